package toolrun_test

import (
	"context"
	"iter"
	"strings"
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

// chunkStream is a provider whose first response streams chunk(i) for
// i = 0, 1, … while it returns true, then a finish; sent counts the chunks
// it yielded. Its later responses are a short text.
type chunkStream struct {
	chunk    func(i int) (toolrun.Chunk, bool)
	sent     int
	requests int
}

func (p *chunkStream) Name() string { return "chunks" }
func (p *chunkStream) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	p.requests++
	first := p.requests == 1
	return func(yield func(toolrun.Chunk, error) bool) {
		if !first {
			_ = yield(toolrun.Chunk{Type: toolrun.ChunkText, Text: "done"}, nil) &&
				yield(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: "stop"}, nil)
			return
		}
		for i := 0; ; i++ {
			c, ok := p.chunk(i)
			if !ok {
				yield(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: "stop"}, nil)
				return
			}
			p.sent++
			if !yield(c, nil) {
				return
			}
		}
	}
}

// limitWorld returns a runtime whose agent's prompt "p" offers the tool
// "write" and streams from p, with MaxResponseBytes limit, and a thread.
func limitWorld(t *testing.T, p toolrun.Provider, limit int) (*toolrun.Runtime, string) {
	t.Helper()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p, ID: "x"},
		fn("write", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ok"), nil }),
		&toolrun.Prompt{Name: "p", Model: "m", Text: "t", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("write")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxResponseBytes: limit})
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	return rt, th.ID
}

// requireOnlyTheUserMessage checks that the thread holds the user's
// message and nothing of the model's response.
func requireOnlyTheUserMessage(t *testing.T, rt *toolrun.Runtime, id string) {
	t.Helper()
	page, err := rt.Store().ListMessages(context.Background(), id, toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Len(t, page.Messages, 1)
	assert.Equal(t, toolrun.RoleUser, page.Messages[0].Role)
}

// A streamed response is bounded by default: 80 MiB in 1 MiB deltas fails
// the model request with an error naming the 64 MiB limit, the provider's
// stream is stopped at the delta past it, and nothing of the response is
// stored. (Reasoning, which the runtime does not keep, counts as text
// does, and keeps the test's memory low.)
func TestStreamedResponsePastTheDefaultLimitFails(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	p := &chunkStream{chunk: func(i int) (toolrun.Chunk, bool) {
		return toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: mib}, i < 80
	}}
	rt, id := limitWorld(t, p, 0)
	_, err := rt.Send(context.Background(), id, "hi")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "toolrun: model m: the response is larger than 67108864 bytes, the limit of RuntimeOptions.MaxResponseBytes")
	assert.Equal(t, 65, p.sent, "the stream goes on past the limit")
	requireOnlyTheUserMessage(t, rt, id)
	assert.Equal(t, 64<<20, toolrun.DefaultMaxResponseBytes)
}

// Text, reasoning and the tool calls' ids, names and arguments count
// together against a configured limit; the response past it fails, and
// one of the limit's size passes.
func TestStreamedResponseIsBoundedByMaxResponseBytes(t *testing.T) {
	const limit = 64 << 10
	kib := strings.Repeat("y", 1<<10)
	text := func(n int) func(i int) (toolrun.Chunk, bool) {
		return func(i int) (toolrun.Chunk, bool) { return toolrun.Chunk{Type: toolrun.ChunkText, Text: kib}, i < n }
	}
	// mixed streams 16 KiB of each kind: text, reasoning, a call's
	// arguments, and the call again, whole (which counts only what its
	// id, name and arguments hold beyond what streamed), then extra bytes.
	mixed := func(extra int) func(i int) (toolrun.Chunk, bool) {
		var chunks []toolrun.Chunk
		for range 16 {
			chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkText, Text: kib})
		}
		for range 16 {
			chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: kib})
		}
		chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkToolCallStart, ToolCall: toolrun.ToolCall{ID: "c1", Name: "write"}})
		// A call counts 256 bytes more, for its bookkeeping.
		args := `{"a":"` + strings.Repeat("z", 16<<10-len(`{"a":""}`)-len("c1write")-256) + `"}`
		for k := 0; k < len(args); k += 1 << 10 {
			chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkToolCallDelta, ToolCall: toolrun.ToolCall{Arguments: args[k:min(len(args), k+1<<10)]}})
		}
		chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkToolCall, ToolCall: toolrun.ToolCall{ID: "c1", Name: "write", Arguments: args}})
		for range 16 {
			chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkText, Text: kib})
		}
		if extra > 0 {
			chunks = append(chunks, toolrun.Chunk{Type: toolrun.ChunkToolCallDelta, Index: 1, ToolCall: toolrun.ToolCall{Arguments: strings.Repeat("w", extra)}})
		}
		return func(i int) (toolrun.Chunk, bool) {
			if i < len(chunks) {
				return chunks[i], true
			}
			return toolrun.Chunk{}, false
		}
	}
	for _, c := range []struct {
		name  string
		chunk func(i int) (toolrun.Chunk, bool)
		fails bool
		sent  int // the chunks yielded, when it fails
		text  int // the bytes of the stored response's text, when it passes
		calls int // and its calls
	}{
		{"text past the limit", text(80), true, 65, 0, 0},
		{"text of the limit's size", text(64), false, 0, 64 << 10, 0},
		{"a mixed response of the limit's size", mixed(0), false, 0, 32 << 10, 1},
		{"a mixed response one byte past the limit", mixed(1), true, 16 + 16 + 1 + 16 + 1 + 16 + 1, 0, 0},
		// Calls that stream no byte count their bookkeeping: 256 bytes
		// each, so the 257th of them is past 64 KiB.
		{"empty calls past the limit", func(i int) (toolrun.Chunk, bool) {
			return toolrun.Chunk{Type: toolrun.ChunkToolCallStart, Index: i}, i < 10000
		}, true, 257, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &chunkStream{chunk: c.chunk}
			rt, id := limitWorld(t, p, limit)
			reply, err := rt.Send(context.Background(), id, "hi")
			if !c.fails {
				require.NoError(t, err)
				page, err := rt.Store().ListMessages(context.Background(), id, toolrun.MessageQuery{})
				require.NoError(t, err)
				require.Greater(t, len(page.Messages), 1)
				m := page.Messages[1]
				assert.Equal(t, toolrun.RoleAssistant, m.Role)
				assert.Len(t, m.Content, c.text)
				assert.Len(t, m.ToolCalls, c.calls)
				return
			}
			require.Error(t, err, "reply %d bytes", len(reply.Text))
			assert.Contains(t, err.Error(), "the response is larger than 65536 bytes, the limit of RuntimeOptions.MaxResponseBytes")
			assert.Equal(t, c.sent, p.sent, "the stream goes on past the limit")
			requireOnlyTheUserMessage(t, rt, id)
		})
	}
}

// A call that arrives whole, without streamed pieces, fires its
// tool_call_started with its whole arguments, redacted.
func TestStartOfACallThatArrivedWholeCarriesItsArguments(t *testing.T) {
	args := `{"path":"a.txt","key":"` + streamSecret + `"}`
	p := &chunkStream{chunk: func(i int) (toolrun.Chunk, bool) {
		return toolrun.Chunk{Type: toolrun.ChunkToolCall, ToolCall: toolrun.ToolCall{ID: "c1", Name: "write", Arguments: args}}, i < 1
	}}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p, ID: "x"},
		fn("write", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ok"), nil }),
		&toolrun.Prompt{Name: "p", Model: "m", Text: "t", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("write")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}},
	))
	rt, id, got := startedArguments(t, reg, "agent")
	_, err := rt.Send(context.Background(), id, "write")
	require.NoError(t, err)
	want := `{"path":"a.txt","key":"[REDACTED:API_KEY]"}`
	assert.Equal(t, []string{"hook: " + want, "event: " + want}, got())
}
