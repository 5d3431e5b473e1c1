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
