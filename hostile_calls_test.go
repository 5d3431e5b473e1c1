package toolrun_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// reentryWait bounds how long a re-entrant Run or Send a test makes may
// wait, so that the test ends when it waits for itself; the tests assert
// on the error, never on the time taken.
const reentryWait = 5 * time.Second

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

// erroringTool returns an error result with error_data.
func erroringTool() *toolrun.Func[noArgs] {
	return fn("fails", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Status: toolrun.StatusError, Error: "bad", ErrorData: map[string]any{"code": 1, "list": []any{"a"}}}, nil
	})
}

// TestADoneHookCannotChangeTheStoredResult: the tool_call_done hook gets
// its own copy of the result. It used to get the error_data map and the
// refs of the message about to be stored, so what it wrote there was
// stored too.
func TestADoneHookCannotChangeTheStoredResult(t *testing.T) {
	ex := newExec(t, &toolrun.ExecutorOptions{Hooks: toolrun.Hooks{ToolCallDone: func(ctx context.Context, th string, ev toolrun.ToolCallDone) {
		ev.Result.ErrorData["hook"] = "was here"
		ev.Result.ErrorData["list"].([]any)[0] = "changed"
		if len(ev.Result.Refs) > 0 {
			ev.Result.Refs[0].Path = "/elsewhere"
		}
	}}}, erroringTool(), fn("attaches", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Result: "see file", Attachments: []toolrun.Attachment{{Name: "a.txt", MimeType: "text/plain", Data: []byte("hi")}}}, nil
	}))
	out := run(t, ex, "t", call("1", "fails", ""), call("2", "attaches", ""))
	require.Len(t, out, 2)
	p, err := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Len(t, p.Messages, 2)
	assert.NotContains(t, p.Messages[0].ErrorData, "hook")
	assert.Equal(t, []any{"a"}, p.Messages[0].ErrorData["list"])
	assert.NotContains(t, out[0].Result.ErrorData, "hook", "nor the outcome")
	require.Len(t, p.Messages[1].Attachments, 1)
	assert.NotEqual(t, "/elsewhere", p.Messages[1].Attachments[0].Path)
	assert.NotEqual(t, "/elsewhere", out[1].Message.Attachments[0].Path)
}

// TestADoneHookMakingACycleCannotKillTheProcess: a tool_call_done hook
// that makes the result's error_data contain itself used to do so in the
// message being stored, whose copy in the memory store then overflowed
// the stack and killed the process (run in a child process).
func TestADoneHookMakingACycleCannotKillTheProcess(t *testing.T) {
	if os.Getenv("HOSTILE_CHILD") == "" {
		inChild(t, t.Name())
		return
	}
	ex := newExec(t, &toolrun.ExecutorOptions{Hooks: toolrun.Hooks{ToolCallDone: func(ctx context.Context, th string, ev toolrun.ToolCallDone) {
		ev.Result.ErrorData["self"] = ev.Result.ErrorData
	}}}, erroringTool())
	out := run(t, ex, "t", call("1", "fails", ""))
	require.Len(t, out, 1)
	p, err := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Len(t, p.Messages, 1)
	assert.Equal(t, "Failed to execute tool: bad", p.Messages[0].Content, "the tool's own result is stored")
	assert.NotContains(t, p.Messages[0].ErrorData, "self")
	assert.Equal(t, []any{"a"}, p.Messages[0].ErrorData["list"])
}

// TestSubscribersGetTheirOwnCopyOfEmittedData: each subscriber of an
// event a tool emits gets its own copy of the data. They used to share
// one tree, so a subscriber changing it changed what the next one got.
func TestSubscribersGetTheirOwnCopyOfEmittedData(t *testing.T) {
	ex := newExec(t, nil, fn("emits", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		s.Emit("progress", map[string]any{"step": "one", "items": []any{"x"}})
		return toolrun.Text("ok"), nil
	}))
	var seen []any
	for range 2 {
		unsubscribe := ex.Subscribe("t", func(ev toolrun.Event) {
			if ev.Type != "progress" {
				return
			}
			m := ev.Data.(map[string]any)
			seen = append(seen, jsonCopy(t, m))
			m["step"] = "changed"
			m["items"].([]any)[0] = "changed"
		})
		defer unsubscribe()
	}
	run(t, ex, "t", call("1", "emits", ""))
	want := map[string]any{"step": "one", "items": []any{"x"}}
	assert.Equal(t, []any{want, want}, seen)
}

// jsonCopy returns a copy of a small JSON tree of maps, lists and strings.
func jsonCopy(t *testing.T, v any) any {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = jsonCopy(t, e)
		}
		return out
	case []any:
		out := []any{}
		for _, e := range x {
			out = append(out, jsonCopy(t, e))
		}
		return out
	case string:
		return x
	}
	t.Fatalf("unexpected value %T", v)
	return nil
}

// TestAStartedHookCannotChangeWhatSubscribersGet: the tool_call_started
// hook and the subscribers do not share the progress text.
func TestAStartedHookCannotChangeWhatSubscribersGet(t *testing.T) {
	type stepArgs struct {
		Progress string `json:"progress"`
	}
	tool := &toolrun.Func[stepArgs]{Name: "step", ProgressArgument: "progress", Execute: func(ctx context.Context, s toolrun.ThreadState, a stepArgs) (toolrun.Result, error) {
		return toolrun.Text("ok"), nil
	}}
	ex := newExec(t, &toolrun.ExecutorOptions{Hooks: toolrun.Hooks{ToolCallStarted: func(ctx context.Context, th string, ev toolrun.ToolCallStarted) {
		if ev.Progress != nil {
			*ev.Progress = "changed by the hook"
		}
	}}}, tool)
	var got []string
	defer ex.Subscribe("t", func(ev toolrun.Event) {
		if s, ok := ev.Data.(toolrun.ToolCallStarted); ok && s.Progress != nil {
			got = append(got, *s.Progress)
		}
	})()
	run(t, ex, "t", call("1", "step", `{"progress":"working"}`))
	assert.Equal(t, []string{"working"}, got)
}

// panickingFilter is a history filter with a bug.
func panickingFilter(context.Context, string, []toolrun.Message) ([]toolrun.Message, error) {
	panic("filter bug")
}

// sendRecovering calls Send and reports what escaped it and what it
// returned.
func sendRecovering(rt *toolrun.Runtime, threadID string) (escaped any, err error) {
	defer func() { escaped = recover() }()
	_, err = rt.Send(context.Background(), threadID, "go")
	return nil, err
}

// TestAPanickingHistoryFilterFailsTheTurn: a prompt's history filter that
// panics fails the turn with an error naming the prompt, as one returning
// an error does. The panic used to escape Send.
func TestAPanickingHistoryFilterFailsTheTurn(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New(scripted.Text("hi")), ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 10}, SideB: toolrun.Side{Human: true}},
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, History: toolrun.Window{Filter: panickingFilter}}))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	escaped, err := sendRecovering(rt, th.ID)
	require.Nil(t, escaped, "Send panicked")
	require.Error(t, err)
	assert.Equal(t, "toolrun: prompt p: history filter panicked: filter bug", err.Error())

	_, err = rt.Resume(context.Background(), th.ID)
	require.Error(t, err, "Resume builds the same request")
	assert.Contains(t, err.Error(), "history filter panicked")
}

// TestAPanickingHistoryFilterOfASubpromptFailsTheTurn: the same inside a
// prompt tool's sub-prompt, where the executor passed the panic on; the
// prompt tool's call gets an error result naming it.
func TestAPanickingHistoryFilterOfASubpromptFailsTheTurn(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New(scripted.Calls(scripted.Call("sub", map[string]any{})), scripted.Text("done")), ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 10}, SideB: toolrun.Side{Human: true}},
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("sub")}},
		&toolrun.Prompt{Name: "sub", Model: "m", Text: "subsys", IncludeChat: true, History: toolrun.Window{Filter: panickingFilter}}))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	escaped, err := sendRecovering(rt, th.ID)
	require.Nil(t, escaped, "Send panicked")
	require.Error(t, err)
	assert.Equal(t, "toolrun: prompt sub: history filter panicked: filter bug", err.Error())
	subs := toolResultsNamed(t, rt.Store(), th.ID, "sub")
	require.Len(t, subs, 1)
	assert.Equal(t, toolrun.StatusError, subs[0].ToolStatus)
	assert.Contains(t, subs[0].Content, "history filter panicked")
}

// TestRunFromInsideARunOfTheSameThreadIsRefused: a tool run by
// Executor.Run that calls Run on its own thread gets an error at once: it
// would wait for the run that waits for the tool. It used to wait until its
// ctx ended, for ever with context.Background().
func TestRunFromInsideARunOfTheSameThreadIsRefused(t *testing.T) {
	var ex *toolrun.Executor
	var inner, other, invoked error
	ran := 0
	ex = newExec(t, nil, fn("reenter", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		// A deadline, so that the test ends even when Run waits.
		cctx, cancel := context.WithTimeout(ctx, reentryWait)
		defer cancel()
		_, inner = ex.Run(cctx, s.ThreadID(), []toolrun.ToolCall{call("x", "plain", "")})
		// A run of another thread takes another lock: the tool's ctx is
		// enough for it.
		_, other = ex.Run(ctx, "another", []toolrun.ToolCall{call("y", "plain", "")})
		return toolrun.Text("ok"), nil
	}), fn("invoker", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		s.InvokeTool(ctx, "reenter", nil)
		cctx, cancel := context.WithTimeout(ctx, reentryWait)
		defer cancel()
		_, invoked = ex.Run(cctx, s.ThreadID(), nil)
		return toolrun.Text("ok"), nil
	}), fn("plain", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		ran++
		return toolrun.Text("ok"), nil
	}))
	run(t, ex, "t", call("1", "reenter", ""))
	require.Error(t, inner)
	assert.False(t, errors.Is(inner, context.DeadlineExceeded), "Run waited for itself: %v", inner)
	assert.Contains(t, inner.Error(), "Run was called from inside a turn of the same thread")
	require.NoError(t, other, "a run of another thread is not refused")
	assert.Equal(t, 1, ran, "the run of the other thread ran its call")

	inner = nil
	run(t, ex, "t2", call("2", "invoker", ""))
	require.Error(t, inner, "a tool invoked by a tool is inside the run too")
	assert.Contains(t, inner.Error(), "Run was called from inside a turn of the same thread")
	require.Error(t, invoked)
	assert.Contains(t, invoked.Error(), "Run was called from inside a turn of the same thread")
}

// TestSendFromInsideARunOfTheSameThreadIsRefused: a tool run by
// Executor.Run that asks the runtime for a turn of its own thread is
// refused at once too.
func TestSendFromInsideARunOfTheSameThreadIsRefused(t *testing.T) {
	var rt *toolrun.Runtime
	var inner error
	tool := fn("reenter", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		cctx, cancel := context.WithTimeout(ctx, reentryWait)
		defer cancel()
		_, inner = rt.Send(cctx, s.ThreadID(), "again")
		return toolrun.Text("ok"), nil
	})
	rt, id := hostileRT(t, scripted.New(scripted.Text("hi")), nil, tool)
	_, err := rt.Executor().Run(context.Background(), id, []toolrun.ToolCall{call("1", "reenter", "")})
	require.NoError(t, err)
	require.Error(t, inner)
	assert.False(t, errors.Is(inner, context.DeadlineExceeded), "Send waited for the run: %v", inner)
	assert.Contains(t, inner.Error(), "from inside a turn of the same thread")
}

// TestRunFromAToolsGoroutineAfterTheRunEndedIsNotRefused: the mark that
// refuses a run of the same thread ends with the run: a goroutine a tool
// started, which calls Run with the tool's ctx once the run is over,
// waits for the lock like anyone else and runs.
func TestRunFromAToolsGoroutineAfterTheRunEndedIsNotRefused(t *testing.T) {
	var ex *toolrun.Executor
	proceed := make(chan struct{})
	done := make(chan error, 1)
	ran := 0
	ex = newExec(t, nil, fn("spawns", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		go func() {
			<-proceed
			_, err := ex.Run(ctx, s.ThreadID(), []toolrun.ToolCall{call("later", "plain", "")})
			done <- err
		}()
		return toolrun.Text("ok"), nil
	}), fn("plain", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		ran++
		return toolrun.Text("ok"), nil
	}))
	run(t, ex, "t", call("1", "spawns", ""))
	close(proceed)
	require.NoError(t, <-done)
	assert.Equal(t, 1, ran)
}

// TestQueueToolAfterItsBatchEndedIsRefused: QueueTool on a ThreadState a
// tool kept returns an error once the batch has ended. It used to return
// nil, and the call never ran.
func TestQueueToolAfterItsBatchEndedIsRefused(t *testing.T) {
	var kept toolrun.ThreadState
	ran := 0
	ex := newExec(t, nil, fn("keep", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		kept = s
		return toolrun.Text("ok"), nil
	}), fn("later", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		ran++
		return toolrun.Text("ok"), nil
	}), fn("aborts", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		kept = s
		return toolrun.Result{}, toolrun.ErrAbort
	}))
	run(t, ex, "t", call("1", "keep", ""))
	err := kept.QueueTool("later", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "QueueTool needs a running batch")

	_, err = ex.Run(context.Background(), "t", []toolrun.ToolCall{call("2", "aborts", "")})
	require.ErrorIs(t, err, toolrun.ErrAbort)
	err = kept.QueueTool("later", nil)
	require.Error(t, err, "nor after a batch that aborted")
	assert.Contains(t, err.Error(), "QueueTool needs a running batch")
	assert.Zero(t, ran)
}
