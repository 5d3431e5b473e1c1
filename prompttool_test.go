package toolrun_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

func mustReg(t *testing.T, defs ...toolrun.Definition) *toolrun.Registry {
	t.Helper()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(defs...))
	return reg
}

// ThreadState is safe for concurrent use: two goroutines invoking prompt tools at once (run with -race).
func TestConcurrentInvokeOfPromptToolsRace(t *testing.T) {
	p := scripted.New(
		scripted.Calls(scripted.Call("fan", nil)),
		scripted.Text("a"), scripted.Text("b"),
		scripted.Text("done"),
	)
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		fn("fan", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			var texts []string
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := s.InvokeTool(ctx, "sub", nil)
					mu.Lock()
					texts = append(texts, r.Result+r.Error)
					mu.Unlock()
				}()
			}
			wg.Wait()
			return toolrun.Text(strings.Join(texts, ",")), nil
		}),
		&toolrun.Prompt{Name: "sub", ToolDescription: "sub", Model: "m"},
		&toolrun.Prompt{Name: "outer", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("fan")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "outer"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
}

// ErrAbort from a tool run by a sub-prompt (prompt tool) stops the whole run.
func TestAbortInsideSubpromptStopsTheRun(t *testing.T) {
	p := scripted.New(
		scripted.Calls(scripted.Call("sub", nil)),  // outer: call the prompt tool
		scripted.Calls(scripted.Call("boom", nil)), // sub-prompt: call the aborting tool
		scripted.Text("carried on"),                // outer again: must never be requested
	)
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		fn("boom", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Result{}, fmt.Errorf("%w: database down", toolrun.ErrAbort)
		}),
		&toolrun.Prompt{Name: "sub", ToolDescription: "sub", Model: "m", Tools: []toolrun.PromptTool{toolrun.Use("boom")}},
		&toolrun.Prompt{Name: "outer", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("sub")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "outer"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	assert.ErrorIs(t, err, toolrun.ErrAbort, "ErrAbort inside a sub-prompt was swallowed")
	assert.Equal(t, 1, p.Remaining(), "the outer model was asked again after an abort")
}
