// Package toolruntest provides a fake ThreadState for unit tests of tools,
// as net/http/httptest does for handlers.
//
// Set the thread up (env, values, messages, files), call the tool through
// the real validation and variables pipeline with [Call], then read what
// the tool queued, invoked, emitted, injected and wrote:
//
//	st := toolruntest.NewState(t, &toolruntest.Options{
//		Env: map[string]toolrun.EnvValue{"GITHUB_TOKEN": toolruntest.SecretValue("ghp_test")},
//	})
//	res := toolruntest.Call(t, LabelIssue, st, `{"owner":"a","repo":"b","number":3}`)
//	if res.Status != toolrun.StatusSuccess { … }
//	if len(st.Queued()) != 1 { … }
package toolruntest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// SecretValue is a secret env value.
func SecretValue(v string) toolrun.EnvValue {
	return toolrun.EnvValue{Value: v, Type: toolrun.VarSecret}
}

// TextValue is a text env value.
func TextValue(v string) toolrun.EnvValue {
	return toolrun.EnvValue{Value: v, Type: toolrun.VarText}
}

// Options sets a State up. The zero value (or nil) is an empty thread "test-thread".
type Options struct {
	ThreadID, AgentID, UserID string
	// Env is the whole env chain as the tool sees it.
	Env map[string]toolrun.EnvValue
	// Values are stored JSON-encoded, as ThreadState.SetValue would.
	Values map[string]any
	// Messages are the thread's history, oldest first.
	Messages []toolrun.Message
	// Files maps paths to contents; MIME type application/octet-stream.
	Files map[string][]byte
	// Execution is returned by Execution(); nil means outside a run.
	Execution *toolrun.Execution
	// CallID is returned by CallID(); "" means "test-call".
	CallID string
	// Tools are what InvokeTool can run (through the same pipeline as Call).
	// A name not found gives the "Tool not found" error result.
	Tools []toolrun.Tool
	// CodeRunner runs RunCode; nil answers every run with a link_error.
	CodeRunner toolrun.CodeRunner
}

// Invocation records one InvokeTool call.
type Invocation struct {
	Name      string
	Arguments string
	Result    toolrun.Result
}

// State is a fake toolrun.ThreadState backed by a MemoryStore. It records
// what tools do with it. It is safe for concurrent use.
type State struct {
	t      testing.TB
	id     string
	agent  string
	user   string
	exec   *toolrun.Execution
	callID string
	store  *toolrun.MemoryStore
	code   toolrun.CodeRunner
	tools  map[string]toolrun.Tool

	mu       sync.Mutex
	env      map[string]toolrun.EnvValue
	uses     []string // the running tool's uses list (nil: no restriction)
	queued   []toolrun.ToolCall
	invoked  []Invocation
	emitted  []toolrun.Event
	injected []toolrun.Message
	written  []string
}

var _ toolrun.ThreadState = (*State)(nil)

// NewState returns a State set up from opts. Set-up failures fail t.
func NewState(t testing.TB, opts *Options) *State {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	s := &State{t: t, id: opts.ThreadID, agent: opts.AgentID, user: opts.UserID, exec: opts.Execution, callID: opts.CallID,
		store: toolrun.NewMemoryStore(), code: opts.CodeRunner, tools: map[string]toolrun.Tool{},
		env: map[string]toolrun.EnvValue{}}
	if s.id == "" {
		s.id = "test-thread"
	}
	if s.callID == "" {
		s.callID = "test-call"
	}
	ctx := context.Background()
	if err := s.store.CreateThread(ctx, &toolrun.Thread{ID: s.id, AgentID: s.agent, UserID: s.user}); err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	for k, v := range opts.Env {
		if v.Type == "" {
			v.Type = toolrun.VarSecret
		}
		s.env[k] = v
	}
	for k, v := range opts.Values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("toolruntest: value %q: %v", k, err)
		}
		if err := s.store.SetValue(ctx, s.id, k, b); err != nil {
			t.Fatalf("toolruntest: %v", err)
		}
	}
	for i := range opts.Messages {
		m := opts.Messages[i]
		stamp(&m)
		if err := s.store.AppendMessages(ctx, s.id, &m); err != nil {
			t.Fatalf("toolruntest: message %d: %v", i, err)
		}
	}
	for p, data := range opts.Files {
		if _, err := s.store.WriteFile(ctx, s.id, toolrun.FileInfo{Path: toolrun.CleanPath(p), MimeType: "application/octet-stream", CreatedAt: fileTime(), UpdatedAt: fileTime()}, data); err != nil {
			t.Fatalf("toolruntest: file %s: %v", p, err)
		}
	}
	for _, tool := range opts.Tools {
		info, err := toolrun.Describe(tool)
		if err != nil {
			t.Fatalf("toolruntest: %v", err)
		}
		s.tools[info.Name] = tool
	}
	return s
}

// Call runs tool with the argument text args through toolrun's real
// pipeline (parse, validate, defaults, required variables, Execute with
// panics recovered, uses list enforced on st) and returns its result.
// A tool that cannot be compiled fails t.
func Call(t testing.TB, tool toolrun.Tool, st *State, args string) toolrun.Result {
	t.Helper()
	res, err := st.run(context.Background(), tool, args)
	if err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	return res
}

func (s *State) run(ctx context.Context, tool toolrun.Tool, args string) (toolrun.Result, error) {
	info, err := toolrun.Describe(tool)
	if err != nil {
		return toolrun.Result{}, err
	}
	s.mu.Lock()
	prev := s.uses
	s.uses = info.Uses
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.uses = prev
		s.mu.Unlock()
	}()
	return toolrun.Invoke(ctx, tool, s, args)
}

// Store is the MemoryStore behind the state, for set-up and inspection
// beyond the recorders.
func (s *State) Store() *toolrun.MemoryStore { return s.store }

// Queued returns the calls tools queued, in order.
func (s *State) Queued() []toolrun.ToolCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toolrun.ToolCall(nil), s.queued...)
}

// Invoked returns the InvokeTool calls, in order, with their results.
func (s *State) Invoked() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Invocation(nil), s.invoked...)
}

// Emitted returns the events tools emitted, in order.
func (s *State) Emitted() []toolrun.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toolrun.Event(nil), s.emitted...)
}

// Injected returns the messages tools injected, in order.
func (s *State) Injected() []toolrun.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toolrun.Message(nil), s.injected...)
}

// Written returns the paths tools wrote, in order (a path written twice
// appears twice).
func (s *State) Written() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.written...)
}

// File returns the current contents of a thread file, failing the test when
// it does not exist.
func (s *State) File(path string) []byte {
	s.t.Helper()
	data, _, err := s.store.ReadFile(context.Background(), s.id, toolrun.CleanPath(path))
	if err != nil {
		s.t.Fatalf("toolruntest: file %s: %v", path, err)
	}
	return data
}

// EnvValue returns the env value a tool set or was given.
func (s *State) EnvValue(name string) (toolrun.EnvValue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.env[name]
	return v, ok
}

// ThreadID implements toolrun.ThreadState.
func (s *State) ThreadID() string { return s.id }

// AgentID implements toolrun.ThreadState.
func (s *State) AgentID() string { return s.agent }

// UserID implements toolrun.ThreadState.
func (s *State) UserID() string { return s.user }

// Execution implements toolrun.ThreadState.
func (s *State) Execution() *toolrun.Execution { return s.exec }

// CallID implements toolrun.ThreadState: Options.CallID, or "test-call".
func (s *State) CallID() string { return s.callID }

// Value implements toolrun.ThreadState.
func (s *State) Value(ctx context.Context, key string, dst any) (bool, error) {
	raw, err := s.store.GetValue(ctx, s.id, key)
	if errors.Is(err, toolrun.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if dst == nil {
		return true, nil
	}
	return true, json.Unmarshal(raw, dst)
}

// SetValue implements toolrun.ThreadState.
func (s *State) SetValue(ctx context.Context, key string, v any) error {
	var raw json.RawMessage
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("toolruntest: value %q: %w", key, err)
		}
		raw = b
	}
	return s.store.SetValue(ctx, s.id, key, raw)
}

// Env implements toolrun.ThreadState.
func (s *State) Env(_ context.Context, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.env[name]
	if !ok {
		return "", fmt.Errorf("%w: %s", toolrun.ErrVariableNotFound, name)
	}
	return v.Value, nil
}

// EnvType implements toolrun.ThreadState.
func (s *State) EnvType(_ context.Context, name string) (toolrun.VarType, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.env[name]; ok && v.Type != "" {
		return v.Type, nil
	}
	return toolrun.VarSecret, nil
}

// SetEnv implements toolrun.ThreadState.
func (s *State) SetEnv(_ context.Context, name, value string, t toolrun.VarType) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == "" {
		t = toolrun.VarSecret
		if old, ok := s.env[name]; ok && old.Type != "" {
			t = old.Type
		}
	}
	s.env[name] = toolrun.EnvValue{Value: value, Type: t}
	return nil
}

func (s *State) declared(name string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uses == nil {
		return "", true
	}
	for _, u := range s.uses {
		if u == name {
			return "", true
		}
	}
	list := "(none)"
	if len(s.uses) > 0 {
		list = ""
		for i, u := range s.uses {
			if i > 0 {
				list += ", "
			}
			list += u
		}
	}
	return fmt.Sprintf("Tool %q is not declared in the current tool's uses list. Allowed tools: %s", name, list), false
}

func argText(args any) (string, error) {
	switch a := args.(type) {
	case nil:
		return "{}", nil
	case string:
		return a, nil
	case json.RawMessage:
		return string(a), nil
	case []byte:
		return string(a), nil
	}
	b, err := json.Marshal(args)
	return string(b), err
}

// QueueTool implements toolrun.ThreadState: the call is recorded, not run.
func (s *State) QueueTool(name string, args any) error {
	if msg, ok := s.declared(name); !ok {
		return fmt.Errorf("%w: %s", toolrun.ErrNotDeclared, msg)
	}
	raw, err := argText(args)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.queued = append(s.queued, toolrun.ToolCall{ID: fmt.Sprintf("queued_%d", len(s.queued)+1), Name: name, Arguments: raw})
	s.mu.Unlock()
	return nil
}

// InvokeTool implements toolrun.ThreadState: tools given in Options.Tools
// run through the real pipeline with this state.
func (s *State) InvokeTool(ctx context.Context, name string, args any) toolrun.Result {
	raw, err := argText(args)
	var res toolrun.Result
	switch msg, ok := s.declared(name); {
	case !ok:
		res = toolrun.Result{Status: toolrun.StatusError, Error: msg}
	case err != nil:
		res = toolrun.Errorf("arguments: %v", err)
	default:
		tool := s.tools[name]
		if tool == nil {
			res = toolrun.Result{Status: toolrun.StatusError, Error: "Tool not found: " + name}
		} else if res, err = s.run(ctx, tool, raw); err != nil {
			res = toolrun.Errorf("%v", err)
		}
	}
	s.mu.Lock()
	s.invoked = append(s.invoked, Invocation{Name: name, Arguments: raw, Result: res})
	s.mu.Unlock()
	return res
}

// InjectMessage implements toolrun.ThreadState.
func (s *State) InjectMessage(ctx context.Context, m toolrun.Message) error {
	c := m
	stamp(&c)
	if err := s.store.AppendMessages(ctx, s.id, &c); err != nil {
		return err
	}
	s.mu.Lock()
	s.injected = append(s.injected, c)
	s.mu.Unlock()
	return nil
}

// Messages implements toolrun.ThreadState.
func (s *State) Messages(ctx context.Context, opts *toolrun.MessagesOptions) (toolrun.MessagePage, error) {
	q := toolrun.MessageQuery{Limit: 100}
	if opts != nil {
		q = toolrun.MessageQuery{Limit: opts.Limit, Offset: opts.Offset, Order: opts.Order, IncludeSilent: opts.IncludeSilent, MaxDepth: opts.MaxDepth}
		if q.Limit <= 0 {
			q.Limit = 100
		}
	}
	return s.store.ListMessages(ctx, s.id, q)
}

// Emit implements toolrun.ThreadState.
func (s *State) Emit(event string, data any) {
	s.mu.Lock()
	s.emitted = append(s.emitted, toolrun.Event{ThreadID: s.id, Type: event, Data: data, Timestamp: time.Now().UTC()})
	s.mu.Unlock()
}

// WriteFile implements toolrun.ThreadState.
func (s *State) WriteFile(ctx context.Context, path string, data []byte, mimeType string) (toolrun.FileInfo, error) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	p := toolrun.CleanPath(path)
	info, err := s.store.WriteFile(ctx, s.id, toolrun.FileInfo{Path: p, MimeType: mimeType, CreatedAt: fileTime(), UpdatedAt: fileTime()}, data)
	if err == nil {
		s.mu.Lock()
		s.written = append(s.written, p)
		s.mu.Unlock()
	}
	return info, err
}

// ReadFile implements toolrun.ThreadState.
func (s *State) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, _, err := s.store.ReadFile(ctx, s.id, toolrun.CleanPath(path))
	return data, err
}

// StatFile implements toolrun.ThreadState.
func (s *State) StatFile(ctx context.Context, path string) (toolrun.FileInfo, error) {
	return s.store.StatFile(ctx, s.id, toolrun.CleanPath(path))
}

// ListFiles implements toolrun.ThreadState.
func (s *State) ListFiles(ctx context.Context, dir string) ([]toolrun.FileInfo, error) {
	return s.store.ListFiles(ctx, s.id, toolrun.CleanPath(dir))
}

// DeleteFile implements toolrun.ThreadState.
func (s *State) DeleteFile(ctx context.Context, path string) error {
	return s.store.DeleteFile(ctx, s.id, toolrun.CleanPath(path))
}

// RunCode implements toolrun.ThreadState.
func (s *State) RunCode(ctx context.Context, source string, opts *toolrun.CodeOptions) *toolrun.CodeRun {
	if s.code == nil {
		return toolrun.SettledCodeRun(toolrun.CodeResult{Status: toolrun.CodeStatusLinkError,
			Error: &toolrun.CodeError{Name: "MissingCodeRunner", Message: "toolruntest: no CodeRunner in Options"}})
	}
	return s.code.RunCode(ctx, source, opts)
}

var msgCount atomic.Int64

// stamp gives a message without an ID or creation time one, as the
// executor does before it stores a message.
func stamp(m *toolrun.Message) {
	if m.ID == "" {
		m.ID = "msg_" + strconv.FormatInt(msgCount.Add(1), 10)
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = fileTime()
	}
}

// fileTime is the time a file is written at.
func fileTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
