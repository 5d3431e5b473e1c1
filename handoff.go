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

func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
