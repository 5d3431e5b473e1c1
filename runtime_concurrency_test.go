package toolrun_test

import (
	"context"
	"fmt"
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
