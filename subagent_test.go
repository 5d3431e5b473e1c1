package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

type team struct {
	rt     *toolrun.Runtime
	lead   *scripted.Provider
	child  *scripted.Provider
	thread string
}

type topicArgs struct {
	Topic string `json:"topic"`
}

// newTeam builds a lead agent owning three relationships to child agents
// that run on their own scripted model.
func newTeam(t *testing.T, env map[string]toolrun.EnvValue) *team {
	t.Helper()
	return newTeamOn(t, env, nil)
}

// newTeamOn is newTeam on the given store (nil: a new memory store).
func newTeamOn(t *testing.T, env map[string]toolrun.EnvValue, st toolrun.Store) *team {
	t.Helper()
	tm := &team{lead: scripted.New(), child: scripted.New()}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "lead_model", Provider: tm.lead},
		&toolrun.Model{Name: "child_model", Provider: tm.child},
		&toolrun.Func[noArgs]{Name: "secret_op", Variables: []toolrun.Variable{{Name: "VAULT", Type: toolrun.VarSecret, Required: true, Scoped: true}},
			Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
				return toolrun.Text("ok"), nil
			}},
		&toolrun.Prompt{Name: "lead_prompt", Model: "lead_model", IncludeChat: true, IncludePastTools: true},
		&toolrun.Prompt{Name: "research_prompt", Model: "child_model", IncludeChat: true, RequiredSchema: toolrun.SchemaFrom[topicArgs]()},
		&toolrun.Prompt{Name: "vault_prompt", Model: "child_model", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("secret_op")}},
		&toolrun.Agent{Name: "researcher", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "research_prompt"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "vault_keeper", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "vault_prompt"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lead_prompt", Subagents: []toolrun.SubagentRelationship{
			{Agent: "researcher", Blocking: true, Description: "Finds facts"},
			{Agent: "researcher", As: "bg_researcher"},
			{Agent: "researcher", As: "capped", MaxInstances: 1},
			{Agent: "vault_keeper"},
			{Agent: "vault_keeper", As: "vault_with_key", ScopedEnv: []string{"VAULT"}},
		}}, SideB: toolrun.Side{Human: true}},
	))
	tm.rt = toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st})
	th, err := tm.rt.NewThread(context.Background(), "lead", &toolrun.ThreadOptions{Env: env})
	require.NoError(t, err)
	tm.thread = th.ID
	return tm
}

func toolResults(msgs []toolrun.Message, name string) []toolrun.Message {
	var out []toolrun.Message
	for _, m := range msgs {
		if m.Role == toolrun.RoleTool && m.Name == name && m.Depth == 0 {
			out = append(out, m)
		}
	}
	return out
}

// TestSubagentCreateArgumentsAreValidatedThenChecked: subagent_create's
// arguments are validated against the schema it publishes (every failing
// location named), then the checks a schema cannot express run in the
// reference's order and words.
func TestSubagentCreateArgumentsAreValidatedThenChecked(t *testing.T) {
	tm := newTeam(t, nil)
	ok := func(extra map[string]any) map[string]any {
		m := map[string]any{"agent": "researcher", "message": "go", "attachments": []any{}, "name": "n", "arguments": map[string]any{"topic": "t"}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	calls := []map[string]any{
		{},
		ok(map[string]any{"arguments": 5}),
		ok(map[string]any{"message": "  "}),
		{"agent": "researcher", "message": "go"},
		ok(map[string]any{"name": 5}),
		ok(map[string]any{"name": " "}),
		ok(map[string]any{"agent": "nobody"}),
		ok(map[string]any{"arguments": map[string]any{"topic": 3}}),
	}
	var sc []scripted.ToolCall
	for _, c := range calls {
		sc = append(sc, scripted.Call("subagent_create", c))
	}
	tm.lead.Add(scripted.Calls(sc[:4]...), scripted.Calls(sc[4:]...), scripted.Text("done"))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "subagent_create")
	want := []string{
		"Tool argument validation failed: [agent] required property is missing; [attachments] required property is missing; [message] required property is missing; [name] required property is missing",
		"Tool argument validation failed: [arguments] got number, want object",
		"subagent_create requires message.",
		"Tool argument validation failed: [attachments] required property is missing; [name] required property is missing",
		"Tool argument validation failed: [name] got number, want string",
		"subagent_create requires name.",
		"Tool argument validation failed: [agent] value must be one of ",
		"Tool argument validation failed: [arguments.topic] got number, want string",
	}
	require.Len(t, res, len(want))
	for i, w := range want {
		assert.True(t, strings.HasPrefix(res[i].Content, "Failed to execute tool: "+w), "check %d: %s", i, res[i].Content)
	}
	assert.Equal(t, "invalid_arguments", res[0].ErrorCode)
	assert.Empty(t, tm.child.Requests(), "no child ran")
}

func TestBlockingSubagentReturnsItsOutcomeWithAReference(t *testing.T) {
	tm := newTeam(t, nil)
	tm.lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "researcher", "message": "find X", "attachments": []any{}, "name": "r1", "arguments": map[string]any{"topic": "go"}})),
		scripted.Text("The researcher says 42."))
	tm.child.Add(scripted.Text("X is 42."))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "subagent_create")
	require.Len(t, res, 1)
	ref := res[0].SubagentID
	require.NotEmpty(t, ref)
	assert.Equal(t, "X is 42.\n\nReference: "+ref, res[0].Content)
	// The child saw its initial arguments (silent system message) and the message.
	creq := tm.child.LastRequest()
	assert.Equal(t, "system user", roles(creq.Messages))
	assert.Contains(t, creq.Messages[0].Content, `"topic": "go"`)
	assert.Equal(t, "find X", creq.Messages[1].Content)
	entry, err := tm.rt.Store().Child(context.Background(), tm.thread, ref)
	require.NoError(t, err)
	assert.Equal(t, toolrun.ChildIdle, entry.Status)
	assert.Equal(t, "researcher", entry.Relationship)
	child, err := tm.rt.Store().GetThread(context.Background(), ref)
	require.NoError(t, err)
	assert.Equal(t, tm.thread, child.ParentID)
	assert.True(t, child.TerminatedAt.IsZero(), "a child persists after its session")
}

func TestNonBlockingSubagentReportsToTheParent(t *testing.T) {
	tm := newTeam(t, nil)
	tm.lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "bg_researcher", "message": "dig", "attachments": []any{}, "name": "bg", "arguments": map[string]any{"topic": "t"}})),
		scripted.Text("Started it."),
		scripted.Text("Got the result."))
	tm.child.Add(scripted.Text("Dug up 7 facts."), scripted.Text("Second session answer."))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "subagent_create")
	require.Len(t, res, 1)
	ref := res[0].SubagentID
	assert.Equal(t, "The subagent was initiated successfully. Reference: "+ref, res[0].Content)
	tm.rt.Wait()
	// The completion message started the parent's next turn.
	require.Len(t, tm.lead.Requests(), 3)
	last := tm.lead.LastRequest().Messages
	found := false
	for _, m := range last {
		if strings.Contains(m.Content, "Subagent (reference: "+ref+") has returned the following result:\n\nDug up 7 facts.") {
			found = true
		}
	}
	assert.True(t, found, "completion delivered to the parent")

	// subagents lists it; subagent_message starts a new session with history intact.
	tm.lead.Add(scripted.Calls(scripted.Call("subagents", nil), scripted.Call("subagent_message", map[string]any{"referenceId": ref, "message": "more", "attachments": []any{}}),
		scripted.Call("subagent_message", map[string]any{"referenceId": "nope", "message": "x", "attachments": []any{}}),
		scripted.Call("subagent_message", map[string]any{"referenceId": ref, "message": "", "attachments": []any{}})), scripted.Text("ok"), scripted.Text("after second"))
	reply, err = tm.rt.Send(context.Background(), tm.thread, "again")
	require.NoError(t, err)
	list := toolResults(reply.Messages, "subagents")
	require.Len(t, list, 1)
	assert.Contains(t, list[0].Content, "- "+ref+": bg_researcher — idle")
	msgs := toolResults(reply.Messages, "subagent_message")
	require.Len(t, msgs, 3)
	assert.Equal(t, "Message sent to subagent "+ref+".", msgs[0].Content)
	assert.Equal(t, `Failed to execute tool: Subagent reference "nope" is not active.`, msgs[1].Content)
	assert.Equal(t, "Failed to execute tool: subagent_message requires referenceId and message.", msgs[2].Content)
	tm.rt.Wait()
	creq := tm.child.LastRequest()
	assert.Equal(t, "system user assistant user", roles(creq.Messages), "history intact in the second session (initial arguments, first message, answer, new message)")

	// Explicit termination closes the child.
	require.NoError(t, tm.rt.Terminate(context.Background(), ref))
	entry, _ := tm.rt.Store().Child(context.Background(), tm.thread, ref)
	assert.Equal(t, toolrun.ChildTerminated, entry.Status)
	_, err = tm.rt.Send(context.Background(), ref, "hello")
	assert.ErrorIs(t, err, toolrun.ErrThreadTerminated)
}

func TestSubagentInstanceCap(t *testing.T) {
	tm := newTeam(t, nil)
	create := scripted.Call("subagent_create", map[string]any{"agent": "capped", "message": "m", "attachments": []any{}, "name": "c", "arguments": map[string]any{"topic": "t"}})
	tm.lead.Add(scripted.Calls(create), scripted.Calls(create), scripted.Text("done"), scripted.Text("after child"))
	tm.child.Add(scripted.Text("child done"))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "subagent_create")
	require.Len(t, res, 2)
	ref := res[0].SubagentID
	assert.Equal(t, `Failed to execute tool: Subagent instance limit reached for "capped" (1). Use subagent_message with an existing reference instead. Active references: `+ref+".", res[1].Content)
	tm.rt.Wait()
}

func TestScopedEnvAndRequiredScopedVariables(t *testing.T) {
	tm := newTeam(t, map[string]toolrun.EnvValue{"VAULT": {Value: "vault-key-1"}, "REGION": {Value: "eu", Type: toolrun.VarText}})
	tm.lead.Add(scripted.Calls(
		scripted.Call("subagent_create", map[string]any{"agent": "vault_keeper", "message": "m", "attachments": []any{}, "name": "v1"}),
		scripted.Call("subagent_create", map[string]any{"agent": "vault_with_key", "message": "m", "attachments": []any{}, "name": "v2"}),
	), scripted.Text("done"), scripted.Text("after"))
	tm.child.Add(scripted.Text("vault ok"))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "subagent_create")
	require.Len(t, res, 2)
	assert.Contains(t, res[0].Content, `Subagent "vault_keeper" requires scoped environment variables before it can be created. Provide VAULT`)
	assert.Equal(t, "subagent_env_required", res[0].ErrorCode)
	ref := res[1].SubagentID
	require.NotEmpty(t, ref, res[1].Content)
	tm.rt.Wait()
	env, err := tm.rt.Store().ListEnv(context.Background(), toolrun.ScopeThread, ref)
	require.NoError(t, err)
	assert.Equal(t, "vault-key-1", env["VAULT"].Value, "scopedEnv copies the scoped value")
	assert.Equal(t, "eu", env["REGION"].Value, "non-scoped values are inherited")
}

func TestAttachmentsAreCopiedToReceiverLocalPaths(t *testing.T) {
	tm := newTeam(t, nil)
	ctx := context.Background()
	_, err := tm.rt.Store().WriteFile(ctx, tm.thread, toolrun.FileInfo{Path: "/attachments/report 2024.pdf", MimeType: "application/pdf", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("%PDF"))
	require.NoError(t, err)
	tm.lead.Add(scripted.Calls(
		scripted.Call("subagent_create", map[string]any{"agent": "researcher", "message": "read it", "name": "r",
			"attachments": []any{"/attachments/report 2024.pdf", "/etc/passwd", "/attachments/missing.png"}, "arguments": map[string]any{"topic": "t"}}),
	), scripted.Calls(scripted.Call("subagent_message", map[string]any{"referenceId": "x", "message": "m"})), scripted.Text("done"))
	tm.child.Add(scripted.Text("read"))
	reply, err := tm.rt.Send(ctx, tm.thread, "go")
	require.NoError(t, err)
	msgs := toolResults(reply.Messages, "subagent_message")
	require.Len(t, msgs, 1)
	assert.Equal(t, "Failed to execute tool: Tool argument validation failed: [attachments] required property is missing", msgs[0].Content,
		"the lifecycle tool's arguments are validated against the schema it publishes")
	created := toolResults(reply.Messages, "subagent_create")
	require.Len(t, created, 1)
	ref := created[0].SubagentID
	files, err := tm.rt.Store().ListFiles(ctx, ref, "/attachments")
	require.NoError(t, err)
	require.Len(t, files, 1, "only existing /attachments/ paths are copied")
	assert.Regexp(t, `^/attachments/report-2024-[0-9a-f]{8}\.pdf$`, files[0].Path)
	data, _, err := tm.rt.Store().ReadFile(ctx, ref, files[0].Path)
	require.NoError(t, err)
	assert.Equal(t, "%PDF", string(data))
	child, _ := tm.rt.Store().ListMessages(ctx, ref, toolrun.MessageQuery{IncludeSilent: true})
	assert.Contains(t, contents(child.Messages), "Initial asset attachment path: "+files[0].Path, "the child is told its own local path")
}

func TestSubpromptInitAttachments(t *testing.T) {
	viewer := &toolrun.Prompt{Name: "viewer", Model: "m", ToolDescription: "Look at files", Text: "Describe.",
		RequiredSchema: `{"type":"object","properties":{"files":{"type":"array","items":{"type":"string"}}},"required":["files"]}`}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "viewer", InitAttachmentsProperty: "files"})
	w := newWorld(t, main, toolrun.Side{}, viewer)
	id := w.thread(t)
	_, err := w.rt.Store().WriteFile(context.Background(), id, toolrun.FileInfo{Path: "/attachments/a.png", MimeType: "image/png", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("png"))
	require.NoError(t, err)
	w.p.Add(scripted.Calls(scripted.Call("viewer", map[string]any{"files": []string{"/attachments/a.png", "/attachments/nope.png", "/tmp/x"}})),
		scripted.Text("A picture."), scripted.Text("done"))
	_, err = w.rt.Send(context.Background(), id, "look")
	require.NoError(t, err)
	sub := w.p.Requests()[1]
	require.Len(t, sub.Messages, 1)
	init := sub.Messages[0]
	assert.Equal(t, toolrun.RoleUser, init.Role)
	assert.Equal(t, "", init.Content, "no text, valid attachments: an empty user message")
	require.Len(t, init.Attachments, 1)
	assert.Equal(t, "/attachments/a.png", init.Attachments[0].Path)
	assert.Equal(t, "image/png", init.Attachments[0].MimeType)
}

func TestSetEnvPropagatesToLiveDescendantsExceptScopedNames(t *testing.T) {
	tm := newTeam(t, map[string]toolrun.EnvValue{"VAULT": {Value: "vault-key-1"}})
	ctx := context.Background()
	tm.lead.Add(scripted.Calls(
		scripted.Call("subagent_create", map[string]any{"agent": "researcher", "message": "m", "attachments": []any{}, "name": "r", "arguments": map[string]any{"topic": "t"}}),
		scripted.Call("subagent_create", map[string]any{"agent": "vault_with_key", "message": "m", "attachments": []any{}, "name": "v"}),
	), scripted.Text("done"))
	tm.child.Add(scripted.Text("r done"), scripted.Text("v done"))
	reply, err := tm.rt.Send(ctx, tm.thread, "go")
	require.NoError(t, err)
	created := toolResults(reply.Messages, "subagent_create")
	require.Len(t, created, 2)
	tm.rt.Wait()
	// A tool on the parent writes env: REGION flows down; VAULT is scoped
	// for the vault keeper and does not.
	reg := tm.rt.Executor().Registry()
	require.NoError(t, reg.Register(fn("set_env", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		if err := s.SetEnv(ctx, "REGION", "us", toolrun.VarText); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("set"), s.SetEnv(ctx, "VAULT", "vault-key-2", "")
	})))
	lead, _ := reg.Prompt("lead_prompt")
	lead.Tools = append(lead.Tools, toolrun.Use("set_env"))
	tm.lead.Add(scripted.Calls(scripted.Call("set_env", nil)), scripted.Text("ok"))
	_, err = tm.rt.Send(ctx, tm.thread, "set")
	require.NoError(t, err)
	r, _ := tm.rt.Store().ListEnv(ctx, toolrun.ScopeThread, created[0].SubagentID)
	v, _ := tm.rt.Store().ListEnv(ctx, toolrun.ScopeThread, created[1].SubagentID)
	assert.Equal(t, "us", r["REGION"].Value)
	assert.Equal(t, "vault-key-2", r["VAULT"].Value, "not scoped for the researcher")
	assert.Equal(t, "us", v["REGION"].Value)
	assert.Equal(t, "vault-key-1", v["VAULT"].Value, "scoped for the vault keeper: not overwritten")
}

func TestSessionStatusIsForwardedToTheParentRegistryAndAgentEnvDefaults(t *testing.T) {
	lead, child := scripted.New(), scripted.New()
	var seen, peeked, peekedState string
	var rt *toolrun.Runtime
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "lm", Provider: lead},
		&toolrun.Model{Name: "cm", Provider: child},
		&toolrun.Func[finishArgs]{Name: "report_status", Execute: func(ctx context.Context, s toolrun.ThreadState, a finishArgs) (toolrun.Result, error) {
			seen, _ = s.Env(ctx, "STYLE")
			return toolrun.Text("noted"), nil
		}},
		fn("peek", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			th, _ := rt.Store().GetThread(ctx, s.ThreadID())
			e, err := rt.Store().Child(ctx, th.ParentID, s.ThreadID())
			peeked = e.Report
			peekedState = e.Status
			return toolrun.Text("peeked"), err
		}),
		&toolrun.Prompt{Name: "lp", Model: "lm"},
		&toolrun.Prompt{Name: "cp", Model: "cm", Tools: []toolrun.PromptTool{toolrun.Use("report_status"), toolrun.Use("peek")}, Env: map[string]string{"STYLE": "prompt-default"}},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, Env: map[string]string{"STYLE": "agent-default"},
			SideA: toolrun.Side{Prompt: "cp", SessionStatus: &toolrun.SessionBinding{Name: "report_status", MessageProperty: "summary"}},
			SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "boss", SideA: toolrun.Side{Prompt: "lp", Subagents: []toolrun.SubagentRelationship{{Agent: "worker", Blocking: true}}}, SideB: toolrun.Side{Human: true}},
	))
	rt = toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "boss", nil)
	require.NoError(t, err)
	lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "worker", "message": "m", "attachments": []any{}, "name": "w"})), scripted.Text("ok"))
	child.Add(scripted.Calls(scripted.Call("report_status", map[string]any{"summary": "halfway there"})),
		scripted.Calls(scripted.Call("peek", nil)), scripted.Text("finished"))
	reply, err := rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	assert.Equal(t, "agent-default", seen, "agent defaults come before prompt defaults in the env chain")
	assert.Equal(t, "halfway there", peeked, "the status reached the parent's registry while the child ran")
	assert.Equal(t, toolrun.ChildRunning, peekedState, "the report does not replace the child's state")
	ref := toolResults(reply.Messages, "subagent_create")[0].SubagentID
	// The blocking call settles the entry to idle at the end; the status
	// report was visible while the child ran, and its text was stored.
	childMsgs, _ := rt.Store().ListMessages(context.Background(), ref, toolrun.MessageQuery{})
	assert.Contains(t, contents(childMsgs.Messages), "halfway there", "messageProperty replaced the status tool's content")
	entry, _ := rt.Store().Child(context.Background(), th.ID, ref)
	assert.Equal(t, toolrun.ChildIdle, entry.Status)
}

// Wait may run while Sends start background subagents: it returns only
// when the work started before it returned has finished, and -race sees no
// misuse.
func TestWaitDuringConcurrentSends(t *testing.T) {
	const n = 4
	child := scripted.New()
	for range n * 2 {
		child.Add(scripted.Text("Dug up facts."))
	}
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "child_model", Provider: child},
		&toolrun.Prompt{Name: "research_prompt", Model: "child_model"},
		&toolrun.Agent{Name: "researcher", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "research_prompt"}, SideB: toolrun.Side{Human: true}},
	))
	leads := make([]*scripted.Provider, n)
	for i := range leads {
		leads[i] = scripted.New(
			scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "researcher", "message": "dig", "attachments": []any{}, "name": "r"})),
			scripted.Text("Started."),
			scripted.Text("Got it."))
		model, prompt, agent := fmt.Sprintf("lead_model_%d", i), fmt.Sprintf("lead_prompt_%d", i), fmt.Sprintf("lead_%d", i)
		require.NoError(t, reg.Register(
			&toolrun.Model{Name: model, Provider: leads[i]},
			&toolrun.Prompt{Name: prompt, Model: model},
			&toolrun.Agent{Name: agent, SideA: toolrun.Side{Prompt: prompt, Subagents: []toolrun.SubagentRelationship{{Agent: "researcher"}}}, SideB: toolrun.Side{Human: true}},
		))
	}
	rt := toolrun.NewRuntime(reg, nil)
	stop := make(chan struct{})
	waiter := make(chan struct{})
	go func() { // keeps waiting while the Sends below start work
		defer close(waiter)
		for {
			select {
			case <-stop:
				return
			default:
				rt.Wait()
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			th, err := rt.NewThread(context.Background(), fmt.Sprintf("lead_%d", i), nil)
			if assert.NoError(t, err) {
				_, err = rt.Send(context.Background(), th.ID, "start")
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	rt.Wait()
	close(stop)
	<-waiter
	for i, p := range leads {
		assert.Len(t, p.Requests(), 3, "lead %d: its completion turn ran before Wait returned", i)
	}
}

func TestCallingARelationshipByNameSaysHowToReachIt(t *testing.T) {
	tm := newTeam(t, nil)
	tm.lead.Add(scripted.Calls(scripted.Call("bg_researcher", map[string]any{"topic": "x"})), scripted.Text("ok"))
	reply, err := tm.rt.Send(context.Background(), tm.thread, "go")
	require.NoError(t, err)
	res := toolResults(reply.Messages, "bg_researcher")
	require.Len(t, res, 1)
	assert.Equal(t, `Failed to execute tool: Tool "bg_researcher" is not directly callable. Use subagent_create with agent="bg_researcher" to start it, or subagent_message to message an existing instance.`, res[0].Content)
}

func fileTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

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
	rt = toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "hi")
	require.NoError(t, err)
	got, err := rt.Store().GetThread(context.Background(), th.ID)
	require.NoError(t, err)
	assert.False(t, got.TerminatedAt.IsZero(), "Terminate was overwritten by the turn counter's UpdateThread")
}

// childFailingStore fails every PutChild and remembers the threads created.
type childFailingStore struct {
	*toolrun.MemoryStore
	mu      sync.Mutex
	created []string
}

func (s *childFailingStore) CreateThread(ctx context.Context, th *toolrun.Thread) error {
	s.mu.Lock()
	s.created = append(s.created, th.ID)
	s.mu.Unlock()
	return s.MemoryStore.CreateThread(ctx, th)
}

func (s *childFailingStore) PutChild(context.Context, toolrun.ChildEntry) error {
	return errors.New("registry is read-only")
}

// A subagent whose set-up fails after its thread was created (here: the
// parent's registry refuses the entry) leaves that thread terminated, so
// no thread that nothing points to can take work; the call is stored as
// an error naming the store's failure.
func TestSubagentWhoseSetUpFailsLeavesItsThreadTerminated(t *testing.T) {
	st := &childFailingStore{MemoryStore: toolrun.NewMemoryStore()}
	tm := newTeamOn(t, nil, st)
	tm.lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "bg_researcher", "message": "find X", "attachments": []any{}, "name": "r1", "arguments": map[string]any{"topic": "go"}})))
	_, err := tm.rt.Send(context.Background(), tm.thread, "start")
	require.ErrorContains(t, err, "registry is read-only")
	ctx := context.Background()
	st.mu.Lock()
	created := append([]string(nil), st.created...)
	st.mu.Unlock()
	require.Len(t, created, 2, "the lead's thread and the child's")
	child, err := st.GetThread(ctx, created[1])
	require.NoError(t, err)
	assert.Equal(t, tm.thread, child.ParentID)
	assert.False(t, child.TerminatedAt.IsZero(), "the child thread no registry entry points to is left open")
	page, err := st.ListMessages(ctx, tm.thread, toolrun.MessageQuery{})
	require.NoError(t, err)
	res := toolResults(page.Messages, "subagent_create")
	require.Len(t, res, 1)
	assert.Equal(t, toolrun.StatusError, res[0].ToolStatus)
	assert.Contains(t, res[0].Content, "registry is read-only")
}

// Only files under /attachments/ are given to a child: a path that leaves
// the folder with ".." is dropped, not cleaned into another folder of the
// parent's thread.
func TestAttachmentPathsCannotLeaveTheAttachmentsFolder(t *testing.T) {
	tm := newTeam(t, nil)
	ctx := context.Background()
	_, err := tm.rt.Store().WriteFile(ctx, tm.thread, toolrun.FileInfo{Path: "/notes/private.md", MimeType: "text/markdown", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("private"))
	require.NoError(t, err)
	_, err = tm.rt.Store().WriteFile(ctx, tm.thread, toolrun.FileInfo{Path: "/attachments/a.txt", MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("shared"))
	require.NoError(t, err)
	tm.lead.Add(scripted.Calls(
		scripted.Call("subagent_create", map[string]any{"agent": "researcher", "message": "read it", "name": "r",
			"attachments": []any{"/attachments/../notes/private.md", "/attachments/x/../../notes/private.md", "/attachments/x/../a.txt"}, "arguments": map[string]any{"topic": "t"}}),
	), scripted.Text("done"))
	tm.child.Add(scripted.Text("read"))
	reply, err := tm.rt.Send(ctx, tm.thread, "go")
	require.NoError(t, err)
	created := toolResults(reply.Messages, "subagent_create")
	require.Len(t, created, 1)
	ref := created[0].SubagentID
	require.NotEmpty(t, ref, created[0].Content)
	files, err := tm.rt.Store().ListFiles(ctx, ref, "/")
	require.NoError(t, err)
	require.Len(t, files, 1, "only the path that stays under /attachments/ is copied")
	data, _, err := tm.rt.Store().ReadFile(ctx, ref, files[0].Path)
	require.NoError(t, err)
	assert.Equal(t, "shared", string(data))
}

// A parent's env value of a type toolrun does not know (written to the
// store directly) is inherited by a child as the secret it counts as,
// instead of failing the child's creation.
func TestChildInheritsAnUnknownEnvTypeAsSecret(t *testing.T) {
	tm := newTeam(t, nil)
	ctx := context.Background()
	require.NoError(t, tm.rt.Store().SetEnv(ctx, toolrun.ScopeThread, tm.thread, "DB_PASS", toolrun.EnvValue{Value: "pw-0123456789", Type: "password"}))
	tm.lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "bg_researcher", "message": "find X", "attachments": []any{}, "name": "r1", "arguments": map[string]any{"topic": "go"}})),
		scripted.Text("started"))
	tm.child.Add(scripted.Text("found"))
	reply, err := tm.rt.Send(ctx, tm.thread, "start")
	require.NoError(t, err)
	tm.rt.Wait()
	res := toolResults(reply.Messages, "subagent_create")
	require.Len(t, res, 1)
	ref := res[0].SubagentID
	require.NotEmpty(t, ref, res[0].Content)
	v, err := tm.rt.Store().GetEnv(ctx, toolrun.ScopeThread, ref, "DB_PASS")
	require.NoError(t, err)
	assert.Equal(t, toolrun.EnvValue{Value: "pw-0123456789", Type: toolrun.VarSecret}, v)
}
