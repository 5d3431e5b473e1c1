package toolrun_test

import (
	"context"
	"iter"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// streamSecret is the secret the tests below stream a part of.
const streamSecret = "sk-live-0123456789abcdefghij"

// startedArguments returns a runtime over reg whose env holds streamSecret
// as API_KEY, and a function returning the Arguments of every
// tool_call_started its hook and a subscriber of thread id got.
func startedArguments(t *testing.T, reg *toolrun.Registry, agent string) (*toolrun.Runtime, string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{
		Env: map[string]toolrun.EnvValue{"API_KEY": {Value: streamSecret, Type: toolrun.VarSecret}},
		Hooks: toolrun.Hooks{ToolCallStarted: func(_ context.Context, _ string, ev toolrun.ToolCallStarted) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, "hook: "+ev.Arguments)
		}},
	})
	th, err := rt.NewThread(context.Background(), agent, nil)
	require.NoError(t, err)
	rt.Subscribe(th.ID, func(ev toolrun.Event) {
		if s, ok := ev.Data.(toolrun.ToolCallStarted); ok {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, "event: "+s.Arguments)
		}
	})
	return rt, th.ID, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// A tool_call_started that fires as the progress argument completes,
// while the rest of the arguments still streams, carries the arguments
// streamed so far. A secret cut by their end is hidden there as a whole
// one is: its first bytes reach neither the hook nor a subscriber.
func TestStreamedStartHidesASecretCutByTheArgumentsSoFar(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	rt, id, got := startedArguments(t, w.reg, "agent")
	w.p.Add(scripted.Fragments("write_file",
		`{"description":"writing a.txt","content":"`+streamSecret[:16], streamSecret[16:]+`"}`), scripted.Text("done"))
	_, err := rt.Send(context.Background(), id, "write")
	require.NoError(t, err)
	want := `{"description":"writing a.txt","content":"[REDACTED:API_KEY]`
	assert.Equal(t, []string{"hook: " + want, "event: " + want}, got())
}

// A call without a progress argument fires tool_call_started as its start
// streams; a provider that streamed a part of its arguments before that
// start does not show a secret cut by their end either.
func TestStartBeforeTheArgumentsEndHidesASecretCutByThem(t *testing.T) {
	tool := fn("audit_key", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("ok"), nil
	})
	n := 0
	prov := funcProvider(func(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
		n++
		var chunks []toolrun.Chunk
		if n == 1 {
			chunks = []toolrun.Chunk{
				{Type: toolrun.ChunkToolCallDelta, Index: 0, ToolCall: toolrun.ToolCall{Arguments: `{"key":"` + streamSecret[:10]}},
				{Type: toolrun.ChunkToolCallStart, Index: 0, ToolCall: toolrun.ToolCall{ID: "c1", Name: "audit_key"}},
				{Type: toolrun.ChunkToolCallDelta, Index: 0, ToolCall: toolrun.ToolCall{Arguments: streamSecret[10:] + `"}`}},
				{Type: toolrun.ChunkFinish, FinishReason: "tool_calls"},
			}
		} else {
			chunks = []toolrun.Chunk{{Type: toolrun.ChunkText, Text: "done"}, {Type: toolrun.ChunkFinish, FinishReason: "stop"}}
		}
		return func(yield func(toolrun.Chunk, error) bool) {
			for _, c := range chunks {
				if !yield(c, nil) {
					return
				}
			}
		}
	})
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: prov, ID: "x"}, tool,
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("audit_key")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 4}, SideB: toolrun.Side{Human: true}}))
	rt, id, got := startedArguments(t, reg, "agent")
	_, err := rt.Send(context.Background(), id, "audit")
	require.NoError(t, err)
	want := `{"key":"[REDACTED:API_KEY]`
	assert.Equal(t, []string{"hook: " + want, "event: " + want}, got())
	for _, a := range got() {
		assert.NotContains(t, a, streamSecret[:4])
	}
}
