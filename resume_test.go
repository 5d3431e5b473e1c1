package toolrun_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/sqlite"
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

// failedSend makes a thread of w and sends it "refund please", which must
// fail with the store's injected error; it returns the thread's id and the
// agent mem says the thread has after it.
func failedSend(t *testing.T, w *world, mem toolrun.Store) (id, agent string) {
	t.Helper()
	id = w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "refund please")
	require.ErrorIs(t, err, storetest.ErrInjected)
	th, err := mem.GetThread(context.Background(), id)
	require.NoError(t, err)
	return id, th.AgentID
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
			id, agent := failedSend(t, w, mem)
			require.Equal(t, tc.agent, agent)

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

// stopWorld is a world whose triage prompt can call stopper (which queues
// later, then calls Execution.Stop), probe and later, the last two counting
// their runs in runs, over st.
func stopWorld(t *testing.T, st toolrun.Store, runs map[string]int) *world {
	stopper := fn("stopper", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		if err := s.QueueTool("later", nil); err != nil {
			return toolrun.Result{}, err
		}
		s.Execution().Stop()
		return toolrun.Text("stopping"), nil
	})
	p := triagePrompt()
	p.Tools = append(p.Tools, toolrun.Use("stopper"), toolrun.Use("probe"), toolrun.Use("later"))
	w := newWorld(t, p, toolrun.Side{}, stopper, countedTool("probe", runs), countedTool("later", runs))
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: st})
	return w
}

// TestAStopIsStoredWithTheResultOfTheCallThatMadeIt: the record of an
// Execution.Stop is stored in the same append as the result of the call
// that stopped, so that a process that dies after that append leaves a
// turn Resume knows is over. The record used to be a write of its own after
// the batch: a crash before it left the result alone, and Resume ran the
// dropped and queued calls and asked the model again.
func TestAStopIsStoredWithTheResultOfTheCallThatMadeIt(t *testing.T) {
	mem := toolrun.NewMemoryStore()
	// Appends: the user message, the response, the stopper's result; a
	// fourth, the separate record, fails for good, as in a process that
	// died there.
	fs := &storetest.FailingStore{Store: mem, FailAt: 4, Sticky: true,
		Match: func(op string) bool { return op == storetest.OpAppendMessages }}
	runs := map[string]int{}
	w := stopWorld(t, fs, runs)
	w.p.Add(scripted.Calls(scripted.Call("stopper", nil), scripted.Call("probe", nil)), scripted.Text("must not be asked"))
	id := w.thread(t)
	reply, err := w.rt.Send(context.Background(), id, "go")
	if assert.NoError(t, err, "the turn needs three appends") {
		assert.Equal(t, toolrun.StopStopped, reply.StopReason)
	}
	assert.Equal(t, 3, fs.Writes())

	// A new process over what was stored.
	rt := toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: mem})
	resumed, err := rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopStopped, resumed.StopReason)
	assert.Equal(t, map[string]int{}, runs, "neither the dropped call nor the queued one runs")
	assert.Len(t, w.p.Requests(), 1, "the model is not asked again")
	all, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	assert.Equal(t, "user assistant+calls tool:stopper system", roles(all.Messages))
}

// TestResumeAfterExecutionStopEndsTheTurn: a turn a tool ended with
// Execution.Stop is over, and Resume says so (StopStopped) without running
// the calls Stop dropped or asking the model again. Resume used to run
// them, the queued ones too, and then start a model request. The stop is
// recorded in the store, so a restarted process (on SQLite) sees it too,
// and the model never sees that record: the dropped calls reach it as
// calls without a result, as they always did.
func TestResumeAfterExecutionStopEndsTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		calls []scripted.ToolCall
		// probes is how often probe ran in the stopped turn; stored, the
		// roles of what it stored.
		probes int
		stored string
		sqlite bool
	}{
		{name: "calls after the stop were dropped", calls: []scripted.ToolCall{scripted.Call("stopper", nil), scripted.Call("probe", nil)},
			stored: "user assistant+calls tool:stopper system"},
		{name: "only a queued call was dropped", calls: []scripted.ToolCall{scripted.Call("probe", nil), scripted.Call("stopper", nil)},
			probes: 1, stored: "user assistant+calls tool:probe tool:stopper system"},
		{name: "SQLite, after a restart", calls: []scripted.ToolCall{scripted.Call("stopper", nil), scripted.Call("probe", nil)},
			stored: "user assistant+calls tool:stopper system", sqlite: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st toolrun.Store = toolrun.NewMemoryStore()
			path := filepath.Join(t.TempDir(), "t.db")
			if tc.sqlite {
				db, err := sqlite.Open(path, nil)
				require.NoError(t, err)
				st = db
			}
			runs := map[string]int{}
			w := stopWorld(t, st, runs)
			w.p.Add(scripted.Calls(tc.calls...), scripted.Text("must not be asked"))
			id := w.thread(t)
			reply, err := w.rt.Send(context.Background(), id, "go")
			require.NoError(t, err)
			assert.Equal(t, toolrun.StopStopped, reply.StopReason)
			assert.Equal(t, tc.stored, roles(reply.Messages))
			ran := func() [2]int { return [2]int{runs["probe"], runs["later"]} }
			assert.Equal(t, [2]int{tc.probes, 0}, ran(), "probe's and later's runs")

			rt := w.rt
			if tc.sqlite {
				require.NoError(t, st.(*sqlite.Store).Close())
				db, err := sqlite.Open(path, nil)
				require.NoError(t, err)
				defer db.Close()
				st = db
				rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: st})
			}
			resumed, err := rt.Resume(context.Background(), id)
			require.NoError(t, err)
			assert.Equal(t, toolrun.StopStopped, resumed.StopReason)
			assert.Empty(t, resumed.Messages, "Resume stores nothing")
			assert.Equal(t, [2]int{tc.probes, 0}, ran(), "no dropped call runs, queued or not")
			assert.Len(t, w.p.Requests(), 1, "no model request")
			all, err := st.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
			require.NoError(t, err)
			assert.Equal(t, tc.stored, roles(all.Messages))

			// The next Send starts a turn; its model sees the stopped
			// response's calls, a dropped one without a result, and no
			// record of the stop.
			reply, err = rt.Send(context.Background(), id, "go on")
			require.NoError(t, err)
			assert.Equal(t, "must not be asked", reply.Text)
			req := w.p.LastRequest()
			wantRoles := map[int]string{0: "user assistant+calls tool:stopper tool:probe user", 1: "user assistant+calls tool:probe tool:stopper user"}[tc.probes]
			require.Equal(t, wantRoles, roles(req.Messages))
			if tc.probes == 0 {
				assert.Equal(t, `Tool result missing from conversation history for prior call "probe". Treat this as a failed tool call.`, req.Messages[3].Content)
			}
			assert.Equal(t, [2]int{tc.probes, 0}, ran())
		})
	}
}

// failOnce is a store whose first append of a message that fail matches
// fails, storing nothing of that append.
type failOnce struct {
	toolrun.Store
	fail   func(m *toolrun.Message) bool
	failed bool
}

func (f *failOnce) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	for _, m := range msgs {
		if !f.failed && f.fail(m) {
			f.failed = true
			return storetest.ErrInjected
		}
	}
	return f.Store.AppendMessages(ctx, threadID, msgs...)
}

// TestResumeAfterAStopResumesALaterInterruptedTurn: the record of a stopped
// turn ends that turn only; a later turn that a store failure interrupted
// resumes as any other, running the calls without a result and asking the
// model again.
func TestResumeAfterAStopResumesALaterInterruptedTurn(t *testing.T) {
	runs := map[string]int{}
	st := &failOnce{Store: toolrun.NewMemoryStore(), fail: func(m *toolrun.Message) bool {
		return m.Role == toolrun.RoleTool && m.Name == "later" && m.ToolCallID == "second"
	}}
	w := stopWorld(t, st, runs)
	w.p.Add(scripted.Calls(scripted.Call("stopper", nil), scripted.Call("probe", nil)),
		scripted.Calls(scripted.Call("probe", nil), scripted.ToolCall{ID: "second", Name: "later", Arguments: "{}"}),
		scripted.Text("both done"))
	id := w.thread(t)
	reply, err := w.rt.Send(context.Background(), id, "go")
	require.NoError(t, err)
	require.Equal(t, toolrun.StopStopped, reply.StopReason)
	_, err = w.rt.Send(context.Background(), id, "again")
	require.ErrorIs(t, err, storetest.ErrInjected)
	assert.Equal(t, map[string]int{"probe": 1, "later": 1}, runs)

	reply, err = w.rt.Resume(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopResponse, reply.StopReason)
	assert.Equal(t, "both done", reply.Text)
	assert.Equal(t, map[string]int{"probe": 1, "later": 2}, runs, "probe's result was stored; later's was lost, so it runs again")
	assert.Equal(t, "tool:later assistant", roles(reply.Messages))
	assert.Len(t, w.p.Requests(), 3)
}
