package toolrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"

	"github.com/toolrun/toolrun/internal/observe"
	"go.opentelemetry.io/otel/trace"
)

// ExecutorOptions configures an Executor. The zero value (or nil) is valid:
// an in-memory store, no instance env, warnings to slog.Default(), no
// hooks, no code runner.
type ExecutorOptions struct {
	// Store persists threads, messages and everything else. nil means a new
	// MemoryStore.
	Store Store
	// Env is the runtime-instance environment: the last link of the env
	// chain. Values without a Type are secret, and so are values of a
	// type other than text and secret, which is logged at Warn naming the
	// variable.
	Env map[string]EnvValue
	// Logger receives the executor's logs (secrets redacted). nil sends
	// warnings and errors to slog.Default() and drops the rest.
	Logger *slog.Logger
	// Hooks are called around tool calls.
	Hooks Hooks
	// TracerProvider receives an "execute_tool <name>" span per call
	// (OpenTelemetry GenAI conventions; secrets redacted). nil means no tracing.
	TracerProvider trace.TracerProvider
	// CodeRunner runs ThreadState.RunCode; the sandbox package provides
	// one (sandbox.Default()). nil answers every run with a link_error that
	// says no code runner is configured.
	CodeRunner CodeRunner
	// MaxNesting bounds how deeply calls nest: a tool calling InvokeTool is
	// one level, a prompt tool's sub-prompt another. A call past the bound
	// is not run and gets an error result naming the limit, so a tool that
	// invokes itself without end cannot exhaust the process. 0 means
	// DefaultMaxNesting.
	MaxNesting int
	// MaxQueued bounds how many calls QueueTool may add to one batch (the
	// calls of one Run, or of one model response in a runtime turn), the
	// calls queued by queued calls included. Past the bound QueueTool
	// queues nothing and returns an error naming the limit, so a tool that
	// queues itself without end cannot keep a batch running for ever. 0
	// means DefaultMaxQueued.
	MaxQueued int
}

// DefaultMaxNesting is the nesting bound of ExecutorOptions.MaxNesting.
const DefaultMaxNesting = 32

// DefaultMaxQueued is the bound of ExecutorOptions.MaxQueued.
const DefaultMaxQueued = 1000

// Executor runs the tool calls of a thread: strictly one at a time, in
// order, each result persisted as a tool message before the next call
// starts. A tool failure is data — an error result stored like any other —
// never a Go error from Run. An Executor is safe for concurrent use; batches
// of one thread are serialised, batches of different threads run in parallel.
type Executor struct {
	reg      *Registry
	store    records
	env      map[string]EnvValue
	log      *slog.Logger
	hooks    Hooks
	code     CodeRunner
	ev       *events // shared by the per-turn views of a Runtime
	locks    *keyedMutex
	tracer   trace.Tracer
	maxNest  int
	maxQueue int32
	// bare and bareTools are the scope of bare batches and what their
	// calls resolve to: the registry's function tools.
	bare      *scope
	bareTools *toolset
}

// NewExecutor returns an executor of the tools registered in reg.
func NewExecutor(reg *Registry, opts *ExecutorOptions) *Executor {
	if opts == nil {
		opts = &ExecutorOptions{}
	}
	e := &Executor{reg: reg, store: records{opts.Store}, log: opts.Logger, hooks: opts.Hooks, code: opts.CodeRunner,
		tracer: tracerOf(opts.TracerProvider), ev: &events{}, locks: &keyedMutex{}, maxNest: opts.MaxNesting, bare: &scope{}, bareTools: registryTools(reg)}
	e.maxQueue = int32(min(max(opts.MaxQueued, 0), math.MaxInt32))
	if e.maxQueue == 0 {
		e.maxQueue = DefaultMaxQueued
	}
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
		e.code = noCodeRunner{}
	}
	e.env = make(map[string]EnvValue, len(opts.Env))
	for k, v := range opts.Env {
		if !knownType(v.Type) {
			// NewExecutor cannot fail: a type it does not know counts as
			// secret, the safe reading, and is logged.
			e.log.Warn("toolrun: runtime-instance env value has an unknown type: it is treated as secret (want text or secret)",
				"name", k, "type", string(v.Type))
		}
		v.Type = typeOr(v.Type)
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
// synchronously on the emitting goroutine and must not block. Each
// subscriber gets its own copy of an event's data, which it may change.
// Call the returned function to unsubscribe.
func (e *Executor) Subscribe(threadID string, fn func(Event)) (unsubscribe func()) {
	return e.ev.subscribe(threadID, fn)
}

// Outcome is what became of one call of a batch.
type Outcome struct {
	// Call is the call as it ran (its id made unique if it had to be), its
	// arguments redacted.
	Call ToolCall
	// Result is the tool's result with secrets redacted.
	Result Result
	// Message is the stored tool-result message; its Queued field reports
	// a call a tool queued with QueueTool.
	Message *Message
	// Resumed reports that the call's result was already stored, so the
	// call was not executed again (a batch resumed after a crash).
	Resumed bool
}

// Run executes calls on the thread threadID, creating the thread when it
// does not exist. Calls run in order, then the calls tools queued, FIFO;
// each result is stored before the next call starts. The calls' names
// resolve to the registry's function tools.
//
// A call whose id already has a stored result, for the same tool and the
// same (redacted) arguments, is that call resumed: it does not run again
// (Outcome.Resumed). Another call reusing a stored call's id, or an id used
// earlier in the batch, runs under a new id (Outcome.Call.ID).
//
// Run returns the outcomes of the calls that ran. Its error is non-nil only
// when the store failed (a *StoreError: the batch stopped there), a tool
// aborted the run (wrapping ErrAbort: its result is stored, the rest did not
// run), or ctx ended (the calls after that point did not run), and at once
// when it was called with the ctx of a tool of a run or a turn of the same
// thread, which it would wait for.
func (e *Executor) Run(ctx context.Context, threadID string, calls []ToolCall) ([]Outcome, error) {
	lock, err := e.locks.lock(ctx, threadID)
	if errors.Is(err, errLockHeld) {
		// A runtime turn and a run mark the ctx they give their tools.
		return nil, fmt.Errorf("toolrun: thread %s: Run was called from inside a turn of the same thread, which would wait for itself to end", threadID)
	}
	if err != nil {
		return nil, err
	}
	defer e.locks.unlock(threadID, lock)
	rb := new(roomyBatch)
	b, err := e.newBatch(ctx, threadID, e.bare, e.bareTools, true, rb)
	if err != nil {
		return nil, err
	}
	// The run's tools get ctx marked as holding the thread's lock, so that
	// one that asks for a run or a turn of the same thread is refused
	// instead of waiting for itself. The mark ends with the run, before
	// the lock is unlocked.
	defer rb.release()
	return e.runBatch(rb.hold(ctx, e.locks), b, calls, false)
}

// State returns the ThreadState of a thread outside any run — what an HTTP
// endpoint or a scheduled job uses to read and write the thread's values,
// env and files, inject messages or invoke tools — creating the thread when
// it does not exist. Its Execution is nil and its CallID "". QueueTool is
// refused (no batch would run the call); InvokeTool runs the registry's
// function tools. The env is read when State is called; SetEnv through the
// state updates it. It is safe for concurrent use.
func (e *Executor) State(ctx context.Context, threadID string) (ThreadState, error) {
	b, err := e.newBatch(ctx, threadID, e.bare, e.bareTools, true, new(roomyBatch))
	if err != nil {
		return nil, err
	}
	return &callState{e: e, b: b}, nil
}

// scope is what the caller of a batch sets for it, the same for all the
// batches of a turn: the execution it belongs to, the env links between
// the thread's and the user's, the labels of the messages it stores, the
// nesting level of its calls, and what to do when a tool sets a thread env
// value. The executor reads it and never interprets its labels. The zero
// scope is a bare batch's.
type scope struct {
	exec *Execution
	// defaults are env links between the thread's env and the user's (an
	// agent's defaults, then a prompt's); their values are secret.
	defaults [2]map[string]string
	// stamp gives its Prompt, Side, ParentID and Depth to every message the
	// batch stores.
	stamp rowStamp
	nest  int // the nesting level of the batch's own calls
	// nullOptionals says the model's schema dialect made optional
	// properties nullable: its nulls for them mean "not given".
	nullOptionals bool
	// watch is told after a tool stored a thread env value; nil: no one.
	watch envWatcher
	// recordsStop says the batch's turn records an Execution.Stop: the
	// result of a call during which exec was stopped is stored with the
	// stop record (stopRecord), in one append.
	recordsStop bool
}

// envWatcher is what a scope tells when a tool stored a thread env value
// (a turn, which carries it down to the thread's sub-agents).
type envWatcher interface {
	envSet(ctx context.Context, name string, v EnvValue) error
}

// rowStamp is what a scope gives every message its batches store.
type rowStamp struct {
	Prompt, Side, ParentID string
	Depth                  int
}

// batch is the state of one run of calls on a thread.
type batch struct {
	threadID string
	thread   threadFacts
	sc       *scope
	tools    *toolset

	mu      sync.Mutex
	queue   []pending
	env     map[string]EnvValue // thread env cache
	userEnv map[string]EnvValue
	abort   error
	red     redactor // cached secrets; valid while redOK
	redOK   bool
	// retired says that a tool's SetEnv replaced a secret value of the
	// thread env: red holds it, and the batch's next redactors keep red's
	// secrets, so the old value stays redacted for the rest of the batch
	// (a refreshed token the call still quotes). A flag in the room the
	// bools leave, not a list: a batch and its room fill 1 KiB.
	retired bool
	// stateUsed says that the room's state is taken (kept here, beside
	// redOK and queuedN, so that a batch and its room fit 1 KiB, an
	// allocation size class).
	stateUsed bool
	queuedN   int32  // calls the running call queued (a queued call costs far more than 2³¹ could fit)
	curCall   string // the top-level call running now (ids of the calls it queues derive from it)
	started   idSet  // calls whose tool_call_started already fired
	obs       observe.Observer
	room      *batchRoom // made with the batch by Run, when the first call runs otherwise
	// slot is where the message of the batch's first result is made: made
	// with the batch by Run, a turn's scratch in a runtime turn (whose
	// results live no longer than the turn). nil once taken, and nil for a
	// batch without one: each result then gets a message of its own.
	slot *Message
}

// batchRoom is room for a batch of one call, so that it allocates nothing
// more: its queue, its outcome and the state its tool gets. The state is
// used once, by the first call (a tool may keep its ThreadState). A turn's
// batch gets it only when the model called tools: the batch of a response
// with none runs nothing.
type batchRoom struct {
	queue [1]pending
	out   [1]Outcome
	state callState
}

// roomyBatch is a batch made together with its room and the message of its
// first result (the caller of Run keeps it). It is also the ctx its run
// gives its tools, marked as holding the thread's lock (see hold). With
// its allocation header it fits 1 KiB, an allocation size class.
type roomyBatch struct {
	batch
	room batchRoom
	msg  Message
	// Context is the run's ctx, once hold has marked it; locks is the
	// table whose lock of the thread the run holds, nil once released.
	context.Context
	locks atomic.Pointer[keyedMutex]
}

// spare returns the batch's room, made when it has none: by runBatch,
// under b.mu, before any call of the batch runs.
func (b *batch) spare() *batchRoom {
	if b.room == nil {
		b.room = new(batchRoom)
	}
	return b.room
}

// state returns a callState for a top-level call of the batch.
func (b *batch) state() *callState {
	r := b.spare()
	if b.stateUsed {
		return new(callState)
	}
	b.stateUsed = true
	return &r.state
}

// message returns a Message for a result of the batch.
func (b *batch) message() *Message {
	m := b.slot
	if m == nil {
		return new(Message)
	}
	b.slot = nil
	return m
}

type pending struct {
	call ToolCall
	// refused, when set, is the error text the call is stored with instead
	// of running (a resumed queued call whose arguments cannot be restored).
	refused string
	queued  bool
	// fresh calls have ids no stored result has: they are never resumed.
	fresh bool
}

// newBatch loads the thread (creating it when create is set) and its env.
// tools, when not nil, are what the batch's calls resolve to; a turn sets
// them after, from what the batch loaded. into, when not nil, is the batch
// to return, made with its room: for a batch that will run calls.
func (e *Executor) newBatch(ctx context.Context, threadID string, sc *scope, tools *toolset, create bool, into *roomyBatch) (*batch, error) {
	facts, env, err := e.store.loadBatch(ctx, threadID)
	if errors.Is(err, ErrNotFound) && create {
		th := &Thread{ID: threadID}
		// Env may be set on a thread before its record exists.
		if err = e.store.CreateThread(ctx, th); err == nil || errors.Is(err, ErrThreadExists) {
			facts, env, err = e.store.loadBatch(ctx, threadID)
		}
	}
	if err != nil {
		if se := (*StoreError)(nil); !errors.As(err, &se) {
			err = &StoreError{Op: "load thread " + threadID, Err: err}
		}
		return nil, err
	}
	var b *batch
	if into != nil {
		b = &into.batch
		b.room, b.slot = &into.room, &into.msg
	} else {
		b = new(batch)
	}
	b.threadID, b.thread, b.env, b.sc, b.tools, b.obs = threadID, facts, env, sc, tools, observe.From(ctx)
	if facts.userID != "" {
		if b.userEnv, err = e.store.ListEnv(ctx, ScopeUser, facts.userID); err != nil {
			return nil, &StoreError{Op: "load user env", Err: err}
		}
	}
	return b, nil
}

// runBatch runs calls and the calls they queue. fresh says that the
// calls' ids were made unique on the thread before their message was
// stored (a runtime turn), so none of them can be a resumed call.
func (e *Executor) runBatch(ctx context.Context, b *batch, calls []ToolCall, fresh bool) ([]Outcome, error) {
	if b.thread.terminatedAt != nil {
		return nil, fmt.Errorf("%w: %s", ErrThreadTerminated, b.threadID)
	}
	defer b.ended()
	b.mu.Lock()
	if b.queue == nil {
		b.queue = b.spare().queue[:0]
	}
	for _, c := range calls {
		b.queue = append(b.queue, pending{call: c, fresh: fresh})
	}
	b.mu.Unlock()
	outcomes := b.spare().out[:0]
	if len(calls) > cap(outcomes) {
		outcomes = make([]Outcome, 0, len(calls))
	}
	for i := 0; ; i++ {
		b.mu.Lock()
		if i >= len(b.queue) {
			b.queue = b.queue[:0]
			b.mu.Unlock()
			return outcomes, nil
		}
		p := b.queue[i]
		b.mu.Unlock()
		if b.sc.exec.Stopped() {
			// Stop drops the rest of the queue without results.
			return outcomes, nil
		}
		if err := ctx.Err(); err != nil {
			return outcomes, err
		}
		out, err := e.runCall(ctx, b, i, p)
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

// runCall runs the batch's call i and stores its result.
func (e *Executor) runCall(ctx context.Context, b *batch, i int, p pending) (Outcome, error) {
	c := p.call
	c.Name = cleanName(c.Name)
	if c.ID != "" && !safeID(c.ID) {
		// Ids come from models (and grow with each queued level): one a
		// store column or a provider could not hold is replaced, by the
		// same id each time, so that a batch run again finds its results.
		c.ID = derivedID(c.ID)
	}
	out := Outcome{Call: c}
	red := e.redactor(b)
	digest := ""
	if !p.fresh {
		// Only a call that may be a resumed one needs telling apart.
		digest = callDigest(c.Name, red.String(c.Arguments))
	}
	switch {
	case c.ID == "":
		c.ID = newRecordID("call")
	case b.ranBefore(i, c.ID):
		// A second call with the same id in one batch is a call of its own.
		c.ID = reissuedID(c.ID)
	case !p.fresh:
		m, err := e.store.ToolResult(ctx, b.threadID, c.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return out, &StoreError{Op: "look up tool result " + c.ID, Err: err}
		}
		if err == nil {
			if m.CallDigest == "" || m.CallDigest == digest {
				// The same call, resumed: its result stands, and the calls it
				// queued before the crash go back on the queue, each to resume
				// (if its result is stored) or to run.
				out.Call = redactCall(out.Call, red)
				out.Message, out.Resumed, out.Result = m, true, resultOf(m)
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

	var h *handler
	switch {
	case p.refused != "":
		h = &handler{name: c.Name, kind: kindRefused, refusal: Result{Status: StatusError, Error: p.refused, ErrorCode: "not_resumable"}}
	case p.queued:
		h = b.tools.forTool(c.Name, "")
	default:
		h = b.tools.forModel(c.Name)
	}
	b.mu.Lock()
	b.queue[i].call.ID = c.ID // the id it runs under, for ranBefore
	queuedBefore := len(b.queue)
	b.curCall, b.queuedN = c.ID, 0
	b.mu.Unlock()
	resultID := newRecordID("msg")

	r := &runningCall{p: p, c: c, h: h, digest: digest, resultID: resultID, queuedBefore: queuedBefore, out: out}
	return e.finish(ctx, b, r, e.execute(ctx, b, r))
}

// runningCall is a batch's call between its start and its stored result.
type runningCall struct {
	p            pending
	c            ToolCall // the call as it runs: id unique, name cleaned
	h            *handler
	digest       string // stored with its result when set
	resultID     string
	queuedBefore int // the batch's queue length when it started
	out          Outcome
}

// quiet reports a call that the allowed-tools gate refused: no hooks fire.
func (r *runningCall) quiet() bool { return r.h.kind == kindRefused && r.h.quiet }

// execute runs the call's handler on the caller's goroutine. A tool that
// calls runtime.Goexit ends that goroutine, which nothing can prevent; on
// its way out the call's error result is stored, so the call has a
// result and is never run again, and every lock is released.
func (e *Executor) execute(ctx context.Context, b *batch, r *runningCall) Result {
	if r.quiet() {
		return r.h.refusal
	}
	e.fireStarted(ctx, b, r.c, r.h.progress)
	args := r.c.Arguments
	if b.sc.nullOptionals && !r.p.queued && r.h.args != nil {
		args, _ = r.h.args.Schema().StripOptionalNulls(args)
	}
	sctx, span := e.startToolSpan(ctx, b, r.c)
	returned := false
	defer func() {
		if returned {
			return
		}
		if p := recover(); p != nil {
			panic(p) // not a tool's: tools' panics are their results
		}
		res := goexitResult()
		e.endToolSpan(span, res, b)
		e.log.ErrorContext(ctx, "toolrun: a tool called runtime.Goexit; its goroutine ends after its result is stored", "thread", b.threadID, "tool", r.c.Name, "call", r.c.ID)
		_, _ = e.finish(ctx, b, r, res)
	}()
	res, err := e.invoke(sctx, b, nil, r.h, r.c.ID, args, r.resultID)
	returned = true
	e.endToolSpan(span, res, b)
	if err != nil {
		b.setAbort(err, e.redactor(b))
	}
	return res
}

// finish stores the call's result and reports its outcome.
func (e *Executor) finish(ctx context.Context, b *batch, r *runningCall, res Result) (Outcome, error) {
	red := e.redactor(b) // the tool may have changed the env
	msg, res := e.shape(ctx, b, r.c, res, red, r.resultID)
	msg.CallDigest = r.digest
	if !r.quiet() && e.listensDone(b) {
		// A hook or subscriber that calls runtime.Goexit ends this
		// goroutine, which nothing can prevent; the result is stored on
		// its way out, so the call is never run again.
		fired := false
		defer func() {
			if !fired {
				e.log.ErrorContext(ctx, "toolrun: a tool_call_done hook or subscriber ended its goroutine; the call's result is stored on the way out", "thread", b.threadID, "tool", r.c.Name, "call", r.c.ID)
				_, _ = e.record(ctx, b, r, msg, res, red)
			}
		}()
		e.fireDone(ctx, b, r.c, res) // the result as shaped: redacted
		fired = true
	}
	return e.record(ctx, b, r, msg, res, red)
}

// appendResult stores a call's result message, and with it, in the same
// append, the stop record of a turn whose execution the call stopped.
func (e *Executor) appendResult(ctx context.Context, b *batch, msg *Message) error {
	ex := b.sc.exec
	if !b.sc.recordsStop || !ex.Stopped() || ex.stopStored.Load() {
		return e.store.AppendMessages(ctx, b.threadID, msg)
	}
	if err := e.store.AppendMessages(ctx, b.threadID, msg, stopRecord(b.sc.stamp)); err != nil {
		return err
	}
	ex.stopStored.Store(true)
	return nil
}

// record stores msg, the shaped result res of the call, and reports the
// call's outcome.
func (e *Executor) record(ctx context.Context, b *batch, r *runningCall, msg *Message, res Result, red redactor) (Outcome, error) {
	c, out := r.c, r.out
	if r.p.queued {
		msg.Queued = true
		msg.Arguments = red.String(c.Arguments)
	}
	b.mu.Lock()
	if len(b.queue) > r.queuedBefore {
		// The live queue keeps the real arguments; what is stored is
		// redacted, and says so when a secret was taken out.
		msg.QueuedCalls = make([]ToolCall, 0, len(b.queue)-r.queuedBefore)
		for _, q := range b.queue[r.queuedBefore:] {
			msg.QueuedCalls = append(msg.QueuedCalls, redactCall(q.call, red))
		}
	}
	b.mu.Unlock()
	// A finished call's result is stored even when ctx was cancelled while
	// it ran: the work happened, and losing its record would let a resumed
	// run execute it twice.
	if err := e.appendResult(uncancelled(ctx), b, msg); err != nil {
		if !errors.Is(err, ErrUnstorable) {
			return out, &StoreError{Op: "append tool result " + c.ID, Err: err}
		}
		// The store refused a value of this result: a short error result
		// takes its place, so the call has a stored result and is never run
		// again; only when that fails too has the store failed.
		msg = refusedResult(msg, red.String(err.Error()))
		if err := e.appendResult(uncancelled(ctx), b, msg); err != nil {
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

// ended records that the batch runs no call any more, however its run
// ended: QueueTool through a ThreadState kept past the end is refused,
// rather than queueing a call that would never run.
func (b *batch) ended() {
	b.mu.Lock()
	b.curCall = ""
	b.mu.Unlock()
}

// ranBefore reports whether a call before call i of the batch ran with
// this id.
func (b *batch) ranBefore(i int, id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.queue[:i] {
		if p.call.ID == id {
			return true
		}
	}
	return false
}

// markStarted records that tool_call_started fired for the call, and
// reports whether it had not before.
func (b *batch) markStarted(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.started.add(id)
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
		p := pending{call: ToolCall{ID: q.ID, Name: q.Name, Arguments: q.Arguments}, queued: true}
		if q.Redacted {
			// Its stored arguments lost a secret to redaction: running it
			// with placeholders (or with a secret guessed back in) would be
			// wrong, so it is refused, visibly.
			p.refused = fmt.Sprintf("Queued call %q was not resumed: its arguments contained a secret, which is not stored. Pass secrets through the thread env, not in QueueTool arguments.", q.Name)
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
