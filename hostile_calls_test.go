package toolrun_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// toolResultsNamed returns the tool results of name stored on the thread,
// at any depth.
func toolResultsNamed(t *testing.T, st toolrun.Store, threadID, name string) []toolrun.Message {
	t.Helper()
	p, err := st.ListMessages(context.Background(), threadID, toolrun.MessageQuery{MaxDepth: -1, IncludeSilent: true})
	require.NoError(t, err)
	var out []toolrun.Message
	for _, m := range p.Messages {
		if m.Role == toolrun.RoleTool && m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

// TestAnAbortingPromptToolIsStoredAsAnError: a prompt tool whose
// sub-prompt could not store its response aborts the run, and its call's
// result is an error result naming the store failure. It was stored as
// "Tool executed successfully", so a resumed turn told the model the
// sub-prompt had worked. Resume then goes on from the error result.
func TestAnAbortingPromptToolIsStoredAsAnError(t *testing.T) {
	runs := map[string]int{}
	var resumedSaw []toolrun.Message
	prov := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		if req.System == "subsys" {
			return scripted.Calls(scripted.Call("work", map[string]any{}))
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role == toolrun.RoleTool {
			resumedSaw = append(resumedSaw, last)
			return scripted.Text("done")
		}
		return scripted.Calls(scripted.Call("sub", map[string]any{}))
	})
	mem := toolrun.NewMemoryStore()
	// Appends: the user message (1), the assistant's call (2), the
	// sub-prompt's response (3: fails).
	failing := &storetest.FailingStore{Store: mem, FailAt: 3, Match: func(op string) bool { return op == storetest.OpAppendMessages }}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: prov, ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 10}, SideB: toolrun.Side{Human: true}},
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("sub")}},
		&toolrun.Prompt{Name: "sub", Model: "m", Text: "subsys", Tools: []toolrun.PromptTool{toolrun.Use("work")}},
		countedTool("work", runs)))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: failing})
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	var se *toolrun.StoreError
	require.ErrorAs(t, err, &se)

	subs := toolResultsNamed(t, mem, th.ID, "sub")
	require.Len(t, subs, 1)
	assert.Equal(t, toolrun.StatusError, subs[0].ToolStatus, "the sub-prompt never ran, yet its call was stored as %q", subs[0].Content)
	assert.Contains(t, subs[0].Content, "append sub-prompt response", "the error result names what failed")
	assert.Zero(t, runs["work"], "the sub-prompt's calls were not run")

	reply, err := rt.Resume(context.Background(), th.ID)
	require.NoError(t, err)
	assert.Equal(t, "done", reply.Text)
	require.Len(t, resumedSaw, 1, "the resumed turn asked the model again")
	assert.Equal(t, toolrun.StatusError, resumedSaw[0].ToolStatus, "the model sees the call as failed")
	assert.Contains(t, resumedSaw[0].Content, "append sub-prompt response")
	assert.Len(t, toolResultsNamed(t, mem, th.ID, "sub"), 1, "the aborted call is not run again")
	assert.Zero(t, runs["work"])
}

// TestAnAbortingSubagentCreateIsStoredAsAnError: subagent_create whose
// child thread could not be created aborts the run with the store's
// error, and its call's result is an error result, not "Tool executed
// successfully". Resume then goes on from the error result.
func TestAnAbortingSubagentCreateIsStoredAsAnError(t *testing.T) {
	var resumedSaw []toolrun.Message
	prov := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		if req.System == "worker" {
			return scripted.Text("worked")
		}
		if last := req.Messages[len(req.Messages)-1]; last.Role == toolrun.RoleTool {
			resumedSaw = append(resumedSaw, last)
			return scripted.Text("done")
		}
		return scripted.Calls(scripted.Call(toolrun.ToolSubagentCreate, map[string]any{"agent": "worker", "message": "m", "attachments": []any{}, "name": "w"}))
	})
	mem := toolrun.NewMemoryStore()
	// Threads created: the boss's (1), the worker's (2: fails).
	failing := &storetest.FailingStore{Store: mem, FailAt: 2, Match: func(op string) bool { return op == storetest.OpCreateThread }}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: prov, ID: "x"},
		&toolrun.Prompt{Name: "bp", Model: "m", Text: "boss", IncludeChat: true, IncludePastTools: true},
		&toolrun.Prompt{Name: "wp", Model: "m", Text: "worker", IncludeChat: true},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "wp"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "boss", SideA: toolrun.Side{Prompt: "bp", MaxSteps: 10, Subagents: []toolrun.SubagentRelationship{{Agent: "worker"}}}, SideB: toolrun.Side{Human: true}}))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: failing})
	th, err := rt.NewThread(context.Background(), "boss", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	var se *toolrun.StoreError
	require.ErrorAs(t, err, &se)

	creates := toolResultsNamed(t, mem, th.ID, toolrun.ToolSubagentCreate)
	require.Len(t, creates, 1)
	assert.Equal(t, toolrun.StatusError, creates[0].ToolStatus, "no subagent was created, yet the call was stored as %q", creates[0].Content)
	assert.Contains(t, creates[0].Content, "create subagent thread", "the error result names what failed")
	assert.Empty(t, creates[0].SubagentID)
	children, err := mem.Children(context.Background(), th.ID)
	require.NoError(t, err)
	assert.Empty(t, children)

	reply, err := rt.Resume(context.Background(), th.ID)
	require.NoError(t, err)
	assert.Equal(t, "done", reply.Text)
	require.Len(t, resumedSaw, 1, "the resumed turn asked the model again")
	assert.Equal(t, toolrun.StatusError, resumedSaw[0].ToolStatus, "the model sees the call as failed")
	assert.Len(t, toolResultsNamed(t, mem, th.ID, toolrun.ToolSubagentCreate), 1, "the aborted call is not run again")
}

// cancellingStore cancels a run's ctx as the at-th append starts, and
// fails that append with the ctx's error, as a store does that sees its
// ctx end.
type cancellingStore struct {
	toolrun.Store
	at, n  int
	cancel context.CancelFunc
}

func (s *cancellingStore) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	if s.n++; s.n == s.at {
		s.cancel()
		return ctx.Err()
	}
	return s.Store.AppendMessages(ctx, threadID, msgs...)
}

// TestAPromptToolStoppedByItsContextReadsAsStopped: a prompt tool whose
// ctx ended while its sub-prompt stored its response gets the error
// result every stopped call gets, "Execution stopped by user", not a
// success.
func TestAPromptToolStoppedByItsContextReadsAsStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	prov := scripted.NewFunc(nil, func(_ context.Context, req *toolrun.Request) *scripted.Response {
		if req.System == "subsys" {
			return scripted.Text("sub text")
		}
		return scripted.Calls(scripted.Call("sub", map[string]any{}))
	})
	mem := toolrun.NewMemoryStore()
	// Appends: the user message (1), the assistant's call (2), the
	// sub-prompt's response (3: the user stops the run).
	st := &cancellingStore{Store: mem, at: 3, cancel: cancel}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: prov, ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 10}, SideB: toolrun.Side{Human: true}},
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("sub")}},
		&toolrun.Prompt{Name: "sub", Model: "m", Text: "subsys"}))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st})
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	_, err = rt.Send(ctx, th.ID, "go")
	require.ErrorIs(t, err, context.Canceled)
	subs := toolResultsNamed(t, mem, th.ID, "sub")
	require.Len(t, subs, 1)
	assert.Equal(t, toolrun.StatusError, subs[0].ToolStatus, "stored %q", subs[0].Content)
	assert.Equal(t, "Failed to execute tool: Execution stopped by user", subs[0].Content)
}
