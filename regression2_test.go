package toolrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// A crash (here: a failed store write) between the queuing call's stored
// result and the queued call's must not lose the queued call: a resumed run
// queues again what the resumed call had queued.
func TestQueuedCallSurvivesResume(t *testing.T) {
	mem := toolrun.NewMemoryStore()
	fs := &storetest.FailingStore{Store: mem, FailAt: 2, Match: func(op string) bool { return op == storetest.OpAppendMessages }}
	ran := 0
	reg := mustReg(t,
		fn("parent", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("queued"), s.QueueTool("child", nil)
		}),
		fn("child", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			ran++
			return toolrun.Text("child ran"), nil
		}),
	)
	calls := []toolrun.ToolCall{{ID: "c1", Name: "parent", Arguments: "{}"}}
	_, err := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: fs, CodeRunner: toolrun.NoCodeRunner{}}).Run(context.Background(), "t1", calls)
	require.Error(t, err) // the queued call's result could not be stored: "crash"
	out, err := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: mem, CodeRunner: toolrun.NoCodeRunner{}}).Run(context.Background(), "t1", calls)
	require.NoError(t, err)
	assert.True(t, out[0].Resumed)
	assert.Len(t, out, 2, "the queued call was lost on resume")
	assert.Equal(t, 2, ran, "child ran once before the crash (result lost) and must run again on resume")
}

// A turn's bookkeeping (turn counter, handoff) must not write back the
// thread record loaded when Send started, which would wipe a Terminate that
// happened during the turn.
func TestTerminateDuringTurnIsNotUndone(t *testing.T) {
	p := scripted.New(scripted.Calls(scripted.Call("close_me", nil)), scripted.Text("bye"))
	var rt *toolrun.Runtime
	reg := mustReg(t,
		&toolrun.Model{Name: "m", Provider: p},
		fn("close_me", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("closed"), rt.Terminate(ctx, s.ThreadID())
		}),
		&toolrun.Prompt{Name: "pp", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("close_me")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "pp"}, SideB: toolrun.Side{Human: true}},
	)
	rt = toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{CodeRunner: toolrun.NoCodeRunner{}})
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "hi")
	require.NoError(t, err)
	got, err := rt.Store().GetThread(context.Background(), th.ID)
	require.NoError(t, err)
	assert.False(t, got.TerminatedAt.IsZero(), "Terminate was overwritten by the turn counter's UpdateThread")
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
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{CodeRunner: toolrun.NoCodeRunner{}})
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
