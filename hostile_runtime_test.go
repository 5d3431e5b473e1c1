package toolrun_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/storetest"
)

// funcProvider is a Provider made of its Stream function.
type funcProvider func(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error]

func (funcProvider) Name() string { return "func" }
func (f funcProvider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	return f(ctx, req)
}

// hostileRT returns a runtime whose agent "agent" has a side A prompt "p"
// (chat and past tools) offering tools, over prov, and a thread of it.
func hostileRT(t *testing.T, prov toolrun.Provider, st toolrun.Store, tools ...*toolrun.Func[noArgs]) (*toolrun.Runtime, string) {
	t.Helper()
	reg := toolrun.NewRegistry(nil)
	defs := []toolrun.Definition{&toolrun.Model{Name: "m", Provider: prov, ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 10}, SideB: toolrun.Side{Human: true}}}
	p := &toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true}
	for _, f := range tools {
		p.Tools = append(p.Tools, toolrun.Use(f.Name))
		defs = append(defs, f)
	}
	require.NoError(t, reg.Register(append(defs, p)...))
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st})
	th, err := rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	return rt, th.ID
}

// countedTool is a tool that counts its runs in runs.
func countedTool(name string, runs map[string]int) *toolrun.Func[noArgs] {
	return fn(name, func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
		runs[name]++
		return toolrun.Text(name + " ok"), nil
	})
}

// inChild reruns test name in a child process (HOSTILE_CHILD=1) and fails
// t when the child dies.
func inChild(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOSTILE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		s := string(out)
		if i := strings.Index(s, "fatal error"); i >= 0 {
			s = s[i:min(len(s), i+120)]
		}
		t.Fatalf("child process died (%v): %s", err, s)
	}
}

// TestToolPanickingWithACyclicValueIsContained: a tool that panics with a
// map that holds itself gets an error result. Formatting the panic value
// with fmt followed the map without end and overflowed the stack, which
// killed the process (run in a child process).
func TestToolPanickingWithACyclicValueIsContained(t *testing.T) {
	if os.Getenv("HOSTILE_CHILD") == "" {
		inChild(t, t.Name())
		return
	}
	ex := newExec(t, nil, fn("boom", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
		m := map[string]any{}
		m["self"] = m
		panic(m)
	}))
	out := run(t, ex, "t", call("1", "boom", ""))
	assert.Contains(t, out[0].Message.Content, "tool panicked")
}

// TestSendFromInsideItsOwnThreadsTurnIsRefused: a tool that calls Send on
// its own thread gets an error at once: the Send would wait for the turn
// that waits for the tool. It used to wait for ever, its ctx ignored.
func TestSendFromInsideItsOwnThreadsTurnIsRefused(t *testing.T) {
	var rt *toolrun.Runtime
	var inner error
	tool := fn("reenter", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		_, inner = rt.Send(ctx, s.ThreadID(), "again")
		return toolrun.Textf("inner: %v", inner), nil
	})
	rt, id := hostileRT(t, scripted.New(scripted.Calls(scripted.Call("reenter", map[string]any{})), scripted.Text("done")), nil, tool)
	done := make(chan error, 1)
	go func() { _, err := rt.Send(context.Background(), id, "go"); done <- err }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("deadlock: neither Send returned")
	}
	require.Error(t, inner)
	assert.Contains(t, inner.Error(), "from inside a turn of the same thread")
}

// TestSendWaitingForABusyThreadEndsWithItsContext: a Send waiting for
// another turn of its thread gives up when its ctx ends.
func TestSendWaitingForABusyThreadEndsWithItsContext(t *testing.T) {
	entered, leave := make(chan struct{}), make(chan struct{})
	tool := fn("hold", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		close(entered)
		<-leave
		return toolrun.Text("held"), nil
	})
	rt, id := hostileRT(t, scripted.New(scripted.Calls(scripted.Call("hold", map[string]any{})), scripted.Text("done")), nil, tool)
	first := make(chan error, 1)
	go func() { _, err := rt.Send(context.Background(), id, "go"); first <- err }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() { _, err := rt.Send(ctx, id, "and now"); second <- err }()
	cancel()
	select {
	case err := <-second:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(time.Minute):
		t.Fatal("the waiting Send did not end with its ctx")
	}
	close(leave)
	require.NoError(t, <-first)
}

// TestQueuedCallWithAnOverlongIDRunsOnce: a queued call's id grows past the
// 64 bytes an id may have ("<id>_q1"); it is replaced by the same derived
// id each time, so that the batch run again finds its stored result
// instead of running it twice.
func TestQueuedCallWithAnOverlongIDRunsOnce(t *testing.T) {
	runs := map[string]int{}
	label := fn("label", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("labelled"), s.QueueTool("audit", nil)
	})
	ex := newExec(t, nil, countedTool("audit", runs), label)
	id := strings.Repeat("a", 62) // a safe id (1–64 bytes); its queued call's id "<id>_q1" is 65
	run(t, ex, "t", call(id, "label", ""))
	out := run(t, ex, "t", call(id, "label", "")) // the batch again, as after a crash
	require.Len(t, out, 2)
	assert.True(t, out[1].Resumed, "the queued call's stored result is not recognised")
	assert.Equal(t, 1, runs["audit"], "the queued call ran twice")
}

// TestOverlongNumberArgumentIsRefusedByItsLength: a number of a million
// digits is refused for its length, naming the argument; the validator
// read it as an exact fraction, at a cost growing with the square of its
// digits (seconds that ctx could not interrupt).
func TestOverlongNumberArgumentIsRefusedByItsLength(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	args := `{"query":"q","format":"json","limit":1` + strings.Repeat("0", 1<<20) + `}`
	out := run(t, ex, "t", call("1", "search", args))
	assert.Equal(t, toolrun.StatusError, out[0].Message.ToolStatus)
	assert.Contains(t, out[0].Message.Content, "[limit] a number of 1048577 characters; numbers may have at most 1000")
}

// TestMisbehavingProvidersAreContained: a provider that panics, or yields
// again after the runtime stopped its stream (which makes the range
// statement panic), fails the turn with an error instead of panicking
// Send; one that streams on after the turn's ctx ended is stopped at its
// next chunk.
func TestMisbehavingProvidersAreContained(t *testing.T) {
	var afterCancel atomic.Int32
	cases := map[string]func(ctx context.Context, cancel func(), yield func(toolrun.Chunk, error) bool){
		"panics": func(_ context.Context, _ func(), yield func(toolrun.Chunk, error) bool) { panic("provider bug") },
		"yields after the consumer stopped": func(_ context.Context, _ func(), yield func(toolrun.Chunk, error) bool) {
			yield(toolrun.Chunk{}, &toolrun.ProviderError{Provider: "func", Message: "boom"})
			yield(toolrun.Chunk{Type: toolrun.ChunkText, Text: "late"}, nil)
		},
		"streams on after ctx is cancelled": func(ctx context.Context, cancel func(), yield func(toolrun.Chunk, error) bool) {
			for i := range 1000 {
				if i == 10 {
					cancel()
				}
				if ctx.Err() != nil {
					afterCancel.Add(1)
				}
				if !yield(toolrun.Chunk{Type: toolrun.ChunkText, Text: "x"}, nil) {
					return
				}
			}
		},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt, id := hostileRT(t, funcProvider(func(pctx context.Context, _ *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
				return func(yield func(toolrun.Chunk, error) bool) { body(pctx, cancel, yield) }
			}), nil)
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						err = fmt.Errorf("Send panicked: %v", p)
					}
				}()
				_, err = rt.Send(ctx, id, "go")
			}()
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "Send panicked")
			if name == "streams on after ctx is cancelled" {
				// Checked here, not after the loop: a -run filter that skips
				// the subtests must not fail the test.
				assert.EqualValues(t, 1, afterCancel.Load(), "chunks the provider yielded after the turn's ctx ended")
			}
		})
	}
}

// TestResumeFindsTheInterruptedResponse: Resume runs the calls of the
// response a failed store write interrupted even when more than a page of
// results follows it, and when a tool injected a user message among them;
// it used to read only the newest 64 rows and to stop at any user message
// not of the acting side, and then ran none of them.
func TestResumeFindsTheInterruptedResponse(t *testing.T) {
	t.Run("more than 64 messages since the response", func(t *testing.T) {
		runs := map[string]int{}
		var calls []scripted.ToolCall
		for range 100 {
			calls = append(calls, scripted.Call("work", map[string]any{}))
		}
		mem := toolrun.NewMemoryStore() // appends: user, assistant, results… the 71st result fails
		failing := &storetest.FailingStore{Store: mem, FailAt: 73, Match: func(op string) bool { return op == storetest.OpAppendMessages }}
		rt, id := hostileRT(t, scripted.New(scripted.Calls(calls...), scripted.Text("done")), failing, countedTool("work", runs))
		_, err := rt.Send(context.Background(), id, "go")
		require.ErrorIs(t, err, storetest.ErrInjected)
		_, err = rt.Resume(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, 101, runs["work"], "70 stored + 1 lost ran before; the 30 without a result must run on Resume")
	})
	t.Run("a tool injected a user message", func(t *testing.T) {
		runs := map[string]int{}
		inject := fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("ok"), s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleUser, Content: "note"})
		})
		mem := toolrun.NewMemoryStore() // appends: user, assistant, injected, inject's result, second's result (fails)
		failing := &storetest.FailingStore{Store: mem, FailAt: 5, Match: func(op string) bool { return op == storetest.OpAppendMessages }}
		rt, id := hostileRT(t, scripted.New(scripted.Calls(scripted.Call("inject", map[string]any{}), scripted.Call("second", map[string]any{})), scripted.Text("done")),
			failing, inject, countedTool("second", runs))
		_, err := rt.Send(context.Background(), id, "go")
		require.ErrorIs(t, err, storetest.ErrInjected)
		_, err = rt.Resume(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, 2, runs["second"], "second's result was lost; Resume must run it")
	})
}

// TestModelToolNamesAreStoredCleaned: a tool name from the model with a NUL
// byte and invalid UTF-8 is stored in the assistant message as cleaned as
// in its result, so that the call and its result name the same tool.
func TestModelToolNamesAreStoredCleaned(t *testing.T) {
	bad := "get\x00iss\xffue"
	rt, id := hostileRT(t, scripted.New(scripted.Calls(scripted.ToolCall{Name: bad, Arguments: "{}"}), scripted.Text("done")), nil)
	reply, err := rt.Send(context.Background(), id, "go")
	require.NoError(t, err)
	var callName, resultName string
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleAssistant && len(m.ToolCalls) > 0 {
			callName = m.ToolCalls[0].Name
		}
		if m.Role == toolrun.RoleTool {
			resultName = m.Name
		}
	}
	require.NotEmpty(t, resultName)
	assert.Equal(t, resultName, callName)
	assert.NotContains(t, callName, "\x00")
	assert.True(t, utf8.ValidString(callName), "%q", callName)
}

// TestMemoryStoreRefusesValuesThatHoldThemselves: a thread, message or
// child entry whose map holds itself is refused with an error naming where,
// and nothing of it is stored. Copying such a map followed it without end
// and overflowed the stack, which killed the process (run in a child
// process).
func TestMemoryStoreRefusesValuesThatHoldThemselves(t *testing.T) {
	if os.Getenv("HOSTILE_CHILD") == "" {
		inChild(t, t.Name())
		return
	}
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	self := map[string]any{}
	self["self"] = self
	at := time.Now()

	err := st.CreateThread(ctx, &toolrun.Thread{ID: "t", Properties: map[string]any{"a": self}, CreatedAt: at})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "properties.a.self")
	_, err = st.GetThread(ctx, "t")
	assert.ErrorIs(t, err, toolrun.ErrNotFound, "the refused thread was stored")

	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t", CreatedAt: at}))
	err = st.UpdateThread(ctx, &toolrun.Thread{ID: "t", Arguments: self})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "arguments.self")
	err = st.AppendMessages(ctx, "t",
		&toolrun.Message{ID: "m1", Role: toolrun.RoleUser, Content: "first", CreatedAt: at},
		&toolrun.Message{ID: "m2", Role: toolrun.RoleUser, Content: "second", Metadata: self, CreatedAt: at})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "message 1 (m2): metadata.self")
	assert.ErrorIs(t, err, toolrun.ErrUnstorable)
	err = st.AppendMessages(ctx, "t", &toolrun.Message{ID: "m3", Role: toolrun.RoleTool, ToolCallID: "c", ErrorData: self, CreatedAt: at})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "error_data.self")
	err = st.PutChild(ctx, toolrun.ChildEntry{ParentID: "t", Reference: "c", InitialArguments: self})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "initial_arguments.self")

	p, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{})
	require.NoError(t, err)
	assert.Empty(t, p.Messages, "a refused append stored some of its batch")
	th, err := st.GetThread(ctx, "t")
	require.NoError(t, err)
	assert.Nil(t, th.Arguments, "a refused update changed the thread")
	kids, err := st.Children(ctx, "t")
	require.NoError(t, err)
	assert.Empty(t, kids, "a refused child entry was stored")
}

// TestMemoryStoreRefusesMapsThatGrowTooLarge: a map that shares one map
// many times (each level twice the one below, 2²⁵ values once copied) is
// refused with ErrUnstorable, storing nothing, instead of being copied
// into a tree of every path.
func TestMemoryStoreRefusesMapsThatGrowTooLarge(t *testing.T) {
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t", CreatedAt: time.Now()}))
	shared := map[string]any{"leaf": true}
	for range 25 {
		shared = map[string]any{"a": shared, "b": shared}
	}
	err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: "m", Role: toolrun.RoleUser, Metadata: shared, CreatedAt: time.Now()})
	require.ErrorIs(t, err, toolrun.ErrUnstorable)
	assert.Contains(t, err.Error(), "metadata")
	p, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{})
	require.NoError(t, err)
	assert.Empty(t, p.Messages)
}
