package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/toolrun/toolrun/internal/jsonvalue"
)

// callState is the ThreadState the executor gives one call of a function
// tool: production's, the one package toolruntest hands tools too.
type callState struct {
	e    *Executor
	b    *batch
	tool *funcTool // the running tool: its uses list and package
	nest int       // the call's nesting level (0: a call of a top-level batch)
	id   string    // the call's id (CallID)
	// resultID is the id the stored result of the batch's running call will
	// get: the rows of a prompt tool the call invokes hang from it.
	resultID string
	// invoked counts the InvokeTool calls made so far, for their ids.
	invoked atomic.Int64
}

var _ ThreadState = (*callState)(nil)

func (s *callState) ThreadID() string      { return s.b.threadID }
func (s *callState) AgentID() string       { return s.b.thread.agentID }
func (s *callState) UserID() string        { return s.b.thread.userID }
func (s *callState) Execution() *Execution { return s.b.sc.exec }
func (s *callState) CallID() string        { return s.id }

func (s *callState) Value(ctx context.Context, key string, dst any) (bool, error) {
	raw, err := s.e.store.GetValue(ctx, s.b.threadID, key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, &StoreError{Op: "get value " + key, Err: err}
	}
	if dst == nil {
		return true, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, fmt.Errorf("toolrun: value %q: %w", key, err)
	}
	return true, nil
}

func (s *callState) SetValue(ctx context.Context, key string, v any) error {
	var raw json.RawMessage
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("toolrun: value %q: %w", key, err)
		}
		raw = b // the store's front makes it valid UTF-8 (records.SetValue)
	}
	if err := s.e.store.SetValue(ctx, s.b.threadID, key, raw); err != nil {
		return &StoreError{Op: "set value " + key, Err: err}
	}
	return nil
}

func (s *callState) Env(_ context.Context, name string) (string, error) {
	v, _, ok := s.e.resolveEnv(s.b, name)
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrVariableNotFound, name)
	}
	return v, nil
}

func (s *callState) EnvType(_ context.Context, name string) (VarType, error) {
	_, t, _ := s.e.resolveEnv(s.b, name)
	return t, nil
}

func (s *callState) SetEnv(ctx context.Context, name, value string, t VarType) error {
	if name == "" {
		return errors.New("toolrun: set env: empty name")
	}
	if !knownType(t) {
		return fmt.Errorf("toolrun: set env %s: unknown type %q (want text or secret)", name, t)
	}
	s.b.mu.Lock()
	if t == "" {
		// The stored type, as it counts: one a store holds that is not
		// text (written to the store directly, say) stays secret.
		t = VarSecret
		if old, ok := s.b.env[name]; ok {
			t = typeOr(old.Type)
		}
	}
	s.b.mu.Unlock()
	v := EnvValue{Value: value, Type: t}
	warnShortSecret(ctx, s.e.log, "thread env (SetEnv)", name, v)
	if err := s.e.store.SetEnv(ctx, ScopeThread, s.b.threadID, name, v); err != nil {
		return &StoreError{Op: "set env " + name, Err: err}
	}
	s.b.mu.Lock()
	if s.b.env == nil {
		s.b.env = map[string]EnvValue{}
	}
	if old, ok := s.b.env[name]; ok && retires(old, v) {
		// The old value may be in what the call returns (a token it
		// refreshed): the batch's redactor must keep it. Built now, it
		// holds it, and its successors keep its secrets (b.retired).
		s.e.redactorLocked(s.b)
		s.b.retired = true
	}
	s.b.env[name] = v
	s.b.redOK = false
	s.b.mu.Unlock()
	if w := s.b.sc.watch; w != nil {
		return w.envSet(ctx, name, v)
	}
	return nil
}

// retires reports whether replacing old by v drops a secret value the
// redactor would have redacted.
func retires(old, v EnvValue) bool {
	if typeOr(old.Type) == VarText || len(old.Value) < redactMinLen {
		return false
	}
	return old.Value != v.Value || typeOr(v.Type) == VarText
}

// allowed applies the running tool's uses list.
func (s *callState) allowed(name string) (string, bool) {
	if s.tool == nil || s.tool.uses == nil {
		return "", true
	}
	for _, u := range s.tool.uses {
		if u == name {
			return "", true
		}
	}
	return notDeclaredMessage(name, s.tool.uses), false
}

func (s *callState) QueueTool(name string, args any) error {
	if msg, ok := s.allowed(name); !ok {
		return &notDeclaredError{msg: msg}
	}
	raw, err := rawArgs(args)
	if err != nil {
		return fmt.Errorf("toolrun: queue %s: arguments: %w", name, err)
	}
	if ns := s.namespace(); ns != "" {
		if ent := s.e.reg.lookup(name, ns); ent != nil {
			name = ent.name
		}
	}
	s.b.mu.Lock()
	if s.b.curCall == "" {
		s.b.mu.Unlock()
		return fmt.Errorf("toolrun: queue %s: QueueTool needs a running batch, which this ThreadState is not in; use InvokeTool", name)
	}
	if limit := int(s.e.maxQueue); len(s.b.queue) >= limit && queuedIn(s.b.queue) >= limit {
		s.b.mu.Unlock()
		return fmt.Errorf("toolrun: queue %s: the batch already queued %d calls, the most one batch may queue (MaxQueued)", name, limit)
	}
	// Deterministic ids (<queuing call>_q<n>): a resumed batch recognises
	// a queued call whose result is already stored.
	s.b.queuedN++
	c := ToolCall{ID: s.b.curCall + "_q" + strconv.Itoa(int(s.b.queuedN)), Name: name, Arguments: raw}
	s.b.queue = append(s.b.queue, pending{call: c, queued: true})
	s.b.mu.Unlock()
	if s.b.obs != nil {
		s.b.obs.Queued(c)
	}
	return nil
}

// queuedIn counts the queued calls of a batch's queue (those a resumed
// batch queued again included).
func queuedIn(queue []pending) int {
	n := 0
	for i := range queue {
		if queue[i].queued {
			n++
		}
	}
	return n
}

// namespace is the running tool's package ("" outside a tool).
func (s *callState) namespace() string {
	if s.tool == nil {
		return ""
	}
	return s.tool.namespace
}

func (s *callState) InvokeTool(ctx context.Context, name string, args any) Result {
	if msg, ok := s.allowed(name); !ok {
		return Result{Status: StatusError, Error: msg}
	}
	raw, err := rawArgs(args)
	if err != nil {
		return Errorf("toolrun: invoke %s: arguments: %v", name, err)
	}
	id := s.id + "_i" + strconv.FormatInt(s.invoked.Add(1), 10)
	h := s.b.tools.forTool(name, s.namespace())
	res, err := s.e.invoke(ctx, s.b, s, h, id, raw, s.resultID)
	if err != nil {
		// An abort, or a store failure, stops the run after this call.
		s.b.setAbort(err, s.e.redactor(s.b))
	}
	if s.b.obs != nil {
		red := s.e.redactor(s.b)
		s.b.obs.Invoked(name, red.String(raw), redactResult(res, red))
	}
	return res
}

func (s *callState) InjectMessage(ctx context.Context, m Message) error {
	if s.b.thread.terminatedAt != nil {
		return fmt.Errorf("%w: %s", ErrThreadTerminated, s.b.threadID)
	}
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return fmt.Errorf("toolrun: inject message: unknown role %q", m.Role)
	}
	red := s.e.redactor(s.b)
	meta, err := redactMap("metadata", m.Metadata, red)
	if err != nil {
		return fmt.Errorf("toolrun: inject message: %w", err)
	}
	st := &s.b.sc.stamp
	msg := &Message{Role: m.Role, Content: red.String(m.Content), Silent: m.Silent, Metadata: meta,
		ParentID: st.ParentID, Depth: st.Depth, Prompt: st.Prompt,
		ToolCallID: red.String(m.ToolCallID), Name: red.String(m.Name), ToolStatus: m.ToolStatus}
	// The store's front fixes free text only: it takes names and call ids
	// as the runtime makes them, and these two are the tool's.
	fixText(&msg.ToolCallID)
	fixText(&msg.Name)
	for _, c := range m.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: red.String(c.ID), Name: red.String(c.Name), Arguments: red.String(c.Arguments)})
	}
	for _, a := range m.Attachments {
		msg.Attachments = append(msg.Attachments, redactRef(a, red))
	}
	if err := s.e.store.AppendMessages(ctx, s.b.threadID, msg); err != nil {
		return &StoreError{Op: "inject message", Err: err}
	}
	if s.b.obs != nil {
		s.b.obs.Injected(*msg)
	}
	return nil
}

func (s *callState) Messages(ctx context.Context, q *MessageQuery) (MessagePage, error) {
	p, err := s.e.store.ListMessages(ctx, s.b.threadID, toolQuery(q))
	if err != nil {
		return MessagePage{}, &StoreError{Op: "list messages", Err: err}
	}
	return p, nil
}

func (s *callState) Emit(event string, data any) {
	red := s.e.redactor(s.b)
	if data != nil {
		// Subscribers get a JSON tree: a value JSON cannot hold (a cycle,
		// NaN, a func) is replaced by a text saying why, never walked.
		tree, err := jsonvalue.Normalize("data", data, nil)
		if err != nil {
			msg := red.String(err.Error())
			s.e.log.Warn("toolrun: emitted event data is not JSON", "thread", s.b.threadID, "event", red.String(event), "error", msg)
			tree = "[event data not sent: " + msg + "]"
		}
		data = red.Value(tree)
	}
	ev := Event{ThreadID: s.b.threadID, Type: red.String(event), Data: data, Timestamp: time.Now().UTC()}
	s.e.ev.publish(ev)
	if s.b.obs != nil {
		s.b.obs.Emitted(ev)
	}
}

func (s *callState) WriteFile(ctx context.Context, path string, data []byte, mimeType string) (FileInfo, error) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	info, err := s.e.store.writeFile(ctx, s.b.threadID, CleanPath(path), data, mimeType)
	if err != nil {
		return FileInfo{}, &StoreError{Op: "write file " + path, Err: err}
	}
	if s.b.obs != nil {
		s.b.obs.Wrote(info.Path)
	}
	return info, nil
}

func (s *callState) ReadFile(ctx context.Context, path string) ([]byte, error) {
	data, _, err := s.e.store.ReadFile(ctx, s.b.threadID, CleanPath(path))
	if err != nil {
		return nil, fileErr("read", path, err)
	}
	return data, nil
}

func (s *callState) StatFile(ctx context.Context, path string) (FileInfo, error) {
	info, err := s.e.store.StatFile(ctx, s.b.threadID, CleanPath(path))
	if err != nil {
		return FileInfo{}, fileErr("stat", path, err)
	}
	return info, nil
}

func (s *callState) ListFiles(ctx context.Context, dir string) ([]FileInfo, error) {
	list, err := s.e.store.ListFiles(ctx, s.b.threadID, CleanPath(dir))
	if err != nil {
		return nil, &StoreError{Op: "list files " + dir, Err: err}
	}
	return list, nil
}

func (s *callState) DeleteFile(ctx context.Context, path string) error {
	if err := s.e.store.DeleteFile(ctx, s.b.threadID, CleanPath(path)); err != nil {
		return fileErr("delete", path, err)
	}
	return nil
}

func fileErr(op, path string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("toolrun: %s file %s: %w", op, CleanPath(path), ErrNotFound)
	}
	return &StoreError{Op: op + " file " + path, Err: err}
}

func (s *callState) RunCode(ctx context.Context, source string, opts *CodeOptions) *CodeRun {
	return runCodeBound(ctx, s.e.code, source, opts)
}

// runCodeBound starts a run and terminates it when ctx ends (a user stop).
func runCodeBound(ctx context.Context, r CodeRunner, source string, opts *CodeOptions) *CodeRun {
	run := r.RunCode(ctx, source, opts)
	if run == nil {
		return SettledCodeRun(CodeResult{Status: CodeStatusLinkError, Error: &CodeError{Name: "MissingCodeRun", Message: "the code runner returned no run"}})
	}
	if ctx.Done() != nil && run.Running() {
		go func() {
			select {
			case <-ctx.Done():
				run.Terminate("Execution stopped: " + ctx.Err().Error())
			case <-run.Done():
			}
		}()
	}
	return run
}

// redactMap turns m into a JSON tree (values of any Go type reached, or an
// error naming what JSON cannot hold) and redacts it.
func redactMap(root string, m map[string]any, red redactor) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	tree, err := jsonvalue.Normalize(root, m, nil)
	if err != nil {
		return nil, err
	}
	out, _ := red.Value(tree).(map[string]any)
	return out, nil
}
