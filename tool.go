package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/toolrun/toolrun/internal/argdecode"
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
	typeName := reflect.TypeFor[A]().String()
	plan := argdecode.Compile(reflect.TypeFor[A](), doc)
	return &funcTool{
		name: f.Name, description: f.Description, schema: s,
		variables: f.Variables, uses: f.Uses, progressArgument: f.ProgressArgument,
		annotations: f.Annotations,
		typed:       true,
		direct:      plan != nil,
		call: func(ctx context.Context, st ThreadState, in toolArgs) (Result, error) {
			var a A
			if in.direct {
				if plan.Decode(in.text, reflect.ValueOf(&a).Elem()) {
					return exec(ctx, st, a)
				}
				// Text the plan leaves to encoding/json (a syntax error the
				// schema check let through, a number too big for its field,
				// a duplicate key …): the general route, with its errors.
				var zero A
				a = zero
				var res Result
				var ok bool
				if in, res, ok = prepareArgsGeneral(s, in.text, true); !ok {
					return res, nil
				}
			}
			if err := json.Unmarshal(in.raw, &a); err != nil {
				var syn *json.SyntaxError
				if errors.As(err, &syn) {
					return Result{Status: StatusError, Error: "Tool arguments are not valid JSON: " + err.Error()}, nil
				}
				return Errorf("Tool arguments do not decode into %s: %v", typeName, err), nil
			}
			if in.patch != nil {
				if err := json.Unmarshal(in.patch, &a); err != nil {
					return Errorf("Tool argument defaults do not decode into %s: %v", typeName, err), nil
				}
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
	return &funcTool{
		name: f.Name, description: f.Description, schema: s,
		variables: f.Variables, uses: f.Uses, progressArgument: f.ProgressArgument,
		annotations: f.Annotations,
		call: func(ctx context.Context, st ThreadState, in toolArgs) (Result, error) {
			return exec(ctx, st, json.RawMessage(in.raw))
		},
	}, nil
}

// funcTool is the compiled, registered form of a function tool.
type funcTool struct {
	name             string // as registered, possibly namespace/name
	namespace        string // package namespace, "" for top-level tools
	description      string
	schema           *schema.Schema // nil: no argument schema
	variables        []Variable
	uses             []string
	progressArgument string
	annotations      map[string]any
	// typed tools decode raw and then a defaults patch on top; untyped ones
	// receive the arguments with defaults merged in.
	typed bool
	// direct typed tools decode checked text with an argdecode plan, which
	// applies the defaults itself.
	direct bool
	call   func(ctx context.Context, s ThreadState, in toolArgs) (Result, error)
}

// toolArgs is a call's argument text made ready for the tool.
type toolArgs struct {
	raw    []byte // the JSON Execute receives (typed tools decode it)
	patch  []byte // typed tools: defaults to decode on top of raw
	text   string // direct: the checked text, decoded by the tool's plan
	direct bool   // text passed the schema check, defaults not yet applied
}

// ToolInfo describes a registered tool: what a runtime sends to a model and
// the fields of its definition.
type ToolInfo struct {
	Name        string
	Description string
	// Parameters is the JSON Schema advertised to the model; nil for a tool
	// without an arguments schema.
	Parameters       json.RawMessage
	Variables        []Variable
	Uses             []string
	ProgressArgument string
	// Annotations are the definition's annotations, unchanged.
	Annotations map[string]any
}

func (t *funcTool) info() ToolInfo {
	ti := ToolInfo{Name: t.name, Description: t.description, Variables: t.variables,
		Uses: t.uses, ProgressArgument: t.progressArgument, Annotations: t.annotations}
	if t.schema != nil {
		ti.Parameters = t.schema.JSON()
	}
	return ti
}
