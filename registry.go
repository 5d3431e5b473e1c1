package toolrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/toolrun/toolrun/internal/schema"
	"github.com/toolrun/toolrun/internal/schemadialect"
)

// Names of tools, prompts, agents and models: what model providers accept.
var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// snakeRE is the naming convention; other valid names get a logged warning.
var snakeRE = regexp.MustCompile(`^[a-z]([a-z0-9_]*[a-z0-9])?$`)

// ProviderPrefix marks a provider-executed tool in a prompt's tools list
// ("provider:web_search"). Registered names cannot start with it.
const ProviderPrefix = "provider:"

// Reserved tool names: the runtime's subagent lifecycle tools.
const (
	ToolSubagents       = "subagents"
	ToolSubagentCreate  = "subagent_create"
	ToolSubagentMessage = "subagent_message"
)

func isReserved(name string) bool {
	return name == ToolSubagents || name == ToolSubagentCreate || name == ToolSubagentMessage
}

// RegistryOptions configures a Registry. The zero value is valid.
type RegistryOptions struct {
	// Logger receives warnings, such as a name that is not snake_case.
	// nil sends warnings and errors to slog.Default() and drops the rest.
	Logger *slog.Logger
}

// Registry holds definitions by name: function tools, prompts, agents and
// models share one namespace. Lookups cost the same whatever the number of
// definitions. A Registry is safe for concurrent use; definitions are
// checked and their schemas compiled once, at registration.
type Registry struct {
	log *slog.Logger

	mu    sync.RWMutex
	names map[string]*entry
	// gen counts registrations, so that a Check result can be reused; it
	// changes under mu and is read without it.
	gen atomic.Uint64
	// index holds the entries of names for lookups, which read it without
	// the lock: calls on many goroutines then share no written memory.
	index sync.Map // name → *entry
}

// entry is one registered definition.
type entry struct {
	name      string // as registered: name or namespace/name
	namespace string
	tool      *funcTool
	def       Definition
	// prompt is what prepare compiled of a *Prompt definition, given to the
	// prompt only once the registration succeeds.
	prompt *preparedPrompt
}

// NewRegistry returns an empty registry.
func NewRegistry(opts *RegistryOptions) *Registry {
	r := &Registry{names: map[string]*entry{}}
	if opts != nil && opts.Logger != nil {
		r.log = opts.Logger
	} else {
		r.log = defaultLogger
	}
	return r
}

// defaultLogger is the logger of a component configured without one: its
// warnings and errors go to slog.Default() (a problem should not go unseen
// because nobody set a logger up), everything quieter is dropped.
var defaultLogger = slog.New(warnHandler{})

// warnHandler forwards records at Warn and above to the handler of
// slog.Default() at the time of the record, with the attributes and groups
// added to it replayed in order.
type warnHandler struct {
	with []func(slog.Handler) slog.Handler
}

func (warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h warnHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.Default().Handler()
	for _, w := range h.with {
		out = w(out)
	}
	return out.Handle(ctx, r)
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{with: append(h.with[:len(h.with):len(h.with)], func(o slog.Handler) slog.Handler { return o.WithAttrs(as) })}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{with: append(h.with[:len(h.with):len(h.with)], func(o slog.Handler) slog.Handler { return o.WithGroup(name) })}
}

// Register adds top-level definitions. It checks every definition first and
// adds all of them or none: it refuses an invalid or reserved name, a name
// already registered (whatever its kind), a definition without Execute, an
// argument type or schema that does not compile, or a schema whose $refs,
// inlined for a model provider, would write more than 10,000 subschemas or
// 1 MiB of JSON, with a *RegistrationError that names the problem.
func (r *Registry) Register(defs ...Definition) error {
	return r.register("", defs)
}

// RegisterPackage adds definitions as a package under namespace: inside the
// package names are local, from outside they are qualified
// ("namespace/name"). Every name a tool's Uses list declares must be in the
// package or be a qualified name already registered ("a package MUST
// include its required tool dependencies").
func (r *Registry) RegisterPackage(namespace string, defs ...Definition) error {
	if !nameRE.MatchString(namespace) {
		return &RegistrationError{Name: namespace, Reason: "invalid package namespace: must match ^[a-zA-Z0-9_-]{1,64}$"}
	}
	return r.register(namespace, defs)
}

func (r *Registry) register(ns string, defs []Definition) error {
	entries := make([]*entry, 0, len(defs))
	local := make(map[string]bool, len(defs))
	for _, d := range defs {
		if d == nil {
			return &RegistrationError{Reason: "nil definition"}
		}
		if v := reflect.ValueOf(d); v.Kind() == reflect.Pointer && v.IsNil() {
			// A typed nil, such as (*Func[T])(nil): its methods would panic.
			return &RegistrationError{Reason: "nil definition (a nil " + v.Type().String() + ")"}
		}
		name := d.definitionName()
		if err := checkName(name); err != nil {
			return err
		}
		if local[name] {
			return &RegistrationError{Name: qualify(ns, name), Reason: "registered twice in one call"}
		}
		local[name] = true
		e := &entry{name: qualify(ns, name), namespace: ns, def: d}
		if err := checkVariables(e.name, variablesOf(d)); err != nil {
			return err
		}
		if t, ok := d.(Tool); ok {
			ft, err := t.compileTool()
			if err != nil {
				if re, ok := err.(*RegistrationError); ok {
					re.Name = e.name
				}
				return err
			}
			if ft.schema != nil {
				if err := checkProviderForm(e.name, "", ft.schema.JSON()); err != nil {
					return err
				}
			}
			ft.named(e.name, ns)
			e.tool = ft
		} else if err := r.prepare(e); err != nil {
			return err
		}
		entries = append(entries, e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range entries {
		if old, ok := r.names[e.name]; ok {
			return &RegistrationError{Name: e.name, Reason: "name already registered (as a " + kindOf(old.def) + ")"}
		}
	}
	if ns != "" {
		for _, e := range entries {
			if e.tool == nil {
				continue
			}
			for _, u := range e.tool.uses {
				if local[u] {
					continue
				}
				if strings.Contains(u, "/") {
					if _, ok := r.names[u]; ok {
						continue
					}
				}
				return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("uses %q, which is neither in package %q nor a registered qualified name", u, ns)}
			}
		}
	}
	r.gen.Add(1)
	for _, e := range entries {
		if p, ok := e.def.(*Prompt); ok {
			p.setPrepared(e.prompt)
		}
		r.names[e.name] = e
		r.index.Store(e.name, e)
		var defaults map[string]string
		switch d := e.def.(type) {
		case *Prompt:
			defaults = d.Env
		case *Agent:
			defaults = d.Env
		}
		for k, v := range defaults {
			warnShortSecret(context.Background(), r.log, kindOf(e.def)+" "+e.name+" env defaults", k, EnvValue{Value: v, Type: VarSecret})
		}
		base := e.name[strings.LastIndexByte(e.name, '/')+1:]
		if !snakeRE.MatchString(base) {
			r.log.Warn("toolrun: definition name is not snake_case", "name", e.name, "kind", kindOf(e.def))
		}
	}
	return nil
}

func qualify(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func checkName(name string) error {
	switch {
	case strings.HasPrefix(name, ProviderPrefix):
		return &RegistrationError{Name: name, Reason: `the "provider:" prefix is reserved for provider-executed tools`}
	case isReserved(name):
		return &RegistrationError{Name: name, Reason: "reserved name: subagents, subagent_create and subagent_message are the runtime's lifecycle tools"}
	case name == "":
		return &RegistrationError{Reason: "empty name"}
	case !nameRE.MatchString(name):
		return &RegistrationError{Name: name, Reason: "invalid name: must match ^[a-zA-Z0-9_-]{1,64}$"}
	}
	return nil
}

func kindOf(d Definition) string {
	switch d.(type) {
	case Tool:
		return "tool"
	}
	return definitionKind(d)
}

// lookup returns the entry registered under name. A caller inside package
// ns finds its package's local names first.
func (r *Registry) lookup(name, ns string) *entry {
	if testHookLookup != nil {
		testHookLookup(name)
	}
	if ns != "" && !strings.Contains(name, "/") {
		if e, ok := r.index.Load(ns + "/" + name); ok {
			return e.(*entry)
		}
	}
	if e, ok := r.index.Load(name); ok {
		return e.(*entry)
	}
	return nil
}

// Test hooks: a counting test sets them to see how often a call consults
// the registry and parses its argument text. They are nil otherwise.
var (
	testHookLookup func(name string)
	testHookParse  func(where string)
)

// countParse reports one parse of argument text to the test hook.
func countParse(where string) {
	if testHookParse != nil {
		testHookParse(where)
	}
}

// Tool describes the function tool registered under name.
func (r *Registry) Tool(name string) (ToolSpec, bool) {
	e := r.lookup(name, "")
	if e == nil || e.tool == nil {
		return ToolSpec{}, false
	}
	return e.tool.spec(), true
}

// Tools describes every registered function tool, sorted by name.
func (r *Registry) Tools() []ToolSpec {
	r.mu.RLock()
	out := make([]ToolSpec, 0, len(r.names))
	for _, e := range r.names {
		if e.tool != nil {
			out = append(out, e.tool.spec())
		}
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names returns every registered name, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	out := make([]string, 0, len(r.names))
	for n := range r.names {
		out = append(out, n)
	}
	r.mu.RUnlock()
	sort.Strings(out)
	return out
}

// checkVariables refuses a variable without a name or with a type other
// than text or secret ("" means secret).
func checkVariables(def string, vs []Variable) error {
	for i, v := range vs {
		switch {
		case strings.TrimSpace(v.Name) == "":
			return &RegistrationError{Name: def, Reason: fmt.Sprintf("Variables[%d] has no Name", i)}
		case v.Type != "" && v.Type != VarText && v.Type != VarSecret:
			return &RegistrationError{Name: def, Reason: fmt.Sprintf("variable %s: Type %q is not %q or %q", v.Name, v.Type, VarText, VarSecret)}
		}
	}
	return nil
}

// variablesOf returns the variables a definition declares.
func variablesOf(d Definition) []Variable {
	switch d := d.(type) {
	case *RawFunc:
		return d.Variables
	case *Prompt:
		return d.Variables
	case interface{ declaredVariables() []Variable }:
		return d.declaredVariables()
	}
	return nil
}

// Model returns the registered model.
func (r *Registry) Model(name string) (*Model, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	m, ok := e.def.(*Model)
	return m, ok
}

// Agent returns the registered agent.
func (r *Registry) Agent(name string) (*Agent, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	a, ok := e.def.(*Agent)
	return a, ok
}

// Prompt returns the registered prompt.
func (r *Registry) Prompt(name string) (*Prompt, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	p, ok := e.def.(*Prompt)
	return p, ok
}

// prepare checks and compiles a non-tool definition before registration.
func (r *Registry) prepare(e *entry) error {
	switch d := e.def.(type) {
	case *Prompt:
		for i, t := range d.Tools {
			if t == nil || t.promptToolName() == "" {
				return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("tools entry %d has no name", i)}
			}
			if _, flags := unwrapEntry(t); slices.Contains(flags, "") {
				return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("tools entry %d (%s): Optional needs an env flag name", i, t.promptToolName())}
			}
		}
		if err := checkLimits(e.name, limit{"History.Messages", d.History.Messages}, limit{"History.Tokens", d.History.Tokens}); err != nil {
			return err
		}
		if e.prompt = d.ownPrepared(); e.prompt != nil {
			return nil // compiled by a registration that succeeded
		}
		s, err := compileRequiredSchema(e.name, d.RequiredSchema)
		if err != nil {
			return &RegistrationError{Name: e.name, Reason: "RequiredSchema: " + err.Error()}
		}
		if s != nil {
			if err := checkProviderForm(e.name, "RequiredSchema: ", s.JSON()); err != nil {
				return err
			}
		}
		// Nothing is written to d here: the registration may yet be
		// refused, and d may be in use by another registry.
		e.prompt = &preparedPrompt{owner: d, schema: s, args: schema.NewArgs(s, nil)}
		return nil
	case *Agent:
		if err := checkLimits(e.name, limit{"MaxSessionTurns", d.MaxSessionTurns}); err != nil {
			return err
		}
		for _, side := range []struct {
			name string
			s    *Side
		}{{"SideA", &d.SideA}, {"SideB", &d.SideB}} {
			if side.s.Human == (side.s.Prompt != "") {
				return &RegistrationError{Name: e.name, Reason: side.name + " must be either Human or backed by a Prompt"}
			}
			if err := checkLimits(e.name, limit{side.name + ".MaxSteps", side.s.MaxSteps}); err != nil {
				return err
			}
			seen := map[string]bool{}
			for i, rel := range side.s.Subagents {
				n := rel.name()
				if n == "" {
					return &RegistrationError{Name: e.name, Reason: side.name + ": a subagent relationship has no Agent"}
				}
				if err := checkLimits(e.name, limit{fmt.Sprintf("%s.Subagents[%d] (%s).MaxInstances", side.name, i, n), rel.MaxInstances}); err != nil {
					return err
				}
				if isReserved(n) || strings.HasPrefix(n, ProviderPrefix) {
					return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("%s: relationship name %q is reserved", side.name, n)}
				}
				if seen[n] {
					return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("%s: relationship %q declared twice", side.name, n)}
				}
				seen[n] = true
			}
		}
		return nil
	case *Model:
		if d.Provider == nil {
			return &RegistrationError{Name: e.name, Reason: "Provider is nil"}
		}
		return nil
	}
	return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("unsupported definition type %T", e.def)}
}

// providerDialects are the schema forms the providers of this module send:
// every combination of the options provider/openai sets (Strict,
// NoTypeArrays); Anthropic's form is the plain one.
var providerDialects = []schemadialect.Dialect{
	schemadialect.OpenAI, schemadialect.OpenAIStrict,
	{NoTypeArrays: true}, {Strict: true, NoTypeArrays: true},
}

// checkProviderForm refuses a schema whose rewrite for a model provider
// would pass the rewrite's bounds (schemadialect.MaxNodes subschemas,
// schemadialect.MaxBytes of JSON): inlining copies a $ref's target at
// every use, so a few KB of shared definitions can stand for gigabytes, and
// the author should learn it here rather than from the first model request
// that offers the tool. Only a schema with a $ref, or one near the byte
// bound, can pass them; the others are not rewritten here. The providers
// check again when they rewrite.
func checkProviderForm(name, field string, params json.RawMessage) error {
	if !bytes.Contains(params, []byte(`"$ref"`)) && len(params) < schemadialect.MaxBytes/2 {
		return nil
	}
	for _, d := range providerDialects {
		if _, _, err := schemadialect.Rewrite(params, d); errors.Is(err, schemadialect.ErrTooLarge) {
			return &RegistrationError{Name: name, Reason: field + strings.TrimPrefix(err.Error(), "schemadialect: ")}
		}
	}
	return nil
}

// limit is a count field of a definition, by its name in the definition,
// and its value.
type limit struct {
	field string
	value int
}

// checkLimits refuses a negative limit of definition name: every count
// limit reads 0 as "no limit", and a negative one would be read the same,
// silently lifting the bound its author meant to set.
func checkLimits(name string, limits ...limit) error {
	for _, l := range limits {
		if l.value < 0 {
			return &RegistrationError{Name: name, Reason: fmt.Sprintf("%s is %d: a limit cannot be negative (0 means no limit)", l.field, l.value)}
		}
	}
	return nil
}

// definitionKind names the kind of a non-tool definition.
func definitionKind(d Definition) string {
	switch d.(type) {
	case *Prompt:
		return "prompt"
	case *Agent:
		return "agent"
	case *Model:
		return "model"
	}
	return "definition"
}
