package toolrun

import (
	"context"
	"encoding/json"
)

// handoff is a switch of the thread to another agent, asked for by a call
// of that agent as a tool; it happens after the batch.
type handoff struct {
	agent  string
	args   map[string]any
	config *SubpromptConfig
}

// handoffHandler is the handler of an agent offered (or reached) as a tool:
// a call records the handoff on the root turn. Its arguments, validated
// against the agent's side-A prompt's RequiredSchema, become the thread's
// arguments; cfg's init properties give its first message.
func (rt *Runtime) handoffHandler(ts *turnState, name string, a *Agent, cfg *SubpromptConfig) *handler {
	spec := ToolSpec{Name: name, Description: a.ToolDescription}
	if spec.Description == "" {
		spec.Description = "Hand off the conversation to the " + a.Name + " agent."
	}
	args := noSchemaArgs
	if p, ok := rt.reg.Prompt(a.SideA.Prompt); ok && p.compiled() != nil {
		spec.Parameters = p.compiled().JSON()
		args = p.args()
	}
	return &handler{name: name, kind: kindHandoff, spec: spec, args: args,
		run: func(ctx context.Context, c call) (Result, error) {
			var m map[string]any
			if fail := args.Decode(c.args, &m); fail != nil {
				return argumentsResult(fail, "Tool"), nil
			}
			if c.caller != nil {
				// Made through InvokeTool, whose calls store no result: a
				// record under the invoking call's result lets Resume see it.
				if err := rt.store.AppendMessages(ctx, ts.th.ID, handoffRecord(c, name, rt.ex.redactor(c.b))); err != nil {
					return Result{Status: StatusError, Error: "Handoff not made: it could not be recorded"},
						&StoreError{Op: "append handoff record", Err: err}
				}
			}
			root := ts.root()
			root.mu.Lock()
			root.handoff = &handoff{agent: name, args: m, config: cfg}
			root.mu.Unlock()
			return Text("Handoff complete"), nil
		}}
}

// applyHandoff switches the thread to the handoff's agent: its arguments
// become the thread's, the session's turn count starts again, and the init
// user message (with the named attachments) is stored for the new agent.
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
	// The thread is the same, so the attachments are attached, not copied.
	if m := rt.initMessage(ctx, th.ID, h.config, h.args); m != nil {
		m.Side = "b"
		if err := rt.store.AppendMessages(ctx, th.ID, m); err != nil {
			return &StoreError{Op: "append handoff message", Err: err}
		}
	}
	return nil
}

// resumeHandoff records again the handoff of a resumed call. Its result
// ("Handoff complete") was stored with the batch and told the model that
// the thread went to the agent, but the switch after the batch may not
// have been stored (a failed thread update, a crash): the resumed turn
// completes it. Applying a handoff that was already applied changes
// nothing: the thread gets the same agent, arguments and turn count, and
// its first message was not stored, or Resume would not have found the
// response, which that message follows. As when the calls ran, the last
// handoff of the batch wins; one that a call run in this batch recorded
// comes after every resumed call.
//
// A resumed call of an agent's name whose stored result is a success was a
// handoff: every other call of an agent's name gets an error result. So
// was one made inside a resumed call, which nestedHandoff finds. A handoff
// whose stored arguments lost a secret to redaction, or whose arguments
// are not found, is not completed: a warning says so.
func (rt *Runtime) resumeHandoff(ctx context.Context, ts *turnState, b *batch, resp *Message, outcomes []Outcome) error {
	ts.mu.Lock()
	recorded := ts.handoff != nil
	ts.mu.Unlock()
	if recorded {
		return nil
	}
	var last *storedHandoff
	for i := len(outcomes) - 1; i >= 0; i-- {
		o := &outcomes[i]
		if !o.Resumed || o.Message == nil || o.Message.ToolStatus != StatusSuccess {
			continue
		}
		e := rt.reg.lookup(o.Call.Name, "")
		if e == nil || !isAgent(e.def) {
			continue
		}
		// The response's calls come first in the batch, in order: their
		// arguments are the model's, as the handler read them; a queued
		// call's are those stored with its result, redacted.
		last = &storedHandoff{seq: o.Message.Seq, agent: e, id: o.Call.ID, args: o.Call.Arguments, prompt: resp.Prompt,
			redacted: o.Call.Redacted, found: true}
		if i < len(resp.ToolCalls) {
			last.args, last.model, last.redacted = resp.ToolCalls[i].Arguments, true, false
		}
		break
	}
	nested, err := rt.nestedHandoff(ctx, ts, resp, outcomes)
	if err != nil {
		return err
	}
	if nested != nil && (last == nil || nested.seq > last.seq) {
		last = nested
	}
	if last == nil {
		return nil
	}
	why := ""
	switch {
	case !last.found:
		why = "its arguments are not among the stored rows"
	case last.redacted:
		why = "its arguments held a secret, which is not stored"
	}
	if why != "" {
		rt.log.WarnContext(ctx, "toolrun: a resumed handoff is not completed: "+why,
			"thread", ts.th.ID, "agent", last.agent.name, "call", last.id)
		return nil
	}
	h := rt.handoffHandler(ts, last.agent.name, last.agent.def.(*Agent), rt.handoffConfig(last.prompt, last.agent))
	args := last.args
	if last.model && rt.nullOptionals(last.prompt) {
		args, _ = h.args.Schema().StripOptionalNulls(args)
	}
	if res, _ := h.run(ctx, call{e: rt.ex, b: b, id: last.id, args: args}); res.IsError() {
		rt.log.WarnContext(ctx, "toolrun: a resumed handoff is not completed: its arguments no longer pass the agent's schema",
			"thread", ts.th.ID, "agent", last.agent.name, "call", last.id, "error", res.Error)
	}
	return nil
}

// storedHandoff is a handoff of a resumed batch, as its stored rows show it.
type storedHandoff struct {
	seq   int64  // the Seq of the row that shows it was made
	agent *entry // the agent handed off to
	id    string // the handoff call's id
	args  string // the handoff call's arguments
	// prompt is the prompt whose batch made the call, which names the
	// handoff's init properties.
	prompt string
	// model reports arguments a model wrote, as the handler read them;
	// redacted, arguments that lost a secret to redaction; found, that the
	// arguments were found at all.
	model, redacted, found bool
}

// nestedHandoff returns the last handoff made inside a resumed call of the
// batch, nil when there is none: a row that hangs, through any number of
// levels, from the stored result of a resumed call, and that is either a
// success result of a call of an agent's name (a sub-prompt's call, or one
// a sub-prompt's tool queued) or the record of a handoff made through
// InvokeTool. It reads only the rows stored after resp, which are the
// batch's, so its cost does not grow with the thread's history.
func (rt *Runtime) nestedHandoff(ctx context.Context, ts *turnState, resp *Message, outcomes []Outcome) (*storedHandoff, error) {
	resumed := map[string]bool{}
	for i := range outcomes {
		if o := &outcomes[i]; o.Resumed && o.Message != nil {
			resumed[o.Message.ID] = true
		}
	}
	if len(resumed) == 0 {
		return nil, nil
	}
	p, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{After: resp.Seq, MaxDepth: -1, IncludeSilent: true, Order: OrderAsc})
	if err != nil {
		return nil, &StoreError{Op: "list messages", Err: err}
	}
	rows := p.Messages
	byID := make(map[string]*Message, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	// underResumed reports that m hangs from the result of a resumed call.
	// Each step goes one level up, so len(rows) steps reach the top.
	underResumed := func(m *Message) bool {
		for range len(rows) {
			parent, ok := byID[m.ParentID]
			if !ok {
				return false
			}
			if parent.Depth == 0 {
				return resumed[parent.ID]
			}
			m = parent
		}
		return false
	}
	for i := len(rows) - 1; i >= 0; i-- {
		m := &rows[i]
		if m.Depth == 0 {
			continue
		}
		var h *storedHandoff
		switch {
		case isHandoffRecord(m):
			c := m.ToolCalls[0]
			h = &storedHandoff{id: c.ID, args: c.Arguments, prompt: m.Prompt, redacted: c.Redacted, found: true}
			h.agent = rt.reg.lookup(c.Name, "")
		case m.Role == RoleTool && m.ToolStatus == StatusSuccess:
			h = &storedHandoff{id: m.ToolCallID, prompt: m.Prompt}
			h.agent = rt.reg.lookup(m.Name, "")
		default:
			continue
		}
		if h.agent == nil || !isAgent(h.agent.def) || !underResumed(m) {
			continue
		}
		h.seq = m.Seq
		if !h.found {
			h.argsOf(rows, m)
		}
		return h, nil
	}
	return nil, nil
}

// argsOf finds the arguments of the call the nested result row r answers,
// among the rows of r's batch (those with its ParentID and Depth): the
// call in the sub-prompt's response (a model's arguments), or the call a
// result of the batch queued (its arguments redacted).
func (h *storedHandoff) argsOf(rows []Message, r *Message) {
	for i := range rows {
		m := &rows[i]
		if m.ParentID != r.ParentID || m.Depth != r.Depth {
			continue
		}
		calls := m.QueuedCalls
		if m.Role == RoleAssistant {
			calls = m.ToolCalls
		}
		for _, c := range calls {
			if c.ID == r.ToolCallID || derivedID(c.ID) == r.ToolCallID {
				h.args, h.redacted, h.found = c.Arguments, c.Redacted, true
				if m.Role == RoleAssistant {
					h.model, h.prompt = true, m.Prompt
				}
				return
			}
		}
	}
}

// handoffCode is the ErrorCode of the row that records a handoff made
// through InvokeTool.
const handoffCode = "handoff"

// handoffRecord returns the row that records the handoff to the agent name
// that the invoked call c made, whose result is not stored: a silent
// system message one level below the invoking call, hanging from that
// call's result, whose one ToolCall is c with its arguments redacted
// (Redacted set when a secret was replaced). No model is sent it.
func handoffRecord(c call, name string, red redactor) *Message {
	st := c.b.sc.stamp
	return &Message{Role: RoleSystem, Silent: true, ErrorCode: handoffCode, Name: name,
		Content:   "Handoff to " + name + " made through InvokeTool.",
		ToolCalls: []ToolCall{redactCall(ToolCall{ID: c.id, Name: name, Arguments: c.args}, red)},
		Prompt:    st.Prompt, Side: st.Side, ParentID: c.resultID, Depth: st.Depth + 1}
}

// isHandoffRecord reports the message handoffRecord returns.
func isHandoffRecord(m *Message) bool {
	return m.Role == RoleSystem && m.ErrorCode == handoffCode && len(m.ToolCalls) == 1
}

// nullOptionals reports whether the model of the named prompt sends
// optional arguments it leaves out as null.
func (rt *Runtime) nullOptionals(prompt string) bool {
	p, ok := rt.reg.Prompt(prompt)
	if !ok {
		return false
	}
	m, ok := rt.reg.Model(p.Model)
	if !ok {
		return false
	}
	n, ok := m.Provider.(NullableOptionals)
	return ok && n.NullableOptionals(m.ID)
}

// handoffConfig returns the tools entry of prompt for the agent of e, which
// names the init properties of a handoff the prompt's model asked for; nil
// when the prompt has none.
func (rt *Runtime) handoffConfig(prompt string, e *entry) *SubpromptConfig {
	p, ok := rt.reg.Prompt(prompt)
	if !ok {
		return nil
	}
	for _, wrapped := range p.Tools {
		entry, _ := unwrapEntry(wrapped)
		if cfg, ok := entry.(*SubpromptConfig); ok && rt.reg.lookup(entry.promptToolName(), "") == e {
			return cfg
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
