package toolrun_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

type issueArgs struct {
	Number int `json:"number" jsonschema:"minimum=1"`
}

type writeArgs struct {
	Description string `json:"description"`
	Content     string `json:"content"`
}

// world is a registry with a scripted model, a few tools, a prompt and an agent.
type world struct {
	reg *toolrun.Registry
	p   *scripted.Provider
	rt  *toolrun.Runtime
	log *bytes.Buffer
}

func newWorld(t *testing.T, prompt *toolrun.Prompt, side toolrun.Side, extra ...toolrun.Definition) *world {
	t.Helper()
	w := &world{log: &bytes.Buffer{}}
	w.reg = toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: slog.New(slog.NewTextHandler(w.log, nil))})
	w.p = scripted.New()
	if prompt.Model == "" {
		prompt.Model = "m"
	}
	if side.Prompt == "" {
		side.Prompt = prompt.Name
	}
	defs := []toolrun.Definition{
		&toolrun.Model{Name: "m", Provider: w.p, ID: "test-model"},
		prompt,
		&toolrun.Agent{Name: "agent", SideA: side, SideB: toolrun.Side{Human: true}},
		&toolrun.Func[issueArgs]{Name: "get_issue", Description: "Read an issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Textf("issue %d: crash on start", a.Number), nil
		}},
		&toolrun.Func[issueArgs]{Name: "label_issue", Description: "Label an issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Text("labelled"), s.QueueTool("audit", map[string]any{"number": a.Number})
		}},
		&toolrun.Func[issueArgs]{Name: "audit", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Text("audited"), nil
		}},
		&toolrun.Func[writeArgs]{Name: "write_file", ProgressArgument: "description", Execute: func(ctx context.Context, s toolrun.ThreadState, a writeArgs) (toolrun.Result, error) {
			return toolrun.Text("wrote"), nil
		}},
	}
	require.NoError(t, w.reg.Register(append(defs, extra...)...))
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Logger: slog.New(slog.NewTextHandler(w.log, nil))})
	return w
}

func (w *world) thread(t *testing.T) string {
	th, err := w.rt.NewThread(context.Background(), "agent", nil)
	require.NoError(t, err)
	return th.ID
}

func roles(msgs []toolrun.Message) string {
	var parts []string
	for _, m := range msgs {
		s := string(m.Role)
		if m.Role == toolrun.RoleTool {
			s += ":" + m.Name
		}
		if len(m.ToolCalls) > 0 {
			s += "+calls"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func triagePrompt() *toolrun.Prompt {
	return &toolrun.Prompt{Name: "triager", Text: "You triage issues.", IncludeChat: true, IncludePastTools: true,
		Tools: []toolrun.PromptTool{toolrun.Use("get_issue"), toolrun.Use("label_issue"), toolrun.Use("write_file")}}
}

func TestTurnRunsToolsInOrderAndPersistsBeforeTheNextRequest(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{MaxSteps: 5})
	w.p.Add(
		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 7}), scripted.Call("label_issue", map[string]any{"number": 7})).WithText("Reading."),
		scripted.Text("Labelled issue 7 as a bug."),
	)
	id := w.thread(t)
	reply, err := w.rt.Send(context.Background(), id, "Triage #7")
	require.NoError(t, err)
	assert.Equal(t, "Labelled issue 7 as a bug.", reply.Text)
	assert.Equal(t, toolrun.StopResponse, reply.StopReason)
	assert.Equal(t, "user assistant+calls tool:get_issue tool:label_issue tool:audit assistant", roles(reply.Messages))

	reqs := w.p.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "You triage issues.", reqs[0].System)
	assert.Len(t, reqs[0].Tools, 3)
	assert.Equal(t, "user", roles(reqs[0].Messages))
	// The second request sees the calls, their results, and the queued
	// audit call as a synthetic call block (CONTRACT: queued results reach the model).
	assert.Equal(t, "user assistant+calls tool:get_issue tool:label_issue assistant+calls tool:audit", roles(reqs[1].Messages))
	assert.Equal(t, "issue 7: crash on start", reqs[1].Messages[2].Content)
	// The synthetic call carries the queued call's real arguments, not {}.
	queuedCall := reqs[1].Messages[4].ToolCalls
	require.Len(t, queuedCall, 1)
	assert.Equal(t, "audit", queuedCall[0].Name)
	assert.JSONEq(t, `{"number":7}`, queuedCall[0].Arguments)
}

func TestIncludeChatFalseSendsOnlyTheSystemPrompt(t *testing.T) {
	p := triagePrompt()
	p.IncludeChat = false
	w := newWorld(t, p, toolrun.Side{})
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "hello")
	require.NoError(t, err)
	assert.Empty(t, w.p.LastRequest().Messages)
}

func TestIncludePastToolsFalseDropsToolMessages(t *testing.T) {
	p := triagePrompt()
	p.IncludePastTools = false
	w := newWorld(t, p, toolrun.Side{})
	w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})).WithText("Looking."), scripted.Text("done"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "hi")
	require.NoError(t, err)
	req := w.p.Requests()[1]
	assert.Equal(t, "user assistant", roles(req.Messages), "tool results dropped, calls stripped")
	assert.Equal(t, "Looking.", req.Messages[1].Content)
}

func TestMissingResultsAreSynthesisedAndOrphansDropped(t *testing.T) {
	p := triagePrompt()
	w := newWorld(t, p, toolrun.Side{})
	id := w.thread(t)
	ctx := context.Background()
	st := w.rt.Store()
	require.NoError(t, st.AppendMessages(ctx, id,
		&toolrun.Message{ID: "m1", Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "lost", Name: "get_issue", Arguments: "{}"}}, CreatedAt: time.Now()},
		&toolrun.Message{ID: "m2", Role: toolrun.RoleTool, ToolCallID: "orphan", Name: "get_issue", Content: "x", ToolStatus: toolrun.StatusSuccess, CreatedAt: time.Now()},
	))
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(ctx, id, "hi")
	require.NoError(t, err)
	msgs := w.p.LastRequest().Messages
	require.Equal(t, "assistant+calls tool:get_issue user", roles(msgs))
	assert.Equal(t, `Tool result missing from conversation history for prior call "get_issue". Treat this as a failed tool call.`, msgs[1].Content)
}

func TestAllowedToolsGate(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Calls(scripted.Call("audit", map[string]any{"number": 1})), scripted.Text("ok"))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "hi")
	require.NoError(t, err)
	assert.Equal(t, `Failed to execute tool: Tool "audit" is not available for this prompt. You can only use tools that were explicitly configured for this prompt.`, reply.Messages[2].Content)
}

func TestProgressFiresBeforeTheFinalFragment(t *testing.T) {
	var seen []string
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Hooks: toolrun.Hooks{
		ToolCallStarted: func(ctx context.Context, th string, ev toolrun.ToolCallStarted) {
			require.NotNil(t, ev.Progress)
			seen = append(seen, *ev.Progress+" | "+ev.Arguments)
		},
	}})
	w.p.Add(scripted.Fragments("write_file", `{"description":"writ`, `ing a.txt","con`, `tent":"a very long body"}`), scripted.Text("done"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "write")
	require.NoError(t, err)
	require.Len(t, seen, 1, "exactly once")
	assert.Equal(t, `writing a.txt | {"description":"writing a.txt","con`, seen[0], "fired while the content was still streaming")
}

func TestToolCallStartedWithoutProgressFiresOnStartAndOnce(t *testing.T) {
	var events []string
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 2})), scripted.Text("done"))
	id := w.thread(t)
	w.rt.Subscribe(id, func(ev toolrun.Event) { events = append(events, ev.Type) })
	_, err := w.rt.Send(context.Background(), id, "x")
	require.NoError(t, err)
	assert.Equal(t, []string{toolrun.EventToolCallStarted, toolrun.EventToolCallDone, toolrun.EventTurnDone}, events)
}

func TestMalformedStreamedArgumentsAreAnErrorResult(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Fragments("get_issue", `{"number": 3`), scripted.Text("sorry"))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(reply.Messages[2].Content, "Failed to execute tool: Tool arguments are not valid JSON: "), reply.Messages[2].Content)
}

func TestLoopGuardsStopAModelThatNeverStops(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{MaxSteps: 3})
	for i := 0; i < 5; i++ {
		w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})))
	}
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopMaxSideSteps, reply.StopReason)
	assert.Len(t, w.p.Requests(), 3)

	w = newWorld(t, triagePrompt(), toolrun.Side{})
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{MaxTotalSteps: 4})
	for i := 0; i < 6; i++ {
		w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})))
	}
	reply, err = w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopMaxTotalSteps, reply.StopReason)
	assert.Len(t, w.p.Requests(), 4)
}

func TestRepeatedErrorBreaker(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	for i := 0; i < 12; i++ {
		w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 0})))
	}
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopRepeatedToolError, reply.StopReason)
	assert.Len(t, w.p.Requests(), 8)
	last := reply.Messages[len(reply.Messages)-1]
	assert.Equal(t, toolrun.RoleAssistant, last.Role)
	assert.Contains(t, last.Content, "repeated 8 times")
}

func TestEmptyResponseGetsASyntheticFailedCall(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Text(""), scripted.Text("now with text"))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, "now with text", reply.Text)
	assert.Equal(t, "user assistant+calls tool:invalid_assistant_response assistant", roles(reply.Messages))
}

// TestNamelessCallIsToldApartFromAnEmptyResponse: a call that streamed no
// name cannot run and is left out of the stored response; the model is
// told what was wrong with it, not that it said nothing.
func TestNamelessCallIsToldApartFromAnEmptyResponse(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Calls(scripted.Call("", map[string]any{"number": 7})), scripted.Text("now with text"))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, "now with text", reply.Text)
	require.Equal(t, "user assistant+calls tool:invalid_assistant_response assistant", roles(reply.Messages))
	for _, c := range reply.Messages[1].ToolCalls {
		assert.NotEmpty(t, c.Name, "no call without a name is stored")
	}
	assert.Equal(t, "Failed to execute tool: The response's tool call had no tool name, so it could not run: call a tool by one of the names offered, or reply with text.", reply.Messages[2].Content)
	reqs := w.p.Requests()
	require.Len(t, reqs, 2)
	seen := reqs[1].Messages[len(reqs[1].Messages)-1]
	assert.Equal(t, reply.Messages[2].Content, seen.Content, "the model reads why")
}

func TestProviderErrorIsReturnedAndNothingHalfStored(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Fail("rate limited", &scripted.ErrorOptions{Code: "rate_limit", Status: 429, Retryable: true}))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 429, pe.Status)
	assert.Equal(t, "user", roles(reply.Messages))
}

func TestMaxSessionTurns(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.reg = toolrun.NewRegistry(nil)
	tp := triagePrompt()
	tp.Model = "m"
	tp.Tools = nil // this registry has no tools
	require.NoError(t, w.reg.Register(&toolrun.Model{Name: "m", Provider: w.p}, tp,
		&toolrun.Agent{Name: "agent", MaxSessionTurns: 2, SideA: toolrun.Side{Prompt: "triager"}, SideB: toolrun.Side{Human: true}}))
	w.rt = toolrun.NewRuntime(w.reg, nil)
	w.p.Add(scripted.Text("one"), scripted.Text("two"), scripted.Text("three"))
	id := w.thread(t)
	r1, err := w.rt.Send(context.Background(), id, "a")
	require.NoError(t, err)
	assert.False(t, r1.SessionEnded)
	r2, err := w.rt.Send(context.Background(), id, "b")
	require.NoError(t, err)
	assert.True(t, r2.SessionEnded)
	assert.Equal(t, toolrun.StopMaxSessionTurns, r2.StopReason)
}

func newTextLogger(w interface{ Write([]byte) (int, error) }) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}

type finishArgs struct {
	Summary string `json:"summary"`
}

func TestStopToolAndSessionBindings(t *testing.T) {
	finish := &toolrun.Func[finishArgs]{Name: "finish", Execute: func(ctx context.Context, s toolrun.ThreadState, a finishArgs) (toolrun.Result, error) {
		return toolrun.Text("finished"), nil
	}}
	giveUp := &toolrun.Func[finishArgs]{Name: "give_up", Execute: func(ctx context.Context, s toolrun.ThreadState, a finishArgs) (toolrun.Result, error) {
		return toolrun.Text("gave up"), nil
	}}
	p := triagePrompt()
	p.Tools = append(p.Tools, toolrun.Use("finish"), toolrun.Use("give_up"))

	w := newWorld(t, p, toolrun.Side{StopTool: "finish", StopToolResponseProperty: "summary"}, finish, giveUp)
	w.p.Add(scripted.Calls(scripted.Call("finish", map[string]any{"summary": " all done "})))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopTool, reply.StopReason)
	assert.Equal(t, "all done", reply.Text)

	w = newWorld(t, triagePrompt(), toolrun.Side{
		SessionStop: &toolrun.SessionBinding{Name: "finish", MessageProperty: "summary"},
		SessionFail: &toolrun.SessionBinding{Name: "give_up", AttachmentsProperty: "summary"},
	}, finish, giveUp)
	prompt, _ := w.reg.Prompt("triager")
	prompt.Tools = append(prompt.Tools, toolrun.Use("finish"), toolrun.Use("give_up"))
	w.p.Add(scripted.Calls(scripted.Call("give_up", map[string]any{"summary": "/attachments/missing.png"})),
		scripted.Calls(scripted.Call("finish", map[string]any{"summary": "Triaged."})))
	reply, err = w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, "Failed to execute tool: Provided attachment path(s) not found in this thread: /attachments/missing.png", reply.Messages[2].Content, "a failed sessionFail does not end the session")
	assert.True(t, reply.SessionEnded)
	assert.Equal(t, toolrun.StopSessionStop, reply.StopReason)
	assert.Equal(t, "Triaged.", reply.Text, "messageProperty replaces the content")
}

func TestCancellationReachesTheProviderAndTheTool(t *testing.T) {
	// A tool that waits for its context: cancelling the Send stops it, and
	// the calls without results get "Execution stopped by user".
	started := make(chan struct{})
	slow := &toolrun.Func[noArgs]{Name: "slow", Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		close(started)
		<-ctx.Done()
		return toolrun.Result{}, ctx.Err()
	}}
	p := triagePrompt()
	p.Tools = append(p.Tools, toolrun.Use("slow"))
	w := newWorld(t, p, toolrun.Side{}, slow)
	w.p.Add(scripted.Calls(scripted.Call("slow", nil), scripted.Call("get_issue", map[string]any{"number": 1})))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	id := w.thread(t)
	_, err := w.rt.Send(ctx, id, "x")
	require.ErrorIs(t, err, context.Canceled)
	page, _ := w.rt.Store().ListMessages(context.Background(), id, toolrun.MessageQuery{})
	assert.Equal(t, "user assistant+calls tool:slow tool:get_issue system", roles(page.Messages))
	assert.Equal(t, "Failed to execute tool: Execution stopped by user", page.Messages[3].Content)

	// A provider call held open is cancelled too.
	hold := make(chan struct{})
	w.p.Add(scripted.Text("never").Wait(hold))
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		for len(w.p.Requests()) < 2 {
			runtimeGosched()
		}
		cancel2()
	}()
	_, err = w.rt.Send(ctx2, id, "again")
	require.ErrorIs(t, err, context.Canceled)
	close(hold)
}

func TestExecutionStopDropsTheRest(t *testing.T) {
	stopper := fn("stopper", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		s.Execution().Stop()
		return toolrun.Text("stopping"), nil
	})
	p := triagePrompt()
	p.Tools = append(p.Tools, toolrun.Use("stopper"))
	w := newWorld(t, p, toolrun.Side{}, stopper)
	w.p.Add(scripted.Calls(scripted.Call("stopper", nil), scripted.Call("get_issue", map[string]any{"number": 1})))
	reply, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, toolrun.StopStopped, reply.StopReason)
	require.Equal(t, "user assistant+calls tool:stopper system", roles(reply.Messages), "the rest of the queue is dropped without results")
	rec := reply.Messages[3]
	assert.True(t, rec.Silent, "the stop's record is silent")
	assert.Equal(t, toolrun.StopStopped, rec.ErrorCode)
}

func runtimeGosched() { time.Sleep(time.Millisecond) }

func TestTurnDoneEventAndRuntimeSetEnv(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	id := w.thread(t)
	var done []toolrun.TurnDone
	w.rt.Subscribe(id, func(ev toolrun.Event) {
		if ev.Type == toolrun.EventTurnDone {
			done = append(done, ev.Data.(toolrun.TurnDone))
		}
	})
	w.p.Add(scripted.Text("hello"))
	_, err := w.rt.Send(context.Background(), id, "x")
	require.NoError(t, err)
	require.Len(t, done, 1)
	assert.Equal(t, toolrun.TurnDone{StopReason: toolrun.StopResponse, Text: "hello"}, done[0])

	require.NoError(t, w.rt.SetEnv(context.Background(), id, "TOKEN", toolrun.EnvValue{Value: "abc"}))
	v, err := w.rt.Store().GetEnv(context.Background(), toolrun.ScopeThread, id, "TOKEN")
	require.NoError(t, err)
	assert.Equal(t, toolrun.EnvValue{Value: "abc", Type: toolrun.VarSecret}, v)
}

func TestToolChoiceAndNoToolCallsCapability(t *testing.T) {
	p := triagePrompt()
	p.ToolChoice = "required"
	w := newWorld(t, p, toolrun.Side{})
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Equal(t, "required", w.p.LastRequest().ToolChoice)

	m, _ := w.reg.Model("m")
	m.Capabilities.NoToolCalls = true
	w.p.Add(scripted.Text("ok"))
	_, err = w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	assert.Empty(t, w.p.LastRequest().Tools, "no tools for a model that cannot call them")
	assert.Empty(t, w.p.LastRequest().ToolChoice, "and no tool choice")
}

func TestUserStopInsideASubPromptGivesEveryCallAResult(t *testing.T) {
	started := make(chan struct{})
	slow := &toolrun.Func[noArgs]{Name: "slow", Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		close(started)
		<-ctx.Done()
		return toolrun.Result{}, ctx.Err()
	}}
	sub := &toolrun.Prompt{Name: "worker", Model: "m", ToolDescription: "Work", Tools: []toolrun.PromptTool{toolrun.Use("slow"), toolrun.Use("get_issue")}}
	main := triagePrompt()
	main.Tools = append(main.Tools, toolrun.Use("worker"))
	w := newWorld(t, main, toolrun.Side{}, slow, sub)
	w.p.Add(scripted.Calls(scripted.Call("worker", nil)),
		scripted.Calls(scripted.Call("slow", nil), scripted.Call("get_issue", map[string]any{"number": 1})))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	id := w.thread(t)
	_, err := w.rt.Send(ctx, id, "x")
	require.ErrorIs(t, err, context.Canceled)
	all, _ := w.rt.Store().ListMessages(context.Background(), id, toolrun.MessageQuery{MaxDepth: -1})
	results := map[string]bool{}
	for _, m := range all.Messages {
		if m.Role == toolrun.RoleTool {
			results[m.ToolCallID] = true
		}
	}
	for _, m := range all.Messages {
		for _, c := range m.ToolCalls {
			assert.True(t, results[c.ID], "call %s (%s, depth %d) has a result", c.Name, c.ID, m.Depth)
		}
	}
}

func TestRequestsNameTheirThread(t *testing.T) {
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.p.Add(scripted.Text("hi"))
	id := w.thread(t)
	_, err := w.rt.Send(context.Background(), id, "x")
	require.NoError(t, err)
	assert.Equal(t, id, w.p.LastRequest().ThreadID)
}
