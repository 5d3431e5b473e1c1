package toolrun_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// nestedHandoffWorld is a world whose triage prompt can hand off to the
// billing_specialist agent, call the extra tools, and call the helper
// prompt as a tool, whose model can hand off to billing_specialist too or
// call queue_billing, which queues that handoff (a handoff's note becomes
// billing's first message). Its store's write op fails at its failAt-th
// time (and after it too, when sticky). The runtime logs to w.log.
func nestedHandoffWorld(t *testing.T, mem toolrun.Store, op string, failAt int, sticky bool, tools ...*toolrun.Func[noArgs]) *world {
	billing := &toolrun.Prompt{Name: "billing_expert", Model: "m", Text: "You handle billing for {{customer}}.", IncludeChat: true, IncludePastTools: true}
	helper := &toolrun.Prompt{Name: "helper", Model: "m", Text: "You route billing questions.", ToolDescription: "Route a question",
		Tools: []toolrun.PromptTool{&toolrun.SubpromptConfig{Name: "billing_specialist", InitUserMessageProperty: "note"}, toolrun.Use("queue_billing")}}
	queue := fn("queue_billing", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("queued"), s.QueueTool("billing_specialist", map[string]any{"customer": "ACME", "note": "refund order 7"})
	})
	main := triagePrompt()
	main.Tools = append(main.Tools, toolrun.Use("helper"), &toolrun.SubpromptConfig{Name: "billing_specialist", InitUserMessageProperty: "note"})
	defs := []toolrun.Definition{billing, helper, queue,
		&toolrun.Agent{Name: "billing_specialist", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "billing_expert"}, SideB: toolrun.Side{Human: true}}}
	for _, f := range tools {
		main.Tools = append(main.Tools, toolrun.Use(f.Name))
		defs = append(defs, f)
	}
	w := newWorld(t, main, toolrun.Side{}, defs...)
	failing := &storetest.FailingStore{Store: mem, FailAt: failAt, Sticky: sticky, Match: func(o string) bool { return o == op }}
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: failing, Logger: newTextLogger(w.log)})
	return w
}

// depthRoles lists the roles of the thread's stored rows at depth d, silent
// ones included.
func depthRoles(t *testing.T, st toolrun.Store, thread string, d int) string {
	t.Helper()
	all, err := st.ListMessages(context.Background(), thread, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	var at []toolrun.Message
	for _, m := range all.Messages {
		if m.Depth == d {
			at = append(at, m)
		}
	}
	return roles(at)
}

// invokeBilling is a tool that hands off to billing_specialist through
// InvokeTool, with note as the handoff's note, and counts its runs.
func invokeBilling(runs *int, note string) *toolrun.Func[noArgs] {
	return fn("escalate", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		*runs++
		r := s.InvokeTool(ctx, "billing_specialist", map[string]any{"customer": "ACME", "note": note})
		if r.IsError() {
			return r, nil
		}
		return toolrun.Text("escalated: " + r.Result), nil
	})
}

// TestResumeCompletesAHandoffMadeInsideAResumedCall: a handoff made inside
// a call of the response — by a sub-prompt's model, or by a tool through
// InvokeTool — is recorded on the turn and applied after the batch, like
// one the response made. When the thread update that applies it is not
// stored, Resume completes it from the stored rows: the new agent gets the
// thread, its arguments and its first message, and answers. Resume used to
// see only the outer call's stored result and ask the old agent's model
// again, although the sub-prompt (or the tool) had been told "Handoff
// complete".
func TestResumeCompletesAHandoffMadeInsideAResumedCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		// invoke hands off through a tool's InvokeTool; otherwise the
		// helper sub-prompt's model calls the agent's name.
		invoke bool
		// queue has the sub-prompt's model call a tool that queues the
		// handoff.
		queue bool
		// restart makes the thread update fail for good and resumes on a
		// new runtime over the store, as after a crash; otherwise the
		// update fails once and the same runtime resumes.
		restart bool
	}{
		{name: "sub-prompt, the update failed once"},
		{name: "sub-prompt, the process died before the update", restart: true},
		{name: "sub-prompt's queued call, the process died before the update", queue: true, restart: true},
		{name: "InvokeTool, the update failed once", invoke: true},
		{name: "InvokeTool, the process died before the update", invoke: true, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := toolrun.NewMemoryStore()
			runs := 0
			w := nestedHandoffWorld(t, mem, storetest.OpUpdateThread, 1, tc.restart, invokeBilling(&runs, "refund order 7"))
			outer, nested, requests := "helper", "assistant+calls tool:billing_specialist", 3
			if tc.invoke {
				// The invoked handoff leaves a silent record under the tool's result.
				outer, nested, requests = "escalate", "system+calls", 2
				w.p.Add(scripted.Calls(scripted.Call("escalate", nil)))
			} else if tc.queue {
				nested = "assistant+calls tool:queue_billing tool:billing_specialist"
				w.p.Add(scripted.Calls(scripted.Call("helper", nil)), scripted.Calls(scripted.Call("queue_billing", nil)))
			} else {
				w.p.Add(scripted.Calls(scripted.Call("helper", nil)),
					scripted.Calls(scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "refund order 7"})))
			}
			w.p.Add(scripted.Text("Billing here."), scripted.Text("the old model must not be asked again"))
			id, agent := failedSend(t, w, mem)
			require.Equal(t, "agent", agent, "the switch was not stored")
			require.Len(t, w.p.Requests(), requests-1)

			rt := w.rt
			if tc.restart {
				rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: mem})
			}
			reply, err := rt.Resume(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, toolrun.StopResponse, reply.StopReason)
			assert.Equal(t, "Billing here.", reply.Text)
			assert.Equal(t, "user assistant", roles(reply.Messages), "billing's first message, then its answer")
			th, err := mem.GetThread(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, "billing_specialist", th.AgentID)
			assert.Equal(t, map[string]any{"customer": "ACME", "note": "refund order 7"}, th.Arguments)
			assert.Equal(t, 1, th.SessionTurns, "billing's turn is the first of the new session")

			reqs := w.p.Requests()
			require.Len(t, reqs, requests, "the triage model is not asked again")
			assert.Equal(t, "You handle billing for ACME.", reqs[requests-1].System, "the new agent answers")
			if tc.invoke {
				assert.Equal(t, 1, runs, "the tool whose result is stored does not run again")
			}
			all, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{})
			require.NoError(t, err)
			require.Equal(t, "user assistant+calls tool:"+outer+" user assistant", roles(all.Messages))
			assert.Equal(t, "refund order 7", all.Messages[3].Content)
			assert.Equal(t, "billing_expert", all.Messages[4].Prompt)
			assert.Equal(t, nested, depthRoles(t, mem, id, 1))
			if tc.invoke {
				deep, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
				require.NoError(t, err)
				rec := deep.Messages[2] // stored when the handoff was made, before the result
				assert.True(t, rec.Silent, "no model is sent the record")
				assert.Equal(t, "handoff", rec.ErrorCode)
				assert.Equal(t, all.Messages[2].ID, rec.ParentID, "it hangs from the invoking call's result")
				require.Len(t, rec.ToolCalls, 1)
				assert.Equal(t, "billing_specialist", rec.ToolCalls[0].Name)
				assert.JSONEq(t, `{"customer":"ACME","note":"refund order 7"}`, rec.ToolCalls[0].Arguments)
				assert.False(t, rec.ToolCalls[0].Redacted)
			}
			assert.NotContains(t, w.log.String(), "not completed")
		})
	}
}

// TestResumeOfANestedHandoffAlreadyAppliedChangesNothing: when the thread
// update was stored and only the first message was not, Resume applies the
// sub-prompt's handoff again, which gives the thread the agent and
// arguments it has, stores the first message once, and lets the new agent
// answer; a second Resume finds the thread waiting for the human.
func TestResumeOfANestedHandoffAlreadyAppliedChangesNothing(t *testing.T) {
	mem := toolrun.NewMemoryStore()
	// Appends: user message, response, sub-prompt response, handoff
	// result, helper's result, first message.
	w := nestedHandoffWorld(t, mem, storetest.OpAppendMessages, 6, false)
	w.p.Add(scripted.Calls(scripted.Call("helper", nil)),
		scripted.Calls(scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "refund order 7"})),
		scripted.Text("Billing here."))
	id, agent := failedSend(t, w, mem)
	require.Equal(t, "billing_specialist", agent, "the switch was stored")
	before, err := mem.GetThread(context.Background(), id)
	require.NoError(t, err)

	reply, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "Billing here.", reply.Text)
	assert.Equal(t, "user assistant", roles(reply.Messages), "the first message, then billing's answer")
	after, err := mem.GetThread(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, before.AgentID, after.AgentID)
	assert.Equal(t, before.Arguments, after.Arguments)
	assert.Equal(t, map[string]any{"customer": "ACME", "note": "refund order 7"}, after.Arguments)
	assert.Equal(t, 1, after.SessionTurns, "billing's turn is the first of the new session")
	reqs := w.p.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "You handle billing for ACME.", reqs[2].System)
	all, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Equal(t, "user assistant+calls tool:helper user assistant", roles(all.Messages))
	assert.Equal(t, 1, userMessages(t, mem, id, "refund order 7"), "the first message is stored once")

	again, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopHuman, again.StopReason)
	assert.Empty(t, again.Messages)
	assert.Len(t, w.p.Requests(), 3)
}

// TestResumeAppliesTheLastHandoffOfTheBatch: the response hands off, then
// its next call's sub-prompt hands off again with another note. As when
// the calls ran, the later handoff wins on Resume.
func TestResumeAppliesTheLastHandoffOfTheBatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []scripted.ToolCall
		note  string
	}{
		{name: "the nested handoff is the later", calls: []scripted.ToolCall{
			scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "first"}), scripted.Call("helper", nil)}, note: "second"},
		{name: "the response's handoff is the later", calls: []scripted.ToolCall{
			scripted.Call("helper", nil), scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "first"})}, note: "first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := toolrun.NewMemoryStore()
			w := nestedHandoffWorld(t, mem, storetest.OpUpdateThread, 1, true)
			w.p.Add(scripted.Calls(tc.calls...),
				scripted.Calls(scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "second"})),
				scripted.Text("Billing here."))
			id := w.thread(t)
			_, err := w.rt.Send(context.Background(), id, "refund please")
			require.ErrorIs(t, err, storetest.ErrInjected)

			rt := toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: mem})
			reply, err := rt.Resume(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, "Billing here.", reply.Text)
			th, err := mem.GetThread(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, "billing_specialist", th.AgentID)
			assert.Equal(t, map[string]any{"customer": "ACME", "note": tc.note}, th.Arguments)
			require.Equal(t, "user assistant", roles(reply.Messages))
			assert.Equal(t, tc.note, reply.Messages[0].Content)
			assert.Len(t, w.p.Requests(), 3)
		})
	}
}

// TestResumeDoesNotCompleteAnInvokedHandoffWhoseArgumentsHeldASecret: the
// arguments of a handoff made through InvokeTool are stored redacted, so
// one that held a secret cannot be made again; Resume says so in a
// warning and goes on with the old agent, as for a queued handoff.
func TestResumeDoesNotCompleteAnInvokedHandoffWhoseArgumentsHeldASecret(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	mem := toolrun.NewMemoryStore()
	runs := 0
	w := nestedHandoffWorld(t, mem, storetest.OpUpdateThread, 1, false, invokeBilling(&runs, "token "+secret))
	w.p.Add(scripted.Calls(scripted.Call("escalate", nil)), scripted.Text("Triage again."))
	th, err := w.rt.NewThread(context.Background(), "agent", &toolrun.ThreadOptions{Env: map[string]toolrun.EnvValue{"API_TOKEN": {Value: secret}}})
	require.NoError(t, err)
	_, err = w.rt.Send(context.Background(), th.ID, "refund please")
	require.ErrorIs(t, err, storetest.ErrInjected)

	reply, err := w.rt.Resume(context.Background(), th.ID)
	require.NoError(t, err)
	assert.Equal(t, "Triage again.", reply.Text)
	assert.Contains(t, w.log.String(), "a resumed handoff is not completed: its arguments held a secret, which is not stored")
	got, err := mem.GetThread(context.Background(), th.ID)
	require.NoError(t, err)
	assert.Equal(t, "agent", got.AgentID)
	assert.Empty(t, got.Arguments)
	assert.Equal(t, 1, runs)
	all, err := mem.ListMessages(context.Background(), th.ID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	require.Equal(t, "user assistant+calls system+calls tool:escalate assistant", roles(all.Messages), "the record, then the tool's result")
	assert.True(t, all.Messages[2].ToolCalls[0].Redacted)
	for _, m := range all.Messages {
		assert.NotContains(t, m.Content, secret)
		for _, c := range m.ToolCalls {
			assert.NotContains(t, c.Arguments, secret)
		}
	}
	assert.False(t, bytes.Contains(w.log.Bytes(), []byte(secret)))
}
