package toolrun_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sandbox"
)

// inTool runs body as the Execute of a one-call batch on thread t1.
func inTool(t *testing.T, ex *toolrun.Executor, body func(ctx context.Context, s toolrun.ThreadState)) {
	t.Helper()
	name := fmt.Sprintf("body_%d", bodyCount.Add(1))
	require.NoError(t, ex.Registry().Register(fn(name, func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		body(ctx, s)
		return toolrun.Text("ok"), nil
	})))
	out := run(t, ex, "t1", call(name, name, ""))
	require.Equal(t, "ok", out[0].Message.Content, "body panicked or failed: %s", out[0].Message.Content)
}

func TestValues(t *testing.T) {
	ex := newExec(t, nil)
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		var v map[string]int
		found, err := s.Value(ctx, "k", &v)
		require.NoError(t, err)
		assert.False(t, found)
		require.NoError(t, s.SetValue(ctx, "k", map[string]int{"a": 1}))
		found, err = s.Value(ctx, "k", &v)
		require.NoError(t, err)
		assert.True(t, found)
		assert.Equal(t, map[string]int{"a": 1}, v)
		require.NoError(t, s.SetValue(ctx, "k", nil))
		found, _ = s.Value(ctx, "k", &v)
		assert.False(t, found, "nil deletes")
		assert.Error(t, s.SetValue(ctx, "bad", math.Inf(1)), "non-finite numbers are refused")
	})
}

func TestFiles(t *testing.T) {
	ex := newExec(t, nil)
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		info, err := s.WriteFile(ctx, "docs//a.txt/", []byte("hello"), "text/plain")
		require.NoError(t, err)
		assert.Equal(t, "/docs/a.txt", info.Path, "paths are normalised")
		data, err := s.ReadFile(ctx, "/docs/a.txt")
		require.NoError(t, err)
		assert.Equal(t, "hello", string(data))
		_, err = s.WriteFile(ctx, "/docs/sub/b.bin", []byte{0, 1}, "")
		require.NoError(t, err)
		list, err := s.ListFiles(ctx, "/docs")
		require.NoError(t, err)
		require.Len(t, list, 2)
		assert.Equal(t, "/docs/a.txt", list[0].Path)
		assert.Equal(t, "application/octet-stream", list[1].MimeType)
		st, err := s.StatFile(ctx, "/docs/sub/b.bin")
		require.NoError(t, err)
		assert.Equal(t, int64(2), st.Size)
		require.NoError(t, s.DeleteFile(ctx, "/docs/a.txt"))
		_, err = s.ReadFile(ctx, "/docs/a.txt")
		assert.ErrorIs(t, err, toolrun.ErrNotFound)
		assert.ErrorIs(t, s.DeleteFile(ctx, "/nope"), toolrun.ErrNotFound)
	})
}

func TestMessagesQuerySemantics(t *testing.T) {
	ex := newExec(t, nil)
	ctx := context.Background()
	_, err := ex.Run(ctx, "t1", nil) // creates the thread
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		require.NoError(t, ex.Store().AppendMessages(ctx, "t1", &toolrun.Message{ID: fmt.Sprint("m", i), Role: toolrun.RoleUser, Content: fmt.Sprint(i), CreatedAt: time.Now()}))
	}
	require.NoError(t, ex.Store().AppendMessages(ctx, "t1",
		&toolrun.Message{ID: "m6", Role: toolrun.RoleSystem, Content: "silent", Silent: true, CreatedAt: time.Now()},
		&toolrun.Message{ID: "m7", Role: toolrun.RoleAssistant, Content: "deep", Depth: 1, CreatedAt: time.Now()}))
	contents := func(p toolrun.MessagePage) (out []string) {
		for _, m := range p.Messages {
			out = append(out, m.Content)
		}
		return out
	}
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		p, err := s.Messages(ctx, &toolrun.MessageQuery{Limit: 2})
		require.NoError(t, err)
		assert.Equal(t, []string{"4", "5"}, contents(p), "default: newest rows, oldest first")
		assert.Equal(t, 5, p.Total)
		assert.True(t, p.HasMore)
		p, _ = s.Messages(ctx, &toolrun.MessageQuery{Limit: 2, Order: toolrun.OrderDesc})
		assert.Equal(t, []string{"5", "4"}, contents(p))
		p, _ = s.Messages(ctx, &toolrun.MessageQuery{Limit: 2, Order: toolrun.OrderAsc})
		assert.Equal(t, []string{"1", "2"}, contents(p))
		p, _ = s.Messages(ctx, &toolrun.MessageQuery{Limit: 2, Offset: 1})
		assert.Equal(t, []string{"3", "4"}, contents(p))
		p, _ = s.Messages(ctx, &toolrun.MessageQuery{Limit: 10, IncludeSilent: true, MaxDepth: 1})
		assert.Equal(t, []string{"1", "2", "3", "4", "5", "silent", "deep"}, contents(p))
		assert.False(t, p.HasMore)
		p, _ = s.Messages(ctx, nil)
		assert.Len(t, p.Messages, 5)
	})
}

func TestInjectMessagePersistsWithoutRunning(t *testing.T) {
	ex := newExec(t, nil)
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		require.NoError(t, s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleSystem, Content: "Important context update"}))
		assert.ErrorContains(t, s.InjectMessage(ctx, toolrun.Message{Role: "robot"}), `unknown role "robot"`)
	})
	page, err := ex.Store().ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Len(t, page.Messages, 2)
	assert.Equal(t, "Important context update", page.Messages[0].Content)
	assert.Equal(t, toolrun.RoleTool, page.Messages[1].Role)
}

func TestRunCodeWithoutRunnerIsALinkError(t *testing.T) {
	ex := newExec(t, nil)
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		res := s.RunCode(ctx, "export default 1", nil).Wait(ctx)
		assert.Equal(t, toolrun.CodeStatusLinkError, res.Status)
		assert.Contains(t, res.Error.Message, "no code runner is configured")
	})
}

func TestEmitReachesSubscribers(t *testing.T) {
	ex := newExec(t, nil)
	var mu sync.Mutex
	var got []toolrun.Event
	stop := ex.Subscribe("t1", func(ev toolrun.Event) { mu.Lock(); got = append(got, ev); mu.Unlock() })
	other := 0
	ex.Subscribe("t2", func(toolrun.Event) { other++ })
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		s.Emit("progress", map[string]int{"step": 3, "total": 10})
	})
	stop()
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) { s.Emit("late", nil) })
	var types []string
	for _, ev := range got {
		types = append(types, ev.Type)
		if ev.Type == "progress" {
			assert.Equal(t, map[string]any{"step": 3.0, "total": 10.0}, ev.Data, "subscribers get the data as a JSON tree")
		}
	}
	assert.Equal(t, []string{toolrun.EventToolCallStarted, "progress", toolrun.EventToolCallDone}, types)
	assert.Zero(t, other)
}

func TestRunCodeRunsInTheGivenCodeRunner(t *testing.T) {
	ex := newExec(t, &toolrun.ExecutorOptions{CodeRunner: sandbox.Default()})
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		var reports []any
		res := s.RunCode(ctx, `
import { readFile } from "fs";
const text: string = await readFile("notes.txt");
export default function main(n: number) { report(n); return text.toUpperCase() + n; }`, &toolrun.CodeOptions{
			Execute: &toolrun.CodeExecute{Fn: "default", Args: []any{2}},
			Imports: map[string]map[string]any{"fs": {"readFile": func(ctx context.Context, args []any) (any, error) {
				return "hello", nil
			}}},
			Report: func(v any) { reports = append(reports, v) },
		}).Wait(ctx)
		require.Equal(t, toolrun.CodeStatusSuccess, res.Status, "%+v", res.Error)
		assert.Equal(t, "HELLO2", res.Value)
		assert.Len(t, reports, 1)
		assert.Len(t, res.Reports, 1)
	})
}

func TestRunCodeIsTerminatedWhenTheToolContextEnds(t *testing.T) {
	ex := newExec(t, &toolrun.ExecutorOptions{CodeRunner: sandbox.Default()})
	inTool(t, ex, func(ctx context.Context, s toolrun.ThreadState) {
		cctx, cancel := context.WithCancel(ctx)
		run := s.RunCode(cctx, "export default () => { for(;;){} }", &toolrun.CodeOptions{Language: "javascript"})
		cancel()
		res := run.Wait(context.Background())
		assert.Equal(t, toolrun.CodeStatusTerminated, res.Status)
	})
}

// A tool sees its own call id (for idempotency keys toward outside
// systems): the model's id, a queued call's id, and for invocations the
// caller's id with the invocation's number — the same when run again.
func TestToolSeesItsOwnCallID(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	record := func(s toolrun.ThreadState) {
		mu.Lock()
		seen = append(seen, s.CallID())
		mu.Unlock()
	}
	leaf := fn("leaf", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		record(s)
		return toolrun.Text("leaf"), nil
	})
	outer := fn("outer", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		record(s)
		s.InvokeTool(ctx, "leaf", nil)
		s.InvokeTool(ctx, "leaf", nil)
		return toolrun.Text("outer"), s.QueueTool("leaf", nil)
	})
	ex := newExec(t, nil, leaf, outer)
	run(t, ex, "t", call("call_9", "outer", ""))
	assert.Equal(t, []string{"call_9", "call_9_i1", "call_9_i2", "call_9_q1"}, seen)

	seen = nil
	run(t, newExec(t, nil, leaf, outer), "t", call("call_9", "outer", ""))
	assert.Equal(t, []string{"call_9", "call_9_i1", "call_9_i2", "call_9_q1"}, seen, "run again (a fresh store: nothing stored), the ids are the same")
}
