package toolrun_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

type refundArgs struct {
	Amount int `json:"amount"`
}

// refunds counts the refunds a tool really made.
func refundTool(made *[]int) *toolrun.Func[refundArgs] {
	return &toolrun.Func[refundArgs]{Name: "refund", Execute: func(ctx context.Context, s toolrun.ThreadState, a refundArgs) (toolrun.Result, error) {
		*made = append(*made, a.Amount)
		return toolrun.Textf("refunded %d", a.Amount), nil
	}}
}

// Local OpenAI-compatible servers number the calls of every response
// call_0, call_1 …: a new call reusing an id must run, and the model must
// see each result with its own call.
func TestRuntimeRunsNewCallsThatReuseAnIDOfAnEarlierResponse(t *testing.T) {
	var made []int
	w := newWorld(t, triagePrompt(), toolrun.Side{}, refundTool(&made))
	p, _ := w.reg.Prompt("triager")
	p.Tools = append(p.Tools, toolrun.Use("refund"))
	w.p.Add(
		scripted.Calls(scripted.Call("refund", map[string]any{"amount": 5}).WithID("call_0")),
		scripted.Text("Refunded 5."),
		scripted.Calls(scripted.Call("refund", map[string]any{"amount": 10}).WithID("call_0"), scripted.Call("refund", map[string]any{"amount": 20}).WithID("call_0")),
		scripted.Text("Refunded 10 and 20."),
	)
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "refund 5")
	require.NoError(t, err)
	reply, err := w.rt.Send(context.Background(), id, "refund 10 and 20")
	require.NoError(t, err)
	assert.Equal(t, []int{5, 10, 20}, made, "every call runs, none is replayed from an old result")

	var ids []string
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleAssistant && len(m.ToolCalls) > 0 {
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
		}
	}
	require.Len(t, ids, 2)
	assert.NotEqual(t, "call_0", ids[0], "an id the thread has used is replaced before the message is stored")
	assert.NotEqual(t, ids[0], ids[1])
	// The last request pairs each call with its own result.
	last := w.p.LastRequest().Messages
	results := map[string]string{}
	for _, m := range last {
		if m.Role == toolrun.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	assert.Equal(t, "refunded 5", results["call_0"])
	assert.Equal(t, "refunded 10", results[ids[0]])
	assert.Equal(t, "refunded 20", results[ids[1]])
}

func TestExecutorRunsANewCallThatReusesAStoredCallsIDAndResumesTheSameCall(t *testing.T) {
	var made []int
	ex := newExec(t, nil, refundTool(&made))
	args := func(n int) string { b, _ := json.Marshal(refundArgs{Amount: n}); return string(b) }

	out := run(t, ex, "t", call("call_0", "refund", args(5)))
	assert.False(t, out[0].Resumed)
	out = run(t, ex, "t", call("call_0", "refund", args(10)))
	assert.False(t, out[0].Resumed, "a different call with the same id is not a resumed call")
	assert.NotEqual(t, "call_0", out[0].Call.ID, "it runs under a new id")
	assert.Equal(t, out[0].Call.ID, out[0].Message.ToolCallID)
	out = run(t, ex, "t", call("call_0", "refund", args(5)))
	assert.True(t, out[0].Resumed, "the same call again is the stored call resumed")
	assert.Equal(t, "refunded 5", out[0].Message.Content)
	out = run(t, ex, "t", call("call_1", "refund", args(1)), call("call_1", "refund", args(1)))
	assert.False(t, out[1].Resumed, "a second call with the same id in one batch runs")
	assert.Equal(t, []int{5, 10, 1, 1}, made)
}
