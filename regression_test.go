package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

const reviewSecret = "s3cr3t-value-123"

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

// The ToolCallDone hook receives the result redacted.
func TestToolCallDoneHookIsRedacted(t *testing.T) {
	var got string
	ex := toolrun.NewExecutor(mustReg(t, fn("leak", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("token is " + reviewSecret), nil
	})), &toolrun.ExecutorOptions{
		Env:        map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}},
		CodeRunner: toolrun.NoCodeRunner{},
		Hooks: toolrun.Hooks{ToolCallDone: func(ctx context.Context, _ string, ev toolrun.ToolCallDone) {
			got = ev.Result.Result
		}},
	})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "leak", Arguments: "{}"}})
	require.NoError(t, err)
	assert.NotContains(t, got, reviewSecret)
}

// InjectMessage stores content and metadata redacted.
func TestInjectMessageIsRedacted(t *testing.T) {
	st := toolrun.NewMemoryStore()
	ex := toolrun.NewExecutor(mustReg(t, fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("ok"), s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleSystem, Content: "key=" + reviewSecret,
			Metadata: map[string]any{"k": reviewSecret}})
	})), &toolrun.ExecutorOptions{Store: st, CodeRunner: toolrun.NoCodeRunner{},
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "inject", Arguments: "{}"}})
	require.NoError(t, err)
	page, err := st.ListMessages(context.Background(), "t1", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	b, _ := json.Marshal(page.Messages)
	assert.NotContains(t, string(b), reviewSecret)
}

// error_data values of any Go type (map[string]string, []map[string]any, structs) are redacted.
func TestErrorDataNestedTypesAreRedacted(t *testing.T) {
	st := toolrun.NewMemoryStore()
	ex := toolrun.NewExecutor(mustReg(t, fn("fail", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Status: toolrun.StatusError, Error: "request failed",
			ErrorData: map[string]any{
				"headers":  map[string]string{"Authorization": "Bearer " + reviewSecret},
				"attempts": []map[string]any{{"url": "https://x/?key=" + reviewSecret}},
			}}, nil
	})), &toolrun.ExecutorOptions{Store: st, CodeRunner: toolrun.NoCodeRunner{},
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	out, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "fail", Arguments: "{}"}})
	require.NoError(t, err)
	b, _ := json.Marshal(out[0].Message.Metadata)
	assert.NotContains(t, string(b), reviewSecret)
}

// An ErrAbort error's text reaches the caller redacted.
func TestAbortErrorIsRedacted(t *testing.T) {
	ex := toolrun.NewExecutor(mustReg(t, fn("boom", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{}, fmt.Errorf("%w: login with %s refused", toolrun.ErrAbort, reviewSecret)
	})), &toolrun.ExecutorOptions{CodeRunner: toolrun.NoCodeRunner{},
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "boom", Arguments: "{}"}})
	require.ErrorIs(t, err, toolrun.ErrAbort)
	assert.NotContains(t, err.Error(), reviewSecret)
}

// A non-blocking child whose run fails reports its error into the parent's history redacted.
func TestBackgroundChildFailureIsRedacted(t *testing.T) {
	lead, child := scripted.New(), scripted.New()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "lm", Provider: lead},
		&toolrun.Model{Name: "cm", Provider: child},
		fn("boom", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			v, _ := s.Env(ctx, "TOKEN")
			return toolrun.Result{}, fmt.Errorf("%w: login with %s refused", toolrun.ErrAbort, v)
		}),
		&toolrun.Prompt{Name: "cp", Model: "cm", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("boom")}},
		&toolrun.Prompt{Name: "lp", Model: "lm", IncludeChat: true, IncludePastTools: true},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "cp"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lp", Subagents: []toolrun.SubagentRelationship{{Agent: "worker"}}},
			SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{CodeRunner: toolrun.NoCodeRunner{}})
	th, err := rt.NewThread(context.Background(), "lead", &toolrun.ThreadOptions{Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	require.NoError(t, err)
	lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "worker", "message": "go", "attachments": []any{}, "name": "w"})),
		scripted.Text("started"), scripted.Text("noted"))
	child.Add(scripted.Calls(scripted.Call("boom", nil)))
	_, err = rt.Send(context.Background(), th.ID, "hi")
	require.NoError(t, err)
	rt.Wait()
	page, err := rt.Store().ListMessages(context.Background(), th.ID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	for _, m := range page.Messages {
		assert.NotContains(t, m.Content, reviewSecret, "parent message %s (%s)", m.ID, m.Role)
	}
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
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{CodeRunner: toolrun.NoCodeRunner{}})
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
}

func mustReg(t *testing.T, defs ...toolrun.Definition) *toolrun.Registry {
	t.Helper()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(defs...))
	return reg
}

var _ = errors.Is
