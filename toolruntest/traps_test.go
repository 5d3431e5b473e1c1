package toolruntest_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// counted returns a tool that counts its runs and answers out.
func counted(name, out string, runs *int) *toolrun.Func[struct{}] {
	return &toolrun.Func[struct{}]{Name: name, Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
		*runs++
		return toolrun.Text(out), nil
	}}
}

// TestCallIsNotAnsweredBySeededHistory: a history seeded as models number
// their calls (call_1 and its result) does not answer Call's call: the
// executor would resume a call whose id has a stored result, so the tool
// would never run and the test would read the seeded result.
func TestCallIsNotAnsweredBySeededHistory(t *testing.T) {
	runs := 0
	st := toolruntest.NewState(t, &toolruntest.Options{Messages: []toolrun.Message{
		{Role: toolrun.RoleUser, Content: "hi"},
		{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "call_1", Name: "lookup", Arguments: "{}"}}},
		{Role: toolrun.RoleTool, ToolCallID: "call_1", Name: "lookup", Content: "old seeded result", ToolStatus: toolrun.StatusSuccess},
	}})
	res := toolruntest.Call(t, counted("ping", "pong", &runs), st, `{}`)
	assert.Equal(t, 1, runs, "the tool ran")
	assert.Equal(t, "pong", res.Result)
	assert.Equal(t, "pong", res.Content)
	assert.NotEqual(t, "call_1", res.Message.ToolCallID)
	seeded, err := st.Store().ToolResult(context.Background(), st.ThreadID(), "call_1")
	require.NoError(t, err)
	assert.Equal(t, "old seeded result", seeded.Content, "the seeded result is left as it was")
}

// TestCallIDsSkipIdsTheThreadNames: Call's ids are toolruntest_call_N, N
// counted on past an id a seeded result, a seeded assistant call or a
// message stored after NewState already names.
func TestCallIDsSkipIdsTheThreadNames(t *testing.T) {
	runs := 0
	ping := counted("ping", "pong", &runs)
	st := toolruntest.NewState(t, &toolruntest.Options{Messages: []toolrun.Message{
		{Role: toolrun.RoleTool, ToolCallID: "toolruntest_call_1", Name: "ping", Content: "seeded", ToolStatus: toolrun.StatusSuccess},
		{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "toolruntest_call_2", Name: "ping", Arguments: "{}"}}},
	}})
	first := toolruntest.Call(t, ping, st, `{}`)
	assert.Equal(t, "toolruntest_call_3", first.Message.ToolCallID)
	later := &toolrun.Message{ID: "m-later", Role: toolrun.RoleTool, ToolCallID: "toolruntest_call_4", Name: "ping",
		Content: "stored later", ToolStatus: toolrun.StatusSuccess, CreatedAt: time.Now()}
	require.NoError(t, st.Store().AppendMessages(context.Background(), st.ThreadID(), later))
	second := toolruntest.Call(t, ping, st, `{}`)
	assert.Equal(t, "toolruntest_call_5", second.Message.ToolCallID)
	assert.Equal(t, 2, runs, "both calls ran")
	assert.Equal(t, "pong", second.Result)
	assert.False(t, first.Outcomes[0].Resumed || second.Outcomes[0].Resumed)
}

// fatalT records the first Fatalf and ends the goroutine, as testing.T's
// Fatalf does; everything else goes to the test's T.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// callFatal runs Call on a goroutine of its own with a fatalT, and returns
// the message it failed with ("" when it returned) and its result.
func callFatal(t *testing.T, tool toolrun.Tool, st *toolruntest.State) (string, toolruntest.Result) {
	ft := &fatalT{TB: t}
	var res toolruntest.Result
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = toolruntest.Call(ft, tool, st, `{}`)
	}()
	<-done
	return ft.msg, res
}

// TestCallRefusesAnotherToolOfARegisteredName: the tool given to Call is
// the one under test. A registry holds one tool per name, so when the
// State already has another tool of that name — a fake in Options.Tools,
// an earlier variant given to Call — Call fails the test naming the clash
// instead of letting the other tool answer.
func TestCallRefusesAnotherToolOfARegisteredName(t *testing.T) {
	fakeRuns, realRuns := 0, 0
	fake := counted("greet", "fake from Options.Tools", &fakeRuns)
	underTest := counted("greet", "the tool under test", &realRuns)

	st := toolruntest.NewState(t, &toolruntest.Options{Tools: []toolrun.Tool{notify, fake}})
	msg, res := callFatal(t, underTest, st)
	assert.Contains(t, msg, `"greet"`, "the clash is named (result %q)", res.Result)
	assert.Contains(t, msg, "Options.Tools[1]")
	assert.Zero(t, fakeRuns, "the other tool did not answer")
	assert.Zero(t, realRuns)

	st = toolruntest.NewState(t, nil)
	msg, _ = callFatal(t, fake, st)
	require.Empty(t, msg)
	msg, res = callFatal(t, underTest, st)
	assert.Contains(t, msg, `"greet"`, "the clash is named (result %q)", res.Result)
	assert.Contains(t, msg, "an earlier Call")
	assert.Equal(t, 1, fakeRuns, "only the first Call ran its tool")
	assert.Zero(t, realRuns)
}

// TestCallRunsTheSameToolAgain: the tool given to Call may also be in
// Options.Tools, and may be called again: it is the same tool, no clash.
func TestCallRunsTheSameToolAgain(t *testing.T) {
	runs := 0
	ping := counted("ping", "pong", &runs)
	st := toolruntest.NewState(t, &toolruntest.Options{Tools: []toolrun.Tool{ping}})
	for range 2 {
		msg, res := callFatal(t, ping, st)
		require.Empty(t, msg)
		assert.Equal(t, "pong", res.Result)
	}
	assert.Equal(t, 2, runs)
}
