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

func TestBlockingAndBackgroundSubagents(t *testing.T) {
	release := make(chan struct{})
	m := scripts(release)
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(definitions(m)...))
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	lead, err := rt.NewThread(ctx, "lead", nil)
	require.NoError(t, err)

	reply, err := rt.Send(ctx, lead.ID, Request)
	require.NoError(t, err)
	var creates, lists []toolrun.Message
	for _, msg := range reply.Messages {
		switch msg.Name {
		case toolrun.ToolSubagentCreate:
			creates = append(creates, msg)
		case toolrun.ToolSubagents:
			lists = append(lists, msg)
		}
	}
	require.Len(t, creates, 2)
	checker, writer := creates[0].SubagentID, creates[1].SubagentID
	require.NotEmpty(t, checker)
	require.NotEmpty(t, writer)
	assert.Equal(t, "Yes: the v2.0 changelog lists \"removed --legacy\".\n\nReference: "+checker, creates[0].Content, "blocking: the child's answer")
	assert.Equal(t, "The subagent was initiated successfully. Reference: "+writer, creates[1].Content, "non-blocking: started")
	require.Len(t, lists, 1)
	assert.Contains(t, lists[0].Content, "- "+writer+": writer — running", "the writer is still working during the lead's turn")
	assert.True(t, strings.HasPrefix(reply.Text, "Confirmed: --legacy is gone"))

	close(release)
	rt.Wait()
	require.NotNil(t, m.writer.LastRequest())
	assert.Equal(t, "You write short release notes for version 2.0.", m.writer.LastRequest().System, "initial arguments interpolated")

	// The completion reached the lead as a silent message and started its next turn.
	assert.True(t, m.lead.Done())
	last := m.lead.LastRequest().Messages
	completion := last[len(last)-1]
	assert.Equal(t, toolrun.RoleUser, completion.Role)
	assert.Equal(t, "Subagent (reference: "+writer+") has returned the following result:\n\nv2.0: faster sync, new config format; the --legacy flag is removed.", completion.Content)
	page, err := rt.Store().ListMessages(ctx, lead.ID, toolrun.MessageQuery{IncludeSilent: true})
	require.NoError(t, err)
	final := page.Messages[len(page.Messages)-1]
	assert.Equal(t, toolrun.RoleAssistant, final.Role)
	assert.True(t, strings.HasPrefix(final.Content, "The release notes are ready"))

	children, err := rt.Store().Children(ctx, lead.ID)
	require.NoError(t, err)
	require.Len(t, children, 2)
	assert.Equal(t, []any{"legacy-check", true, toolrun.ChildIdle}, []any{children[0].Name, children[0].Blocking, children[0].Status})
	assert.Equal(t, []any{"notes-v2", false, toolrun.ChildIdle}, []any{children[1].Name, children[1].Blocking, children[1].Status})
	th, err := rt.Store().GetThread(ctx, writer)
	require.NoError(t, err)
	assert.Equal(t, lead.ID, th.ParentID)
}

func TestRunPrints(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), &out))
	s := out.String()
	for _, want := range []string{
		"tool subagent_create [success]: Yes: the v2.0 changelog",
		"tool subagent_create [success]: The subagent was initiated successfully. Reference: ",
		"writer — running",
		"user (silent): Subagent (reference: ",
		"assistant: The release notes are ready:",
		"name=legacy-check relationship=fact_checker blocking=true status=idle",
		"name=notes-v2 relationship=writer blocking=false status=idle",
	} {
		assert.Contains(t, s, want)
	}
	assert.Less(t, strings.Index(s, "writer — running"), strings.Index(s, "== after the background writer finished"))
}
