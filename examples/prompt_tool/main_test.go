package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

func TestPromptToolRunsTheSummarizerAsASubPrompt(t *testing.T) {
	router, summarizer := scripts()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(definitions(router, summarizer)...))
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	th, err := rt.NewThread(ctx, "support", nil)
	require.NoError(t, err)
	reply, err := rt.Send(ctx, th.ID, "Please look at this ticket:\n"+Ticket)
	require.NoError(t, err)

	assert.True(t, router.Done())
	assert.True(t, summarizer.Done())
	require.Len(t, summarizer.Requests(), 1, "one-shot: the invalid call never reached the model")
	sub := summarizer.Requests()[0]
	assert.Equal(t, "You are an expert summarizer. Write at most three key points for the on-call engineer.", sub.System)
	require.Len(t, sub.Messages, 1)
	assert.Equal(t, Ticket, sub.Messages[0].Content, "InitUserMessageProperty: text")
	require.Len(t, sub.Tools, 1)
	assert.Equal(t, "count_words", sub.Tools[0].Name)

	var results []toolrun.Message
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool && m.Depth == 0 {
			results = append(results, m)
		}
	}
	require.Len(t, results, 2)
	assert.Equal(t, toolrun.StatusError, results[0].ToolStatus)
	assert.Equal(t, "Failed to execute tool: Prompt tool argument validation failed: [text] required property is missing", results[0].Content)
	assert.Equal(t, toolrun.StatusSuccess, results[1].ToolStatus)
	assert.True(t, strings.HasPrefix(results[1].Content, "- Nightly export fails since 3.2"), results[1].Content)
	assert.True(t, strings.HasSuffix(results[1].Content, "\nTool Response: 58 words"), results[1].Content)

	// The router's next request reads the summary as the tool result.
	last := router.LastRequest().Messages
	assert.Equal(t, results[1].Content, last[len(last)-1].Content)
	assert.Contains(t, reply.Text, "Summary for on-call")

	// The sub-prompt's rows are stored one level down, under the caller's result.
	all, err := rt.Store().ListMessages(ctx, th.ID, toolrun.MessageQuery{MaxDepth: -1})
	require.NoError(t, err)
	var deep int
	for _, m := range all.Messages {
		if m.Depth == 1 {
			deep++
			assert.Equal(t, results[1].ID, m.ParentID)
		}
	}
	assert.Positive(t, deep)
}

func TestRunPrints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	for _, want := range []string{
		`the router is offered "summarizer": Summarize text into key points`,
		`"required":["text","audience"]`,
		"system: You are an expert summarizer. Write at most three key points for the on-call engineer.",
		"summarizer [error]:\n    Failed to execute tool: Prompt tool argument validation failed",
		"summarizer [success]:\n    - Nightly export fails since 3.2",
		"Tool Response: 58 words",
		"final reply: Summary for on-call",
	} {
		assert.Contains(t, out.String(), want)
	}
}
