package toolrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// RuntimeOptions configures a Runtime. The zero value (or nil) is valid.
type RuntimeOptions struct {
	// Store persists everything; nil means a new MemoryStore.
	Store Store
	// Env is the runtime-instance environment (last link of the env chain).
	Env map[string]EnvValue
	// Logger receives the runtime's logs; nil sends warnings and errors to
	// slog.Default() and drops the rest.
	Logger *slog.Logger
	// Hooks are called around tool calls.
	Hooks Hooks
	// CodeRunner runs ThreadState.RunCode (ExecutorOptions.CodeRunner);
	// sandbox.Default() is the sandbox's. nil answers every run with a
	// link_error.
	CodeRunner CodeRunner
	// TracerProvider receives "chat <model>" and "execute_tool <name>" spans
	// (OpenTelemetry GenAI conventions). nil means no tracing.
	TracerProvider trace.TracerProvider
	// Owner names this runtime instance to a ThreadLocker store; "" means a
	// random id per Runtime.
	Owner string
	// MaxTotalSteps is the global ceiling of model requests in one
	// execution: a Send (or Resume) and everything it starts, its turns,
	// sub-prompts, subagents (blocking or not) and the parent turns their
	// completions start; 0 means 250, raised to the acting side's MaxSteps
	// when that is bigger. Agents that fan out to many subagents may need
	// more.
	MaxTotalSteps int
	// MaxNesting bounds how deeply calls nest (ExecutorOptions.MaxNesting).
	MaxNesting int
	// MaxQueued bounds the calls QueueTool may add to the batch of one
	// model response (ExecutorOptions.MaxQueued).
	MaxQueued int
	// MaxBackground bounds the background (non-blocking) subagents that run
	// at once on the runtime, each with the parent turn its completion
	// starts; past it subagent_create and subagent_message give the model
	// an error result naming the limit. 0 means DefaultMaxBackground.
	MaxBackground int
	// MaxResponseBytes bounds the size of one streamed model response: the
	// bytes of its text, of its reasoning and of its tool calls' ids,
	// names and arguments, a call's whole arguments counted once with the
	// pieces of them that streamed, and 256 bytes more for each call (what
	// its bookkeeping costs, so that calls streaming nothing count). A
	// response that grows past it fails its model request with an error
	// naming the limit, its stream is stopped and nothing of it is stored.
	// 0 or less means DefaultMaxResponseBytes.
	MaxResponseBytes int
}

// DefaultMaxBackground is the bound of RuntimeOptions.MaxBackground.
const DefaultMaxBackground = 256

// Runtime runs agents on threads: a model answers, its tool calls run
// through the executor, results go back to the model, sides take turns,
// prompts run as tools, agents hand off, subagents are created and
// messaged.
//
// A Runtime is safe for concurrent use. Two turns of one thread never run
// at once: Send on a thread waits for the thread's running turn to end.
// Turns of different threads run in parallel.
type Runtime struct {
	reg      *Registry
	ex       *Executor
	store    records
	log      *slog.Logger
	maxTotal int
	maxBg    int // RuntimeOptions.MaxBackground
	maxResp  int // RuntimeOptions.MaxResponseBytes
	turns    *keyedMutex
	bg       *workCounter
	locker   ThreadLocker // nil: one process owns the store
	owner    string
	base     *Runtime // the runtime a per-turn view was made from
	checks   *defCheck
	// lifecycleArgsCache holds the compiled argument routes of lifecycle
	// tools, by schema.
	lifecycleArgsCache *sync.Map
}

// defCheck caches the result of Registry.Check for one registry generation.
// Every Send reads it: the result is read without a lock, and mu is held
// only to run a check, so that turns starting on many goroutines at once
// do not queue on one mutex.
type defCheck struct {
	mu   sync.Mutex
	last atomic.Pointer[checkResult]
}

// checkResult is Registry.Check's error for registry generation gen.
type checkResult struct {
	gen uint64
	err error
}

// checkDefinitions runs Registry.Check once per registry generation and
// returns its error: no thread or turn starts while a definition names
// something that is not registered.
func (rt *Runtime) checkDefinitions() error {
	c := rt.checks
	gen := rt.reg.gen.Load()
	if r := c.last.Load(); r != nil && r.gen == gen {
		return r.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.last.Load(); r != nil && r.gen == gen {
		return r.err // checked while this call waited
	}
	// A registration during the check may be seen by it: its result is
	// then kept for the older generation, and the next call checks again.
	err := rt.reg.Check()
	c.last.Store(&checkResult{gen: gen, err: err})
	if err != nil {
		rt.log.Error("toolrun: definitions refer to names that are not registered", "error", err)
	}
	return err
}

// ThreadLocker is implemented by stores that several service instances
// share (store/postgres). Before a turn the runtime acquires the thread
// from it and does all of the turn's writes through the returned store, so
// a turn of a thread runs on one instance at a time and a stale owner's
// late writes are refused (fencing). AcquireThread waits while another
// owner holds the thread, until ctx ends; release gives it up.
type ThreadLocker interface {
	AcquireThread(ctx context.Context, threadID, owner string) (st Store, release func(context.Context) error, err error)
}

// NewRuntime returns a runtime over the definitions registered in reg.
func NewRuntime(reg *Registry, opts *RuntimeOptions) *Runtime {
	if opts == nil {
		opts = &RuntimeOptions{}
	}
	ex := NewExecutor(reg, &ExecutorOptions{Store: opts.Store, Env: opts.Env, Logger: opts.Logger, Hooks: opts.Hooks, CodeRunner: opts.CodeRunner,
		TracerProvider: opts.TracerProvider, MaxNesting: opts.MaxNesting, MaxQueued: opts.MaxQueued})
	rt := &Runtime{reg: reg, ex: ex, store: ex.store, log: ex.log, maxTotal: opts.MaxTotalSteps,
		turns: ex.locks, bg: newWorkCounter(), owner: opts.Owner, checks: &defCheck{}, lifecycleArgsCache: &sync.Map{}}
	if rt.maxTotal <= 0 {
		rt.maxTotal = 250
	}
	if rt.maxBg = opts.MaxBackground; rt.maxBg <= 0 {
		rt.maxBg = DefaultMaxBackground
	}
	if rt.maxResp = opts.MaxResponseBytes; rt.maxResp <= 0 {
		rt.maxResp = DefaultMaxResponseBytes
	}
	if rt.owner == "" {
		rt.owner = newID("runtime")
	}
	rt.locker, _ = ex.store.Store.(ThreadLocker)
	rt.base = rt
	return rt
}

// Executor returns the runtime's executor (shared store, env and hooks).
func (rt *Runtime) Executor() *Executor { return rt.ex }

// Store returns the runtime's store.
func (rt *Runtime) Store() Store { return rt.store.Store }

// Subscribe calls fn with every event of threadID ("" for all threads).
func (rt *Runtime) Subscribe(threadID string, fn func(Event)) (unsubscribe func()) {
	return rt.ex.Subscribe(threadID, fn)
}

// Wait blocks until the background work the runtime started (non-blocking
// subagents and the parent turns their completions start) has finished,
// including work started while it waits. It may be called at any time, from
// any number of goroutines, concurrently with Send.
func (rt *Runtime) Wait() { rt.bg.wait() }

// workCounter counts running background work. Unlike a sync.WaitGroup,
// work may start while someone waits: wait returns once the count is zero.
type workCounter struct {
	mu   sync.Mutex
	zero *sync.Cond
	n    int
}

func newWorkCounter() *workCounter {
	w := &workCounter{}
	w.zero = sync.NewCond(&w.mu)
	return w
}

// tryStart counts one more piece of work, unless limit pieces are running.
func (w *workCounter) tryStart(limit int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n >= limit {
		return false
	}
	w.n++
	return true
}

func (w *workCounter) done() {
	w.mu.Lock()
	if w.n--; w.n == 0 {
		w.zero.Broadcast()
	}
	w.mu.Unlock()
}

func (w *workCounter) wait() {
	w.mu.Lock()
	for w.n > 0 {
		w.zero.Wait()
	}
	w.mu.Unlock()
}

// ThreadOptions configures a new thread. The zero value is valid.
type ThreadOptions struct {
	// ID is the thread id; "" generates one.
	ID string
	// UserID links the thread to a user account (whose env is the fourth
	// link of the env chain).
	UserID string
	// Env is the thread env; values without a Type are secret, and a Type
	// other than VarText and VarSecret is refused before the thread is
	// created.
	Env map[string]EnvValue
	// ParentID makes the thread a child of another thread.
	ParentID string
}

// NewThread creates a thread running agent.
func (rt *Runtime) NewThread(ctx context.Context, agent string, opts *ThreadOptions) (*Thread, error) {
	if err := rt.checkDefinitions(); err != nil {
		return nil, fmt.Errorf("toolrun: new thread of agent %q refused: the registry does not check: %w", agent, err)
	}
	if _, ok := rt.reg.Agent(agent); !ok {
		return nil, fmt.Errorf("toolrun: new thread: agent %q is not registered", agent)
	}
	if opts == nil {
		opts = &ThreadOptions{}
	}
	// An unknown env type is refused before the thread exists, so that
	// nothing is left behind.
	for k, v := range opts.Env {
		if !knownType(v.Type) {
			for _, name := range slices.Sorted(maps.Keys(opts.Env)) { // the first in order, every time
				if t := opts.Env[name].Type; !knownType(t) {
					k, v.Type = name, t
					break
				}
			}
			return nil, fmt.Errorf("toolrun: new thread: env %q: unknown type %q (want %q or %q; empty means %q)", k, v.Type, VarText, VarSecret, VarSecret)
		}
	}
	th := &Thread{ID: opts.ID, AgentID: agent, UserID: opts.UserID, ParentID: opts.ParentID}
	if th.ID == "" {
		th.ID = newID("thread")
	}
	if err := rt.store.CreateThread(ctx, th); err != nil {
		return nil, &StoreError{Op: "create thread", Err: err}
	}
	for k, v := range opts.Env {
		if v.Type == "" {
			v.Type = VarSecret
		}
		warnShortSecret(ctx, rt.log, "thread env (NewThread)", k, v)
		if err := rt.store.SetEnv(ctx, ScopeThread, th.ID, k, v); err != nil {
			return nil, &StoreError{Op: "set thread env", Err: err}
		}
	}
	return th, nil
}

// Stop reasons of a Reply.
const (
	StopResponse          = "response"            // the side answered with text (stopOnResponse)
	StopTool              = "stop_tool"           // the side's StopTool was called
	StopMaxSideSteps      = "max_side_steps"      // the side reached MaxSteps
	StopMaxTotalSteps     = "max_total_steps"     // the global step ceiling was reached
	StopRepeatedToolError = "repeated_tool_error" // the circuit breaker tripped
	StopSessionStop       = "session_stop"        // the SessionStop tool succeeded
	StopSessionFail       = "session_fail"        // the SessionFail tool succeeded
	StopMaxSessionTurns   = "max_session_turns"   // MaxSessionTurns was reached
	StopStopped           = "stopped"             // a tool called Execution.Stop
	StopHuman             = "awaiting_human"      // the next side is human
)

// Reply is the outcome of Send: the turn (or turns) it ran.
type Reply struct {
	ThreadID string
	// Text is the last reply text of the turn (the stop tool's response
	// property, or the last assistant text).
	Text string
	// StopReason says why the run stopped (Stop* constants).
	StopReason string
	// SessionEnded reports that the session ended (session tools,
	// MaxSessionTurns); the next Send starts a new session.
	SessionEnded bool
	// Failed reports a session that ended through SessionFail.
	Failed bool
	// Messages are the messages stored during this run, in order.
	Messages []Message
}

// Send stores text as a user message (from the human side) and runs turns
// until the thread waits for the human again or the session stops.
//
// When Send fails after storing the message — a provider or store error, a
// cancelled ctx, a crash of the process — retry with Resume, which goes on
// from what is stored; calling Send again would store the message twice.
//
// Turns of one thread run one at a time: a Send waits for the thread's
// running turn, until ctx ends. A Send from inside a turn of the same
// thread (a tool calling Send on its own thread, with the ctx it was given)
// would wait for itself and fails at once.
func (rt *Runtime) Send(ctx context.Context, threadID, text string) (*Reply, error) {
	// A store keeps nothing of the messages it appends, and nothing else
	// refers to this one: it is recycled.
	m := userMessages.Get().(*Message)
	*m = Message{Role: RoleUser, Content: text}
	defer func() {
		*m = Message{}
		userMessages.Put(m)
	}()
	return rt.send(ctx, threadID, m)
}

// userMessages recycles the messages Send appends.
var userMessages = sync.Pool{New: func() any { return new(Message) }}

func (rt *Runtime) send(ctx context.Context, threadID string, m *Message) (*Reply, error) {
	return rt.withThread(ctx, threadID, func(ctx context.Context, rt *Runtime, th *Thread, startSeq int64) (*Reply, error) {
		if m != nil {
			m.Side = "b"
			if err := rt.store.AppendMessages(ctx, threadID, m); err != nil {
				return nil, &StoreError{Op: "append user message", Err: err}
			}
		}
		return rt.runSession(ctx, th, "a", startSeq, nil)
	})
}

// Resume continues a thread from what is stored, without storing or running
// anything twice. After a Send that failed or was interrupted (or a crash),
// it finishes the turn that did not: the tool calls of the latest model
// response that have no stored result run (a call whose result is stored is
// not run again, and the calls it had queued are queued again), then the
// turn's next model requests, then the turns after it, as Send would. A
// thread whose last message is the human side's gets its agent's turn; a
// thread waiting for the human returns at once, with StopReason StopHuman
// and no messages. A message a tool injected (ThreadState.InjectMessage) is
// neither the human's nor the end of a turn: when it is last because the
// injecting call's result was not stored, Resume finishes that call's turn.
//
// Resume does not undo a deliberate stop: a turn that a tool ended with
// Execution.Stop is over, and Resume returns at once, with StopReason
// StopStopped and no messages, running none of the calls Stop dropped.
//
// A handoff whose result ("Handoff complete") is stored but whose switch of
// the thread to the new agent is not (the store failed, the process died)
// is completed: the thread goes to that agent, with the handoff's
// arguments and first message, and the agent takes the turn, as it would
// have in the interrupted Send. That holds for a handoff made inside a
// resumed call too (by a prompt tool's sub-prompt, or by a tool through
// InvokeTool), but not for one whose arguments held a secret, which is
// not stored: a warning says so, and the old agent's turn goes on.
//
// A turn resumes with a fresh MaxSteps budget. A prompt tool's sub-prompt
// that was interrupted runs again from its start.
func (rt *Runtime) Resume(ctx context.Context, threadID string) (*Reply, error) {
	return rt.withThread(ctx, threadID, func(ctx context.Context, rt *Runtime, th *Thread, startSeq int64) (*Reply, error) {
		p, err := rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: resumeWindow, Order: OrderDesc, IncludeSilent: true})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		if len(p.Messages) == 0 {
			return &Reply{ThreadID: th.ID, StopReason: StopHuman}, nil
		}
		last := &p.Messages[0]
		side := sideOf(last)
		partWay := false
		if side == "" {
			// A row without a side was injected by a tool: it does not say
			// where the turn stopped, the newest row with a side does. Rows
			// injected while a turn ran part-way (before the injecting
			// call's result was stored) resume that turn.
			anchor, err := rt.newestWithSide(ctx, threadID, p)
			if err != nil {
				return nil, err
			}
			if anchor != nil && !endsTurn(anchor) {
				side, partWay = sideOf(anchor), true
			}
		}
		switch {
		case partWay:
		case last.Role == RoleUser && side != "a":
			// The human side (or a child's report) spoke last: the agent's turn.
			return rt.runSession(ctx, th, "a", startSeq, nil)
		case last.Role == RoleAssistant && len(last.ToolCalls) == 0:
			// The side's turn ended with text: the other side is next.
			agent, ok := rt.reg.Agent(th.AgentID)
			if !ok {
				return nil, fmt.Errorf("toolrun: thread %s: agent %q is not registered", th.ID, th.AgentID)
			}
			next, other := "b", &agent.SideB
			if side == "b" {
				next, other = "a", &agent.SideA
			}
			if other.Human {
				return &Reply{ThreadID: th.ID, StopReason: StopHuman}, nil
			}
			return rt.runSession(ctx, th, next, startSeq, nil)
		}
		// The side's turn stopped part-way: the calls of its latest response
		// (those with a stored result are resumed, not run), then on.
		if side == "" {
			side = "a"
		}
		// The response is looked for page by page, newest first: its results
		// can be more than a page. A user message of the other side means
		// the turn began after the last response; one without a side was
		// injected (by a tool, say) and is part of the turn.
		var resp *Message
	scan:
		for offset := 0; ; {
			for i := range p.Messages {
				m := &p.Messages[i]
				if isStopRecord(m) {
					// A tool ended the turn with Execution.Stop: it is over.
					return &Reply{ThreadID: th.ID, StopReason: StopStopped}, nil
				}
				if m.Role == RoleAssistant && sideOf(m) == side {
					resp = m
					break scan
				}
				if m.Role == RoleUser && sideOf(m) != side && sideOf(m) != "" {
					break scan
				}
			}
			if !p.HasMore {
				break
			}
			offset += len(p.Messages)
			if p, err = rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: resumeWindow, Offset: offset, Order: OrderDesc, IncludeSilent: true}); err != nil {
				return nil, &StoreError{Op: "list messages", Err: err}
			}
		}
		return rt.runSession(ctx, th, side, startSeq, resp)
	})
}

// endsTurn reports a row after which a side's turn is over: a user message
// of the human side (or a child's report), which the agent answers, or a
// response without calls, after which the other side is next.
func endsTurn(m *Message) bool {
	return m.Role == RoleUser && sideOf(m) != "a" || m.Role == RoleAssistant && len(m.ToolCalls) == 0
}

// newestWithSide returns the thread's newest row that has a side, reading
// on from first (the newest page, newest first), or nil if no row has one.
func (rt *Runtime) newestWithSide(ctx context.Context, threadID string, first MessagePage) (*Message, error) {
	for p, offset := first, 0; ; {
		for i := range p.Messages {
			if sideOf(&p.Messages[i]) != "" {
				return &p.Messages[i], nil
			}
		}
		if !p.HasMore {
			return nil, nil
		}
		offset += len(p.Messages)
		var err error
		if p, err = rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: resumeWindow, Offset: offset, Order: OrderDesc, IncludeSilent: true}); err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
	}
}

// resumeWindow is how many of the latest messages Resume reads to find
// where the turn stopped.
const resumeWindow = 64

// withThread runs fn with the thread's turn lock held (and, for a store
// shared between instances, the thread acquired from it), the thread
// loaded and checked to take work, and the Seq of its last message. fn's
// ctx is marked as holding the lock, so that a tool of the turn that asks
// for a turn of the same thread is refused instead of waiting for itself.
func (rt *Runtime) withThread(ctx context.Context, threadID string, fn func(ctx context.Context, rt *Runtime, th *Thread, startSeq int64) (*Reply, error)) (*Reply, error) {
	rt = rt.base
	growStack()
	if err := rt.checkDefinitions(); err != nil {
		return nil, fmt.Errorf("toolrun: turn on thread %s refused: the registry does not check: %w", threadID, err)
	}
	lock, err := rt.turns.lock(ctx, threadID)
	if errors.Is(err, errLockHeld) {
		return nil, fmt.Errorf("toolrun: thread %s: a turn was asked for from inside a turn of the same thread, which would wait for itself to end", threadID)
	}
	if err != nil {
		return nil, err
	}
	defer rt.turns.unlock(threadID, lock)
	held := holding(ctx, rt.turns, threadID)
	defer held.release()
	ctx = held
	if rt.locker != nil {
		st, release, err := rt.locker.AcquireThread(ctx, threadID, rt.owner)
		if err != nil {
			return nil, &StoreError{Op: "acquire thread " + threadID, Err: err}
		}
		defer func() {
			if err := release(context.WithoutCancel(ctx)); err != nil {
				rt.log.WarnContext(ctx, "toolrun: releasing thread", "thread", threadID, "error", err)
			}
		}()
		view := *rt
		view.store = records{st}
		view.ex = rt.ex.withStore(st)
		rt = &view
	}
	th, err := rt.store.GetThread(ctx, threadID)
	if err != nil {
		return nil, &StoreError{Op: "load thread " + threadID, Err: err}
	}
	if !th.TerminatedAt.IsZero() {
		return nil, fmt.Errorf("%w: %s", ErrThreadTerminated, threadID)
	}
	startSeq, err := rt.lastSeq(ctx, threadID)
	if err != nil {
		return nil, err
	}
	return fn(ctx, rt, th, startSeq)
}

// EventTurnDone is published when a run of turns ends, including the parent
// turns that a background subagent's completion starts.
const EventTurnDone = "turn_done"

// TurnDone is the data of a turn_done event.
type TurnDone struct {
	StopReason   string `json:"stop_reason"`
	Text         string `json:"text"`
	SessionEnded bool   `json:"session_ended,omitempty"`
	Failed       bool   `json:"failed,omitempty"`
}

// SetEnv sets a thread env value from outside a tool (for example a value
// the user provided later) and propagates it to live descendants as
// ThreadState.SetEnv does. A value without a Type is secret.
func (rt *Runtime) SetEnv(ctx context.Context, threadID, name string, v EnvValue) error {
	if v.Type == "" {
		v.Type = VarSecret
	}
	warnShortSecret(ctx, rt.log, "thread env (Runtime.SetEnv)", name, v)
	if err := rt.store.SetEnv(ctx, ScopeThread, threadID, name, v); err != nil {
		return &StoreError{Op: "set env " + name, Err: err}
	}
	return rt.propagateEnv(ctx, threadID, name, v, 0)
}

// lastSeq returns the Seq of the thread's newest message (0 for none),
// read into a pooled buffer: a turn asks it twice.
func (rt *Runtime) lastSeq(ctx context.Context, threadID string) (int64, error) {
	var bufs turnRows
	buf := rt.readBuffer(&bufs, 1)
	defer bufs.release()
	p, err := rt.store.listMessagesInto(ctx, threadID, MessageQuery{Limit: 1, Order: OrderDesc, IncludeSilent: true, MaxDepth: -1}, buf)
	if err != nil {
		return 0, &StoreError{Op: "list messages", Err: err}
	}
	bufs.keep(p.Messages)
	if len(p.Messages) == 0 {
		return 0, nil
	}
	return p.Messages[0].Seq, nil
}

// collect fills reply.Messages with what was stored after startSeq.
// It reads only those: the cost does not grow with the thread's history.
func (rt *Runtime) collect(ctx context.Context, reply *Reply, startSeq int64, err error) error {
	p, lerr := rt.store.ListMessages(context.WithoutCancel(ctx), reply.ThreadID, MessageQuery{IncludeSilent: true, MaxDepth: -1, After: startSeq, Order: OrderAsc})
	if lerr == nil {
		reply.Messages = p.Messages
	}
	return err
}

// updateThread re-reads the thread, applies change to the fresh record and
// stores it, so a concurrent change (a Terminate, another property) is not
// overwritten by the copy loaded when the turn started. th is refreshed.
func (rt *Runtime) updateThread(ctx context.Context, th *Thread, change func(*Thread)) error {
	if ms, ok := rt.store.Store.(*MemoryStore); ok {
		// In one step, without a copy to read (a direct call: change, then,
		// does not escape).
		fresh, err := ms.changeThread(ctx, th.ID, change)
		if err != nil {
			return &StoreError{Op: "update thread " + th.ID, Err: err}
		}
		*th = fresh
		return nil
	}
	fresh, err := rt.store.GetThread(ctx, th.ID)
	if err != nil {
		return &StoreError{Op: "load thread " + th.ID, Err: err}
	}
	change(fresh)
	if err := rt.store.UpdateThread(ctx, fresh); err != nil {
		return &StoreError{Op: "update thread " + th.ID, Err: err}
	}
	*th = *fresh
	return nil
}

func (rt *Runtime) countTurn(ctx context.Context, th *Thread) (int, error) {
	n := 0
	err := rt.updateThread(ctx, th, func(t *Thread) {
		t.SessionTurns++
		n = t.SessionTurns
	})
	return n, err
}

func (rt *Runtime) resetTurns(ctx context.Context, th *Thread) error {
	return rt.updateThread(ctx, th, func(t *Thread) { t.SessionTurns = 0 })
}
