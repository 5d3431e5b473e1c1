package toolrun

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolrun/toolrun/internal/jsonvalue"
	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/internal/safefmt"
	"github.com/toolrun/toolrun/internal/schema"
)

// ExecutorOptions configures an Executor. The zero value (or nil) is valid:
// an in-memory store, no instance env, no logging, no hooks, no code runner.
type ExecutorOptions struct {
	// Store persists threads, messages and everything else. nil means a new
	// MemoryStore.
	Store Store
	// Env is the runtime-instance environment: the last link of the env
	// chain. Values without a Type are secret.
	Env map[string]EnvValue
	// Logger receives the executor's logs (secrets redacted). nil sends
	// warnings and errors to slog.Default() and drops the rest.
	Logger *slog.Logger
	// Hooks are called around tool calls.
	Hooks Hooks
	// TracerProvider receives an "execute_tool <name>" span per call
	// (OpenTelemetry GenAI conventions; secrets redacted). nil means no tracing.
	TracerProvider trace.TracerProvider
	// CodeRunner runs ThreadState.RunCode. nil means the sandbox package's
	// default runner (SandboxRunner); NoCodeRunner disables RunCode.
	CodeRunner CodeRunner
	// MaxNesting bounds how deeply calls nest: a tool calling InvokeTool is
	// one level, a prompt tool's sub-prompt another. A call past the bound
	// is not run and gets an error result naming the limit, so a tool that
	// invokes itself without end cannot exhaust the process. 0 means
	// DefaultMaxNesting.
	MaxNesting int
}

// DefaultMaxNesting is the nesting bound of ExecutorOptions.MaxNesting.
const DefaultMaxNesting = 32

// Executor runs the tool calls of a thread: strictly one at a time, in
// order, each result persisted as a tool message before the next call
// starts. A tool failure is data — an error result stored like any other —
// never a Go error from Run. An Executor is safe for concurrent use; batches
// of one thread are serialised, batches of different threads run in parallel.
type Executor struct {
	reg    *Registry
	store  records
	env    map[string]EnvValue
	log    *slog.Logger
	hooks  Hooks
	code   CodeRunner
	ev     *events // shared by the per-turn views of a Runtime
	locks  *keyedMutex
	tracer trace.Tracer
	// maxNest bounds the nesting level of calls.
	maxNest int
}

// NewExecutor returns an executor of the tools registered in reg.
func NewExecutor(reg *Registry, opts *ExecutorOptions) *Executor {
	if opts == nil {
		opts = &ExecutorOptions{}
	}
	e := &Executor{reg: reg, store: records{opts.Store}, log: opts.Logger, hooks: opts.Hooks, code: opts.CodeRunner, tracer: tracerOf(opts.TracerProvider),
		ev: &events{}, locks: &keyedMutex{}, maxNest: opts.MaxNesting}
	if e.maxNest <= 0 {
		e.maxNest = DefaultMaxNesting
	}
	if e.store.Store == nil {
		e.store.Store = NewMemoryStore()
	}
	if e.log == nil {
		e.log = defaultLogger
	}
	if e.code == nil {
		e.code = defaultCodeRunner()
	}
	e.env = make(map[string]EnvValue, len(opts.Env))
	for k, v := range opts.Env {
		if v.Type == "" {
			v.Type = VarSecret
		}
		warnShortSecret(context.Background(), e.log, "runtime-instance env", k, v)
		e.env[k] = v
	}
	return e
}

// withStore returns a view of e whose writes go to st (a lease-bound store).
func (e *Executor) withStore(st Store) *Executor {
	c := *e
	c.store = records{st}
	return &c
}

// Store returns the executor's store.
func (e *Executor) Store() Store { return e.store.Store }

// Registry returns the executor's registry.
func (e *Executor) Registry() *Registry { return e.reg }

// Subscribe calls fn with every event of threadID ("" for every thread):
// tool_call_started, tool_call_done and the events tools Emit. fn runs
// synchronously on the emitting goroutine and must not block. Call the
// returned function to unsubscribe.
func (e *Executor) Subscribe(threadID string, fn func(Event)) (unsubscribe func()) {
	return e.ev.subscribe(threadID, fn)
}

// Outcome is what became of one call of a batch.
type Outcome struct {
	Call ToolCall
	// Result is the tool's result with secrets redacted.
	Result Result
	// Message is the stored tool-result message.
	Message *Message
	// Queued reports that a tool queued the call with QueueTool.
	Queued bool
	// Resumed reports that the call's result was already stored, so the
	// call was not executed again (a batch resumed after a crash).
	Resumed bool
}

// Run executes calls on the thread threadID, creating the thread when it
// does not exist. Calls run in order, then the calls tools queued, FIFO;
// each result is stored before the next call starts. Run returns the
// outcomes of the calls that ran. Its error is non-nil only when the store
// failed (a *StoreError: the batch stopped there), a tool aborted the run
// (wrapping ErrAbort: its result is stored, the rest did not run), or ctx
// ended (the calls after that point did not run).
func (e *Executor) Run(ctx context.Context, threadID string, calls []ToolCall) ([]Outcome, error) {
	unlock := e.locks.lock(threadID)
	defer unlock()
	b, err := e.newBatch(ctx, threadID, true)
	if err != nil {
		return nil, err
	}
	return e.runBatch(ctx, b, calls, false)
}

// batch is the state of one run of calls on a thread.
type batch struct {
	threadID string
	thread   *Thread

	// Set by the runtime; zero for a bare Executor.Run.
	offered   map[string]bool // allowed-tools gate for model calls; nil: no gate
	exec      *Execution
	agentEnv  map[string]string
	promptEnv map[string]string
	prompt    string
	parentID  string
	depth     int
	nest      int // nesting level of the batch's own calls (sub-prompts: one more than their caller)
	// nullOptionals: the model's provider sends optional properties as
	// nullable, so its nulls for them mean "not given".
	nullOptionals bool
	started       map[string]bool // calls whose tool_call_started already fired
	side          string          // acting side, recorded on stored results
	turn          *turnState      // the runtime turn, nil for a bare run
	msgID         string          // id the running call's result message will get

	mu      sync.Mutex
	queue   []pending
	env     map[string]EnvValue // thread env cache
	userEnv map[string]EnvValue
	abort   error
	red     redactor // cached secrets; valid while redOK
	redOK   bool
	curCall string // the top-level call running now (ids of the calls it queues derive from it)
	queuedN int
	ran     []string // ids of the calls run so far
	ranBuf  [4]string
}

type pending struct {
	call   ToolCall
	queued bool
	// refused, when set, is the error text the call is stored with instead
	// of running (a resumed queued call whose arguments cannot be restored).
	refused string
	// fresh calls have ids no stored result has: they are never resumed.
	fresh bool
}

func (e *Executor) newBatch(ctx context.Context, threadID string, create bool) (*batch, error) {
	th, err := e.store.GetThread(ctx, threadID)
	if errors.Is(err, ErrNotFound) && create {
		th = &Thread{ID: threadID}
		if err = e.store.CreateThread(ctx, th); errors.Is(err, ErrThreadExists) {
			th, err = e.store.GetThread(ctx, threadID)
		}
	}
	if err != nil {
		return nil, &StoreError{Op: "load thread " + threadID, Err: err}
	}
	b := &batch{threadID: threadID, thread: th, nest: nestingOf(ctx)}
	if b.env, err = e.store.ListEnv(ctx, ScopeThread, threadID); err != nil {
		return nil, &StoreError{Op: "load thread env", Err: err}
	}
	if th.UserID != "" {
		if b.userEnv, err = e.store.ListEnv(ctx, ScopeUser, th.UserID); err != nil {
			return nil, &StoreError{Op: "load user env", Err: err}
		}
	}
	return b, nil
}

// runBatch runs calls and the calls they queue. fresh says that the
// calls' ids were made unique on the thread before their message was
// stored (a runtime turn), so none of them can be a resumed call.
func (e *Executor) runBatch(ctx context.Context, b *batch, calls []ToolCall, fresh bool) ([]Outcome, error) {
	if !b.thread.TerminatedAt.IsZero() {
		return nil, fmt.Errorf("%w: %s", ErrThreadTerminated, b.threadID)
	}
	b.mu.Lock()
	for _, c := range calls {
		b.queue = append(b.queue, pending{call: c, fresh: fresh})
	}
	b.mu.Unlock()
	outcomes := make([]Outcome, 0, len(calls))
	for i := 0; ; i++ {
		b.mu.Lock()
		if i >= len(b.queue) {
			b.queue = b.queue[:0]
			b.mu.Unlock()
			return outcomes, nil
		}
		p := b.queue[i]
		b.mu.Unlock()
		if b.exec.Stopped() {
			// Stop() drops the rest of the queue without results (reference E4).
			return outcomes, nil
		}
		if err := ctx.Err(); err != nil {
			return outcomes, err
		}
		out, err := e.runCall(ctx, b, p)
		if out.Message != nil {
			outcomes = append(outcomes, out)
		}
		if err != nil {
			return outcomes, err
		}
		if b.abort != nil {
			return outcomes, b.abort
		}
	}
}

// runCall runs one call of a batch and stores its result.
func (e *Executor) runCall(ctx context.Context, b *batch, p pending) (Outcome, error) {
	c := p.call
	c.Name = cleanName(c.Name)
	if c.ID != "" && !safeID(c.ID) {
		// Ids come from models: one a store column or a provider could not
		// hold is replaced.
		c.ID = newID("call")
	}
	out := Outcome{Call: c, Queued: p.queued}
	red := e.redactor(b)
	digest := ""
	if !p.fresh {
		// Only a call that may be a resumed one needs telling apart.
		digest = callDigest(c.Name, red.String(c.Arguments))
	}
	switch {
	case c.ID == "":
		c.ID = newID("call")
	case b.ranID(c.ID):
		// A second call with the same id in one batch is a call of its own.
		c.ID = reissuedID(c.ID)
	case !p.fresh:
		m, err := e.store.ToolResult(ctx, b.threadID, c.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return out, &StoreError{Op: "look up tool result " + c.ID, Err: err}
		}
		if err == nil {
			if m.CallDigest == "" || m.CallDigest == digest {
				// The same call, resumed: its result stands.
				out.Call = redactCall(out.Call, red)
				out.Message, out.Resumed = m, true
				out.Result = resultOf(m)
				// The calls it queued before the crash go back on the queue: each
				// resumes (if its result is stored) or runs.
				e.requeue(b, m)
				return out, nil
			}
			// Another call that reuses a stored call's id (servers that number
			// calls call_0, call_1 … in every response): it runs, under an id
			// of its own.
			c.ID = reissuedID(c.ID)
			e.log.WarnContext(ctx, "toolrun: call id already used on the thread by another call: the call runs under a new id",
				"thread", b.threadID, "tool", c.Name, "id", p.call.ID, "new_id", c.ID)
		}
	}
	out.Call.ID = c.ID
	b.markRan(c.ID)

	var res Result
	ran := false
	b.mu.Lock()
	queuedBefore := len(b.queue)
	b.curCall, b.queuedN = c.ID, 0
	b.mu.Unlock()
	if p.refused != "" {
		res = Result{Status: StatusError, Error: p.refused, ErrorCode: "not_resumable"}
	} else if b.offered != nil && !p.queued && !b.offered[c.Name] {
		// The allowed-tools gate: no hooks fire for a refused call. A
		// relationship's name gets the text that says how to reach it.
		if b.turn != nil && b.turn.relationship(b, c.Name, true) != nil {
			res = notDirectlyCallable(c.Name)
		} else {
			res = Result{Status: StatusError, Error: fmt.Sprintf("Tool %q is not available for this prompt. You can only use tools that were explicitly configured for this prompt.", c.Name)}
		}
	} else {
		ran = true
		e.fireStarted(ctx, b, c)
		b.msgID = newID("msg")
		var abort error
		sctx, span := e.startToolSpan(ctx, b, c)
		args := c.Arguments
		if b.nullOptionals && !p.queued {
			args = e.stripOptionalNulls(b, c.Name, args)
		}
		res, abort = e.execute(sctx, b, nil, c.ID, c.Name, args)
		defer func() { e.endToolSpan(span, res, b) }()
		if abort != nil {
			b.setAbort(abort, e.redactor(b))
		}
		if b.turn != nil {
			res = b.turn.bindResult(ctx, c, res)
		}
	}

	red = e.redactor(b) // the tool may have changed the env
	msg, res := e.shape(ctx, b, c, res, red)
	msg.CallDigest = digest
	if ran {
		e.fireDone(ctx, b, c, res) // the result as it leaves the tool: redacted
	}
	if p.queued {
		msg.Queued = true
		msg.Arguments = red.String(c.Arguments)
	}
	b.mu.Lock()
	if len(b.queue) > queuedBefore {
		// The live queue keeps the real arguments; what is stored is
		// redacted, and says so when a secret was taken out.
		msg.QueuedCalls = make([]ToolCall, 0, len(b.queue)-queuedBefore)
		for _, q := range b.queue[queuedBefore:] {
			msg.QueuedCalls = append(msg.QueuedCalls, redactCall(q.call, red))
		}
	}
	b.mu.Unlock()
	// A finished call's result is stored even when ctx was cancelled while
	// it ran: the work happened, and losing its record would let a resumed
	// run execute it twice.
	if err := e.store.AppendMessages(uncancelled(ctx), b.threadID, msg); err != nil {
		if !errors.Is(err, ErrUnstorable) {
			return out, &StoreError{Op: "append tool result " + c.ID, Err: err}
		}
		// The store refused a value of this result: a short error result
		// takes its place, so the call has a stored result and is never run
		// again; only when that fails too has the store failed.
		msg, res = refusedResult(msg, red.String(err.Error())), Result{Status: StatusError}
		if err := e.store.AppendMessages(uncancelled(ctx), b.threadID, msg); err != nil {
			return out, &StoreError{Op: "append tool result " + c.ID, Err: err}
		}
		res = resultOf(msg)
		e.log.WarnContext(ctx, "toolrun: the store refused a tool result; an error result was stored instead", "thread", b.threadID, "tool", c.Name, "call", c.ID, "error", msg.Content)
	}
	out.Result, out.Message = res, msg
	out.Call = redactCall(out.Call, red)
	if res.IsError() {
		e.log.DebugContext(ctx, "toolrun: tool call failed", "thread", b.threadID, "tool", c.Name, "call", c.ID, "error", res.Error)
	}
	return out, nil
}

// safeID reports whether a call id is what every store and provider takes:
// 1 to 64 letters, digits, '_', '-', '.' or ':'.
func safeID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// cleanName returns a tool name from a model as text every store can hold:
// control characters and invalid UTF-8 become U+FFFD, and it is cut at 256
// bytes. A registered name is returned as it is.
func cleanName(name string) string {
	if plainName(name) {
		return name
	}
	name = strings.ToValidUTF8(name, "\uFFFD")
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, name)
	if len(name) > 256 {
		name = strings.ToValidUTF8(name[:256], "")
	}
	return name
}

// plainName reports whether name is made of what names and qualified names
// are (letters, digits, '_', '-', '/'), 1 to 129 bytes: such a name needs no
// cleaning.
func plainName(name string) bool {
	if len(name) == 0 || len(name) > 129 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// callDigest identifies a call by its tool and its redacted arguments, so
// that a stored result tells the call it answers from another call with
// the same id.
func callDigest(name, redactedArgs string) string {
	var buf [512]byte
	in := append(append(append(buf[:0], name...), 0), strings.TrimSpace(redactedArgs)...)
	sum := sha256.Sum256(in)
	var out [22]byte
	base64.RawURLEncoding.Encode(out[:], sum[:16])
	return string(out[:])
}

// reissuedID returns a new id for a call whose id is taken, keeping the old
// one as its start (ids stay within what providers accept: letters, digits,
// _ and -).
func reissuedID(old string) string {
	if len(old) > 24 {
		old = old[:24]
	}
	return old + "_" + randomHex(4)
}

// ranID reports whether a call with this id already ran in the batch;
// markRan records one.
func (b *batch) ranID(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.ran, id)
}

func (b *batch) markRan(id string) {
	b.mu.Lock()
	if b.ran == nil {
		b.ran = b.ranBuf[:0]
	}
	b.ran = append(b.ran, id)
	b.mu.Unlock()
}

// uncancelled returns ctx without its cancellation, for writes that must
// happen once the work they record is done.
func uncancelled(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx // nothing to remove
	}
	return context.WithoutCancel(ctx)
}

// requeue puts back on the queue the calls a stored result says its call
// queued.
func (e *Executor) requeue(b *batch, m *Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, q := range m.QueuedCalls {
		if q.ID == "" || q.Name == "" {
			continue
		}
		name := q.Name
		p := pending{call: ToolCall{ID: q.ID, Name: q.Name, Arguments: q.Arguments}, queued: true}
		if q.Redacted {
			// Its stored arguments lost a secret to redaction: running it
			// with placeholders (or with a secret guessed back in) would be
			// wrong, so it is refused, visibly.
			p.refused = fmt.Sprintf("Queued call %q was not resumed: its arguments contained a secret, which is not stored. Pass secrets through the thread env, not in QueueTool arguments.", name)
		}
		b.queue = append(b.queue, p)
	}
}

// setAbort records the error that stops the run, redacted.
func (b *batch) setAbort(err error, red redactor) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.abort == nil {
		b.abort = redactError(err, red)
	}
}

// redactedError carries an error whose text had secrets in it: Error is
// redacted, errors.Is and errors.As still see the original.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
func (e *redactedError) As(target any) bool   { return errors.As(e.err, target) }

func redactError(err error, red redactor) error {
	if !red.Active() {
		return err
	}
	msg := red.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// resultOf rebuilds a Result from a stored tool message.
func resultOf(m *Message) Result {
	r := Result{Status: m.ToolStatus, Refs: m.Attachments, SubagentID: m.SubagentID,
		ErrorCode: m.ErrorCode, ErrorData: m.ErrorData, Stack: m.Stack}
	if m.ToolStatus == StatusError {
		r.Error = m.Content
	} else {
		r.Result = m.Content
	}
	return r
}

// execute runs name through the pipeline — resolve, parse, validate, apply
// defaults, check required variables, apply the uses list, call with panics
// recovered — and returns the normalised result. It stores nothing. abort is
// non-nil when the tool asked to abort the run.
//
// id is the call's id: the batch call's, or an invocation's (see CallID).
func (e *Executor) execute(ctx context.Context, b *batch, caller *callState, id, name, args string) (res Result, abort error) {
	ns := ""
	level := b.nest
	if caller != nil {
		level = caller.nest + 1
		if caller.tool != nil {
			ns = caller.tool.namespace
		}
	}
	if level > e.maxNest {
		return nestingResult(name, level, e.maxNest), nil
	}
	if b.turn != nil {
		if res, handled, abort := b.turn.dispatch(ctx, b, name, args, level); handled {
			return res, abort
		}
	}
	ent := e.reg.lookup(name, ns)
	if ent == nil || ent.tool == nil {
		if b.turn != nil {
			if res, handled, abort := b.turn.dispatchDefinition(ctx, b, ent, name, args, level, caller != nil); handled {
				return res, abort
			}
		}
		return Result{Status: StatusError, Error: "Tool not found: " + name}, nil
	}
	t := ent.tool
	in, res, ok := prepareArgs(t, args)
	if !ok {
		return res, nil
	}
	if missing := e.missingVariables(b, t.variables); len(missing) > 0 {
		return missingVariablesResult(missing), nil
	}
	st := &callState{e: e, b: b, tool: t, nest: level, id: id}
	return callTool(ctx, t, st, in)
}

// stripOptionalNulls removes the nulls a strict schema dialect made the
// model send for optional properties of the named tool or prompt.
func (e *Executor) stripOptionalNulls(b *batch, name, args string) string {
	ent := e.reg.lookup(name, "")
	if ent == nil {
		return args
	}
	var s *schema.Schema
	switch {
	case ent.tool != nil:
		s = ent.tool.schema
	case isPrompt(ent.def):
		s = ent.def.(*Prompt).compiled
	}
	out, _ := s.StripOptionalNulls(args)
	return out
}

// nestingKey carries, in the context of a blocking subagent's Send, the
// nesting level its batches start at.
type nestingKey struct{}

func withNesting(ctx context.Context, level int) context.Context {
	return context.WithValue(ctx, nestingKey{}, level)
}

func nestingOf(ctx context.Context) int {
	n, _ := ctx.Value(nestingKey{}).(int)
	return n
}

// nestingResult refuses a call nested past the limit.
func nestingResult(name string, level, limit int) Result {
	return Result{Status: StatusError, ErrorCode: "max_nesting",
		Error: fmt.Sprintf("Tool %q was not run: it would be nested %d levels deep (tools invoking tools, and prompt tools), past the limit of %d.", name, level, limit)}
}

// prepareArgs parses, validates and defaults the argument text for t, or
// returns an error result and false.
func prepareArgs(t *funcTool, args string) (toolArgs, Result, bool) {
	text := strings.TrimSpace(args)
	if text == "" {
		text = "{}"
	}
	if t.direct {
		// The quickest route: check the text against the schema without
		// building values; the tool's plan decodes it and adds defaults.
		if ok, _, supported := t.schema.Check(text); supported && ok {
			return toolArgs{text: text, direct: true}, Result{}, true
		}
	}
	return prepareArgsGeneral(t.schema, text, t.typed)
}

// prepareArgsGeneral is prepareArgs for every tool: it returns the JSON
// handed to the tool and, for typed tools, a patch of defaults to decode on
// top of it.
func prepareArgsGeneral(s *schema.Schema, text string, typed bool) (_ toolArgs, _ Result, _ bool) {
	raw := []byte(text)
	if s != nil && (typed || json.Valid(raw)) {
		// Fast path: validate the text directly, without generic values.
		// Typed tools skip json.Valid: their decoder reports a syntax error
		// in the same words (see Func's call).
		if ok, p, supported := s.Scan(text); supported && ok {
			if p == nil {
				return toolArgs{raw: raw}, Result{}, true
			}
			if typed {
				if patch, err := json.Marshal(p); err == nil {
					return toolArgs{raw: raw, patch: patch}, Result{}, true
				}
			}
		}
	}
	v, err := schema.Decode(raw)
	if err != nil {
		return toolArgs{}, Result{Status: StatusError, Error: "Tool arguments are not valid JSON: " + err.Error()}, false
	}
	if s == nil {
		return toolArgs{raw: raw}, Result{}, true
	}
	if issues := s.Validate(v); len(issues) > 0 {
		var sb strings.Builder
		sb.WriteString("Tool argument validation failed: ")
		for i, is := range issues {
			if i > 0 {
				sb.WriteString("; ")
			}
			sb.WriteString(is.String())
		}
		return toolArgs{}, Result{Status: StatusError, Error: sb.String(), ErrorCode: "invalid_arguments"}, false
	}
	if !s.HasDefaults() {
		return toolArgs{raw: raw}, Result{}, true
	}
	p, full := s.DefaultsPatch(v)
	if p == nil && !full {
		return toolArgs{raw: raw}, Result{}, true
	}
	if typed && !full {
		if patch, err := json.Marshal(p); err == nil {
			return toolArgs{raw: raw, patch: patch}, Result{}, true
		}
	}
	s.ApplyDefaults(v)
	if raw, err = json.Marshal(v); err != nil {
		return toolArgs{}, Result{Status: StatusError, Error: "Tool arguments could not be re-encoded after applying defaults: " + err.Error()}, false
	}
	return toolArgs{raw: raw}, Result{}, true
}

// callTool calls the tool's Execute and normalises what it returned. The
// tool runs on a goroutine of its own, so that nothing it does ends the
// caller's goroutine: a panic becomes an error result with its stack, and
// runtime.Goexit (t.FailNow inside a test assertion) becomes an error
// result too, where on the caller's goroutine it would have unwound Run
// itself and stored nothing.
func callTool(ctx context.Context, t *funcTool, st ThreadState, in toolArgs) (res Result, abort error) {
	f := callFrames.Get().(*callFrame)
	f.ctx, f.tool, f.st, f.in = ctx, t, st, in
	select {
	case idleRunners <- f: // a runner whose stack has grown already takes it
	default:
		go runCalls(f)
	}
	<-f.done
	res, abort = f.res, f.abort
	*f = callFrame{done: f.done}
	callFrames.Put(f)
	if res.Status != StatusError {
		res.Status = StatusSuccess
	} else if res.Error == "" {
		res.Error = res.Result
	}
	return res, abort
}

// callFrame carries one tool call to the goroutine that runs it. Frames
// are pooled with their channel.
type callFrame struct {
	ctx   context.Context
	tool  *funcTool
	st    ThreadState
	in    toolArgs
	res   Result
	abort error
	done  chan struct{}
}

var callFrames = sync.Pool{New: func() any { return &callFrame{done: make(chan struct{}, 1)} }}

// idleRunners hands a call to a runner goroutine waiting for one. A fresh
// goroutine per call would cost more than the call: its small stack grows
// again, by copying, for every call.
var idleRunners = make(chan *callFrame)

// idleCount counts the runners waiting for a call; at most maxIdle wait,
// so a burst of concurrent calls does not leave its runners behind.
var idleCount atomic.Int32

var maxIdle = int32(4 * runtime.GOMAXPROCS(0))

// runCalls runs f, then the calls handed to it while it waits, until more
// than maxIdle runners would be waiting. A tool that calls runtime.Goexit
// ends its runner (after f.run has reported the call), which is all Goexit
// can do.
func runCalls(f *callFrame) {
	for {
		f.run()
		if idleCount.Add(1) > maxIdle {
			idleCount.Add(-1)
			return
		}
		f = <-idleRunners
		idleCount.Add(-1)
	}
}

func (f *callFrame) run() {
	pprof.SetGoroutineLabels(f.ctx) // profiles see the caller's labels
	returned := false
	defer func() {
		if !returned {
			if p := recover(); p != nil {
				f.res = Result{Status: StatusError, Error: "tool panicked: " + safefmt.Sprint(p), Stack: string(debug.Stack())}
			} else {
				// Only runtime.Goexit unwinds a goroutine without a panic.
				f.res = Result{Status: StatusError, Error: "tool exited its goroutine (runtime.Goexit, as t.FailNow does) before returning a result",
					ErrorCode: "tool_goexit", Stack: string(debug.Stack())}
			}
			f.abort = nil
		}
		f.done <- struct{}{}
	}()
	r, err := f.tool.call(f.ctx, f.st, f.in)
	if err != nil {
		r = Result{Status: StatusError, Error: safefmt.Error(err), Attachments: r.Attachments, Refs: r.Refs}
		var coded interface{ Code() string }
		if errors.As(err, &coded) {
			r.ErrorCode = coded.Code()
		}
		if errors.Is(err, ErrAbort) {
			f.abort = err
		}
	}
	f.res = r
	returned = true
}

func (e *Executor) missingVariables(b *batch, vars []Variable) []string {
	var missing []string
	for _, v := range vars {
		if !v.Required {
			continue
		}
		if _, _, ok := e.resolveEnv(b, v.Name); !ok {
			missing = append(missing, v.Name)
		}
	}
	return missing
}

// resolveEnv walks the env chain (spec: thread, agent defaults, prompt
// defaults, user account, runtime instance).
func (e *Executor) resolveEnv(b *batch, name string) (string, VarType, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.env[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	if v, ok := b.agentEnv[name]; ok {
		return v, VarSecret, true
	}
	if v, ok := b.promptEnv[name]; ok {
		return v, VarSecret, true
	}
	if v, ok := b.userEnv[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	if v, ok := e.env[name]; ok {
		return v.Value, typeOr(v.Type), true
	}
	return "", VarSecret, false
}

func typeOr(t VarType) VarType {
	if t == "" {
		return VarSecret
	}
	return t
}

// redactor collects every secret value the thread knows. It is cached on
// the batch until the thread env changes.
func (e *Executor) redactor(b *batch) redactor {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.redOK {
		return b.red
	}
	// Every secret value of every link is redacted, also one a nearer link
	// hides: the tool may have read it another way.
	var secrets []redact.Secret
	add := func(name, value string, t VarType) {
		if typeOr(t) == VarSecret && len(value) >= redactMinLen {
			secrets = append(secrets, redact.Secret{Name: name, Value: value})
		}
	}
	for k, v := range b.env {
		add(k, v.Value, v.Type)
	}
	for k, v := range b.agentEnv {
		add(k, v, VarSecret)
	}
	for k, v := range b.promptEnv {
		add(k, v, VarSecret)
	}
	for k, v := range b.userEnv {
		add(k, v.Value, v.Type)
	}
	for k, v := range e.env {
		add(k, v.Value, v.Type)
	}
	slices.SortFunc(secrets, func(a, b redact.Secret) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Value, b.Value)
	})
	secrets = slices.Compact(secrets)
	b.red = redactors.get(secrets)
	b.redOK = true
	return b.red
}

// shape turns a result into the tool-result message to store: attachments
// written as thread files, content texts, metadata, secrets redacted.
func (e *Executor) shape(ctx context.Context, b *batch, c ToolCall, res Result, red redactor) (*Message, Result) {
	refs := append([]AttachmentRef(nil), res.Refs...)
	for _, a := range res.Attachments {
		ref, err := e.writeAttachment(ctx, b.threadID, a)
		if err != nil {
			e.log.WarnContext(ctx, "toolrun: attachment skipped", "thread", b.threadID, "tool", c.Name, "name", red.String(a.Name), "error", red.String(err.Error()))
			continue
		}
		refs = append(refs, ref)
	}
	for i := range refs {
		refs[i] = redactRef(refs[i], red)
	}
	res.Attachments = nil
	res.Refs = refs

	res.Result = red.String(res.Result)
	res.Error = red.String(res.Error)
	res.Stack = red.String(res.Stack)
	res.ErrorCode = red.String(res.ErrorCode)
	res.SubagentID = red.String(strings.TrimSpace(res.SubagentID))
	if res.ErrorData != nil {
		// Values of any Go type become a JSON tree once, here: a cycle, a
		// NaN or anything else JSON cannot hold is refused before it can
		// crash a walker or make the store fail on every retry.
		tree, err := jsonvalue.Normalize("error_data", res.ErrorData, nil)
		if err != nil {
			res = unstorableResult(res, red.String(err.Error()))
		} else {
			res.ErrorData, _ = red.Value(tree).(map[string]any)
		}
	}
	var content string
	if res.Status == StatusError {
		text := strings.TrimSpace(res.Error)
		if text == "" {
			text = "Tool execution failed"
		}
		content = errorContent(text)
	} else {
		content = strings.TrimSpace(res.Result)
		if content == "" {
			content = "Tool executed successfully"
		}
	}
	if len(refs) > 0 {
		var sb strings.Builder
		sb.WriteString(content)
		sb.WriteString("\n")
		for _, r := range refs {
			fmt.Fprintf(&sb, "\nAttachment path for %q: %s", r.Name, r.Path)
		}
		content = sb.String()
	}
	id := b.msgID
	if id == "" {
		id = newID("msg")
	}
	b.msgID = ""
	msg := &Message{
		ID:          id,
		ThreadID:    b.threadID,
		Role:        RoleTool,
		Content:     content,
		ToolCallID:  c.ID,
		Name:        c.Name,
		ToolStatus:  res.Status,
		Attachments: refs,
		ParentID:    b.parentID,
		Depth:       b.depth,
		Prompt:      b.prompt,
		SubagentID:  res.SubagentID,
		ErrorCode:   res.ErrorCode,
		ErrorData:   res.ErrorData,
		Stack:       res.Stack,
		Side:        b.side,
		CreatedAt:   time.Now().UTC(),
	}
	return msg, res
}

// unstorableResult is what is stored for a result whose error_data cannot
// be: an error result that says why, keeping the tool's own text.
func unstorableResult(res Result, why string) Result {
	text := "Tool result could not be stored: " + why
	if t := strings.TrimSpace(res.Error); res.IsError() && t != "" {
		text = t + " (its error_data could not be stored: " + why + ")"
	} else if t := strings.TrimSpace(res.Result); t != "" {
		text += " (the tool's result was: " + t + ")"
	}
	res.Status, res.Error, res.Result, res.ErrorData, res.ErrorCode = StatusError, text, "", nil, "invalid_result"
	return res
}

// refusedResult is the message stored in place of one the store refused.
func refusedResult(m *Message, why string) *Message {
	return &Message{ID: m.ID, ThreadID: m.ThreadID, Role: RoleTool, ToolCallID: m.ToolCallID, Name: m.Name, ToolStatus: StatusError,
		Content: errorContent("Tool result could not be stored: " + why), ErrorCode: "unstorable_result",
		ParentID: m.ParentID, Depth: m.Depth, Prompt: m.Prompt, Side: m.Side, CallDigest: m.CallDigest, QueuedCalls: m.QueuedCalls,
		Queued: m.Queued, Arguments: m.Arguments, CreatedAt: m.CreatedAt}
}

// errorContent is the stored content of an error result with text text.
func errorContent(text string) string { return "Failed to execute tool: " + text }

// redactCall returns c with its texts redacted and Redacted set when a
// secret was replaced in its arguments.
func redactCall(c ToolCall, red redactor) ToolCall {
	args := red.String(c.Arguments)
	if args != c.Arguments {
		c.Redacted = true
	}
	c.ID, c.Name, c.Arguments = red.String(c.ID), red.String(c.Name), args
	return c
}

// redactRef redacts the texts of an attachment ref: a name, path, MIME type
// or description can carry a secret into the content the model reads.
func redactRef(r AttachmentRef, red redactor) AttachmentRef {
	r.ID = red.String(r.ID)
	r.Path = red.String(r.Path)
	r.Name = red.String(r.Name)
	r.MimeType = red.String(r.MimeType)
	r.Description = red.String(r.Description)
	return r
}

// attachmentExt picks a file extension from the MIME type, else the name.
func attachmentExt(a Attachment) string {
	switch strings.ToLower(a.MimeType) {
	case "image/png":
		return "png"
	case "image/jpeg", "image/jpg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	}
	if i := strings.LastIndexByte(a.Name, '.'); i >= 0 && i < len(a.Name)-1 {
		ext := strings.ToLower(a.Name[i+1:])
		ok := len(ext) <= 16
		for _, r := range ext {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				ok = false
			}
		}
		if ok {
			return ext
		}
	}
	return "bin"
}

func (e *Executor) writeAttachment(ctx context.Context, threadID string, a Attachment) (AttachmentRef, error) {
	if a.Name == "" {
		return AttachmentRef{}, errors.New("attachment has no name")
	}
	mt := a.MimeType
	if mt == "" {
		mt = "application/octet-stream"
	}
	p := fmt.Sprintf("/attachments/%d-%s.%s", time.Now().UnixMilli(), randomHex(4), attachmentExt(a))
	info, err := e.store.writeFile(context.WithoutCancel(ctx), threadID, p, a.Data, mt)
	if err != nil {
		return AttachmentRef{}, err
	}
	return AttachmentRef{ID: newID("att"), Type: "file", Path: p, Name: a.Name, MimeType: mt, Size: info.Size, Width: a.Width, Height: a.Height}, nil
}

func (e *Executor) fireStarted(ctx context.Context, b *batch, c ToolCall) {
	if e.hooks.ToolCallStarted == nil && !e.ev.has(b.threadID) {
		return
	}
	b.mu.Lock()
	if b.started[c.ID] {
		b.mu.Unlock()
		return
	}
	if b.started == nil {
		b.started = map[string]bool{}
	}
	b.started[c.ID] = true
	b.mu.Unlock()
	ev := ToolCallStarted{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	if ent := e.reg.lookup(c.Name, ""); ent != nil && ent.tool != nil && ent.tool.progressArgument != "" {
		ev.Progress = progressOf(c.Arguments, ent.tool.progressArgument)
	}
	e.emitStarted(ctx, b, ev)
}

// emitStarted calls the hook and publishes the thread event.
func (e *Executor) emitStarted(ctx context.Context, b *batch, ev ToolCallStarted) {
	red := e.redactor(b)
	if ev.Progress != nil {
		p := red.String(*ev.Progress)
		ev.Progress = &p
	}
	ev.Arguments = red.String(ev.Arguments)
	if h := e.hooks.ToolCallStarted; h != nil {
		e.safeHook(ctx, "tool_call_started", func() { h(ctx, b.threadID, ev) })
	}
	if e.ev.has(b.threadID) {
		e.ev.publish(Event{ThreadID: b.threadID, Type: EventToolCallStarted, Data: ev, Timestamp: time.Now().UTC()})
	}
}

func (e *Executor) fireDone(ctx context.Context, b *batch, c ToolCall, res Result) {
	ev := ToolCallDone{ID: c.ID, Name: c.Name, Status: res.Status, Result: res}
	if h := e.hooks.ToolCallDone; h != nil {
		e.safeHook(ctx, "tool_call_done", func() { h(ctx, b.threadID, ev) })
	}
	if e.ev.has(b.threadID) {
		e.ev.publish(Event{ThreadID: b.threadID, Type: EventToolCallDone, Data: ToolCallDone{ID: c.ID, Name: c.Name, Status: res.Status}, Timestamp: time.Now().UTC()})
	}
}

func (e *Executor) safeHook(ctx context.Context, name string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			e.log.ErrorContext(ctx, "toolrun: hook panicked", "hook", name, "panic", safefmt.Sprint(p))
		}
	}()
	fn()
}

// progressOf reads a top-level string argument from complete argument text.
func progressOf(args, key string) *string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return nil
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return nil
	}
	return &s
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// keyedMutex serialises work per key without keeping a lock per key forever.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	en := k.m[key]
	if en == nil {
		en = &keyedEntry{}
		k.m[key] = en
	}
	en.refs++
	k.mu.Unlock()
	en.mu.Lock()
	return func() {
		en.mu.Unlock()
		k.mu.Lock()
		en.refs--
		if en.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
