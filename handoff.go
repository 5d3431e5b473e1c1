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
	if p, ok := rt.reg.Prompt(a.SideA.Prompt); ok && p.compiled != nil {
		spec.Parameters = p.compiled.JSON()
		args = p.args
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
// handoff: every other call of an agent's name gets an error result.
func (rt *Runtime) resumeHandoff(ctx context.Context, ts *turnState, b *batch, resp *Message, outcomes []Outcome) {
	ts.mu.Lock()
	recorded := ts.handoff != nil
	ts.mu.Unlock()
	if recorded {
		return
	}
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
		args, model := o.Call.Arguments, i < len(resp.ToolCalls)
		if model {
			args = resp.ToolCalls[i].Arguments
		} else if o.Call.Redacted {
			rt.log.WarnContext(ctx, "toolrun: a resumed handoff is not completed: its queued arguments held a secret, which is not stored",
				"thread", ts.th.ID, "agent", e.name, "call", o.Call.ID)
			return
		}
		h := rt.handoffHandler(ts, e.name, e.def.(*Agent), rt.handoffConfig(resp.Prompt, e))
		if model && b.sc.nullOptionals {
			args, _ = h.args.Schema().StripOptionalNulls(args)
		}
		if res, _ := h.run(ctx, call{e: rt.ex, b: b, id: o.Call.ID, args: args}); res.IsError() {
			rt.log.WarnContext(ctx, "toolrun: a resumed handoff is not completed: its arguments no longer pass the agent's schema",
				"thread", ts.th.ID, "agent", e.name, "call", o.Call.ID, "error", res.Error)
		}
		return
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
