package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	"github.com/toolrun/toolrun/internal/schema"
)

// Status is the outcome of a tool call.
type Status string

// The two statuses of a tool result.
const (
	StatusSuccess Status = "success"
	StatusError   Status = "error"
)

// Result is what a tool returns (spec ToolResult). The zero Result is a
// success with no text, stored as "Tool executed successfully".
//
// Result, ErrorCode, ErrorData and Stack are kept on the stored message's
// metadata and never sent to the model; Error and Result are the text the
// model reads.
type Result struct {
	Status    Status         `json:"status"`
	Result    string         `json:"result,omitempty"`
	Error     string         `json:"error,omitempty"`
	ErrorCode string         `json:"error_code,omitempty"`
	ErrorData map[string]any `json:"error_data,omitempty"`
	Stack     string         `json:"stack,omitempty"`
	// Attachments are new files the tool produced; the executor writes each
	// under /attachments/ in the thread's files and stores a ref to it.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Refs are existing thread files the result points at; they are stored
	// as they are.
	Refs []AttachmentRef `json:"refs,omitempty"`
	// SubagentID names the child thread the result concerns (UI grouping).
	SubagentID string `json:"subagent_id,omitempty"`
}

// IsError reports whether the result is an error result.
func (r Result) IsError() bool { return r.Status == StatusError }

// Attachment is a new file returned by a tool (spec ToolAttachment). Data is
// the file's bytes; in JSON it is base64, as the spec's data field.
type Attachment struct {
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Data     []byte `json:"data"`
	Width    int    `json:"width,omitempty"`
	Height   int    `json:"height,omitempty"`
}

// Text returns a success result with text s.
func Text(s string) Result { return Result{Status: StatusSuccess, Result: s} }

// Textf returns a success result whose text is fmt.Sprintf(format, args...).
func Textf(format string, args ...any) Result {
	return Result{Status: StatusSuccess, Result: fmt.Sprintf(format, args...)}
}

// JSON returns a success result whose text is v encoded as JSON. If v cannot
// be encoded the result is an error that says why.
func JSON(v any) Result {
	b, err := json.Marshal(v)
	if err != nil {
		return Errorf("encoding the result as JSON: %v", err)
	}
	return Result{Status: StatusSuccess, Result: string(b)}
}

// Errorf returns an error result whose text is fmt.Sprintf(format, args...).
// The text is told to the model.
func Errorf(format string, args ...any) Result {
	return Result{Status: StatusError, Error: fmt.Sprintf(format, args...)}
}

// Definition is anything a Registry holds: *Func[A], *RawFunc, *Prompt,
// *Agent and *Model. The interface is closed; use those types.
type Definition interface {
	definitionName() string
}

// Tool is a function tool definition: *Func[A] or *RawFunc. The interface
// is closed; use those types.
type Tool interface {
	Definition
	compileTool() (*funcTool, error)
}

// Func defines a function tool whose arguments are the Go struct A. The
// JSON Schema advertised to models, and used to validate every call, is
// generated from A with github.com/invopop/jsonschema struct tags
// (`jsonschema:"description=…,enum=a,enum=b,default=10,minimum=1"`). Fields
// without `omitempty` are required; every object is closed, so an unknown
// key is a validation error; recursive types are refused at registration.
// A tool without arguments uses Func[struct{}]. Go unquotes struct tags, so
// a backslash in a tag value is written twice: `jsonschema:"pattern=^[\\w.-]+$"`.
//
// A Func must not be modified after it is registered. Execute may be called
// concurrently for different threads.
type Func[A any] struct {
	// Name is the tool's name: ^[a-zA-Z0-9_-]{1,64}$, snake_case by convention.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// Variables the tool reads with ThreadState.Env. Required ones are
	// checked before Execute.
	Variables []Variable
	// Uses lists the tools, prompts and agents the tool may run through
	// ThreadState.InvokeTool and QueueTool. nil means no restriction; an empty
	// non-nil slice allows nothing.
	Uses []string
	// ProgressArgument names a top-level string argument whose value
	// describes what the call is doing; tool_call_started fires as soon as it
	// has streamed.
	ProgressArgument string
	// Annotations are implementation-specific hints, returned unchanged and
	// never read by toolrun.
	Annotations map[string]any
	// Execute runs the tool with the validated, defaulted arguments. A
	// returned error becomes an error result (its text is told to the model);
	// an error wrapping ErrAbort also stops the run.
	Execute func(ctx context.Context, s ThreadState, args A) (Result, error)

	once   sync.Once
	schema map[string]any
	err    error
}

func (f *Func[A]) definitionName() string { return f.Name }

func (f *Func[A]) declaredVariables() []Variable { return f.Variables }

// InputSchema returns the JSON Schema generated from A, as sent to models.
// The map must not be modified.
func (f *Func[A]) InputSchema() (map[string]any, error) {
	f.once.Do(func() {
		f.schema, f.err = schema.ForType(reflect.TypeFor[A]())
	})
	return f.schema, f.err
}

func (f *Func[A]) compileTool() (*funcTool, error) {
	if f.Execute == nil {
		return nil, &RegistrationError{Name: f.Name, Reason: "Execute is nil"}
	}
	doc, err := f.InputSchema()
	if err != nil {
		return nil, &RegistrationError{Name: f.Name, Reason: err.Error()}
	}
	s, err := schema.Compile(f.Name, doc)
	if err != nil {
		return nil, &RegistrationError{Name: f.Name, Reason: err.Error()}
	}
	exec := f.Execute
	args := schema.NewArgs(s, reflect.TypeFor[A]())
	return &funcTool{
		name: f.Name, description: f.Description, schema: s, args: args,
		variables: f.Variables, uses: f.Uses, progressArgument: f.ProgressArgument,
		annotations: f.Annotations,
		call: func(ctx context.Context, st ThreadState, text string) (Result, error) {
			var a A
			countParse("decode")
			if fail := args.Decode(text, &a); fail != nil {
				return argumentsResult(fail, "Tool"), nil
			}
			return exec(ctx, st, a)
		},
	}, nil
}

// RawFunc defines a function tool from a JSON Schema document; Execute
// receives the validated, defaulted arguments as JSON. With a nil Schema the
// tool takes no arguments schema: calls are not validated and Execute
// receives the arguments as they came ("{}" when empty), and the model is
// sent no parameters.
//
// A RawFunc must not be modified after it is registered.
type RawFunc struct {
	Name        string
	Description string
	// Schema is a JSON Schema document of type object (JSON text, or a
	// map[string]any). Remote and file $ref are refused.
	Schema           any
	Variables        []Variable
	Uses             []string
	ProgressArgument string
	Annotations      map[string]any
	Execute          func(ctx context.Context, s ThreadState, args json.RawMessage) (Result, error)
}

func (f *RawFunc) definitionName() string { return f.Name }

func (f *RawFunc) compileTool() (*funcTool, error) {
	if f.Execute == nil {
		return nil, &RegistrationError{Name: f.Name, Reason: "Execute is nil"}
	}
	var s *schema.Schema
	if f.Schema != nil {
		var err error
		if s, err = schema.Compile(f.Name, f.Schema); err != nil {
			return nil, &RegistrationError{Name: f.Name, Reason: err.Error()}
		}
	}
	exec := f.Execute
	args := schema.NewArgs(s, nil)
	return &funcTool{
		name: f.Name, description: f.Description, schema: s, args: args,
		variables: f.Variables, uses: f.Uses, progressArgument: f.ProgressArgument,
		annotations: f.Annotations,
		call: func(ctx context.Context, st ThreadState, text string) (Result, error) {
			var raw json.RawMessage
			countParse("decode")
			if fail := args.Decode(text, &raw); fail != nil {
				return argumentsResult(fail, "Tool"), nil
			}
			return exec(ctx, st, raw)
		},
	}, nil
}

// funcTool is the compiled, registered form of a function tool.
type funcTool struct {
	name             string // as registered, possibly namespace/name
	namespace        string // package namespace, "" for top-level tools
	description      string
	schema           *schema.Schema // nil: no argument schema
	args             *schema.Args   // the argument route
	variables        []Variable
	uses             []string
	progressArgument string
	annotations      map[string]any
	// call decodes the argument text and runs Execute.
	call func(ctx context.Context, s ThreadState, text string) (Result, error)
	// handler is what a call of the tool resolves to; named reports that
	// it has been built for name and namespace.
	handler *handler
}

// named records the tool's registered name and package and builds its
// handler.
func (t *funcTool) named(name, ns string) {
	t.name, t.namespace = name, ns
	spec := ToolSpec{Name: name, Description: t.description}
	if t.schema != nil {
		spec.Parameters = t.schema.JSON()
	}
	t.handler = &handler{name: name, kind: kindFunction, spec: spec, args: t.args, progress: t.progressArgument,
		variables: t.variables, uses: t.uses, namespace: ns, run: t.runFunction}
}

// spec describes the tool as the registry does: its ToolSpec with the
// definition's variables, uses, progress argument and annotations.
func (t *funcTool) spec() ToolSpec {
	s := t.handler.spec
	s.Variables, s.Uses, s.ProgressArgument, s.Annotations = t.variables, t.uses, t.progressArgument, t.annotations
	return s
}
