// Package toolruntest runs tools in unit tests exactly as production does,
// as net/http/httptest serves handlers: a thread in a MemoryStore, a real
// Executor, the production ThreadState, and recorders around them.
//
// Set the thread up (env, values, messages, files), call the tool with
// [Call] — the executor's whole pipeline: required variables, argument
// validation and defaults, the uses list, Execute with panics recovered,
// redaction, the stored result — then read what it returned and stored and
// what it queued, invoked, emitted, injected and wrote:
//
//	st := toolruntest.NewState(t, &toolruntest.Options{
//		Env: map[string]toolrun.EnvValue{"GITHUB_TOKEN": toolruntest.SecretValue("ghp_test")},
//	})
//	res := toolruntest.Call(t, LabelIssue, st, `{"owner":"a","repo":"b","number":3}`)
//	if res.Status != toolrun.StatusSuccess { … }     // the result, secrets redacted
//	if res.Message.Content != "…" { … }               // the text the model reads
//	if len(st.Queued()) != 1 { … }
//
// Calls a tool queues run after it, as in production (the tools they name
// are registered from Options.Tools); Result.Outcomes has them all.
package toolruntest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/jsonvalue"
	"github.com/toolrun/toolrun/internal/observe"
)

// SecretValue is a secret env value.
func SecretValue(v string) toolrun.EnvValue {
	return toolrun.EnvValue{Value: v, Type: toolrun.VarSecret}
}

// TextValue is a text env value.
func TextValue(v string) toolrun.EnvValue {
	return toolrun.EnvValue{Value: v, Type: toolrun.VarText}
}

// Options sets a State up. The zero value (or nil) is an empty thread
// "test-thread".
type Options struct {
	ThreadID, AgentID, UserID string
	// Env is the thread's env: secret values are redacted from everything
	// the tool returns and stores, as in production.
	Env map[string]toolrun.EnvValue
	// Values are stored JSON-encoded, as ThreadState.SetValue would.
	Values map[string]any
	// Messages are the thread's history, oldest first (ids and times are
	// filled in when missing).
	Messages []toolrun.Message
	// Files maps paths to contents; MIME type application/octet-stream.
	Files map[string][]byte
	// Tools are registered beside the tools given to Call: what InvokeTool
	// and queued calls can run. A tool given to Call may be one of them,
	// but not another tool of the same name as one of them.
	Tools []toolrun.Tool
	// CodeRunner runs RunCode; nil answers every run with a link_error.
	CodeRunner toolrun.CodeRunner
}

// Invocation records one InvokeTool call.
type Invocation struct {
	Name string
	// Arguments and Result are redacted, as production leaves them.
	Arguments string
	Result    toolrun.Result
}

// Result is what a call gave, as production returns and stores it, secrets
// redacted.
type Result struct {
	Status toolrun.Status
	// Result and Error are the tool's texts; Content is what was stored for
	// the model to read ("Tool executed successfully" for an empty success,
	// "Failed to execute tool: …", attachment lines …).
	Result, Error, Content string
	ErrorCode              string
	ErrorData              map[string]any
	// Refs are the result's attachments as stored: new files written under
	// /attachments/, existing refs as given.
	Refs []toolrun.AttachmentRef
	// Message is the stored tool-result message.
	Message toolrun.Message
	// Outcomes are the outcomes of the batch: the call, then the calls it
	// queued.
	Outcomes []toolrun.Outcome
	// Err is the error of the run: a tool aborted it (ErrAbort), or the
	// store failed.
	Err error
}

// State is a thread run by a real Executor over a MemoryStore. As a
// ThreadState it is the production one outside a run (Executor.State),
// except that it reads the thread's env as it is at each method call, not
// once: after a call, Env returns the values the tool set, and the secrets
// among them are redacted from what it emits, injects and invokes. It
// records what tools do through it and in calls. It is safe for concurrent
// use.
type State struct {
	toolrun.ThreadState

	t     testing.TB
	id    string
	reg   *toolrun.Registry
	ex    *toolrun.Executor
	store *toolrun.MemoryStore

	mu    sync.Mutex
	calls int
	// taken holds the call ids the thread's messages name (results, calls
	// of assistant messages, queued calls) up to Seq seen, and the ids
	// Call gave.
	taken map[string]bool
	seen  int64
	// tools are the tools registered, by name, and where each came from.
	tools    map[string]registered
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
	s := &State{t: t, id: opts.ThreadID, reg: toolrun.NewRegistry(nil), store: toolrun.NewMemoryStore()}
	if s.id == "" {
		s.id = "test-thread"
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	if err := s.store.CreateThread(ctx, &toolrun.Thread{ID: s.id, AgentID: opts.AgentID, UserID: opts.UserID, CreatedAt: now}); err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	for k, v := range opts.Env {
		if v.Type == "" {
			v.Type = toolrun.VarSecret
		}
		if err := s.store.SetEnv(ctx, toolrun.ScopeThread, s.id, k, v); err != nil {
			t.Fatalf("toolruntest: env %s: %v", k, err)
		}
	}
	for k, v := range opts.Values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("toolruntest: value %q: %v", k, err)
		}
		if err := s.store.SetValue(ctx, s.id, k, jsonvalue.FixUTF8JSON(b)); err != nil {
			t.Fatalf("toolruntest: %v", err)
		}
	}
	for i := range opts.Messages {
		m := opts.Messages[i]
		if m.ID == "" {
			m.ID = fmt.Sprintf("msg_seed_%d", i+1)
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		m.ThreadID = s.id
		if err := s.store.AppendMessages(ctx, s.id, &m); err != nil {
			t.Fatalf("toolruntest: message %d: %v", i, err)
		}
	}
	for p, data := range opts.Files {
		f := toolrun.FileInfo{Path: toolrun.CleanPath(p), MimeType: "application/octet-stream", CreatedAt: now, UpdatedAt: now}
		if _, err := s.store.WriteFile(ctx, s.id, f, data); err != nil {
			t.Fatalf("toolruntest: file %s: %v", p, err)
		}
	}
	if len(opts.Tools) > 0 {
		defs := make([]toolrun.Definition, len(opts.Tools))
		for i, tool := range opts.Tools {
			defs[i] = tool
		}
		if err := s.reg.Register(defs...); err != nil {
			t.Fatalf("toolruntest: %v", err)
		}
	}
	s.tools = make(map[string]registered, len(opts.Tools))
	for i, tool := range opts.Tools {
		name, err := describe(tool)
		if err != nil {
			t.Fatalf("toolruntest: %v", err)
		}
		s.tools[name] = registered{tool, fmt.Sprintf("Options.Tools[%d]", i)}
	}
	s.ex = toolrun.NewExecutor(s.reg, &toolrun.ExecutorOptions{Store: s.store, CodeRunner: opts.CodeRunner})
	st, err := s.ex.State(observe.With(ctx, (*observer)(s)), s.id)
	if err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	s.ThreadState = current{st, s}
	return s
}

// current is the ThreadState of a State. The production state outside a
// run reads the thread's env once, when it is made, as a request handler
// gets it; a State outlives many calls, whose tools set env values. So
// each method that reads the env runs on the production state of the
// thread as it is now: it sees the values tools set since NewState and
// redacts the secrets among them. The rest is the state NewState made.
type current struct {
	toolrun.ThreadState
	s *State
}

// now returns the production state of the thread as it is now.
func (c current) now(ctx context.Context) (toolrun.ThreadState, error) {
	return c.s.ex.State(observe.With(ctx, (*observer)(c.s)), c.s.id)
}

func (c current) Env(ctx context.Context, name string) (string, error) {
	st, err := c.now(ctx)
	if err != nil {
		return "", err
	}
	return st.Env(ctx, name)
}

func (c current) EnvType(ctx context.Context, name string) (toolrun.VarType, error) {
	st, err := c.now(ctx)
	if err != nil {
		return "", err
	}
	return st.EnvType(ctx, name)
}

func (c current) SetEnv(ctx context.Context, name, value string, t toolrun.VarType) error {
	st, err := c.now(ctx)
	if err != nil {
		return err
	}
	return st.SetEnv(ctx, name, value, t)
}

func (c current) InvokeTool(ctx context.Context, name string, args any) toolrun.Result {
	st, err := c.now(ctx)
	if err != nil {
		return toolrun.Errorf("toolruntest: invoke %s: %v", name, err)
	}
	return st.InvokeTool(ctx, name, args)
}

func (c current) InjectMessage(ctx context.Context, m toolrun.Message) error {
	st, err := c.now(ctx)
	if err != nil {
		return err
	}
	return st.InjectMessage(ctx, m)
}

func (c current) Emit(event string, data any) {
	st, err := c.now(context.Background())
	if err != nil {
		st = c.ThreadState // the event is sent, redacted as best it can be
	}
	st.Emit(event, data)
}

// Call runs tool with the argument text args as production runs a model's
// call — registering the tool with the State's registry on its first call —
// and returns what production returns and stores. A tool that cannot be
// registered fails t.
//
// The calls of a State run under the ids toolruntest_call_1,
// toolruntest_call_2 … (Result.Message.ToolCallID), skipping any id the
// thread's messages already name: a seeded tool result is never taken for
// the call's own, so the tool always runs.
//
// Call runs the tool it is given, never another of the same name. A
// registry holds one tool per name, so a State runs one tool of each name:
// Call given a tool other than the one of its name registered before (in
// Options.Tools or by an earlier Call) fails t, naming the clash. Give each
// variant of a tool a State of its own.
func Call(t testing.TB, tool toolrun.Tool, st *State, args string) Result {
	t.Helper()
	name := st.register(t, tool)
	id := st.callID(t)
	outs, err := st.ex.Run(observe.With(context.Background(), (*observer)(st)), st.id, []toolrun.ToolCall{{ID: id, Name: name, Arguments: args}})
	if len(outs) == 0 {
		t.Fatalf("toolruntest: the call of %s stored no result: %v", name, err)
	}
	r, m := outs[0].Result, *outs[0].Message
	return Result{Status: r.Status, Result: r.Result, Error: r.Error, Content: m.Content, ErrorCode: r.ErrorCode, ErrorData: r.ErrorData,
		Refs: m.Attachments, Message: m, Outcomes: outs, Err: err}
}

// callID returns the id of the next call: "toolruntest_call_" and the
// number of calls so far, counted on past every id the thread's messages
// already name. The executor would take a stored result with the id for the
// call's own (a resumed call) and not run the tool, so Call never reuses
// an id of the seeded history, of an earlier call or of a message stored
// since.
func (s *State) callID(t testing.TB) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	page, err := s.store.ListMessages(context.Background(), s.id, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1, After: s.seen})
	if err != nil {
		t.Fatalf("toolruntest: reading the thread's messages: %v", err)
	}
	if s.taken == nil {
		s.taken = map[string]bool{}
	}
	for _, m := range page.Messages {
		s.seen = max(s.seen, m.Seq)
		s.taken[m.ToolCallID] = true
		for _, c := range m.ToolCalls {
			s.taken[c.ID] = true
		}
		for _, c := range m.QueuedCalls {
			s.taken[c.ID] = true
		}
	}
	for {
		s.calls++
		id := fmt.Sprintf("toolruntest_call_%d", s.calls)
		if !s.taken[id] {
			s.taken[id] = true
			return id
		}
	}
}

// registered is a tool of the State's registry and where it came from.
type registered struct {
	tool toolrun.Tool
	from string
}

// register registers tool unless it is registered already, and returns
// its name. Another tool registered under its name fails t.
func (s *State) register(t testing.TB, tool toolrun.Tool) string {
	t.Helper()
	name, err := describe(tool)
	if err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.tools[name]; ok {
		if old.tool == tool {
			return name
		}
		t.Fatalf("toolruntest: Call was given a tool named %q, but the State already runs another tool of that name (from %s), which would answer instead: a State runs one tool of each name, so give each variant a State of its own", name, old.from)
	}
	if err := s.reg.Register(tool); err != nil {
		t.Fatalf("toolruntest: %v", err)
	}
	s.tools[name] = registered{tool, "an earlier Call"}
	return name
}

// describe returns a tool's name: the Name field every tool type
// (Func[A], RawFunc) has.
func describe(tool toolrun.Tool) (string, error) {
	v := reflect.ValueOf(tool)
	if tool == nil || v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return "", fmt.Errorf("not a tool definition: %T", tool)
	}
	f := v.Elem().FieldByName("Name")
	if f.Kind() != reflect.String {
		return "", fmt.Errorf("not a tool definition: %T", tool)
	}
	return f.String(), nil
}

// Store is the MemoryStore behind the state, for set-up and inspection
// beyond the recorders.
func (s *State) Store() *toolrun.MemoryStore { return s.store }

// Executor is the executor the calls run on.
func (s *State) Executor() *toolrun.Executor { return s.ex }

// Queued returns the calls tools queued, in order (arguments as given).
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

// Emitted returns the events tools emitted, in order, as subscribers get
// them (data as a JSON tree, secrets redacted).
func (s *State) Emitted() []toolrun.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toolrun.Event(nil), s.emitted...)
}

// Injected returns the messages tools injected, in order, as stored.
func (s *State) Injected() []toolrun.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toolrun.Message(nil), s.injected...)
}

// Written returns the paths tools wrote with WriteFile, in order (a path
// written twice appears twice; attachments of results are not listed).
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

// EnvValue returns the thread env value a tool set or was given.
func (s *State) EnvValue(name string) (toolrun.EnvValue, bool) {
	v, err := s.store.GetEnv(context.Background(), toolrun.ScopeThread, s.id, name)
	return v, err == nil
}

// observer is the State as the observer production reports to.
type observer State

func (o *observer) Invoked(name, args string, result any) {
	r, _ := result.(toolrun.Result)
	o.mu.Lock()
	o.invoked = append(o.invoked, Invocation{Name: name, Arguments: args, Result: r})
	o.mu.Unlock()
}

func (o *observer) Queued(call any) {
	c, _ := call.(toolrun.ToolCall)
	o.mu.Lock()
	o.queued = append(o.queued, c)
	o.mu.Unlock()
}

func (o *observer) Injected(message any) {
	m, _ := message.(toolrun.Message)
	o.mu.Lock()
	o.injected = append(o.injected, m)
	o.mu.Unlock()
}

func (o *observer) Wrote(path string) {
	o.mu.Lock()
	o.written = append(o.written, path)
	o.mu.Unlock()
}

func (o *observer) Emitted(event any) {
	ev, _ := event.(toolrun.Event)
	o.mu.Lock()
	o.emitted = append(o.emitted, ev)
	o.mu.Unlock()
}
