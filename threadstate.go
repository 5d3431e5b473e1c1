package toolrun

import (
	"context"
	"encoding/json"
	"time"
)

// ThreadState is what a running tool sees of its thread (the spec's
// ThreadState): identity, execution info, the key-value store, the env
// chain, other tools, messages, events, files and the code sandbox.
//
// Implementations: the executor hands each call its own ThreadState, valid
// for the duration of Execute (do not keep it after Execute returns); the
// toolruntest package provides a fake for unit tests of tools. The
// interface may grow: embed an existing implementation rather than writing
// one from scratch if you need to wrap it (for example to add logging).
//
// A ThreadState is safe for concurrent use by the goroutines of one tool
// call; QueueTool and InvokeTool act on the calling tool's batch.
type ThreadState interface {
	// ThreadID is the id of the thread the call runs on.
	ThreadID() string
	// AgentID is the thread's current agent ("" for a bare executor run).
	AgentID() string
	// UserID is the thread's user ("" when it has none).
	UserID() string
	// Execution describes the active run, or is nil outside one.
	Execution() *Execution
	// CallID is the id of the running tool call: the model's call id (made
	// unique on the thread), a queued call's id, or, for a tool run through
	// InvokeTool, its caller's id followed by "_i" and the invocation's
	// number (1, 2 … in the order the caller made them). It is the same when
	// a call is run again after a crash, so it suits idempotency keys
	// toward outside systems.
	CallID() string

	// Value decodes the JSON value stored under key into dst and reports
	// whether it exists.
	Value(ctx context.Context, key string, dst any) (found bool, err error)
	// SetValue stores v (JSON-encodable) under key; nil deletes the key.
	// Bytes of its JSON that are not UTF-8 (from a json.RawMessage, say)
	// are stored as U+FFFD, one for each byte, on every store.
	SetValue(ctx context.Context, key string, v any) error

	// Env resolves name through the env chain: thread env, agent defaults,
	// prompt defaults, user-account env, runtime-instance env. It returns
	// ErrVariableNotFound when no link resolves it. "" counts as a value.
	Env(ctx context.Context, name string) (string, error)
	// EnvType returns the display type of the value Env would return
	// (VarSecret when unresolved).
	EnvType(ctx context.Context, name string) (VarType, error)
	// SetEnv stores name in the thread env with type t ("" keeps the stored
	// type, or VarSecret for a new name).
	SetEnv(ctx context.Context, name, value string, t VarType) error

	// QueueTool appends a call of name to the tail of the running batch (it
	// runs after the calls already queued). args is anything JSON-encodable
	// (json.RawMessage and string are taken as JSON text). It returns an error
	// wrapping ErrNotDeclared when the running tool's uses list does not name
	// the target, and queues nothing then.
	QueueTool(name string, args any) error
	// InvokeTool runs name now through the full pipeline (validation,
	// variables, uses) and returns its result. Nothing is persisted and no
	// hooks fire. A target outside the running tool's uses list gives an
	// error result.
	InvokeTool(ctx context.Context, name string, args any) Result

	// InjectMessage persists m on the thread without triggering execution.
	InjectMessage(ctx context.Context, m Message) error
	// Messages returns the thread's history as q selects it (see
	// MessageQuery). nil means the newest 100 top-level, non-silent
	// messages, oldest first; a Limit of 0 means 100.
	Messages(ctx context.Context, q *MessageQuery) (MessagePage, error)
	// Emit sends a custom event to the thread's subscribers. They get data
	// as a JSON tree (maps, slices, strings, float64 or json.Number, bools,
	// nil), secrets redacted; data JSON cannot hold (a cycle, NaN, a func) is
	// replaced by a text saying why.
	Emit(event string, data any)

	// WriteFile creates or replaces a thread file.
	WriteFile(ctx context.Context, path string, data []byte, mimeType string) (FileInfo, error)
	// ReadFile returns a thread file's bytes, or an error wrapping ErrNotFound.
	ReadFile(ctx context.Context, path string) ([]byte, error)
	// StatFile describes a thread file, or returns an error wrapping ErrNotFound.
	StatFile(ctx context.Context, path string) (FileInfo, error)
	// ListFiles lists the files at or below dir, sorted by path.
	ListFiles(ctx context.Context, dir string) ([]FileInfo, error)
	// DeleteFile removes a thread file, or returns an error wrapping ErrNotFound.
	DeleteFile(ctx context.Context, path string) error

	// RunCode starts model- or user-authored JavaScript or TypeScript in the
	// sandbox and returns its handle at once. Cancelling ctx terminates it.
	RunCode(ctx context.Context, source string, opts *CodeOptions) *CodeRun
}

// toolQuery is the query of ThreadState.Messages: nil means the newest 100
// top-level, non-silent messages, oldest first, and a Limit of 0 means 100
// (a tool never reads an unbounded history by accident).
func toolQuery(q *MessageQuery) MessageQuery {
	if q == nil {
		return MessageQuery{Limit: 100}
	}
	c := *q
	if c.Limit <= 0 {
		c.Limit = 100
	}
	return c
}

// Event is a thread event delivered to subscribers: tool_call_started,
// tool_call_done, and the custom events tools send with Emit.
type Event struct {
	ThreadID  string    `json:"thread_id"`
	Type      string    `json:"type"`
	Data      any       `json:"data,omitempty"`
	Timestamp time.Time `json:"timestamp"`
}

// ToolCallStarted is the data of a tool_call_started event and hook.
type ToolCallStarted struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Progress is the call's progress argument, when the tool has one and
	// the model produced it as a string.
	Progress *string `json:"progress,omitempty"`
	// Arguments are the call's argument text, redacted: what streamed so
	// far when the start fires while the call streams (a secret cut by its
	// end is hidden too), the whole text otherwise.
	Arguments string `json:"-"`
}

// ToolCallDone is the data of a tool_call_done event and hook.
type ToolCallDone struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Result is the call's result as shaped for storage: its attachments
	// written as thread files and listed in Refs, its secrets redacted. It
	// is the hook's own copy.
	Result Result `json:"-"`
}

// rawArgs turns the args of QueueTool/InvokeTool into JSON text.
func rawArgs(args any) (string, error) {
	switch a := args.(type) {
	case nil:
		return "{}", nil
	case json.RawMessage:
		return string(a), nil
	case []byte:
		return string(a), nil
	case string:
		return a, nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
