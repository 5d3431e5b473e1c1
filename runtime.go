package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrun/toolrun/internal/partialjson"
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
	// CodeRunner runs ThreadState.RunCode; nil means the sandbox.
	CodeRunner CodeRunner
	// TracerProvider receives "chat <model>" and "execute_tool <name>" spans
	// (OpenTelemetry GenAI conventions). nil means no tracing.
	TracerProvider trace.TracerProvider
	// Owner names this runtime instance to a ThreadLocker store; "" means a
	// random id per Runtime.
	Owner string
	// MaxTotalSteps is the global ceiling of model requests in one
	// execution (a Send and the turns it starts), sub-prompt requests
	// included; 0 means 250, raised to the acting side's MaxSteps when that
	// is bigger.
	MaxTotalSteps int
	// MaxNesting bounds how deeply calls nest (ExecutorOptions.MaxNesting).
	MaxNesting int
}

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
	turns    *keyedMutex
	bg       *workCounter
	locker   ThreadLocker // nil: one process owns the store
	owner    string
	base     *Runtime // the runtime a per-turn view was made from
	checks   *defCheck
}

// defCheck caches the result of Registry.Check for one registry generation.
type defCheck struct {
	mu  sync.Mutex
	gen uint64
	ok  bool
	err error
}

// checkDefinitions runs Registry.Check once per registry generation and
// returns its error: no thread or turn starts while a definition names
// something that is not registered.
func (rt *Runtime) checkDefinitions() error {
	c := rt.checks
	rt.reg.mu.RLock()
	gen := rt.reg.gen
	rt.reg.mu.RUnlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok && c.gen == gen {
		return c.err
	}
	c.gen, c.ok, c.err = gen, true, rt.reg.Check()
	if c.err != nil {
		rt.log.Error("toolrun: definitions refer to names that are not registered", "error", c.err)
	}
	return c.err
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
		TracerProvider: opts.TracerProvider, MaxNesting: opts.MaxNesting})
	rt := &Runtime{reg: reg, ex: ex, store: ex.store, log: ex.log, maxTotal: opts.MaxTotalSteps,
		turns: ex.locks, bg: newWorkCounter(), owner: opts.Owner, checks: &defCheck{}}
	if rt.maxTotal <= 0 {
		rt.maxTotal = 250
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

func (w *workCounter) start() {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
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
	// Env is the thread env; values without a Type are secret.
	Env map[string]EnvValue
	// ParentID makes the thread a child of another thread.
	ParentID string
}

// NewThread creates a thread running agent.
func (rt *Runtime) NewThread(ctx context.Context, agent string, opts *ThreadOptions) (*Thread, error) {
	if err := rt.checkDefinitions(); err != nil {
		return nil, err
	}
	if _, ok := rt.reg.Agent(agent); !ok {
		return nil, fmt.Errorf("toolrun: new thread: agent %q is not registered", agent)
	}
	if opts == nil {
		opts = &ThreadOptions{}
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
func (rt *Runtime) Send(ctx context.Context, threadID, text string) (*Reply, error) {
	return rt.send(ctx, threadID, &Message{Role: RoleUser, Content: text})
}

func (rt *Runtime) send(ctx context.Context, threadID string, m *Message) (*Reply, error) {
	return rt.withThread(ctx, threadID, func(rt *Runtime, th *Thread, startSeq int64) (*Reply, error) {
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
// and no messages.
//
// A turn resumes with a fresh MaxSteps budget. A prompt tool's sub-prompt
// that was interrupted runs again from its start.
func (rt *Runtime) Resume(ctx context.Context, threadID string) (*Reply, error) {
	return rt.withThread(ctx, threadID, func(rt *Runtime, th *Thread, startSeq int64) (*Reply, error) {
		p, err := rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: resumeWindow, Order: OrderDesc, IncludeSilent: true})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		if len(p.Messages) == 0 {
			return &Reply{ThreadID: th.ID, StopReason: StopHuman}, nil
		}
		last := &p.Messages[0]
		side := sideOf(last)
		switch {
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
		var calls []ToolCall
		for i := range p.Messages {
			m := &p.Messages[i]
			if m.Role == RoleAssistant && sideOf(m) == side {
				calls = m.ToolCalls
				break
			}
			if m.Role == RoleUser && sideOf(m) != side {
				break // the turn began after the last response
			}
		}
		return rt.runSession(ctx, th, side, startSeq, calls)
	})
}

// resumeWindow is how many of the latest messages Resume reads to find
// where the turn stopped.
const resumeWindow = 64

// withThread runs fn with the thread's turn lock held (and, for a store
// shared between instances, the thread acquired from it), the thread
// loaded and checked to take work, and the Seq of its last message.
func (rt *Runtime) withThread(ctx context.Context, threadID string, fn func(rt *Runtime, th *Thread, startSeq int64) (*Reply, error)) (*Reply, error) {
	rt = rt.base
	if err := rt.checkDefinitions(); err != nil {
		return nil, err
	}
	unlock := rt.turns.lock(threadID)
	defer unlock()
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
	return fn(rt, th, startSeq)
}

const (
	missingText = "Tool result missing from conversation history for prior call %q. Treat this as a failed tool call."
)

// turnState is what one side turn shares with the batches it runs.
type turnState struct {
	rt      *Runtime
	th      *Thread
	agent   *Agent
	side    *Side
	sideKey string // "a" or "b"
	prompt  *Prompt
	model   *Model
	offered map[string]offer
	specs   []ToolSpec
	mu      sync.Mutex // guards handoff (tools may call InvokeTool from goroutines)
	handoff *handoff
	total   *atomic.Int64 // model requests of the execution
	ceiling int           // the execution's limit of model requests
	parent  *turnState    // the calling turn of a sub-prompt
}

type offerKind int

const (
	offerFunc offerKind = iota
	offerPrompt
	offerAgent
	offerProvider
	offerLifecycle
)

type offer struct {
	kind   offerKind
	config *SubpromptConfig
}

type handoff struct {
	agent  string
	args   map[string]any
	config *SubpromptConfig
}

type turnResult struct {
	stop      string
	text      string
	handoff   *handoff
	ended     bool
	failed    bool
	lastModel string
}

// runSession runs side turns starting with side until a human side is
// next, the session ends or a guard stops it. The thread's turn lock is held.
// resume, when not nil, are the calls of a stored response the first turn
// runs (resuming those with stored results) before its first request.
func (rt *Runtime) runSession(ctx context.Context, th *Thread, side string, startSeq int64, resume []ToolCall) (*Reply, error) {
	reply := &Reply{ThreadID: th.ID}
	var total atomic.Int64
	for {
		agent, ok := rt.reg.Agent(th.AgentID)
		if !ok {
			return nil, fmt.Errorf("toolrun: thread %s: agent %q is not registered", th.ID, th.AgentID)
		}
		s := &agent.SideA
		if side == "b" {
			s = &agent.SideB
		}
		if s.Human {
			reply.StopReason = StopHuman
			break
		}
		res, err := rt.runTurn(ctx, th, agent, s, side, &total, resume)
		resume = nil
		if err != nil {
			return reply, rt.collect(ctx, reply, startSeq, err)
		}
		if res.handoff != nil {
			if err := rt.applyHandoff(ctx, th, res.handoff); err != nil {
				return reply, rt.collect(ctx, reply, startSeq, err)
			}
			side = "a"
			continue
		}
		reply.Text, reply.StopReason = res.text, res.stop
		turns, err := rt.countTurn(ctx, th)
		if err != nil {
			return reply, rt.collect(ctx, reply, startSeq, err)
		}
		if res.ended || agent.MaxSessionTurns > 0 && turns >= agent.MaxSessionTurns {
			reply.SessionEnded = true
			if res.ended {
				reply.Failed = res.failed
			} else {
				reply.StopReason = StopMaxSessionTurns
			}
			if err := rt.resetTurns(ctx, th); err != nil {
				return reply, rt.collect(ctx, reply, startSeq, err)
			}
			break
		}
		if !th.TerminatedAt.IsZero() {
			break // terminated during the turn: no further turn
		}
		if res.stop != StopResponse && res.stop != StopTool {
			break // a guard stopped the turn: do not hand the turn over
		}
		other := &agent.SideB
		next := "b"
		if side == "b" {
			other, next = &agent.SideA, "a"
		}
		if other.Human {
			break
		}
		side = next
	}
	err := rt.collect(ctx, reply, startSeq, nil)
	if rt.ex.ev.has(th.ID) {
		rt.ex.ev.publish(Event{ThreadID: th.ID, Type: EventTurnDone, Timestamp: time.Now().UTC(),
			Data: TurnDone{StopReason: reply.StopReason, Text: reply.Text, SessionEnded: reply.SessionEnded, Failed: reply.Failed}})
	}
	return reply, err
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

func (rt *Runtime) lastSeq(ctx context.Context, threadID string) (int64, error) {
	p, err := rt.store.ListMessages(ctx, threadID, MessageQuery{Limit: 1, Order: OrderDesc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		return 0, &StoreError{Op: "list messages", Err: err}
	}
	if len(p.Messages) == 0 {
		return 0, nil
	}
	return p.Messages[0].Seq, nil
}

// collect fills reply.Messages with what was stored after startSeq.
func (rt *Runtime) collect(ctx context.Context, reply *Reply, startSeq int64, err error) error {
	p, lerr := rt.store.ListMessages(context.WithoutCancel(ctx), reply.ThreadID, MessageQuery{IncludeSilent: true, MaxDepth: -1})
	if lerr == nil {
		for _, m := range p.Messages {
			if m.Seq > startSeq {
				reply.Messages = append(reply.Messages, m)
			}
		}
	}
	return err
}

// updateThread re-reads the thread, applies change to the fresh record and
// stores it, so a concurrent change (a Terminate, another property) is not
// overwritten by the copy loaded when the turn started. th is refreshed.
func (rt *Runtime) updateThread(ctx context.Context, th *Thread, change func(*Thread)) error {
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

// runTurn runs one side's turn: model requests and tool batches until the
// side stops.
func (rt *Runtime) runTurn(ctx context.Context, th *Thread, agent *Agent, side *Side, sideKey string, total *atomic.Int64, resume []ToolCall) (turnResult, error) {
	prompt, ok := rt.reg.Prompt(side.Prompt)
	if !ok {
		return turnResult{}, fmt.Errorf("toolrun: agent %s: prompt %q is not registered", agent.Name, side.Prompt)
	}
	model, ok := rt.reg.Model(prompt.Model)
	if !ok {
		return turnResult{}, fmt.Errorf("toolrun: prompt %s: model %q is not registered", prompt.Name, prompt.Model)
	}
	ceiling := rt.maxTotal
	if side.MaxSteps > ceiling {
		ceiling = side.MaxSteps
	}
	ts := &turnState{rt: rt, th: th, agent: agent, side: side, sideKey: sideKey, prompt: prompt, model: model, total: total, ceiling: ceiling}
	turnStart, err := rt.lastSeq(ctx, th.ID)
	if err != nil {
		return turnResult{}, err
	}
	exec := &Execution{Side: sideKey}
	steps := 0
	lastText := ""
	// runCalls runs a response's calls and applies the stop rules after
	// them; done reports that the turn ends with res.
	runCalls := func(b *batch, calls []ToolCall, fresh bool) (res turnResult, done bool, err error) {
		outcomes, err := rt.ex.runBatch(ctx, b, calls, fresh)
		if err != nil {
			if ctx.Err() != nil {
				rt.stopped(ctx, ts, b, calls)
			}
			return turnResult{}, true, err
		}
		exec.StepCount = steps
		if res, done := rt.afterBatch(ctx, ts, outcomes, exec, lastText); done {
			return res, true, nil
		}
		if stop, err := rt.breaker(ctx, ts); err != nil || stop {
			return turnResult{stop: StopRepeatedToolError, text: lastText}, true, err
		}
		return turnResult{}, false, nil
	}
	if len(resume) > 0 {
		b, err := rt.ex.newBatch(ctx, th.ID, false)
		if err != nil {
			return turnResult{}, err
		}
		rt.bindBatch(b, ts, exec)
		if err := rt.offerTools(ctx, ts, b); err != nil {
			return turnResult{}, err
		}
		if res, done, err := runCalls(b, resume, false); done {
			return res, err
		}
	}
	for {
		if side.MaxSteps > 0 && steps >= side.MaxSteps {
			return turnResult{stop: StopMaxSideSteps, text: lastText}, nil
		}
		if total.Load() >= int64(ceiling) {
			return turnResult{stop: StopMaxTotalSteps, text: lastText}, nil
		}
		if err := ctx.Err(); err != nil {
			return turnResult{}, err
		}
		if steps > 0 {
			if fresh, err := rt.store.GetThread(ctx, th.ID); err == nil && !fresh.TerminatedAt.IsZero() {
				th.TerminatedAt = fresh.TerminatedAt
				return turnResult{stop: StopStopped, text: lastText}, nil
			}
		}
		// The offered tools are worked out for every request: the lifecycle
		// tools depend on the child registry, which the last batch may have changed.
		b, err := rt.ex.newBatch(ctx, th.ID, false)
		if err != nil {
			return turnResult{}, err
		}
		rt.bindBatch(b, ts, exec)
		if err := rt.offerTools(ctx, ts, b); err != nil {
			return turnResult{}, err
		}
		req, err := rt.buildRequest(ctx, ts, turnStart)
		if err != nil {
			return turnResult{}, err
		}
		total.Add(1)
		text, calls, err := rt.stream(ctx, ts, b, req)
		if err != nil {
			return turnResult{}, err
		}
		empty := strings.TrimSpace(text) == "" && len(calls) == 0
		if empty {
			calls = []ToolCall{{ID: newID("call"), Name: "invalid_assistant_response", Arguments: "{}"}}
		}
		am := &Message{Role: RoleAssistant, Content: text, ToolCalls: calls, Prompt: prompt.Name, Side: sideKey}
		if err := rt.store.AppendMessages(ctx, th.ID, am); err != nil {
			return turnResult{}, &StoreError{Op: "append assistant message", Err: err}
		}
		steps++
		if strings.TrimSpace(text) != "" {
			lastText = text
		}
		if empty {
			em := &Message{Role: RoleTool, ToolCallID: calls[0].ID, Name: calls[0].Name, ToolStatus: StatusError, Prompt: prompt.Name,
				Content: errorContent("The response was empty: reply with text or call a tool."),
				Side:    sideKey}
			if err := rt.store.AppendMessages(ctx, th.ID, em); err != nil {
				return turnResult{}, &StoreError{Op: "append tool result", Err: err}
			}
			exec.StepCount = steps
			continue
		}
		if len(calls) == 0 {
			if side.stopOnResponse() {
				return turnResult{stop: StopResponse, text: text}, nil
			}
			exec.StepCount = steps
			continue
		}
		if res, done, err := runCalls(b, calls, true); done {
			return res, err
		}
	}
}

// stopped records a user stop (reference E15): an error result "Execution
// stopped by user" for every call of the response still lacking one, and a
// system message with the same text.
func (rt *Runtime) stopped(ctx context.Context, ts *turnState, b *batch, calls []ToolCall) {
	ctx = context.WithoutCancel(ctx)
	const text = "Execution stopped by user"
	var msgs []*Message
	for _, c := range calls {
		if _, err := rt.store.ToolResult(ctx, ts.th.ID, c.ID); err == nil {
			continue
		}
		msgs = append(msgs, &Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, ToolStatus: StatusError, Prompt: ts.prompt.Name,
			Depth: b.depth, ParentID: b.parentID, Content: errorContent(text), Side: ts.sideKey})
	}
	if b.depth == 0 {
		msgs = append(msgs, &Message{Role: RoleSystem, Content: text, Side: ts.sideKey})
	}
	if err := rt.store.AppendMessages(ctx, ts.th.ID, msgs...); err != nil {
		rt.log.ErrorContext(ctx, "toolrun: recording a user stop", "thread", ts.th.ID, "error", err)
	}
}

// bindResult applies the side's session bindings to a call's result
// (reference E11): a MessageProperty replaces the success text, and the
// AttachmentsProperty paths of SessionStop/SessionFail must exist.
func (ts *turnState) bindResult(ctx context.Context, c ToolCall, res Result) Result {
	if ts.parent != nil || res.IsError() {
		return res
	}
	for _, bind := range []*SessionBinding{ts.side.SessionStop, ts.side.SessionFail, ts.side.SessionStatus} {
		if bind == nil || bind.Name != c.Name {
			continue
		}
		if bind.MessageProperty != "" {
			if v := argValue(c.Arguments, bind.MessageProperty); v != "" {
				res.Result = v
			}
		}
		if bind.AttachmentsProperty != "" && bind != ts.side.SessionStatus {
			var m map[string]any
			_ = json.Unmarshal([]byte(c.Arguments), &m)
			var missing []string
			for _, p := range attachmentPaths(m[bind.AttachmentsProperty]) {
				if _, err := ts.rt.store.StatFile(ctx, ts.th.ID, p); err != nil {
					missing = append(missing, p)
				} else {
					res.Refs = append(res.Refs, AttachmentRef{ID: newID("att"), Type: "file", Path: p, Name: p[strings.LastIndexByte(p, '/')+1:]})
				}
			}
			if len(missing) > 0 {
				return Result{Status: StatusError, Error: "Provided attachment path(s) not found in this thread: " + strings.Join(missing, ", ")}
			}
		}
	}
	return res
}

// afterBatch applies the stop rules that follow a batch of tool calls.
func (rt *Runtime) afterBatch(ctx context.Context, ts *turnState, outcomes []Outcome, exec *Execution, lastText string) (turnResult, bool) {
	side := ts.side
	for _, o := range outcomes {
		name := o.Call.Name
		ok := o.Result.Status == StatusSuccess
		if side.SessionStatus != nil && name == side.SessionStatus.Name && ts.th.ParentID != "" {
			// A status report goes to the parent's child registry (reference E11).
			text := strings.TrimSpace(o.Message.Content)
			if e, err := rt.store.Child(ctx, ts.th.ParentID, ts.th.ID); err == nil && e.Status != ChildTerminated {
				e.Report = text
				if err := rt.store.PutChild(ctx, e); err != nil {
					rt.log.WarnContext(ctx, "toolrun: forwarding session status", "thread", ts.th.ID, "error", err)
				}
			}
		}
		if side.SessionFail != nil && name == side.SessionFail.Name && ok {
			return turnResult{stop: StopSessionFail, text: o.Message.Content, ended: true, failed: true}, true
		}
		if side.SessionStop != nil && name == side.SessionStop.Name && ok {
			return turnResult{stop: StopSessionStop, text: o.Message.Content, ended: true}, true
		}
	}
	ts.mu.Lock()
	h := ts.handoff
	ts.mu.Unlock()
	if h != nil {
		return turnResult{handoff: h}, true
	}
	if side.StopTool != "" {
		for _, o := range outcomes {
			if o.Call.Name != side.StopTool {
				continue
			}
			text := lastText
			if side.StopToolResponseProperty != "" {
				if v := argValue(o.Call.Arguments, side.StopToolResponseProperty); v != "" {
					text = v
				}
			}
			return turnResult{stop: StopTool, text: text}, true
		}
	}
	if exec.Stopped() {
		return turnResult{stop: StopStopped, text: lastText}, true
	}
	return turnResult{}, false
}

// argValue reads a top-level argument as text (strings trimmed, others JSON).
func argValue(args, key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return ""
	}
	raw, ok := m[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	return string(raw)
}

var signatureRE = regexp.MustCompile(`"[^"]*"|'[^']*'|(/[\w.-]+)+|\d+`)

// breaker is the repeated-error circuit breaker: the 8 most recent
// top-level tool results are all errors with one normalised signature.
func (rt *Runtime) breaker(ctx context.Context, ts *turnState) (bool, error) {
	const window = 8
	p, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{Limit: 4 * window, Order: OrderDesc})
	if err != nil {
		return false, &StoreError{Op: "list messages", Err: err}
	}
	var sig string
	n := 0
	for _, m := range p.Messages {
		if m.Role != RoleTool {
			continue
		}
		if m.ToolStatus != StatusError {
			return false, nil
		}
		s := signatureRE.ReplaceAllString(m.Content, "_")
		if n == 0 {
			sig = s
		} else if s != sig {
			return false, nil
		}
		if n++; n == window {
			break
		}
	}
	if n < window {
		return false, nil
	}
	msg := &Message{Role: RoleAssistant, Prompt: ts.prompt.Name,
		Content: fmt.Sprintf("I stopped because the same tool error repeated %d times in a row. The last result was: %s", window, p.Messages[0].Content),
		Side:    ts.sideKey, ErrorCode: StopRepeatedToolError}
	if err := rt.store.AppendMessages(ctx, ts.th.ID, msg); err != nil {
		return true, &StoreError{Op: "append assistant message", Err: err}
	}
	return true, nil
}

// bindBatch gives a batch the turn's context: gate, execution, env links,
// dispatch of non-function tools.
func (rt *Runtime) bindBatch(b *batch, ts *turnState, exec *Execution) {
	b.exec = exec
	b.agentEnv = ts.agent.Env
	b.promptEnv = ts.prompt.Env
	b.prompt = ts.prompt.Name
	b.side = ts.sideKey
	b.turn = ts
	if n, ok := ts.model.Provider.(NullableOptionals); ok {
		b.nullOptionals = n.NullableOptionals(ts.model.ID)
	}
	b.thread.AgentID = ts.th.AgentID
}

// stream sends req and collects the response, firing tool_call_started as
// each call's progress argument completes.
func (rt *Runtime) stream(ctx context.Context, ts *turnState, b *batch, req *Request) (string, []ToolCall, error) {
	type pendingCall struct {
		call    ToolCall
		rawID   string // the id the provider gave
		args    strings.Builder
		scan    partialjson.Scanner
		key     string
		fired   bool
		started bool
	}
	var text strings.Builder
	calls := map[int]*pendingCall{}
	ids := map[string]bool{} // ids given to this response's calls
	var order []int
	get := func(i int) *pendingCall {
		pc := calls[i]
		if pc == nil {
			pc = &pendingCall{}
			calls[i] = pc
			order = append(order, i)
		}
		return pc
	}
	fire := func(pc *pendingCall, progress *string) {
		if pc.fired {
			return
		}
		pc.fired = true
		if b.offered != nil && !b.offered[pc.call.Name] {
			return // refused by the allowed-tools gate: no start and no done (reference E7)
		}
		b.mu.Lock()
		if b.started == nil {
			b.started = map[string]bool{}
		}
		b.started[pc.call.ID] = true
		b.mu.Unlock()
		rt.ex.emitStarted(ctx, b, ToolCallStarted{ID: pc.call.ID, Name: pc.call.Name, Progress: progress, Arguments: pc.args.String()})
	}
	sctx, span := rt.startChatSpan(ctx, ts)
	defer span.End()
	for ch, err := range ts.model.Provider.Stream(sctx, req) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			return "", nil, fmt.Errorf("toolrun: model %s: %w", ts.model.Name, err)
		}
		switch ch.Type {
		case ChunkText:
			text.WriteString(ch.Text)
		case ChunkToolCallStart:
			pc := get(ch.Index)
			pc.rawID, pc.call.Name = ch.ToolCall.ID, ch.ToolCall.Name
			if pc.call.ID, err = rt.uniqueCallID(ctx, ts.th.ID, pc.rawID, ids); err != nil {
				return "", nil, err
			}
			pc.started = true
			pc.key = rt.progressKey(pc.call.Name)
			if pc.key == "" {
				fire(pc, nil)
			}
		case ChunkToolCallDelta:
			pc := get(ch.Index)
			pc.args.WriteString(ch.ToolCall.Arguments)
			if pc.key != "" && !pc.fired {
				pc.scan.Feed(ch.ToolCall.Arguments)
				if v, st := pc.scan.Value(pc.key); st == partialjson.Complete {
					fire(pc, &v)
				}
			}
		case ChunkToolCall:
			pc := get(ch.Index)
			if pc.call.ID == "" || ch.ToolCall.ID != "" && ch.ToolCall.ID != pc.rawID {
				pc.rawID = ch.ToolCall.ID
				if pc.call.ID, err = rt.uniqueCallID(ctx, ts.th.ID, pc.rawID, ids); err != nil {
					return "", nil, err
				}
				if pc.fired {
					b.mu.Lock()
					if b.started == nil {
						b.started = map[string]bool{}
					}
					b.started[pc.call.ID] = true // the start already fired under the first id
					b.mu.Unlock()
				}
			}
			if ch.ToolCall.Name != "" {
				pc.call.Name = ch.ToolCall.Name
			}
			pc.call.Arguments = ch.ToolCall.Arguments
		case ChunkProviderTool:
			if ch.ProviderTool != nil {
				rt.log.InfoContext(ctx, "toolrun: provider tool", "thread", ts.th.ID, "name", ch.ProviderTool.Name, "id", ch.ProviderTool.ID, "status", ch.ProviderTool.Status)
			}
		case ChunkUsage:
			if ch.Usage != nil && span.IsRecording() {
				span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", ch.Usage.InputTokens), attribute.Int("gen_ai.usage.output_tokens", ch.Usage.OutputTokens))
			}
		case ChunkFinish:
			if span.IsRecording() {
				span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{ch.FinishReason}))
			}
		}
	}
	out := make([]ToolCall, 0, len(order))
	for _, i := range order {
		pc := calls[i]
		if pc.call.Name == "" {
			continue
		}
		if pc.call.Arguments == "" {
			pc.call.Arguments = pc.args.String()
		}
		if !pc.fired {
			var progress *string
			if pc.key != "" {
				progress = progressOf(pc.call.Arguments, pc.key)
			}
			fire(pc, progress)
		}
		out = append(out, pc.call)
	}
	return text.String(), out, nil
}

// uniqueCallID returns the id a call of the response being streamed runs
// under: the provider's id unless an earlier call of the response has it or
// a stored result on the thread answers it (servers that number the calls
// of every response call_0, call_1 …); then a new id derived from it. Only a
// call resumed from its stored assistant message keeps the id of a stored
// result. seen holds the ids given so far.
func (rt *Runtime) uniqueCallID(ctx context.Context, threadID, id string, seen map[string]bool) (string, error) {
	if !safeID(id) {
		id = newID("call")
	}
	for {
		taken := seen[id]
		if !taken {
			_, err := rt.store.ToolResult(ctx, threadID, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return "", &StoreError{Op: "look up tool result " + id, Err: err}
			}
			taken = err == nil
		}
		if !taken {
			seen[id] = true
			return id, nil
		}
		id = reissuedID(id)
	}
}

// progressKey returns the progress argument of a function tool, or "".
func (rt *Runtime) progressKey(name string) string {
	if e := rt.reg.lookup(name, ""); e != nil && e.tool != nil {
		return e.tool.progressArgument
	}
	return ""
}

// applyHandoff switches the thread to the handoff's agent (reference G9).
func (rt *Runtime) applyHandoff(ctx context.Context, th *Thread, h *handoff) error {
	err := rt.updateThread(ctx, th, func(t *Thread) {
		t.AgentID = h.agent
		if len(h.args) > 0 {
			t.Arguments = h.args
		}
		t.SessionTurns = 0
	})
	if err != nil {
		return err
	}
	// The handoff's init user message, with the named attachments, as a
	// prompt tool gets it (the thread is the same, so nothing is copied).
	if m := rt.initMessage(ctx, th.ID, h.config, h.args); m != nil {
		m.Side = "b"
		if err := rt.store.AppendMessages(ctx, th.ID, m); err != nil {
			return &StoreError{Op: "append handoff message", Err: err}
		}
	}
	return nil
}

func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
