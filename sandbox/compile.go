package sandbox

import (
	"container/list"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// compiled is the cached output of bundling one run's module graph: a script
// that evaluates to an async function whose promise resolves to the entry
// module's namespace, plus what is needed to map positions back to the user's
// sources. It is immutable once built and shared between runs.
type compiled struct {
	hash    string
	code    string   // "(async function(){...})" script text
	exports []string // export names of the entry module
	smap    *sourceMap
	rawMap  []byte
	sources []string // display names, indexed like smap sources

	progOnce sync.Once
	prog     *goja.Program
	progErr  error
}

const (
	esbNamespace  = "toolrun"
	importNS      = "toolrun-import"
	bundleName    = "toolrun-bundle.js"
	importsGlobal = "__toolrun_imports"
)

// compileRequest is everything the bundle depends on.
type compileRequest struct {
	source   string
	filename string
	lang     string
	modules  map[string]string
	imports  map[string][]string // specifier -> member names
}

func (c *compileRequest) key() string {
	h := sha256.New()
	w := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	w(c.source)
	w(c.filename)
	w(c.lang)
	keys := make([]string, 0, len(c.modules))
	for k := range c.modules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w("m")
		w(k)
		w(c.modules[k])
	}
	keys = keys[:0]
	for k := range c.imports {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w("i")
		w(k)
		for _, m := range c.imports[k] {
			w(m)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// compileCache is a bounded LRU of compiled bundles keyed by content hash.
// It is safe for concurrent use.
type compileCache struct {
	mu    sync.Mutex
	max   int
	ll    *list.List
	items map[string]*list.Element

	builds atomic.Int64 // esbuild invocations, for tests and metrics
}

type cacheEntry struct {
	key string
	c   *compiled
	err *Error
}

func newCompileCache(max int) *compileCache {
	return &compileCache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (cc *compileCache) get(key string) (*cacheEntry, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e, ok := cc.items[key]; ok {
		cc.ll.MoveToFront(e)
		return e.Value.(*cacheEntry), true
	}
	return nil, false
}

func (cc *compileCache) put(ent *cacheEntry) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e, ok := cc.items[ent.key]; ok {
		cc.ll.MoveToFront(e)
		return
	}
	cc.items[ent.key] = cc.ll.PushFront(ent)
	for cc.ll.Len() > cc.max {
		last := cc.ll.Back()
		cc.ll.Remove(last)
		delete(cc.items, last.Value.(*cacheEntry).key)
	}
}

// compileCached returns the bundle for req, from the cache when possible.
// A non-nil *Error is a link error (syntax, resolution, missing import).
func compileCached(cc *compileCache, req *compileRequest) (*compiled, *Error) {
	key := req.key()
	if ent, ok := cc.get(key); ok {
		return ent.c, ent.err
	}
	cc.builds.Add(1)
	c, err := compile(req)
	if c != nil {
		c.hash = key
	}
	cc.put(&cacheEntry{key: key, c: c, err: err})
	return c, err
}

var moduleExts = []string{".ts", ".tsx", ".js", ".mjs", ".json"}

// normModuleKey turns a modules-map key into a root-relative clean path
// ("./lib/x.ts" -> "lib/x.ts"). ok is false when the key escapes the root or
// is not relative.
func normModuleKey(k string) (string, bool) {
	if !strings.HasPrefix(k, "./") && !strings.HasPrefix(k, "../") {
		return "", false
	}
	p := path.Clean(k)
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return "", false
	}
	return p, true
}

func isBareSpecifier(s string) bool {
	if s == "" || strings.HasPrefix(s, ".") || strings.HasPrefix(s, "/") {
		return false
	}
	return !hasScheme(s)
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func hasScheme(s string) bool { return schemeRE.MatchString(s) }

func loaderFor(p, lang string, entry bool) api.Loader {
	switch path.Ext(p) {
	case ".ts", ".mts", ".cts":
		return api.LoaderTS
	case ".tsx":
		return api.LoaderTSX
	case ".js", ".mjs", ".cjs":
		return api.LoaderJS
	case ".json":
		return api.LoaderJSON
	}
	if lang == LanguageJavaScript {
		return api.LoaderJS
	}
	return api.LoaderTS
}

var identRE = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// jsReserved are names that cannot be used as `export const <name>`.
var jsReserved = map[string]bool{"default": true, "break": true, "case": true, "catch": true, "class": true, "const": true, "continue": true, "debugger": true, "delete": true, "do": true, "else": true, "enum": true, "export": true, "extends": true, "false": true, "finally": true, "for": true, "function": true, "if": true, "import": true, "in": true, "instanceof": true, "new": true, "null": true, "return": true, "super": true, "switch": true, "this": true, "throw": true, "true": true, "try": true, "typeof": true, "var": true, "void": true, "while": true, "with": true, "yield": true, "let": true, "static": true, "implements": true, "interface": true, "package": true, "private": true, "protected": true, "public": true, "await": true, "arguments": true, "eval": true}

// importModuleSource is the virtual module for a bare import specifier: it
// re-exports the members of the namespace installed by the engine.
func importModuleSource(spec string, members []string) string {
	var b strings.Builder
	q, _ := json.Marshal(spec)
	fmt.Fprintf(&b, "const __ns = %s[%s];\nexport default __ns;\n", importsGlobal, q)
	for i, m := range members {
		mq, _ := json.Marshal(m)
		if identRE.MatchString(m) && !jsReserved[m] {
			fmt.Fprintf(&b, "export const %s = __ns[%s];\n", m, mq)
		} else if m != "default" {
			fmt.Fprintf(&b, "const __m%d = __ns[%s];\nexport { __m%d as %s };\n", i, mq, i, mq)
		}
	}
	return b.String()
}

func compile(req *compileRequest) (*compiled, *Error) {
	mods := make(map[string]string, len(req.modules))
	display := map[string]string{} // esbuild path -> display name
	for k, v := range req.modules {
		p, ok := normModuleKey(k)
		if !ok {
			return nil, &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf("modules key %q must be a relative specifier inside the module root", k), Specifier: k}
		}
		mods[p] = v
		display["/"+p] = k
	}
	entryPath := "/" + strings.TrimLeft(path.Clean("/"+req.filename), "/")
	if req.filename == "" || strings.ContainsAny(req.filename, "/\\") {
		entryPath = "/<entry>"
	}
	display[entryPath] = req.filename

	resolve := func(spec, importer string) (string, string) {
		dir := path.Dir(importer)
		joined := path.Join(strings.TrimPrefix(dir, "/"), spec)
		if joined == ".." || strings.HasPrefix(joined, "../") {
			return "", fmt.Sprintf("Module specifier %q escapes the module root", spec)
		}
		cands := []string{joined}
		for _, e := range moduleExts {
			cands = append(cands, joined+e)
		}
		for _, e := range moduleExts {
			cands = append(cands, joined+"/index"+e)
		}
		for _, c := range cands {
			if _, ok := mods[c]; ok {
				return "/" + c, ""
			}
		}
		return "", fmt.Sprintf("Cannot find module %q", spec)
	}

	plugin := api.Plugin{Name: "toolrun", Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(a api.OnResolveArgs) (api.OnResolveResult, error) {
			if a.Kind == api.ResolveEntryPoint {
				return api.OnResolveResult{Path: entryPath, Namespace: esbNamespace}, nil
			}
			if isBareSpecifier(a.Path) {
				if _, ok := req.imports[a.Path]; ok {
					return api.OnResolveResult{Path: a.Path, Namespace: importNS}, nil
				}
				return api.OnResolveResult{Errors: []api.Message{{Text: fmt.Sprintf("Cannot find module %q: it is not provided by the imports option", a.Path), Detail: a.Path}}}, nil
			}
			if !strings.HasPrefix(a.Path, "./") && !strings.HasPrefix(a.Path, "../") {
				return api.OnResolveResult{Errors: []api.Message{{Text: fmt.Sprintf("Cannot find module %q: only relative module specifiers and imports are allowed", a.Path), Detail: a.Path}}}, nil
			}
			p, msg := resolve(a.Path, a.Importer)
			if msg != "" {
				return api.OnResolveResult{Errors: []api.Message{{Text: msg, Detail: a.Path}}}, nil
			}
			return api.OnResolveResult{Path: p, Namespace: esbNamespace}, nil
		})
		b.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: importNS}, func(a api.OnLoadArgs) (api.OnLoadResult, error) {
			src := importModuleSource(a.Path, req.imports[a.Path])
			return api.OnLoadResult{Contents: &src, Loader: api.LoaderJS}, nil
		})
		b.OnLoad(api.OnLoadOptions{Filter: ".*", Namespace: esbNamespace}, func(a api.OnLoadArgs) (api.OnLoadResult, error) {
			if a.Path == entryPath {
				src := req.source
				l := api.LoaderTS
				if req.lang == LanguageJavaScript {
					l = api.LoaderJS
				}
				return api.OnLoadResult{Contents: &src, Loader: l}, nil
			}
			src := mods[strings.TrimPrefix(a.Path, "/")]
			return api.OnLoadResult{Contents: &src, Loader: loaderFor(a.Path, req.lang, false)}, nil
		})
	}}

	res := api.Build(api.BuildOptions{
		EntryPoints: []string{entryPath},
		Bundle:      true,
		Write:       false,
		Format:      api.FormatESModule,
		Target:      api.ES2022,
		// goja lacks async generators; esbuild lowers them.
		Supported:      map[string]bool{"async-generator": false, "for-await": false},
		Platform:       api.PlatformNeutral,
		Outfile:        "/" + bundleName,
		Sourcemap:      api.SourceMapExternal,
		SourcesContent: api.SourcesContentExclude,
		Metafile:       true,
		LogLevel:       api.LogLevelSilent,
		Charset:        api.CharsetUTF8,
		LegalComments:  api.LegalCommentsNone,
		TreeShaking:    api.TreeShakingFalse,
		Plugins:        []api.Plugin{plugin},
	})
	if len(res.Errors) > 0 {
		m := res.Errors[0]
		e := &Error{Name: "SyntaxError", Message: m.Text}
		if spec, ok := m.Detail.(string); ok {
			e.Specifier = spec
		}
		if strings.HasPrefix(m.Text, "Cannot find module") || strings.Contains(m.Text, "escapes the module root") {
			e.Name = "ModuleNotFoundError"
		}
		if strings.HasPrefix(m.Text, "No matching export") {
			e.Name = "SyntaxError"
		}
		if m.Location != nil {
			file := strings.TrimPrefix(m.Location.File, esbNamespace+":")
			name, ok := display[file]
			if !ok {
				name = file
			}
			e.Filename = name
			e.Line = m.Location.Line
			e.Column = m.Location.Column + 1
			e.Message = fmt.Sprintf("Line %d of %s: %s", e.Line, name, m.Text)
		}
		return nil, e
	}
	var js, mp []byte
	for _, f := range res.OutputFiles {
		if strings.HasSuffix(f.Path, ".map") {
			mp = f.Contents
		} else {
			js = f.Contents
		}
	}
	var meta struct {
		Outputs map[string]struct {
			Exports []string `json:"exports"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(res.Metafile), &meta); err != nil {
		return nil, &Error{Name: "InternalError", Message: "sandbox: bad esbuild metafile: " + err.Error()}
	}
	var exports []string
	for _, o := range meta.Outputs {
		if len(o.Exports) > 0 {
			exports = o.Exports
		}
	}
	body := string(js)
	ret := "return {};"
	if len(exports) > 0 {
		i := strings.LastIndex(body, "\nexport {")
		if i < 0 && strings.HasPrefix(body, "export {") {
			i = -1
		} else if i < 0 {
			return nil, &Error{Name: "InternalError", Message: "sandbox: bundle has no export clause"}
		}
		clause := body[i+1:]
		end := strings.Index(clause, "};")
		if end < 0 {
			return nil, &Error{Name: "InternalError", Message: "sandbox: malformed export clause"}
		}
		items := strings.Split(clause[len("export {"):end], ",")
		var b strings.Builder
		b.WriteString("return {")
		for _, it := range items {
			it = strings.TrimSpace(it)
			if it == "" {
				continue
			}
			local, name := it, it
			if j := strings.Index(it, " as "); j >= 0 {
				local, name = strings.TrimSpace(it[:j]), strings.TrimSpace(it[j+4:])
			}
			if strings.HasPrefix(name, `"`) {
				if u, err := strconv.Unquote(name); err == nil {
					name = u
				}
			}
			q, _ := json.Marshal(name)
			fmt.Fprintf(&b, "%s: %s, ", q, local)
		}
		b.WriteString("};")
		ret = b.String()
		// Keep the line count stable so the source map stays valid.
		body = body[:i+1] + ret + strings.Repeat("\n", strings.Count(clause[:end+2], "\n")) + clause[end+2:]
	} else {
		body += "\n" + ret
	}
	code := "(async function(" + importsGlobal + "){\"use strict\";\n" + body + "\n})"

	sm, err := parseSourceMap(mp)
	if err != nil {
		return nil, &Error{Name: "InternalError", Message: "sandbox: bad source map: " + err.Error()}
	}
	sm.lineOffset = 1
	srcs := make([]string, len(sm.sources))
	for i, s := range sm.sources {
		s = strings.TrimPrefix(s, esbNamespace+":")
		if d, ok := display[s]; ok {
			srcs[i] = d
		} else if d, ok := display["/"+strings.TrimLeft(s, "/")]; ok {
			srcs[i] = d
		} else {
			srcs[i] = s
		}
	}
	return &compiled{code: code, exports: exports, smap: sm, rawMap: mp, sources: srcs}, nil
}
