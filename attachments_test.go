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

// chartTool returns a chart.png attachment of 640×480.
func chartTool(name string) *toolrun.Func[noArgs] {
	return fn(name, func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Result: "drew it", Attachments: []toolrun.Attachment{{Name: "chart.png", MimeType: "image/png", Data: []byte("\x89PNG"), Width: 640, Height: 480}}}, nil
	})
}

// attachmentTeam is a lead agent with a blocking "painter" child whose
// session ends with a finish tool that returns chart.png.
func attachmentTeam(t *testing.T) (rt *toolrun.Runtime, lead, child *scripted.Provider, thread string) {
	t.Helper()
	lead, child = scripted.New(), scripted.New()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "lead_model", Provider: lead},
		&toolrun.Model{Name: "child_model", Provider: child},
		chartTool("draw"), chartTool("finish"),
		&toolrun.Prompt{Name: "lead_prompt", Model: "lead_model", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("draw")}},
		&toolrun.Prompt{Name: "painter_prompt", Model: "child_model", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("finish")}},
		&toolrun.Agent{Name: "painter", ExposeAsTool: true,
			SideA: toolrun.Side{Prompt: "painter_prompt", SessionStop: &toolrun.SessionBinding{Name: "finish"}}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lead_prompt", Subagents: []toolrun.SubagentRelationship{{Agent: "painter", Blocking: true}}},
			SideB: toolrun.Side{Human: true}},
	))
	rt = toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "lead", nil)
	require.NoError(t, err)
	return rt, lead, child, th.ID
}

func TestChildAttachmentsReachTheParentUnderParentPathsWithTheirNames(t *testing.T) {
	rt, lead, child, thread := attachmentTeam(t)
	ctx := context.Background()
	lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "painter", "message": "paint", "attachments": []any{}, "name": "p"})), scripted.Text("done"))
	child.Add(scripted.Calls(scripted.Call("finish", nil)))
	reply, err := rt.Send(ctx, thread, "go")
	require.NoError(t, err)
	created := toolResults(reply.Messages, "subagent_create")
	require.Len(t, created, 1)
	res := created[0]

	// The child stored chart.png under its own path.
	childMsgs, err := rt.Store().ListMessages(ctx, res.SubagentID, toolrun.MessageQuery{})
	require.NoError(t, err)
	var childPath string
	for _, m := range childMsgs.Messages {
		for _, a := range m.Attachments {
			childPath = a.Path
		}
	}
	require.NotEmpty(t, childPath)

	require.Len(t, res.Attachments, 1)
	got := res.Attachments[0]
	assert.NotEqual(t, childPath, got.Path)
	assert.Regexp(t, `^/attachments/chart-[0-9a-f]{8}\.png$`, got.Path)
	assert.Equal(t, "chart.png", got.Name, "the original file name travels")
	assert.Equal(t, "image/png", got.MimeType)
	assert.Equal(t, 640, got.Width)
	assert.Equal(t, 480, got.Height)
	_, err = rt.Store().StatFile(ctx, thread, got.Path)
	require.NoError(t, err, "the parent-local path exists in the parent")
	assert.NotContains(t, res.Content, childPath, "the parent's result text names only parent-local paths")
	assert.Equal(t, 1, strings.Count(res.Content, `Attachment path for "chart.png": `+got.Path), res.Content)
}

func TestParentAttachmentsReachTheChildWithTheirNames(t *testing.T) {
	rt, lead, child, thread := attachmentTeam(t)
	ctx := context.Background()
	lead.Add(scripted.Calls(scripted.Call("draw", nil)), scripted.Text("drawn"))
	child.Add(scripted.Text("nice chart"))
	// The first turn draws; the second hands the chart to the child.
	_, err := rt.Send(ctx, thread, "draw")
	require.NoError(t, err)
	page, err := rt.Store().ListMessages(ctx, thread, toolrun.MessageQuery{})
	require.NoError(t, err)
	var drawn toolrun.AttachmentRef
	for _, m := range page.Messages {
		for _, a := range m.Attachments {
			drawn = a
		}
	}
	require.Equal(t, "chart.png", drawn.Name)
	lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "painter", "message": "look", "attachments": []any{drawn.Path}, "name": "p"})), scripted.Text("ok"))
	reply, err := rt.Send(ctx, thread, "show the child")
	require.NoError(t, err)
	created := toolResults(reply.Messages, "subagent_create")
	require.Len(t, created, 1)
	childMsgs, err := rt.Store().ListMessages(ctx, created[0].SubagentID, toolrun.MessageQuery{})
	require.NoError(t, err)
	var first *toolrun.Message
	for i := range childMsgs.Messages {
		if childMsgs.Messages[i].Role == toolrun.RoleUser && childMsgs.Messages[i].Content == "look" {
			first = &childMsgs.Messages[i]
		}
	}
	require.NotNil(t, first)
	require.Len(t, first.Attachments, 1, "the child's first message carries the copy")
	a := first.Attachments[0]
	assert.Equal(t, "chart.png", a.Name)
	assert.Equal(t, "image/png", a.MimeType)
	assert.Equal(t, 640, a.Width)
	assert.Equal(t, 480, a.Height)
	assert.NotEqual(t, drawn.Path, a.Path)
	_, err = rt.Store().StatFile(ctx, created[0].SubagentID, a.Path)
	require.NoError(t, err, "the path is the child's own")
}

func TestHandoffAttachesTheInitAttachments(t *testing.T) {
	specialist := &toolrun.Prompt{Name: "specialist_prompt", Model: "m", IncludeChat: true, Text: "You are the specialist."}
	main := triagePrompt()
	main.Tools = append(main.Tools, &toolrun.SubpromptConfig{Name: "specialist", InitUserMessageProperty: "request", InitAttachmentsProperty: "files"}, toolrun.Use("chart"))
	w := newWorld(t, main, toolrun.Side{}, specialist, chartTool("chart"),
		&toolrun.Agent{Name: "specialist", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "specialist_prompt"}, SideB: toolrun.Side{Human: true}})
	id := w.thread(t)
	w.p.Add(scripted.Calls(scripted.Call("chart", nil)), scripted.Text("drawn"))
	_, err := w.rt.Send(context.Background(), id, "draw")
	require.NoError(t, err)
	page, err := w.rt.Store().ListMessages(context.Background(), id, toolrun.MessageQuery{})
	require.NoError(t, err)
	var path string
	for _, m := range page.Messages {
		for _, a := range m.Attachments {
			path = a.Path
		}
	}
	require.NotEmpty(t, path)
	w.p.Add(scripted.Calls(scripted.Call("specialist", map[string]any{"request": "check this chart", "files": []string{path, "/attachments/missing.png"}})),
		scripted.Text("Specialist here."))
	_, err = w.rt.Send(context.Background(), id, "hand it over")
	require.NoError(t, err)
	last := w.p.LastRequest()
	require.NotEmpty(t, last.Messages)
	init := last.Messages[len(last.Messages)-1]
	assert.Equal(t, "check this chart", init.Content)
	require.Len(t, init.Attachments, 1, "the existing file is attached, the missing one left out")
	assert.Equal(t, path, init.Attachments[0].Path)
	assert.Equal(t, "chart.png", init.Attachments[0].Name)
}
