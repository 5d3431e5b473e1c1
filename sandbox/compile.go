package sandbox

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"

	"github.com/toolrun/toolrun/internal/safefmt"
)

// compiled is the cached output of bundling one run's module graph: a script
// that evaluates to an async function whose promise resolves to the entry
// module's namespace, plus what is needed to map positions back to the user's
// sources. It is immutable once built and shared between runs.
type compiled struct {
	hash    string
	code    string   // "(async function(){...})" script text
	exports []string // export names of the entry module
	rawMap  []byte
	sources []string // display names, indexed like the map's sources

	smapOnce sync.Once
	smap     *sourceMap

	featOnce sync.Once
	feat     bundleFeatures
	genOnce  sync.Once
	hasGen   bool // set by the first parse (see hasGenerator)

	// dropProg is set when the cache holding the bundle cannot afford its
	// goja program: each run then parses the code again.
	dropProg atomic.Bool
	progOnce sync.Once
	prog     *goja.Program
	progErr  error
}

// sourceMap returns the bundle's decoded source map (nil when it is
// malformed), decoding it on first use: a host that only passes bundles on
// to workers never needs it.
func (c *compiled) sourceMap() *sourceMap {
	c.smapOnce.Do(func() {
		if sm, err := parseSourceMap(c.rawMap); err == nil {
			sm.lineOffset = 1
			c.smap = sm
		}
	})
	return c.smap
}

// bundleFeatures are what a bundle's text says about the syntax it uses,
// erring on the side of yes.
type bundleFeatures struct {
	asyncWrapper bool // the bundle's function is async (top-level await)
	mayAsync     bool // async functions may exist: the text has "async" or a \u escape
	mayGenerator bool // generator functions exist: the syntax tree has one
}

// features returns the bundle's features; call it after program.
func (c *compiled) features() bundleFeatures {
	c.featOnce.Do(func() {
		// A generator needs a '*' (a punctuator has no escaped form): without
		// one the tree need not be asked.
		c.genOnce.Do(func() {
			if strings.Contains(c.code, "*") {
				// Not parsed yet (cannot happen: program runs first).
				c.hasGen = true
			}
		})
		c.feat = bundleFeatures{
			asyncWrapper: strings.HasPrefix(c.code, "(async "),
			mayAsync:     strings.Contains(c.code, "async") || strings.Contains(c.code, `\u`),
			mayGenerator: c.hasGen,
		}
	})
	return c.feat
}

// progCostFactor estimates the memory of a goja program as a multiple of
// its source text (measured: about 11 for esbuild bundles).
const progCostFactor = 16

// cost is what the bundle is charged in a cache: its texts, the decoded
// source map (16 bytes a line) and, when withProgram, the goja program
// built from it.
func (c *compiled) cost(withProgram bool) int64 {
	n := int64(512 + len(c.hash) + len(c.code) + len(c.rawMap))
	n += 16 * int64(bytes.Count(c.rawMap, []byte{';'})+1)
	for _, s := range c.sources {
		n += 16 + int64(len(s))
	}
	for _, s := range c.exports {
		n += 16 + int64(len(s))
	}
	if withProgram {
		n += progCostFactor * int64(len(c.code))
	}
	return n
}

func (c *compiled) spec() *bundleSpec {
	return &bundleSpec{Code: c.code, Map: c.rawMap, Sources: c.sources, Exports: c.exports}
}

func compiledFromSpec(hash string, b *bundleSpec) *compiled {
	return &compiled{hash: hash, code: b.Code, rawMap: b.Map, sources: b.Sources, exports: b.Exports}
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

// size is the number of bytes of source text in the request: the entry
// source and every module's specifier and text.
func (c *compileRequest) size() int {
	n := len(c.source)
	for k, v := range c.modules {
		n += len(k) + len(v)
	}
	return n
}

func (c *compileRequest) spec(hash string, memory int64) *compileSpec {
	return &compileSpec{Hash: hash, Source: c.source, Filename: c.filename, Lang: c.lang, Modules: c.modules, Imports: c.imports, Memory: memory}
}

func requestFromSpec(s *compileSpec) *compileRequest {
	return &compileRequest{source: s.Source, filename: s.Filename, lang: s.Lang, modules: s.Modules, imports: s.Imports}
}

// key is the content hash of the request: every text, each preceded by its
// length, so that no two different requests share a key.
func (c *compileRequest) key() string {
	h := sha256.New()
	var lb [binary.MaxVarintLen64]byte
	w := func(s string) {
		h.Write(lb[:binary.PutUvarint(lb[:], uint64(len(s)))])
		io.WriteString(h, s)
	}
	w(c.source)
	w(c.filename)
	w(c.lang)
	for _, k := range sortedKeys(c.modules) {
		w("m")
		w(k)
		w(c.modules[k])
	}
	for _, k := range sortedKeys(c.imports) {
		w("i")
		w(k)
		w(strconv.Itoa(len(c.imports[k])))
		for _, m := range c.imports[k] {
			w(m)
		}
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// keyMemo remembers the keys of the last few requests, so that a source
// run again, the common case, is compared with the one before instead of
// hashed. A hit needs every part of the request to be equal; requests with
// more than keyMemoMaxBytes of text (sources, filename, import names) are
// always hashed, and the memo keeps copies of the texts (not strings that
// may share the memory of larger ones), which bounds what it keeps alive.
// It is safe for concurrent use.
type keyMemo struct {
	mu   sync.Mutex
	next int
	ents [keyMemoSize]keyMemoEntry
}

type keyMemoEntry struct {
	req compileRequest // its maps owned by the memo
	key string
}

const (
	keyMemoSize     = 8
	keyMemoMaxBytes = 64 << 10
)

// key returns c.key(), from the memo when c was seen lately.
func (m *keyMemo) key(c *compileRequest) string {
	if c.memoSize() > keyMemoMaxBytes {
		return c.key()
	}
	m.mu.Lock()
	for i := range m.ents {
		if e := &m.ents[i]; e.key != "" && e.req.equal(c) {
			k := e.key
			m.mu.Unlock()
			return k
		}
	}
	m.mu.Unlock()
	k := c.key()
	own := compileRequest{source: strings.Clone(c.source), filename: strings.Clone(c.filename), lang: strings.Clone(c.lang)}
	if c.modules != nil {
		own.modules = make(map[string]string, len(c.modules))
		for spec, text := range c.modules {
			own.modules[strings.Clone(spec)] = strings.Clone(text)
		}
	}
	if c.imports != nil {
		own.imports = make(map[string][]string, len(c.imports))
		for spec, names := range c.imports {
			cp := make([]string, len(names))
			for i, n := range names {
				cp[i] = strings.Clone(n)
			}
			own.imports[strings.Clone(spec)] = cp
		}
	}
	m.mu.Lock()
	m.ents[m.next] = keyMemoEntry{req: own, key: k}
	m.next = (m.next + 1) % keyMemoSize
	m.mu.Unlock()
	return k
}

// memoSize is what a keyMemo entry for c keeps: its size and the bytes of
// its filename, language and import specifiers and names.
func (c *compileRequest) memoSize() int {
	n := c.size() + len(c.filename) + len(c.lang)
	for spec, names := range c.imports {
		n += len(spec) + 16*len(names)
		for _, name := range names {
			n += len(name)
		}
	}
	return n
}

// equal reports whether c and d are the same request: the same texts, and
// modules and imports with the same entries (nil and empty alike).
func (c *compileRequest) equal(d *compileRequest) bool {
	return c.source == d.source && c.filename == d.filename && c.lang == d.lang &&
		maps.Equal(c.modules, d.modules) && maps.EqualFunc(c.imports, d.imports, slices.Equal)
}

// compileCache is an LRU of compiled bundles (and link errors) keyed by
// content hash, bounded by entry count and by bytes (see compiled.cost).
// An entry costing more than the byte bound is not kept. It is safe for
// concurrent use.
type compileCache struct {
	mu          sync.Mutex
	maxEntries  int
	maxBytes    int64
	bytes       int64
	withProgram bool // entries are charged for their goja program
	ll          *list.List
	items       map[string]*list.Element

	builds atomic.Int64 // compilations (in a worker or here), for tests and metrics
}

type cacheEntry struct {
	key  string
	c    *compiled
	err  *Error
	cost int64
}

func newCompileCache(maxEntries int, maxBytes int64, withProgram bool) *compileCache {
	return &compileCache{maxEntries: maxEntries, maxBytes: maxBytes, withProgram: withProgram, ll: list.New(), items: map[string]*list.Element{}}
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

// put adds a bundle or a link error under key, evicting the least recently
// used entries to stay within the bounds.
func (cc *compileCache) put(key string, c *compiled, lerr *Error) {
	ent := &cacheEntry{key: key, c: c, err: lerr}
	if c != nil {
		ent.cost = c.cost(cc.withProgram)
	} else if lerr != nil {
		ent.cost = int64(512 + len(lerr.Name) + len(lerr.Message) + len(lerr.Stack) + len(lerr.Filename) + len(lerr.Specifier))
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if e, ok := cc.items[key]; ok {
		cc.ll.MoveToFront(e)
		return
	}
	if ent.cost > cc.maxBytes && c != nil && cc.withProgram {
		// Keep the bundle without its program, if that fits.
		if cost := c.cost(false); cost <= cc.maxBytes {
			c.dropProgram()
			ent.cost = cost
		}
	}
	if ent.cost > cc.maxBytes {
		return
	}
	cc.items[key] = cc.ll.PushFront(ent)
	cc.bytes += ent.cost
	for cc.ll.Len() > cc.maxEntries || cc.bytes > cc.maxBytes {
		last := cc.ll.Back()
		cc.ll.Remove(last)
		le := last.Value.(*cacheEntry)
		delete(cc.items, le.key)
		cc.bytes -= le.cost
	}
}

// stats returns the number of entries and the bytes they are charged.
func (cc *compileCache) stats() (entries int, bytes int64) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.ll.Len(), cc.bytes
}

// compileHere compiles req in this process and caches the outcome. A
// non-nil *Error is a link error (syntax, resolution, missing import).
func compileHere(cc *compileCache, key string, req *compileRequest) (*compiled, *Error) {
	cc.builds.Add(1)
	c, err := compile(req)
	if c != nil {
		c.hash = key
	}
	cc.put(key, c, err)
	return c, err
}

// checkProgram parses and compiles the bundle with goja, as a run will,
// keeping the program. Workers do this right after compiling, under the
// compile stack limit, so a bundle that a host goja parser could not
// handle fails there.
func (c *compiled) checkProgram() *Error {
	if _, err := c.program(); err != nil {
		return capError(&Error{Name: "SyntaxError", Message: safefmt.Error(err)})
	}
	return nil
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
		return nil, capError(e)
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
			// A computed key, so that an export named "__proto__" is a
			// property of the namespace and not its prototype.
			q, _ := json.Marshal(name)
			fmt.Fprintf(&b, "[%s]: %s, ", q, local)
		}
		b.WriteString("};")
		ret = b.String()
		// Keep the line count stable so the source map stays valid.
		body = body[:i+1] + ret + strings.Repeat("\n", strings.Count(clause[:end+2], "\n")) + clause[end+2:]
	} else {
		body += "\n" + ret
	}
	// The bundle runs inside a function so that the entry's namespace can
	// be returned; an async one only when the code awaits at top level
	// (the text has "await"), as async functions and promises cost more
	// than the rest of a realm.
	wrap := "(function("
	if strings.Contains(body, "await") {
		wrap = "(async function("
	}
	code := wrap + importsGlobal + "){\"use strict\";\n" + body + "\n})"

	var mapSources struct {
		Sources []string `json:"sources"`
	}
	if err := json.Unmarshal(mp, &mapSources); err != nil {
		return nil, &Error{Name: "InternalError", Message: "sandbox: bad source map: " + err.Error()}
	}
	srcs := make([]string, len(mapSources.Sources))
	for i, s := range mapSources.Sources {
		s = strings.TrimPrefix(s, esbNamespace+":")
		if d, ok := display[s]; ok {
			srcs[i] = d
		} else if d, ok := display["/"+strings.TrimLeft(s, "/")]; ok {
			srcs[i] = d
		} else {
			srcs[i] = s
		}
	}
	return &compiled{code: code, exports: exports, rawMap: mp, sources: srcs}, nil
}
