package toolrun_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

var bodyCount atomic.Int64

// TestConcurrentBatchesOnDistinctThreads runs 100 goroutines, each running
// batches on its own thread over one registry and one store. Run it with -race.
func TestConcurrentBatchesOnDistinctThreads(t *testing.T) {
	var ran atomic.Int64
	var g searchArgs
	_ = g
	ex := newExec(t, nil, searchTool(nil), fn("count", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		ran.Add(1)
		if err := s.SetValue(ctx, "n", ran.Load()); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("counted"), s.QueueTool("search", map[string]any{"query": "q", "format": "text"})
	}))
	var wg sync.WaitGroup
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			th := fmt.Sprintf("thread-%d", i)
			for j := 0; j < 5; j++ {
				out, err := ex.Run(context.Background(), th, []toolrun.ToolCall{
					call(fmt.Sprintf("%d-a", j), "count", ""),
					call(fmt.Sprintf("%d-b", j), "search", `{"query":"x","format":"json"}`),
				})
				if !assert.NoError(t, err) || !assert.Len(t, out, 3) {
					return
				}
			}
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int64(500), ran.Load())
	for i := 0; i < 100; i++ {
		p, err := ex.Store().ListMessages(context.Background(), fmt.Sprintf("thread-%d", i), toolrun.MessageQuery{})
		require.NoError(t, err)
		require.Len(t, p.Messages, 15)
	}
}

// TestBatchesOfOneThreadDoNotInterleave checks the executor's per-thread
// serialisation: two batches on one thread never run calls at once.
func TestBatchesOfOneThreadDoNotInterleave(t *testing.T) {
	var active, maxActive atomic.Int64
	ex := newExec(t, nil, fn("slow", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		n := active.Add(1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		for i := 0; i < 1000; i++ {
			_ = s.SetValue(ctx, "x", i)
		}
		active.Add(-1)
		return toolrun.Text("ok"), nil
	}))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := ex.Run(context.Background(), "shared", []toolrun.ToolCall{call(fmt.Sprint(i), "slow", "")})
			assert.NoError(t, err)
		}(i)
	}
	wg.Wait()
	assert.Equal(t, int64(1), maxActive.Load())
}

// Executor.Run and Runtime turns share one per-thread lock: a bare batch
// never interleaves with a running turn of the same thread.
func TestExecutorRunSerialisedWithRuntimeTurn(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	p := scripted.New(scripted.Calls(scripted.Call("slow", nil)), scripted.Text("done"))
	reg := mustReg(t,
		&toolrun.Model{Name: "m", Provider: p},
		fn("slow", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			close(entered)
			<-release
			return toolrun.Text("slow done"), nil
		}),
		fn("quick", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("q"), nil
		}),
		&toolrun.Prompt{Name: "pp", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("slow")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "pp"}, SideB: toolrun.Side{Human: true}},
	)
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	go func() { _, _ = rt.Send(context.Background(), th.ID, "hi") }()
	<-entered
	done := make(chan struct{})
	go func() {
		_, _ = rt.Executor().Run(context.Background(), th.ID, []toolrun.ToolCall{{ID: "x", Name: "quick", Arguments: "{}"}})
		close(done)
	}()
	select {
	case <-done:
		t.Error("Executor.Run ran on a thread whose runtime turn was still executing a call")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	<-done
	rt.Wait()
}
