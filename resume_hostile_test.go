package toolrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// injectThenLose runs a turn whose response calls "inject" (a tool that
// injects a message of role) and "second", with the store failing on the
// fourth append: the user message, the response and the injected message
// are stored, inject's result is not. The injected message, which has no
// side, is the thread's last row. It returns the runtime, the thread, the
// provider and the runs of each tool.
func injectThenLose(t *testing.T, role toolrun.Role) (*toolrun.Runtime, string, *scripted.Provider, map[string]int) {
	t.Helper()
	mem := toolrun.NewMemoryStore()
	failing := &storetest.FailingStore{Store: mem, FailAt: 4,
		Match: func(op string) bool { return op == storetest.OpAppendMessages }}
	ran := map[string]int{}
	inject := fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		ran["inject"]++
		if err := s.InjectMessage(ctx, toolrun.Message{Role: role, Content: "injected by a tool"}); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("injected"), nil
	})
	prov := scripted.New(scripted.Calls(scripted.Call("inject", nil), scripted.Call("second", nil)), scripted.Text("all done"))
	rt, id := hostileRT(t, prov, failing, inject, countedTool("second", ran))
	_, err := rt.Send(context.Background(), id, "go")
	require.ErrorIs(t, err, storetest.ErrInjected)
	require.Equal(t, 1, ran["inject"])
	require.Equal(t, 0, ran["second"], "the batch stopped before second")
	msgs, err := mem.ListMessages(context.Background(), id, toolrun.MessageQuery{Order: toolrun.OrderDesc, Limit: 1, IncludeSilent: true})
	require.NoError(t, err)
	require.Len(t, msgs.Messages, 1)
	require.Equal(t, "injected by a tool", msgs.Messages[0].Content, "the injected message is the last row")
	require.Empty(t, msgs.Messages[0].Side)
	return rt, id, prov, ran
}

// A user message a tool injected is not the human speaking: when it is the
// last row because the call's result was lost, Resume runs the interrupted
// response's calls without a result instead of starting a fresh turn.
func TestResumeAfterAnInjectedUserMessageRunsTheInterruptedCalls(t *testing.T) {
	rt, id, prov, ran := injectThenLose(t, toolrun.RoleUser)
	reply, err := rt.Resume(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, ran["second"], "the call without a result ran once")
	require.Equal(t, 2, ran["inject"], "inject's result was lost, so it ran again")
	require.Equal(t, "all done", reply.Text)
	require.Equal(t, toolrun.StopResponse, reply.StopReason)
	reqs := prov.Requests()
	require.Len(t, reqs, 2, "the model was asked once more, after the calls")
	results := toolResults(reqs[1].Messages, "second")
	require.Len(t, results, 1)
	require.Equal(t, "second ok", results[0].Content, "the model saw second's result, not a failure")
}

// An assistant message a tool injected is not the end of the side's turn:
// Resume runs the interrupted calls instead of answering StopHuman.
func TestResumeAfterAnInjectedAssistantMessageRunsTheInterruptedCalls(t *testing.T) {
	rt, id, prov, ran := injectThenLose(t, toolrun.RoleAssistant)
	reply, err := rt.Resume(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 1, ran["second"], "the call without a result ran once")
	require.Equal(t, "all done", reply.Text)
	require.Equal(t, toolrun.StopResponse, reply.StopReason)
	require.Len(t, prov.Requests(), 2, "the model was asked once more, after the calls")
}

// Rows without a side that follow a turn that ended (a tool's goroutine
// injecting after its call returned, say) do not reopen the turn: after a
// side's text the human is next, as before they were added.
func TestResumeAfterAnInjectedMessageFollowingAnEndedTurnWaitsForTheHuman(t *testing.T) {
	mem := toolrun.NewMemoryStore()
	prov := scripted.New(scripted.Text("done"))
	rt, id := hostileRT(t, prov, mem)
	reply, err := rt.Send(context.Background(), id, "go")
	require.NoError(t, err)
	require.Equal(t, toolrun.StopResponse, reply.StopReason)
	require.NoError(t, mem.AppendMessages(context.Background(), id, &toolrun.Message{ID: "late", Role: toolrun.RoleAssistant, Content: "late", CreatedAt: time.Now()}))
	reply, err = rt.Resume(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, toolrun.StopHuman, reply.StopReason)
	require.Empty(t, reply.Messages)
	require.Len(t, prov.Requests(), 1, "the model was not asked again")
}
