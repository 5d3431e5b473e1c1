package toolrun

import (
	"context"
	"fmt"

	"github.com/toolrun/toolrun/internal/schema"
)

// handlerKind says what runs behind a name.
type handlerKind uint8

const (
	kindFunction  handlerKind = iota // a function tool: Func or RawFunc
	kindPrompt                       // a prompt run as a one-shot sub-prompt
	kindHandoff                      // an agent the thread hands off to
	kindLifecycle                    // subagents, subagent_create, subagent_message
	kindProvider                     // a tool the model's provider executes
	kindRefused                      // a name no call may run: the refusal is its result
)

// handler is what one name resolves to: everything it takes to offer it to a
// model and to run a call of it. Handlers of function tools are built once,
// at registration; the runtime builds the others for each model request.
type handler struct {
	name string // as called: registered or qualified
	kind handlerKind
	spec ToolSpec // as offered to a model
	// args is the argument route (schema, defaults, decoding); nil for
	// handlers that read no arguments.
	args      *schema.Args
	progress  string // the progress argument, "" for none
	variables []Variable
	uses      []string // nil: no restriction
	namespace string   // the package a function tool belongs to
	// run runs a call whose required variables resolved. A non-nil error
	// stops the run: it wraps ErrAbort, or is a *StoreError, or ctx's error.
	// The result returned with it is the call's; one that is not an error
	// result is replaced by one naming the error (Executor.invoke).
	run func(ctx context.Context, c call) (Result, error)
	// refusal is the result of a call of a kindRefused handler; quiet
	// refusals (the allowed-tools gate) fire no tool_call events.
	refusal Result
	quiet   bool
}

// toolset is what the names of a batch's calls resolve to: the tools
// offered to the model (the allowed-tools gate for its calls) and how names
// beyond them resolve, for the calls tools queue or invoke and for batches
// without a model.
type toolset struct {
	// gated says that the calls a model made may run only the handlers
	// offered; false for a bare Executor.Run batch, which has no gate.
	gated bool
	// list holds the handlers a model request offered by name, in
	// offering order (Request.Tools).
	list keyed[string, *handler]
	// names resolves the names beyond the offered handlers.
	names resolver
}

// resolver resolves the names a toolset does not offer. It is an interface
// rather than two funcs so that a turn's toolset and what its resolver
// needs are made in one allocation (turnTools).
type resolver interface {
	// resolve finds the handler of a name that is not offered, or of any
	// name when there is no gate. ns is the calling tool's package; nested
	// says a running tool asked. It never returns nil.
	resolve(name, ns string, nested bool) *handler
	// refuse is the handler of a model call to a name that is not offered.
	refuse(name string) *handler
}

// forModel resolves the name of a call the model made: an offered tool, or
// the gate's refusal.
func (ts *toolset) forModel(name string) *handler {
	if !ts.gated {
		return ts.names.resolve(name, "", false)
	}
	if h := ts.offered(name); h != nil {
		return h
	}
	return ts.names.refuse(name)
}

// offered returns the offered handler of name, or nil.
func (ts *toolset) offered(name string) *handler {
	h, _ := ts.list.find(name)
	return h
}

// offer adds h to the offered handlers unless one of its name is offered.
func (ts *toolset) offer(h *handler) { ts.list.add(h.name, h) }

// specs returns the offered handlers' specs, as a request sends them: a
// slice of the request's own; nil when nothing is offered.
func (ts *toolset) specs() []ToolSpec { return ts.specsInto(nil) }

// specsInto is specs written over buf's array when it has room: buf[:0]
// with the specs appended.
func (ts *toolset) specsInto(buf []ToolSpec) []ToolSpec {
	hs := ts.list.entries
	if len(hs) == 0 {
		return buf[:0]
	}
	out := buf[:0]
	if cap(out) < len(hs) {
		out = make([]ToolSpec, 0, len(hs))
	}
	for _, e := range hs {
		out = append(out, e.val.spec)
	}
	return out
}

// forTool resolves a name a running tool queued or invoked (ns is its
// package): these bypass the gate.
func (ts *toolset) forTool(name, ns string) *handler {
	if ns == "" {
		if h := ts.offered(name); h != nil {
			return h
		}
	}
	return ts.names.resolve(name, ns, true)
}

// registryTools is the toolset of a bare batch: every function tool of the
// registry, no gate.
func registryTools(reg *Registry) *toolset {
	return &toolset{names: registryNames{reg}}
}

// registryNames resolves a name to the registry's function tool of that
// name.
type registryNames struct{ reg *Registry }

func (r registryNames) resolve(name, ns string, _ bool) *handler {
	if e := r.reg.lookup(name, ns); e != nil && e.tool != nil {
		return e.tool.handler
	}
	return notFound(name)
}

// refuse is not called: a bare batch has no gate.
func (r registryNames) refuse(name string) *handler { return notOffered(name) }

// notFound is the handler of a name nothing answers to.
func notFound(name string) *handler {
	return &handler{name: name, kind: kindRefused, refusal: Result{Status: StatusError, Error: "Tool not found: " + name}}
}

// notOffered is the allowed-tools gate's refusal: no tool_call events fire
// for it.
func notOffered(name string) *handler {
	return &handler{name: name, kind: kindRefused, quiet: true, refusal: Result{Status: StatusError,
		Error: fmt.Sprintf("Tool %q is not available for this prompt. You can only use tools that were explicitly configured for this prompt.", name)}}
}

// notDirectlyCallable is the refusal of a call of a subagent relationship's
// name, which the model reaches through the lifecycle tools.
func notDirectlyCallable(name string) *handler {
	return &handler{name: name, kind: kindRefused, quiet: true, refusal: Result{Status: StatusError,
		Error: fmt.Sprintf("Tool %q is not directly callable. Use subagent_create with agent=%q to start it, or subagent_message to message an existing instance.", name, name)}}
}

// providerExecuted is the handler of a provider tool: the local executor
// never runs it.
func providerExecuted(spec ToolSpec) *handler {
	return &handler{name: spec.Name, kind: kindProvider, spec: spec, refusal: Result{Status: StatusError,
		Error: fmt.Sprintf("Tool %q is a provider-executed tool and should be handled by the LLM provider, not executed locally.", spec.Name)}}
}

// noSchemaArgs is the argument route of handlers without a schema: the
// text must be JSON, and is handed on as it is.
var noSchemaArgs = schema.NewArgs(nil, nil)
