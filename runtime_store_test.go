package toolrun_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// TestRuntimeStoreFailureMidTurn: a store that fails mid-turn (a full disk)
// makes Send return a Go error that says so; nothing after the failure
// runs, what was stored stays intact, and the thread can go on once the
// store works again without running a stored call twice.
func TestRuntimeStoreFailureMidTurn(t *testing.T) {
	for failAt := 1; failAt <= 4; failAt++ {
		mem := toolrun.NewMemoryStore()
		fs := &storetest.FailingStore{Store: mem, FailAt: failAt, Err: syscall.ENOSPC,
			Match: func(op string) bool { return op == storetest.OpAppendMessages }}
		p := scripted.New()
		runs := map[int]int{}
		reg := toolrun.NewRegistry(nil)
		require.NoError(t, reg.Register(
			&toolrun.Model{Name: "m", Provider: p},
			&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}},
			&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
			&toolrun.Func[issueArgs]{Name: "get_issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
				runs[a.Number]++
				return toolrun.Textf("issue %d", a.Number), nil
			}},
		))
		rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: fs})
		th, err := rt.NewThread(context.Background(), "agent", nil)
		require.NoError(t, err)
		p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1}), scripted.Call("get_issue", map[string]any{"number": 2})), scripted.Text("done"))
		_, err = rt.Send(context.Background(), th.ID, "go")
		// Appends: 1 user message, 2 assistant message, 3 and 4 the results.
		require.Error(t, err, "failAt %d", failAt)
		assert.True(t, errors.Is(err, syscall.ENOSPC), "the error says what failed: %v", err)
		var se *toolrun.StoreError
		assert.ErrorAs(t, err, &se)
		page, lerr := mem.ListMessages(context.Background(), th.ID, toolrun.MessageQuery{})
		require.NoError(t, lerr)
		assert.Len(t, page.Messages, failAt-1, "everything before the failure is stored, nothing after")
		// Tools run only after the assistant message is stored, and a call
		// runs only after the previous call's result is stored.
		want := map[int][2]int{1: {0, 0}, 2: {0, 0}, 3: {1, 0}, 4: {1, 1}}[failAt]
		assert.Equal(t, want, [2]int{runs[1], runs[2]}, "failAt %d", failAt)

		// The store works again: the thread goes on, and the history the
		// model gets pairs every stored call with a result.
		p.Add(scripted.Text("recovered"))
		reply, err := rt.Send(context.Background(), th.ID, "again")
		require.NoError(t, err, "failAt %d", failAt)
		assert.Equal(t, toolrun.StopResponse, reply.StopReason)
		for i, m := range p.LastRequest().Messages {
			if m.Role == toolrun.RoleAssistant && len(m.ToolCalls) > 0 {
				next := p.LastRequest().Messages[i+1:]
				for j := range m.ToolCalls {
					assert.Equal(t, toolrun.RoleTool, next[j].Role)
				}
			}
		}
	}
}
