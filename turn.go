package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// missingText is the result the model is shown for a call of an earlier
// response that has no stored result.
const missingText = "Tool result missing from conversation history for prior call %q. Treat this as a failed tool call."

// missingResult is the failed result a model is shown for call c when no
// result of it is stored (or sent).
func missingResult(c ToolCall) Message {
	return Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, ToolStatus: StatusError,
		Content: strings.Replace(missingText, "%q", `"`+c.Name+`"`, 1)}
}

// turnState is one side's turn, or one sub-prompt of it: what its model
// requests and their batches share.
type turnState struct {
	rt      *Runtime
	th      *Thread
	agent   *Agent
	side    *Side
	sideKey string // "a" or "b"
	prompt  *Prompt
	model   *Model
	exec    *Execution
	total   *atomic.Int64 // model requests of the execution
	ceiling int           // the execution's limit of model requests
	parent  *turnState    // the calling turn of a sub-prompt
	// turnStart is the Seq of the thread's last message when the turn began.
	turnStart int64
	// A sub-prompt's rows hang from its caller's result message, one level
	// deeper; its calls nest one level deeper than its caller.
	parentID string
	depth    int
	nest     int

	mu      sync.Mutex // guards handoff (tools may call InvokeTool from goroutines)
	handoff *handoff

	rows turnRows // the chat rows its requests read
	resp response // collects each of its model responses
	sc   scope    // the scope of its batches, once made (scOK)
	scOK bool
}

// root is the top-level turn a sub-prompt belongs to.
func (ts *turnState) root() *turnState {
	for ts.parent != nil {
		ts = ts.parent
	}
	return ts
}

// scope is the scope of the turn's batches, made for its first.
func (ts *turnState) scope() *scope {
	sc := &ts.sc
	if ts.scOK {
		return sc
	}
	*sc = scope{
		exec:     ts.exec,
		defaults: [2]map[string]string{ts.agent.Env, ts.prompt.Env},
		stamp:    rowStamp{Prompt: ts.prompt.Name, Side: ts.sideKey, ParentID: ts.parentID, Depth: ts.depth},
		nest:     ts.nest,
		watch:    ts,
		// A sub-prompt's Stop ends only the sub-prompt, which stores no
		// record of it.
		recordsStop: ts.parent == nil,
	}
	if n, ok := ts.model.Provider.(NullableOptionals); ok {
		sc.nullOptionals = n.NullableOptionals(ts.model.ID)
	}
	ts.scOK = true
	return sc
}

// envSet carries a thread env value a tool of the turn stored down to the
// thread's live sub-agents.
func (ts *turnState) envSet(ctx context.Context, name string, v EnvValue) error {
	return ts.rt.propagateEnv(ctx, ts.th.ID, name, v, 0)
}

type turnResult struct {
	stop    string
	text    string
	handoff *handoff
	ended   bool
	failed  bool
}

// budgetKey carries, into the sessions of subagents, the count of model
// requests of the execution that started them: everything one Send starts,
// its subagents and the parent turns their completions start included,
// shares the execution's ceiling.
type budgetKey struct{}

func withBudget(ctx context.Context, total *atomic.Int64) context.Context {
	return context.WithValue(ctx, budgetKey{}, total)
}

// budgetOf returns the request count a session shares, or nil for a
// session that starts an execution.
func budgetOf(ctx context.Context) *atomic.Int64 {
	total, _ := ctx.Value(budgetKey{}).(*atomic.Int64)
	return total
}

// runSession runs side turns starting with side until a human side is
// next, the session ends or a guard stops it. The thread's turn lock is held.
// resume, when not nil, is a stored response whose calls the first turn
// runs (resuming those with stored results) before its first request.
func (rt *Runtime) runSession(ctx context.Context, th *Thread, side string, startSeq int64, resume *Message) (*Reply, error) {
	reply := &Reply{ThreadID: th.ID}
	total := budgetOf(ctx)
	if total == nil {
		total = new(atomic.Int64)
	}
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
		res, err := rt.runTurn(ctx, th, agent, s, side, total, resume)
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

// runTurn runs one side's turn: model requests and tool batches until the
// side stops.
func (rt *Runtime) runTurn(ctx context.Context, th *Thread, agent *Agent, side *Side, sideKey string, total *atomic.Int64, resume *Message) (turnResult, error) {
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
	turnStart, err := rt.lastSeq(ctx, th.ID)
	if err != nil {
		return turnResult{}, err
	}
	exec := &Execution{Side: sideKey}
	ts := &turnState{rt: rt, th: th, agent: agent, side: side, sideKey: sideKey, prompt: prompt, model: model, exec: exec,
		total: total, ceiling: ceiling, turnStart: turnStart, nest: nestingOf(ctx)}
	defer ts.rows.release()
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
		if !fresh {
			if err := rt.resumeHandoff(ctx, ts, b, resume, outcomes); err != nil {
				return turnResult{}, true, err
			}
		}
		exec.StepCount = steps
		if res, done := rt.afterBatch(ctx, ts, outcomes, exec, lastText); done {
			if res.stop == StopStopped && !exec.stopStored.Load() {
				// Stopped after the last result was stored (by a goroutine
				// of a tool, say): the record goes on its own.
				return res, true, rt.recordStop(ctx, ts)
			}
			return res, true, nil
		}
		if stop, err := rt.breaker(ctx, ts, outcomes); err != nil || stop {
			return turnResult{stop: StopRepeatedToolError, text: lastText}, true, err
		}
		return turnResult{}, false, nil
	}
	if resume != nil && len(resume.ToolCalls) > 0 {
		b, _, err := rt.prepare(ctx, ts)
		if err != nil {
			return turnResult{}, err
		}
		if res, done, err := runCalls(b, resume.ToolCalls, false); done {
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
		// The offered tools are worked out for every request: the lifecycle
		// tools depend on the child registry, which the last batch may have changed.
		b, tools, err := rt.prepare(ctx, ts)
		if err != nil {
			return turnResult{}, err
		}
		if steps > 0 && b.thread.terminatedAt != nil {
			// Terminated while the turn ran (the batch read the record fresh).
			th.TerminatedAt = *b.thread.terminatedAt
			return turnResult{stop: StopStopped, text: lastText}, nil
		}
		req, err := rt.buildRequest(ctx, ts, tools)
		if err != nil {
			return turnResult{}, err
		}
		total.Add(1)
		text, calls, err := rt.stream(ctx, ts, b, tools, req)
		if err != nil {
			return turnResult{}, err
		}
		empty := strings.TrimSpace(text) == "" && len(calls) == 0
		if empty {
			calls = []ToolCall{{ID: newRecordID("call"), Name: "invalid_assistant_response", Arguments: "{}"}}
		}
		// Stores keep nothing of what they append: the turn's message is reused.
		am := &ts.rows.scratchOf().am
		*am = Message{Role: RoleAssistant, Content: text, ToolCalls: calls, Prompt: prompt.Name, Side: sideKey}
		if err := rt.store.AppendMessages(ctx, th.ID, am); err != nil {
			return turnResult{}, &StoreError{Op: "append assistant message", Err: err}
		}
		steps++
		if strings.TrimSpace(text) != "" {
			lastText = text
		}
		if n := ts.resp.nameless; n > 0 {
			rt.log.WarnContext(ctx, "toolrun: the model's response held tool calls without a name; they were left out", "thread", th.ID, "calls", n)
		}
		if empty {
			why := "The response was empty: reply with text or call a tool."
			if ts.resp.nameless > 0 {
				why = "The response's tool call had no tool name, so it could not run: call a tool by one of the names offered, or reply with text."
			}
			em := &Message{Role: RoleTool, ToolCallID: calls[0].ID, Name: calls[0].Name, ToolStatus: StatusError, Prompt: prompt.Name,
				Content: errorContent(why),
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

// stoppedText is the error text of a call that a user stop (the end of
// the run's ctx) kept from finishing.
const stoppedText = "Execution stopped by user"

// stopped records a user stop: an error result "Execution
// stopped by user" for every call of the response still lacking one, and a
// system message with the same text.
func (rt *Runtime) stopped(ctx context.Context, ts *turnState, b *batch, calls []ToolCall) {
	ctx = context.WithoutCancel(ctx)
	var msgs []*Message
	for _, c := range calls {
		if _, err := rt.store.ToolResult(ctx, ts.th.ID, c.ID); err == nil {
			continue
		}
		msgs = append(msgs, &Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, ToolStatus: StatusError, Prompt: ts.prompt.Name,
			Depth: ts.depth, ParentID: ts.parentID, Content: errorContent(stoppedText), Side: ts.sideKey})
	}
	if ts.depth == 0 {
		msgs = append(msgs, &Message{Role: RoleSystem, Content: stoppedText, Side: ts.sideKey})
	}
	if err := rt.store.AppendMessages(ctx, ts.th.ID, msgs...); err != nil {
		rt.log.ErrorContext(ctx, "toolrun: recording a user stop", "thread", ts.th.ID, "error", err)
	}
}

// stopText is the content of the message that records a turn a tool ended
// with Execution.Stop.
const stopText = "Execution stopped by a tool: the calls still queued were not run."

// recordStop stores the end of a turn a tool ended with Execution.Stop, so
// that Resume knows the turn is over and does not run the calls Stop
// dropped. The record is a silent system message with ErrorCode
// StopStopped, for Resume and for people reading the thread; no model is
// sent it (a dropped call reaches the model as a call without a result).
func (rt *Runtime) recordStop(ctx context.Context, ts *turnState) error {
	if err := rt.store.AppendMessages(context.WithoutCancel(ctx), ts.th.ID, stopRecord(ts.scope().stamp)); err != nil {
		return &StoreError{Op: "append stop record", Err: err}
	}
	return nil
}

// stopRecord returns the message recordStop stores, labelled as the
// turn's batches label theirs.
func stopRecord(st rowStamp) *Message {
	return &Message{Role: RoleSystem, Content: stopText, ErrorCode: StopStopped, Silent: true,
		Prompt: st.Prompt, Side: st.Side, ParentID: st.ParentID, Depth: st.Depth}
}

// isStopRecord reports the message recordStop stores.
func isStopRecord(m *Message) bool { return m.Role == RoleSystem && m.ErrorCode == StopStopped }

// bound wraps the handler of one of the side's session tools so that the
// bindings apply to its results; other handlers come back as they are.
func (ts *turnState) bound(h *handler) *handler {
	if ts.parent != nil || h.kind != kindFunction {
		return h
	}
	var binds []*SessionBinding
	for _, b := range []*SessionBinding{ts.side.SessionStop, ts.side.SessionFail, ts.side.SessionStatus} {
		if b != nil && b.Name == h.name {
			binds = append(binds, b)
		}
	}
	if len(binds) == 0 {
		return h
	}
	w := *h
	w.run = func(ctx context.Context, c call) (Result, error) {
		res, err := h.run(ctx, c)
		if err != nil || res.IsError() {
			return res, err
		}
		return ts.bindResult(ctx, binds, c.args, res)
	}
	return &w
}

// bindResult applies session bindings to a successful result: a
// MessageProperty replaces the result text, and the AttachmentsProperty
// paths of SessionStop and SessionFail must exist in the thread.
func (ts *turnState) bindResult(ctx context.Context, binds []*SessionBinding, args string, res Result) (Result, error) {
	var top map[string]json.RawMessage
	countParse("session binding")
	_ = json.Unmarshal([]byte(args), &top)
	for _, bind := range binds {
		if bind.MessageProperty != "" {
			if v := rawText(top[bind.MessageProperty]); v != "" {
				res.Result = v
			}
		}
		if bind.AttachmentsProperty == "" || bind == ts.side.SessionStatus {
			continue
		}
		var v any
		_ = json.Unmarshal(top[bind.AttachmentsProperty], &v)
		var missing []string
		for _, r := range ts.rt.refsForPaths(ctx, ts.th.ID, attachmentPaths(v)) {
			if _, err := ts.rt.store.StatFile(ctx, ts.th.ID, r.Path); err != nil {
				missing = append(missing, r.Path)
				continue
			}
			r.ID, r.Type = newRecordID("att"), "file"
			res.Refs = append(res.Refs, r)
		}
		if len(missing) > 0 {
			return Result{Status: StatusError, Error: "Provided attachment path(s) not found in this thread: " + strings.Join(missing, ", ")}, nil
		}
	}
	return res, nil
}

// afterBatch applies the stop rules that follow a batch of tool calls.
func (rt *Runtime) afterBatch(ctx context.Context, ts *turnState, outcomes []Outcome, exec *Execution, lastText string) (turnResult, bool) {
	side := ts.side
	for _, o := range outcomes {
		name := o.Call.Name
		ok := o.Result.Status == StatusSuccess
		if side.SessionStatus != nil && name == side.SessionStatus.Name && ts.th.ParentID != "" {
			// A status report goes to the parent's child registry.
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
	return rawText(m[key])
}

// rawText is a JSON value as text: a string trimmed, anything else as its
// JSON ("" when absent).
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 {
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
// top-level tool results are all errors with one normalised signature. The
// newest of them is the last result a top-level batch stored, so such a
// batch whose last result succeeded reads nothing.
func (rt *Runtime) breaker(ctx context.Context, ts *turnState, outcomes []Outcome) (bool, error) {
	const window = 8
	if n := len(outcomes); n > 0 && ts.depth == 0 && !outcomes[n-1].Resumed && outcomes[n-1].Message.ToolStatus != StatusError {
		return false, nil
	}
	p, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{Limit: 4 * window, Order: OrderDesc})
	if err != nil {
		return false, &StoreError{Op: "list messages", Err: err}
	}
	var sig string
	n := 0
	for i := range p.Messages {
		m := &p.Messages[i]
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

// prepare starts a model request of the turn: the batch its calls will run
// in, and the tools it offers, which the batch's calls resolve to.
func (rt *Runtime) prepare(ctx context.Context, ts *turnState) (*batch, *toolset, error) {
	b, err := rt.ex.newBatch(ctx, ts.th.ID, ts.scope(), nil, false, nil)
	if err != nil {
		return nil, nil, err
	}
	tools, err := rt.offer(ctx, ts, b)
	if err != nil {
		return nil, nil, err
	}
	b.tools = tools
	b.slot = &ts.rows.scratchOf().result
	return b, tools, nil
}
