package toolrun_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/storetest"
)

type noArgs = struct{}

func fn(name string, f func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error)) *toolrun.Func[noArgs] {
	return &toolrun.Func[noArgs]{Name: name, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		return f(ctx, s)
	}}
}

// --- Order and persistence ---

func TestCallsRunInOrderAndQueuedCallsGoToTheTail(t *testing.T) {
	var mu sync.Mutex
	var order []string
	rec := func(name string) *toolrun.Func[noArgs] {
		return fn(name, func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			return toolrun.Text(name), nil
		})
	}
	first := fn("first", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		order = append(order, "first")
		require.NoError(t, s.QueueTool("q1", nil))
		require.NoError(t, s.QueueTool("q2", map[string]any{}))
		return toolrun.Text("first"), nil
	})
	q1 := fn("q1", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		order = append(order, "q1")
		require.NoError(t, s.QueueTool("q3", "{}"))
		return toolrun.Text("q1"), nil
	})
	ex := newExec(t, nil, first, q1, rec("q2"), rec("q3"), rec("second"))
	out := run(t, ex, "t1", call("a", "first", ""), call("b", "second", ""))
	assert.Equal(t, []string{"first", "second", "q1", "q2", "q3"}, order)
	require.Len(t, out, 5)
	assert.True(t, out[2].Message.Queued)
	assert.Equal(t, true, out[2].Message.Queued)
	assert.Equal(t, "{}", out[2].Message.Arguments, "nil args are queued as {}")
	page, err := ex.Store().ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	require.NoError(t, err)
	var names []string
	for _, m := range page.Messages {
		names = append(names, m.Name)
	}
	assert.Equal(t, []string{"first", "second", "q1", "q2", "q3"}, names, "stored in execution order")
}

func TestEachResultIsStoredBeforeTheNextCallStarts(t *testing.T) {
	var seen []int
	mk := func(name string) *toolrun.Func[noArgs] {
		return fn(name, func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			p, err := s.Messages(ctx, nil)
			require.NoError(t, err)
			seen = append(seen, len(p.Messages))
			return toolrun.Text(name), nil
		})
	}
	ex := newExec(t, nil, mk("a"), mk("b"), mk("c"))
	run(t, ex, "t1", call("1", "a", ""), call("2", "b", ""), call("3", "c", ""))
	assert.Equal(t, []int{0, 1, 2}, seen)
}

func TestResumedBatchDoesNotExecuteStoredCalls(t *testing.T) {
	count := map[string]int{}
	mk := func(name string) *toolrun.Func[noArgs] {
		return fn(name, func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			count[name]++
			return toolrun.Text(name), nil
		})
	}
	ex := newExec(t, nil, mk("a"), mk("b"))
	run(t, ex, "t1", call("1", "a", ""))
	out := run(t, ex, "t1", call("1", "a", ""), call("2", "b", ""))
	assert.Equal(t, 1, count["a"], "a's result was stored: not run again")
	assert.Equal(t, 1, count["b"])
	assert.True(t, out[0].Resumed)
	assert.Equal(t, "a", out[0].Result.Result)
	page, _ := ex.Store().ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	assert.Len(t, page.Messages, 2, "no duplicate result stored")
}

func TestStoreRefusesSecondResultForSameCall(t *testing.T) {
	st := toolrun.NewMemoryStore()
	ctx := context.Background()
	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t"}))
	m := func() *toolrun.Message {
		return &toolrun.Message{ID: "m1", Role: toolrun.RoleTool, ToolCallID: "c1", Content: "x", ToolStatus: toolrun.StatusSuccess, CreatedAt: time.Now()}
	}
	require.NoError(t, st.AppendMessages(ctx, "t", m()))
	require.ErrorIs(t, st.AppendMessages(ctx, "t", m()), toolrun.ErrDuplicateToolResult)
}

// failingStore fails AppendMessages after n successful appends.
type failingStore struct {
	*toolrun.MemoryStore
	mu sync.Mutex
	n  int
}

func (f *failingStore) AppendMessages(ctx context.Context, id string, msgs ...*toolrun.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return errors.New("disk full")
	}
	f.n--
	return f.MemoryStore.AppendMessages(ctx, id, msgs...)
}

func TestStoreFailureStopsTheBatchWithAGoError(t *testing.T) {
	ran := map[string]bool{}
	mk := func(name string) *toolrun.Func[noArgs] {
		return fn(name, func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			ran[name] = true
			return toolrun.Text(name), nil
		})
	}
	st := &failingStore{MemoryStore: toolrun.NewMemoryStore(), n: 1}
	ex := newExec(t, &toolrun.ExecutorOptions{Store: st}, mk("a"), mk("b"), mk("c"))
	out, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{call("1", "a", ""), call("2", "b", ""), call("3", "c", "")})
	var se *toolrun.StoreError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "disk full")
	assert.Contains(t, err.Error(), "append tool result 2")
	assert.Len(t, out, 1, "only the stored result is reported")
	assert.False(t, ran["c"], "nothing runs after a result could not be stored")
	page, _ := st.ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	require.Len(t, page.Messages, 1)
	assert.Equal(t, "1", page.Messages[0].ToolCallID)
}

func TestCancelledContextStoresTheFinishedCallAndStops(t *testing.T) {
	// Execution is nil for a bare executor run; the runtime sets it. Use a
	// tool that aborts via context cancellation as the bare equivalent.
	ctx, cancel := context.WithCancel(context.Background())
	ranB := false
	ex := newExec(t, nil,
		fn("a", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			cancel()
			return toolrun.Text("a"), nil
		}),
		fn("b", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			ranB = true
			return toolrun.Text("b"), nil
		}),
	)
	out, err := ex.Run(ctx, "t1", []toolrun.ToolCall{call("1", "a", ""), call("2", "b", "")})
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, ranB)
	assert.Len(t, out, 1)
}

// --- uses lists ---

func TestUsesListGatesInvokeAndQueue(t *testing.T) {
	var queueErr error
	var invoked toolrun.Result
	caller := &toolrun.Func[noArgs]{Name: "caller", Uses: []string{"allowed"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		queueErr = s.QueueTool("secret_tool", nil)
		invoked = s.InvokeTool(ctx, "secret_tool", nil)
		r := s.InvokeTool(ctx, "allowed", nil)
		return r, nil
	}}
	ranSecret := false
	ex := newExec(t, nil, caller,
		fn("allowed", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("allowed ran"), nil
		}),
		fn("secret_tool", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			ranSecret = true
			return toolrun.Text("x"), nil
		}),
	)
	out := run(t, ex, "t1", call("1", "caller", ""))
	want := `Tool "secret_tool" is not declared in the current tool's uses list. Allowed tools: allowed`
	require.ErrorIs(t, queueErr, toolrun.ErrNotDeclared)
	assert.Equal(t, want, queueErr.Error())
	assert.Equal(t, toolrun.StatusError, invoked.Status)
	assert.Equal(t, want, invoked.Error)
	assert.False(t, ranSecret)
	assert.Len(t, out, 1, "the refused queue call queued nothing")
	assert.Equal(t, "allowed ran", out[0].Message.Content)
}

func TestEmptyUsesAllowsNothingAndOmittedAllowsAll(t *testing.T) {
	var errEmpty, errNil error
	ex := newExec(t, nil,
		&toolrun.Func[noArgs]{Name: "none", Uses: []string{}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
			errEmpty = s.QueueTool("t", nil)
			return toolrun.Result{}, nil
		}},
		&toolrun.Func[noArgs]{Name: "any", Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
			errNil = s.QueueTool("t", nil)
			return toolrun.Result{}, nil
		}},
		fn("t", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("t"), nil }),
	)
	run(t, ex, "t1", call("1", "none", ""), call("2", "any", ""))
	require.Error(t, errEmpty)
	assert.Contains(t, errEmpty.Error(), "Allowed tools: (none)")
	assert.NoError(t, errNil)
}

func TestNestedInvocationsRestoreTheUsesList(t *testing.T) {
	var afterPanic, afterFail error
	var second toolrun.Result
	outer := &toolrun.Func[noArgs]{Name: "outer", Uses: []string{"inner_panics", "inner_fails"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		r := s.InvokeTool(ctx, "inner_panics", nil)
		require.Equal(t, toolrun.StatusError, r.Status)
		afterPanic = s.QueueTool("other", nil) // outer's list applies again: refused
		r = s.InvokeTool(ctx, "inner_fails", nil)
		require.Equal(t, toolrun.StatusError, r.Status)
		afterFail = s.QueueTool("other", nil)
		second = s.InvokeTool(ctx, "inner_fails", nil) // still allowed by outer's list
		return toolrun.Text("done"), nil
	}}
	ex := newExec(t, nil, outer,
		&toolrun.Func[noArgs]{Name: "inner_panics", Uses: []string{"other"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
			panic("inner boom")
		}},
		&toolrun.Func[noArgs]{Name: "inner_fails", Uses: []string{"other"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
			return toolrun.Result{}, errors.New("inner failed")
		}},
		fn("other", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("other"), nil }),
	)
	out := run(t, ex, "t1", call("1", "outer", ""))
	assert.ErrorIs(t, afterPanic, toolrun.ErrNotDeclared)
	assert.ErrorIs(t, afterFail, toolrun.ErrNotDeclared)
	assert.Equal(t, "inner failed", second.Error)
	assert.Len(t, out, 1)
}

func TestInvokeToolRunsTheFullPipelineAndPersistsNothing(t *testing.T) {
	var got toolrun.Result
	var invalid toolrun.Result
	var missing toolrun.Result
	ex := newExec(t, nil,
		fn("caller", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			got = s.InvokeTool(ctx, "search", map[string]any{"query": "go", "format": "json"})
			invalid = s.InvokeTool(ctx, "search", map[string]any{"format": "json"})
			missing = s.InvokeTool(ctx, "nope", nil)
			return toolrun.Text("ok"), nil
		}),
		searchTool(nil),
	)
	started := 0
	ex.Subscribe("t1", func(ev toolrun.Event) {
		if ev.Type == toolrun.EventToolCallStarted {
			started++
		}
	})
	run(t, ex, "t1", call("1", "caller", ""))
	assert.Equal(t, "found go", got.Result)
	assert.Equal(t, "Tool argument validation failed: [query] required property is missing", invalid.Error)
	assert.Equal(t, "Tool not found: nope", missing.Error)
	page, _ := ex.Store().ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	assert.Len(t, page.Messages, 1, "only the caller's result is stored")
	assert.Equal(t, 1, started, "invokeTool fires no tool_call_started")
}

// --- Variables and secrets ---

type labelArgs struct {
	Number int `json:"number" jsonschema:"minimum=1"`
}

func TestRequiredVariablesAreCheckedBeforeExecute(t *testing.T) {
	called := false
	tool := &toolrun.Func[labelArgs]{
		Name: "label",
		Variables: []toolrun.Variable{
			{Name: "GITHUB_TOKEN", Type: toolrun.VarSecret, Required: true},
			{Name: "ORG", Type: toolrun.VarText, Required: true},
			{Name: "OPTIONAL", Type: toolrun.VarText},
		},
		Execute: func(ctx context.Context, s toolrun.ThreadState, a labelArgs) (toolrun.Result, error) {
			called = true
			return toolrun.Text("labelled"), nil
		},
	}
	ex := newExec(t, nil, tool)
	out := run(t, ex, "t1", call("1", "label", `{"number":1}`))
	require.False(t, called)
	m := out[0].Message
	assert.Equal(t, "Failed to execute tool: Missing required variables: GITHUB_TOKEN, ORG", m.Content)
	assert.Equal(t, "missing_variables", m.ErrorCode)
	assert.Equal(t, map[string]any{"missing": []any{"GITHUB_TOKEN", "ORG"}}, m.ErrorData)

	// The empty string counts as present; the instance env is the last link.
	ctx := context.Background()
	require.NoError(t, ex.Store().SetEnv(ctx, toolrun.ScopeThread, "t2", "ORG", toolrun.EnvValue{Value: "", Type: toolrun.VarText}))
	ex2 := toolrun.NewExecutor(ex.Registry(), &toolrun.ExecutorOptions{Store: ex.Store(), Env: map[string]toolrun.EnvValue{"GITHUB_TOKEN": {Value: "tok-instance"}}})
	out = run(t, ex2, "t2", call("1", "label", `{"number":1}`))
	assert.True(t, called)
	assert.Equal(t, "labelled", out[0].Message.Content)
}

func TestEnvChainOrderAndTypes(t *testing.T) {
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t1", UserID: "u1"}))
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeThread, "t1", "A", toolrun.EnvValue{Value: "thread", Type: toolrun.VarText}))
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeUser, "u1", "A", toolrun.EnvValue{Value: "user"}))
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeUser, "u1", "B", toolrun.EnvValue{Value: "user-b", Type: toolrun.VarText}))
	got := map[string]string{}
	types := map[string]toolrun.VarType{}
	var notFound error
	ex := newExec(t, &toolrun.ExecutorOptions{Store: st, Env: map[string]toolrun.EnvValue{
		"A": {Value: "instance"}, "B": {Value: "instance-b"}, "C": {Value: "instance-c", Type: toolrun.VarText},
	}}, fn("read", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		for _, n := range []string{"A", "B", "C"} {
			got[n], _ = s.Env(ctx, n)
			types[n], _ = s.EnvType(ctx, n)
		}
		_, notFound = s.Env(ctx, "D")
		types["D"], _ = s.EnvType(ctx, "D")
		require.NoError(t, s.SetEnv(ctx, "C", "set-by-tool", toolrun.VarText))
		got["C2"], _ = s.Env(ctx, "C")
		return toolrun.Result{}, nil
	}))
	run(t, ex, "t1", call("1", "read", ""))
	assert.Equal(t, map[string]string{"A": "thread", "B": "user-b", "C": "instance-c", "C2": "set-by-tool"}, got)
	assert.Equal(t, map[string]toolrun.VarType{"A": toolrun.VarText, "B": toolrun.VarText, "C": toolrun.VarText, "D": toolrun.VarSecret}, types)
	assert.ErrorIs(t, notFound, toolrun.ErrVariableNotFound)
	v, err := st.GetEnv(ctx, toolrun.ScopeThread, "t1", "C")
	require.NoError(t, err)
	assert.Equal(t, toolrun.EnvValue{Value: "set-by-tool", Type: toolrun.VarText}, v)
}

func TestSecretsAreRedactedFromEverythingThatLeavesATool(t *testing.T) {
	const secret = `s3cr3t/"tok"&x`
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeThread, "t1", "TOKEN", toolrun.EnvValue{Value: secret, Type: toolrun.VarSecret}))
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeThread, "t1", "SHOWN", toolrun.EnvValue{Value: "visible-text", Type: toolrun.VarText}))
	var events []toolrun.Event
	ex := newExec(t, &toolrun.ExecutorOptions{Store: st},
		fn("leak", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			tok, _ := s.Env(ctx, "TOKEN")
			shown, _ := s.Env(ctx, "SHOWN")
			s.Emit("progress", map[string]any{"token": tok})
			js, _ := json.Marshal(map[string]string{"t": tok})
			return toolrun.Result{Status: toolrun.StatusError,
				Error:     "failed with " + tok + " and " + shown + " json=" + string(js) + " url=" + url.QueryEscape(tok),
				ErrorData: map[string]any{"token": tok, "nested": []any{tok}},
				Stack:     "at " + tok,
			}, nil
		}),
	)
	ex.Subscribe("t1", func(ev toolrun.Event) { events = append(events, ev) })
	out := run(t, ex, "t1", call("1", "leak", ""))
	m := out[0].Message
	assert.NotContains(t, m.Content, "s3cr3t")
	assert.Contains(t, m.Content, "[REDACTED:TOKEN]")
	assert.Contains(t, m.Content, "visible-text", "text values are shown")
	assert.Equal(t, 3, strings.Count(m.Content, "[REDACTED:TOKEN]"), "raw, JSON-escaped and URL-encoded forms: %s", m.Content)
	all, _ := json.Marshal(m.Metadata)
	assert.NotContains(t, string(all), "s3cr3t")
	assert.NotContains(t, out[0].Result.Error, "s3cr3t")
	require.NotEmpty(t, events)
	evJSON, _ := json.Marshal(events)
	assert.NotContains(t, string(evJSON), "s3cr3t")
	assert.Contains(t, string(evJSON), "[REDACTED:TOKEN]")
}

// --- Attachments ---

func TestAttachmentsAreWrittenAsThreadFiles(t *testing.T) {
	png := []byte("\x89PNG fake")
	ex := newExec(t, nil, fn("draw", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Status: toolrun.StatusSuccess, Result: "drew it", Attachments: []toolrun.Attachment{
			{Name: "pic.png", MimeType: "image/png", Data: png, Width: 2, Height: 3},
			{Name: "notes.txt", MimeType: "text/plain", Data: []byte("hi")},
		}}, nil
	}))
	out := run(t, ex, "t1", call("1", "draw", ""))
	m := out[0].Message
	require.Len(t, m.Attachments, 2)
	a := m.Attachments[0]
	assert.Regexp(t, `^/attachments/\d+-[0-9a-f]{8}\.png$`, a.Path)
	assert.Equal(t, "pic.png", a.Name)
	assert.Equal(t, int64(len(png)), a.Size)
	assert.Equal(t, 2, a.Width)
	assert.Equal(t, "file", a.Type)
	assert.NotEmpty(t, a.ID)
	assert.Regexp(t, `\.txt$`, m.Attachments[1].Path)
	data, _, err := ex.Store().ReadFile(context.Background(), "t1", a.Path)
	require.NoError(t, err)
	assert.Equal(t, png, data)
	want := fmt.Sprintf("drew it\n\nAttachment path for \"pic.png\": %s\nAttachment path for \"notes.txt\": %s", a.Path, m.Attachments[1].Path)
	assert.Equal(t, want, m.Content)
}

func TestAttachmentJSONIsBase64(t *testing.T) {
	b, err := json.Marshal(toolrun.Attachment{Name: "a", MimeType: "x/y", Data: []byte("hello")})
	require.NoError(t, err)
	assert.Contains(t, string(b), base64.StdEncoding.EncodeToString([]byte("hello")))
}

// --- Hooks and events ---

type progressArgs struct {
	Description string `json:"description"`
	Path        string `json:"path"`
}

func TestHooksFireAroundEachCall(t *testing.T) {
	var log []string
	tool := &toolrun.Func[progressArgs]{Name: "write_file", ProgressArgument: "description", Execute: func(ctx context.Context, s toolrun.ThreadState, a progressArgs) (toolrun.Result, error) {
		log = append(log, "execute")
		return toolrun.Text("ok"), nil
	}}
	ex := newExec(t, &toolrun.ExecutorOptions{Hooks: toolrun.Hooks{
		ToolCallStarted: func(ctx context.Context, th string, ev toolrun.ToolCallStarted) {
			p := "<nil>"
			if ev.Progress != nil {
				p = *ev.Progress
			}
			log = append(log, "started:"+ev.ID+":"+p)
		},
		ToolCallDone: func(ctx context.Context, th string, ev toolrun.ToolCallDone) {
			log = append(log, "done:"+ev.ID+":"+string(ev.Status))
		},
	}}, tool, searchTool(nil))
	run(t, ex, "t1", call("1", "write_file", `{"description":"writing a.txt","path":"a.txt"}`), call("2", "search", `{}`))
	assert.Equal(t, []string{"started:1:writing a.txt", "execute", "done:1:success", "started:2:<nil>", "done:2:error"}, log)
}

func TestAnnotationsAreReturnedUnchangedAndNeverSent(t *testing.T) {
	ann := map[string]any{"agentbuilder": map[string]any{"codemode": map[string]any{"codeArgument": "code"}}}
	tool := &toolrun.Func[progressArgs]{Name: "code", Annotations: ann, Execute: func(ctx context.Context, s toolrun.ThreadState, a progressArgs) (toolrun.Result, error) {
		return toolrun.Text("ran"), nil
	}}
	ex := newExec(t, nil, tool)
	info, ok := ex.Registry().Tool("code")
	require.True(t, ok)
	assert.Equal(t, ann, info.Annotations)
	assert.NotContains(t, string(info.Parameters), "agentbuilder")
	out := run(t, ex, "t1", call("1", "code", `{"description":"d","path":"p"}`))
	assert.Equal(t, "ran", out[0].Message.Content)
}

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
	_, err := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: fs}).Run(context.Background(), "t1", calls)
	require.Error(t, err) // the queued call's result could not be stored: "crash"
	out, err := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: mem}).Run(context.Background(), "t1", calls)
	require.NoError(t, err)
	assert.True(t, out[0].Resumed)
	assert.Len(t, out, 2, "the queued call was lost on resume")
	assert.Equal(t, 2, ran, "child ran once before the crash (result lost) and must run again on resume")
}
