package toolrun_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// filteredBatch runs a turn whose model calls tools a and b at once, then
// answers, with filter as the prompt's history filter, and returns the
// messages of the request made after the calls ran.
func filteredBatch(t *testing.T, filter func(context.Context, string, []toolrun.Message) ([]toolrun.Message, error)) []toolrun.Message {
	t.Helper()
	prov := scripted.New(scripted.Calls(scripted.Call("a", nil), scripted.Call("b", nil)), scripted.Text("done"))
	ran := map[string]int{}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: prov},
		countedTool("a", ran), countedTool("b", ran),
		&toolrun.Prompt{Name: "p", Model: "m", IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("a"), toolrun.Use("b")}, History: toolrun.Window{Filter: filter}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	require.Equal(t, map[string]int{"a": 1, "b": 1}, ran)
	reqs := prov.Requests()
	require.Len(t, reqs, 2)
	return reqs[1].Messages
}

// requirePaired fails t unless every assistant message of msgs with calls
// is followed at once by one result of each call, and no other message is
// a tool result.
func requirePaired(t *testing.T, msgs []toolrun.Message) {
	t.Helper()
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		require.NotEqual(t, toolrun.RoleTool, m.Role, "message %d, a result of call %q, does not follow its call (messages %q)", i, m.ToolCallID, roles(msgs))
		for _, c := range m.ToolCalls {
			i++
			require.Less(t, i, len(msgs), "call %q has no result (messages %q)", c.ID, roles(msgs))
			require.Equal(t, toolrun.RoleTool, msgs[i].Role, "call %q is not followed by its result (messages %q)", c.ID, roles(msgs))
			require.Equal(t, c.ID, msgs[i].ToolCallID, "messages %q", roles(msgs))
		}
	}
}

// The history a request sends never parts a call from its result, whatever
// the Filter returned: providers refuse such a request, and would go on
// refusing every later request of the thread.
func TestHistoryFilterCannotSplitACallFromItsResult(t *testing.T) {
	keepLast := func(n int) func(context.Context, string, []toolrun.Message) ([]toolrun.Message, error) {
		return func(_ context.Context, _ string, h []toolrun.Message) ([]toolrun.Message, error) {
			if len(h) > n {
				h = h[len(h)-n:]
			}
			return h, nil
		}
	}

	t.Run("results whose call was cut are dropped", func(t *testing.T) {
		msgs := filteredBatch(t, keepLast(3))
		requirePaired(t, msgs)
		assert.Equal(t, []string{"assistant", "tool", "tool"}, rolesOf(msgs), "the filter kept the whole group")
		msgs = filteredBatch(t, keepLast(2))
		requirePaired(t, msgs)
		assert.Empty(t, msgs, "both results lost their call to the filter")
		msgs = filteredBatch(t, keepLast(1))
		assert.Empty(t, msgs)
	})

	t.Run("a call whose result was dropped is shown as missing", func(t *testing.T) {
		msgs := filteredBatch(t, func(ctx context.Context, id string, h []toolrun.Message) ([]toolrun.Message, error) {
			return slices.DeleteFunc(h, func(m toolrun.Message) bool { return m.Role == toolrun.RoleTool && m.Name == "b" }), nil
		})
		requirePaired(t, msgs)
		require.Equal(t, []string{"user", "assistant", "tool", "tool"}, rolesOf(msgs))
		assert.Equal(t, "a ok", msgs[2].Content)
		assert.Equal(t, toolrun.StatusError, msgs[3].ToolStatus)
		assert.Equal(t, "b", msgs[3].Name)
		assert.Contains(t, msgs[3].Content, `Tool result missing from conversation history for prior call "b"`)
	})

	t.Run("results the filter moved go back after their call", func(t *testing.T) {
		msgs := filteredBatch(t, func(ctx context.Context, id string, h []toolrun.Message) ([]toolrun.Message, error) {
			if len(h) < 4 {
				return h, nil // the first request: the user's message
			}
			// The results first, reversed, then the rest, then a note.
			out := []toolrun.Message{h[3], h[2], h[0], h[1], h[3], {Role: toolrun.RoleSystem, Content: "note"}}
			return out, nil
		})
		requirePaired(t, msgs)
		require.Equal(t, []string{"user", "assistant", "tool", "tool", "system"}, rolesOf(msgs))
		assert.Equal(t, []string{"go", "", "a ok", "b ok", "note"}, contents(msgs), "each result once, in its call's order")
	})

	t.Run("a paired history goes as the filter returned it", func(t *testing.T) {
		msgs := filteredBatch(t, func(ctx context.Context, id string, h []toolrun.Message) ([]toolrun.Message, error) {
			if len(h) == 4 {
				h[2].Content = "rewritten"
			}
			return h, nil
		})
		requirePaired(t, msgs)
		assert.Equal(t, []string{"go", "", "rewritten", "b ok"}, contents(msgs))
	})
}

// rolesOf lists the roles of msgs.
func rolesOf(msgs []toolrun.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role)
	}
	return out
}
