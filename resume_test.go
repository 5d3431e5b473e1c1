package toolrun_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// userMessages counts the stored messages from the human side with text.
func userMessages(t *testing.T, st toolrun.Store, thread, text string) int {
	t.Helper()
	p, err := st.ListMessages(context.Background(), thread, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	n := 0
	for _, m := range p.Messages {
		if m.Role == toolrun.RoleUser && m.Content == text {
			n++
		}
	}
	return n
}

func TestResumeAfterAFailedModelRequestDoesNotStoreTheUserMessageTwice(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Fail("overloaded", &scripted.ErrorOptions{Status: 503}), scripted.Text("Issue 7 is a bug."))
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "triage #7")
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)

	reply, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "Issue 7 is a bug.", reply.Text)
	assert.Equal(t, 1, userMessages(t, w.rt.Store(), id, "triage #7"))
	assert.Equal(t, "assistant", roles(reply.Messages), "only what the resumed turn stored")
	last := w.p.LastRequest()
	assert.Equal(t, "user", roles(last.Messages), "the model sees the message once")
}

func TestResumeAfterAStoreFailureMidBatchRunsOnlyTheCallsWithoutAResult(t *testing.T) {
	mem := toolrun.NewMemoryStore()
	// The fourth append fails: user message, assistant message, first
	// result, then the second result.
	failing := &storetest.FailingStore{Store: mem, FailAt: 4, Match: func(op string) bool { return op == storetest.OpAppendMessages }}
	ran := map[string]int{}
	counting := func(name string) *toolrun.Func[issueArgs] {
		return &toolrun.Func[issueArgs]{Name: name, Execute: func(context.Context, toolrun.ThreadState, issueArgs) (toolrun.Result, error) {
			ran[name]++
			return toolrun.Text(name + " done"), nil
		}}
	}
	p := triagePrompt()
	p.Tools = []toolrun.PromptTool{toolrun.Use("first"), toolrun.Use("second")}
	w := newWorld(t, p, toolrun.Side{}, counting("first"), counting("second"))
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: failing})
	w.p.Add(scripted.Calls(scripted.Call("first", map[string]any{"number": 1}), scripted.Call("second", map[string]any{"number": 2})),
		scripted.Text("both done"))
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "do both")
	var se *toolrun.StoreError
	require.ErrorAs(t, err, &se)
	require.True(t, errors.Is(err, storetest.ErrInjected))
	assert.Equal(t, map[string]int{"first": 1, "second": 1}, ran, "second ran; its result could not be stored")

	reply, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "both done", reply.Text)
	assert.Equal(t, map[string]int{"first": 1, "second": 2}, ran, "first is not run again; second, whose result was lost, runs")
	assert.Equal(t, "tool:second assistant", roles(reply.Messages))
	assert.Equal(t, 1, userMessages(t, mem, id, "do both"))
	last := w.p.LastRequest()
	assert.True(t, strings.HasPrefix(roles(last.Messages), "user assistant+calls tool:first tool:second"), roles(last.Messages))
}

func TestResumeOfAThreadWaitingForTheHumanDoesNothing(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Text("Done."))
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "hi")
	require.NoError(t, err)
	n := len(w.p.Requests())
	reply, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopHuman, reply.StopReason)
	assert.Empty(t, reply.Messages)
	assert.Len(t, w.p.Requests(), n, "no model request")
}

// handoffWorld is a world whose triage prompt can hand off to the
// billing_specialist agent (the handoff's note becomes billing's first
// message) and call the extra tools, over a store whose write op fails at
// its failAt-th time (and after it too, when sticky).
func handoffWorld(t *testing.T, mem toolrun.Store, op string, failAt int, sticky bool, tools ...*toolrun.Func[noArgs]) *world {
	billing := &toolrun.Prompt{Name: "billing_expert", Model: "m", Text: "You handle billing for {{customer}}.", IncludeChat: true, IncludePastTools: true}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "billing_specialist", InitUserMessageProperty: "note"})
	defs := []toolrun.Definition{billing,
		&toolrun.Agent{Name: "billing_specialist", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "billing_expert"}, SideB: toolrun.Side{Human: true}}}
	for _, f := range tools {
		main.Tools = append(main.Tools, toolrun.Use(f.Name))
		defs = append(defs, f)
	}
	w := newWorld(t, main, toolrun.Side{}, defs...)
	failing := &storetest.FailingStore{Store: mem, FailAt: failAt, Sticky: sticky, Match: func(o string) bool { return o == op }}
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: failing})
	return w
}

// TestResumeCompletesAHandoffWhoseThreadUpdateFailed: the handoff's result
// "Handoff complete" is stored with the batch, and the thread switches
// agent after it. When that switch is not stored (the store's thread update
// fails, or the process dies first), Resume completes the handoff: the new
// agent gets the thread, its arguments and its first message, and answers.
// It used to resume the call without its handoff and ask the old agent's
// model again, which had been told that the handoff was complete.
func TestResumeCompletesAHandoffWhoseThreadUpdateFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// The failAt-th write of op fails.
		op     string
		failAt int
		// restart makes the write fail for good and resumes on a new runtime
		// over the store, as after a crash; otherwise the write fails once
		// and the same runtime resumes.
		restart bool
		agent   string // the thread's agent after the failed Send
	}{
		{name: "the update failed once", op: storetest.OpUpdateThread, failAt: 1, agent: "agent"},
		{name: "the process died before the update", op: storetest.OpUpdateThread, failAt: 1, restart: true, agent: "agent"},
		// Appends: user message, response, handoff result, first message.
		{name: "the first message failed after the update", op: storetest.OpAppendMessages, failAt: 4, agent: "billing_specialist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := toolrun.NewMemoryStore()
			w := handoffWorld(t, mem, tc.op, tc.failAt, tc.restart)
			w.p.Add(
				scripted.Calls(scripted.Call("billing_specialist", map[string]any{"customer": "ACME", "note": "refund order 7"})),
				scripted.Text("Billing here."),
			)
			id := w.thread(t)
			_, err := w.rt.Send(context.Background(), id, "refund please")
			require.ErrorIs(t, err, storetest.ErrInjected)
			th, err := mem.GetThread(context.Background(), id)
			require.NoError(t, err)
			require.Equal(t, tc.agent, th.AgentID)

			rt := w.rt
			if tc.restart {
				rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: mem})
			}
			reply, err := rt.Resume(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, toolrun.StopResponse, reply.StopReason)
			assert.Equal(t, "Billing here.", reply.Text)
			assert.Equal(t, "user assistant", roles(reply.Messages), "billing's first message, then its answer")
			th, err = mem.GetThread(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, "billing_specialist", th.AgentID)
			assert.Equal(t, map[string]any{"customer": "ACME", "note": "refund order 7"}, th.Arguments)

			reqs := w.p.Requests()
			require.Len(t, reqs, 2, "the triage model is not asked again")
			assert.Equal(t, "You handle billing for ACME.", reqs[1].System, "the new agent answers")
			all, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
			require.NoError(t, err)
			require.Equal(t, "user assistant+calls tool:billing_specialist user assistant", roles(all.Messages))
			assert.Equal(t, "Handoff complete", all.Messages[2].Content)
			assert.Equal(t, "refund order 7", all.Messages[3].Content)
			assert.Equal(t, "billing_expert", all.Messages[4].Prompt)
		})
	}
}

// TestResumeCompletesAQueuedHandoff: a handoff a tool queued is completed
// on Resume like one the model called, from the arguments stored with its
// result; the tool that queued it does not run again.
func TestResumeCompletesAQueuedHandoff(t *testing.T) {
	escalations := 0
	escalate := fn("escalate", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		escalations++
		return toolrun.Text("escalated"), s.QueueTool("billing_specialist", map[string]any{"customer": "ACME", "note": "refund order 7"})
	})
	mem := toolrun.NewMemoryStore()
	w := handoffWorld(t, mem, storetest.OpUpdateThread, 1, false, escalate)
	w.p.Add(scripted.Calls(scripted.Call("escalate", nil)), scripted.Text("Billing here."))
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "refund please")
	require.ErrorIs(t, err, storetest.ErrInjected)

	reply, err := w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "Billing here.", reply.Text)
	assert.Equal(t, 1, escalations)
	th, err := mem.GetThread(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "billing_specialist", th.AgentID)
	assert.Equal(t, map[string]any{"customer": "ACME", "note": "refund order 7"}, th.Arguments)
	all, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	assert.Equal(t, "user assistant+calls tool:escalate tool:billing_specialist user assistant", roles(all.Messages))
}
