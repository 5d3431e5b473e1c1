package toolrun_test

import (
	"context"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// turnScript is one full turn: three tool calls, then an answer.
func turnScript() []*scripted.Response {
	return []*scripted.Response{
		scripted.Calls(
			scripted.Call("get_issue", map[string]any{"number": 1}),
			scripted.Call("get_issue", map[string]any{"number": 2}),
			scripted.Call("get_issue", map[string]any{"number": 3}),
		),
		scripted.Text("Three issues read."),
	}
}

// TestConcurrentTurnsOnOneRuntime runs full turns on 100 threads at once
// (run with -race), and checks that turns of one thread never overlap.
func TestConcurrentTurnsOnOneRuntime(t *testing.T) {
	var active sync.Map // thread → *atomic.Int32
	var overlap atomic.Bool
	reg := toolrun.NewRegistry(nil)
	providers := map[string]*scripted.Provider{}
	defs := []toolrun.Definition{
		&toolrun.Func[issueArgs]{Name: "get_issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			v, _ := active.LoadOrStore(s.ThreadID(), new(atomic.Int32))
			n := v.(*atomic.Int32)
			if n.Add(1) > 1 {
				overlap.Store(true)
			}
			defer n.Add(-1)
			return toolrun.Textf("issue %d", a.Number), nil
		}},
	}
	for i := 0; i < 100; i++ {
		p := scripted.New()
		for j := 0; j < 2; j++ {
			p.Add(turnScript()...)
		}
		name := fmt.Sprintf("m%d", i)
		providers[name] = p
		defs = append(defs,
			&toolrun.Model{Name: name, Provider: p},
			&toolrun.Prompt{Name: "p" + name, Model: name, IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}},
			&toolrun.Agent{Name: "a" + name, SideA: toolrun.Side{Prompt: "p" + name}, SideB: toolrun.Side{Human: true}})
	}
	require.NoError(t, reg.Register(defs...))
	rt := toolrun.NewRuntime(reg, nil)
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		th, err := rt.NewThread(context.Background(), fmt.Sprintf("am%d", i), nil)
		require.NoError(t, err)
		// Two Sends race on the same thread: they must be serialised.
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reply, err := rt.Send(context.Background(), th.ID, "go")
				if assert.NoError(t, err) {
					assert.Equal(t, "Three issues read.", reply.Text)
				}
			}()
		}
	}
	wg.Wait()
	assert.False(t, overlap.Load(), "two turns of one thread overlapped")
	for _, p := range providers {
		assert.True(t, p.Done())
	}
}

// BenchmarkTurn is one turn: scripted model → 3 tool calls → final answer,
// memory store.
func BenchmarkTurn(b *testing.B) {
	p := scripted.New()
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Func[issueArgs]{Name: "get_issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Text("issue"), nil
		}},
	); err != nil {
		b.Fatal(err)
	}
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	threads := make([]string, b.N)
	for i := range threads {
		th, err := rt.NewThread(ctx, "agent", nil)
		if err != nil {
			b.Fatal(err)
		}
		threads[i] = th.ID
		p.Add(turnScript()...)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reply, err := rt.Send(ctx, threads[i], "go")
		if err != nil || reply.Text != "Three issues read." {
			b.Fatalf("%v %+v", err, reply)
		}
	}
}

// requestChecker is a provider that checks, while it streams, that the
// request it was given is its thread's own and stays as it was given:
// turns make their requests in recycled room, and a turn must never write
// into a request another turn's provider is reading.
type requestChecker struct {
	mu       sync.Mutex
	problems []string
	streams  atomic.Int64
}

func (p *requestChecker) Name() string { return "checker" }

func (p *requestChecker) fail(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.problems = append(p.problems, fmt.Sprintf(format, args...))
}

// describeRequest renders everything in req a provider would send.
func describeRequest(req *toolrun.Request) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s|%s|%s|%s|", req.Model, req.ThreadID, req.System, req.ToolChoice)
	for _, s := range req.Tools {
		fmt.Fprintf(&sb, "tool %s %s %s|", s.Name, s.Description, s.Parameters)
	}
	for _, m := range req.Messages {
		fmt.Fprintf(&sb, "%s %s %s %s|", m.Role, m.Content, m.ToolCallID, m.ThreadID)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&sb, "call %s %s %s|", c.ID, c.Name, c.Arguments)
		}
	}
	return sb.String()
}

func (p *requestChecker) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	return func(yield func(toolrun.Chunk, error) bool) {
		p.streams.Add(1)
		given := describeRequest(req)
		users, answered := 0, false
		for _, m := range req.Messages {
			if m.Role == toolrun.RoleUser {
				users++
				if m.Content != "go "+req.ThreadID {
					p.fail("a request for %s holds the user message %q", req.ThreadID, m.Content)
				}
			}
			answered = m.Role == toolrun.RoleTool
		}
		if users == 0 || len(req.Tools) != 1 {
			p.fail("a request for %s has %d user messages and %d tools", req.ThreadID, users, len(req.Tools))
		}
		runtime.Gosched() // let other turns build their requests meanwhile
		var chunks []toolrun.Chunk
		if answered {
			chunks = []toolrun.Chunk{{Type: toolrun.ChunkText, Text: "done " + req.ThreadID}, {Type: toolrun.ChunkFinish, FinishReason: "stop"}}
		} else {
			call := toolrun.ToolCall{ID: fmt.Sprintf("call_%s_%d", req.ThreadID, users), Name: "get_issue", Arguments: `{"number":7}`}
			chunks = []toolrun.Chunk{{Type: toolrun.ChunkToolCall, ToolCall: call}, {Type: toolrun.ChunkFinish, FinishReason: "tool_calls"}}
		}
		for _, c := range chunks {
			if !yield(c, nil) {
				return
			}
			runtime.Gosched()
			if now := describeRequest(req); now != given {
				p.fail("a request for %s changed while its stream ran:\n was %s\n now %s", req.ThreadID, given, now)
			}
		}
	}
}

// TestConcurrentTurnsHaveRequestsOfTheirOwn runs turns of two requests each
// on 48 threads at once (run with -race): every request a provider gets
// holds its own thread's chat and tools, and nothing writes to it while its
// stream runs.
func TestConcurrentTurnsHaveRequestsOfTheirOwn(t *testing.T) {
	p := &requestChecker{}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		&toolrun.Prompt{Name: "pr", Model: "m", Text: "You answer on one thread.", IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Func[issueArgs]{Name: "get_issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Textf("issue %d of %s", a.Number, s.ThreadID()), nil
		}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	const threads, turns = 48, 3
	var wg sync.WaitGroup
	for range threads {
		th, err := rt.NewThread(context.Background(), "agent", nil)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range turns {
				reply, err := rt.Send(context.Background(), th.ID, "go "+th.ID)
				if assert.NoError(t, err) {
					assert.Equal(t, "done "+th.ID, reply.Text)
				}
			}
		}()
	}
	wg.Wait()
	assert.Empty(t, p.problems)
	assert.EqualValues(t, threads*turns*2, p.streams.Load(), "requests streamed")
}
