package toolrun_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

type summaryArgs struct {
	Text string `json:"text" jsonschema:"description=Text to summarize"`
}

func TestPromptToolRunsAOneShotSubPrompt(t *testing.T) {
	summarizer := &toolrun.Prompt{Name: "summarizer", Model: "m", ToolDescription: "Summarize text", Text: "Summarize: {{text}}",
		RequiredSchema: toolrun.SchemaFrom[summaryArgs](), Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "summarizer", InitUserMessageProperty: "text"})
	w := newWorld(t, main, toolrun.Side{}, summarizer)
	w.p.Add(
		scripted.Calls(scripted.Call("summarizer", map[string]any{"text": "long text"})),
		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 4})).WithText("Summary: short."),
		scripted.Text("The summary is short."),
	)
	reply, err := w.rt.Send(context.Background(), w.thread(t), "summarize")
	require.NoError(t, err)
	reqs := w.p.Requests()
	require.Len(t, reqs, 3, "the sub-prompt is one-shot")
	sub := reqs[1]
	assert.Equal(t, "Summarize: long text", sub.System, "arguments interpolated")
	require.Equal(t, "user", roles(sub.Messages), "only the init user message")
	assert.Equal(t, "long text", sub.Messages[0].Content)
	assert.Equal(t, "get_issue", sub.Tools[0].Name)
	var result toolrun.Message
	for _, m := range reply.Messages {
		if m.Name == "summarizer" {
			result = m
		}
	}
	assert.Equal(t, "Summary: short.\n\nTool Executions:\nTool Call: get_issue({\"number\":4})\nTool Response: issue 4: crash on start", result.Content)
	// Sub-prompt rows are stored one level deeper, linked to the caller's result.
	all, _ := w.rt.Store().ListMessages(context.Background(), reply.ThreadID, toolrun.MessageQuery{MaxDepth: -1})
	var deep []toolrun.Message
	for _, m := range all.Messages {
		if m.Depth == 1 {
			deep = append(deep, m)
		}
	}
	require.Len(t, deep, 2)
	assert.Equal(t, result.ID, deep[0].ParentID)
	assert.Equal(t, "user assistant+calls tool:summarizer assistant", roles(reply.Messages[:0:0])+roles(filterDepth0(reply.Messages)))
}

func filterDepth0(msgs []toolrun.Message) []toolrun.Message {
	var out []toolrun.Message
	for _, m := range msgs {
		if m.Depth == 0 {
			out = append(out, m)
		}
	}
	return out
}

func TestPromptToolShapingAndErrors(t *testing.T) {
	summarizer := &toolrun.Prompt{Name: "summarizer", Model: "m", ToolDescription: "Summarize", Text: "S",
		RequiredSchema: toolrun.SchemaFrom[summaryArgs](), Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "summarizer", IncludeToolCalls: toolrun.Bool(false)})
	w := newWorld(t, main, toolrun.Side{}, summarizer)
	w.p.Add(
		scripted.Calls(scripted.Call("summarizer", map[string]any{})),                         // invalid args
		scripted.Calls(scripted.Call("summarizer", map[string]any{"text": "x"})),              // sub-prompt whose tool fails
		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 0})).WithText("t"), // the failing child call
		scripted.Calls(scripted.Call("summarizer", map[string]any{"text": "y"})),              // sub-prompt whose model fails
		scripted.Fail("upstream down", nil),
		scripted.Text("done"),
	)
	reply, err := w.rt.Send(context.Background(), w.thread(t), "go")
	require.NoError(t, err)
	var results []string
	for _, m := range filterDepth0(reply.Messages) {
		if m.Name == "summarizer" {
			results = append(results, m.Content)
		}
	}
	require.Len(t, results, 3)
	assert.Equal(t, "Failed to execute tool: Prompt tool argument validation failed: [text] required property is missing", results[0])
	assert.True(t, strings.HasPrefix(results[1], "Failed to execute tool: Sub-prompt failed with 1 error(s):\n  get_issue: Failed to execute tool: Tool argument validation failed: [number]"), results[1])
	assert.Contains(t, results[2], "Failed to execute tool: Sub-prompt model request failed:", "CONTRACT: a failed sub-prompt request is an error result")
	assert.Contains(t, results[2], "upstream down")
}

func TestHandoffSwitchesTheAgentAndItsPrompt(t *testing.T) {
	billing := &toolrun.Prompt{Name: "billing_expert", Model: "m", Text: "You handle billing for {{customer}}."}
	main := triagePrompt()
	main.Tools = append(main.Tools, toolrun.Use("billing_specialist"))
	w := newWorld(t, main, toolrun.Side{}, billing,
		&toolrun.Agent{Name: "billing_specialist", ExposeAsTool: true, ToolDescription: "Hand off billing issues",
			SideA: toolrun.Side{Prompt: "billing_expert"}, SideB: toolrun.Side{Human: true}})
	w.p.Add(
		scripted.Calls(scripted.Call("billing_specialist", map[string]any{"customer": "ACME"})),
		scripted.Text("Billing here."),
	)
	id := w.thread(t)
	reply, err := w.rt.Send(context.Background(), id, "refund please")
	require.NoError(t, err)
	assert.Equal(t, "Billing here.", reply.Text)
	reqs := w.p.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "Hand off billing issues", toolSpec(reqs[0], "billing_specialist").Description)
	assert.Equal(t, "You handle billing for ACME.", reqs[1].System)
	th, err := w.rt.Store().GetThread(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "billing_specialist", th.AgentID)
	assert.Contains(t, contents(reply.Messages), "Handoff complete")
}

func toolSpec(r *toolrun.Request, name string) toolrun.ToolSpec {
	for _, s := range r.Tools {
		if s.Name == name {
			return s
		}
	}
	return toolrun.ToolSpec{}
}

func contents(msgs []toolrun.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return out
}

func TestProviderToolOfferingRules(t *testing.T) {
	p := scripted.NewWithOptions(&scripted.Options{ProviderTools: []toolrun.ToolSpec{{Name: "web_search", Description: "Search the web"}, {Name: "code_interpreter"}}})
	reg := toolrun.NewRegistry(nil)
	var logs strings.Builder
	rt := func(optIn []string, tools ...toolrun.PromptTool) *toolrun.Request {
		reg = toolrun.NewRegistry(nil)
		require.NoError(t, reg.Register(
			&toolrun.Model{Name: "m", Provider: p, ID: "x", ProviderTools: optIn},
			&toolrun.Prompt{Name: "pr", Model: "m", Tools: tools},
			&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
		))
		r := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Logger: newTextLogger(&logs)})
		th, err := r.NewThread(context.Background(), "agent", nil)
		require.NoError(t, err)
		p.Add(scripted.Text("ok"))
		_, err = r.Send(context.Background(), th.ID, "hi")
		require.NoError(t, err)
		return p.LastRequest()
	}
	req := rt([]string{"web_search"}, toolrun.Use("provider:web_search"), toolrun.Use("provider:code_interpreter"))
	require.Len(t, req.Tools, 1, "code_interpreter is not in the model's opt-in list")
	assert.Equal(t, "web_search", req.Tools[0].Name)
	assert.True(t, req.Tools[0].ProviderExecuted)
	assert.Contains(t, logs.String(), "ProviderTools does not list it")

	logs.Reset()
	req = rt([]string{"web_search"}, toolrun.Use("web_search"))
	assert.Empty(t, req.Tools, "a bare name never selects a provider tool")
	assert.Contains(t, logs.String(), "use=provider:web_search")

	// A model asking the local executor to run an offered provider tool gets an error result.
	reg2 := toolrun.NewRegistry(nil)
	require.NoError(t, reg2.Register(
		&toolrun.Model{Name: "m", Provider: p, ProviderTools: []string{"web_search"}},
		&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("provider:web_search")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
	))
	r2 := toolrun.NewRuntime(reg2, nil)
	th, _ := r2.NewThread(context.Background(), "agent", nil)
	p.Add(scripted.Calls(scripted.Call("web_search", map[string]any{"q": "x"})), scripted.Text("ok"))
	reply, err := r2.Send(context.Background(), th.ID, "hi")
	require.NoError(t, err)
	assert.Contains(t, contents(reply.Messages), `Failed to execute tool: Tool "web_search" is a provider-executed tool and should be handled by the LLM provider, not executed locally.`)
}

func TestPromptToolEntryFromDataRefusesRelationshipKeys(t *testing.T) {
	_, err := toolrun.PromptToolFromMap(map[string]any{"name": "helper", "blocking": true, "resumable": true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resumable, blocking")
	assert.Contains(t, err.Error(), "agent side's Subagents")
	pt, err := toolrun.PromptToolFromMap(map[string]any{"name": "helper", "includeErrors": false})
	require.NoError(t, err)
	cfg := pt.(*toolrun.SubpromptConfig)
	assert.False(t, *cfg.IncludeErrors)
	_, err = toolrun.PromptToolFromMap(map[string]any{"name": "helper", "bogus": 1})
	assert.ErrorContains(t, err, `unknown key "bogus"`)
}

// A sub-prompt that includes the chat adds its init message to a copy of
// the history: nothing is written past the end of the slice a history
// filter returned (nor of the turn's pooled view).
func TestPromptToolInitMessageWritesIntoNoHistorySlice(t *testing.T) {
	var kept []toolrun.Message // the filter's own slice, with room to spare
	summarizer := &toolrun.Prompt{Name: "summarizer", Model: "m", ToolDescription: "Summarize text", Text: "Summarize",
		RequiredSchema: toolrun.SchemaFrom[summaryArgs](), IncludeChat: true,
		History: toolrun.Window{Filter: func(ctx context.Context, threadID string, history []toolrun.Message) ([]toolrun.Message, error) {
			kept = make([]toolrun.Message, len(history), len(history)+8)
			copy(kept, history)
			return kept, nil
		}}}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "summarizer", InitUserMessageProperty: "text"})
	w := newWorld(t, main, toolrun.Side{}, summarizer)
	w.p.Add(
		scripted.Calls(scripted.Call("summarizer", map[string]any{"text": "long text"})),
		scripted.Text("Summary: short."),
		scripted.Text("The summary is short."),
	)
	_, err := w.rt.Send(context.Background(), w.thread(t), "summarize")
	require.NoError(t, err)
	reqs := w.p.Requests()
	require.Len(t, reqs, 3)
	sub := reqs[1].Messages
	require.NotEmpty(t, sub)
	assert.Equal(t, "long text", sub[len(sub)-1].Content, "the init message ends the sub-prompt's request")
	require.NotNil(t, kept)
	for i, m := range kept[len(kept):cap(kept)] {
		assert.Zero(t, m, "the filter's slice was written %d past its length", i)
	}
}
