package toolrun

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun/internal/jsonvalue"
)

// shape turns a result into the tool-result message to store: attachments
// written as thread files, content texts, metadata, secrets redacted.
func (e *Executor) shape(ctx context.Context, b *batch, c ToolCall, res Result, red redactor, id string) (*Message, Result) {
	refs := append([]AttachmentRef(nil), res.Refs...)
	for _, a := range res.Attachments {
		ref, err := e.writeAttachment(ctx, b.threadID, a)
		if err != nil {
			e.log.WarnContext(ctx, "toolrun: attachment skipped", "thread", b.threadID, "tool", c.Name, "name", red.String(a.Name), "error", red.String(err.Error()))
			continue
		}
		refs = append(refs, ref)
	}
	for i := range refs {
		refs[i] = redactRef(refs[i], red)
	}
	res.Attachments = nil
	res.Refs = refs

	res.Result = red.String(res.Result)
	res.Error = red.String(res.Error)
	res.Stack = red.String(res.Stack)
	res.ErrorCode = red.String(res.ErrorCode)
	res.SubagentID = red.String(strings.TrimSpace(res.SubagentID))
	if res.ErrorData != nil {
		// Values of any Go type become a JSON tree once, here: a cycle, a
		// NaN or anything else JSON cannot hold is refused before it can
		// crash a walker or make the store fail on every retry.
		tree, err := jsonvalue.Normalize("error_data", res.ErrorData, nil)
		if err != nil {
			res = unstorableResult(res, red.String(err.Error()))
		} else {
			res.ErrorData, _ = red.Value(tree).(map[string]any)
		}
	}
	var content string
	if res.Status == StatusError {
		text := strings.TrimSpace(res.Error)
		if text == "" {
			text = "Tool execution failed"
		}
		content = errorContent(text)
	} else {
		content = strings.TrimSpace(res.Result)
		if content == "" {
			content = "Tool executed successfully"
		}
	}
	if len(refs) > 0 {
		var sb strings.Builder
		sb.WriteString(content)
		sb.WriteString("\n")
		for _, r := range refs {
			fmt.Fprintf(&sb, "\nAttachment path for %q: %s", r.Name, r.Path)
		}
		content = sb.String()
	}
	st := &b.sc.stamp
	msg := b.message()
	*msg = Message{
		ID:          id,
		ThreadID:    b.threadID,
		Role:        RoleTool,
		Content:     content,
		ToolCallID:  c.ID,
		Name:        c.Name,
		ToolStatus:  res.Status,
		Attachments: refs,
		ParentID:    st.ParentID,
		Depth:       st.Depth,
		Prompt:      st.Prompt,
		SubagentID:  res.SubagentID,
		ErrorCode:   res.ErrorCode,
		ErrorData:   res.ErrorData,
		Stack:       res.Stack,
		Side:        st.Side,
	}
	return msg, res
}

// unstorableResult is what is stored for a result whose error_data cannot
// be: an error result that says why, keeping the tool's own text.
func unstorableResult(res Result, why string) Result {
	text := "Tool result could not be stored: " + why
	if t := strings.TrimSpace(res.Error); res.IsError() && t != "" {
		text = t + " (its error_data could not be stored: " + why + ")"
	} else if t := strings.TrimSpace(res.Result); t != "" {
		text += " (the tool's result was: " + t + ")"
	}
	res.Status, res.Error, res.Result, res.ErrorData, res.ErrorCode = StatusError, text, "", nil, "invalid_result"
	return res
}

// refusedResult is the message stored in place of one the store refused.
func refusedResult(m *Message, why string) *Message {
	return &Message{ID: m.ID, ThreadID: m.ThreadID, Role: RoleTool, ToolCallID: m.ToolCallID, Name: m.Name, ToolStatus: StatusError,
		Content: errorContent("Tool result could not be stored: " + why), ErrorCode: "unstorable_result",
		ParentID: m.ParentID, Depth: m.Depth, Prompt: m.Prompt, Side: m.Side, CallDigest: m.CallDigest, QueuedCalls: m.QueuedCalls,
		Queued: m.Queued, Arguments: m.Arguments, CreatedAt: m.CreatedAt}
}

// errorContent is the stored content of an error result with text text.
func errorContent(text string) string { return "Failed to execute tool: " + text }

// redactResult returns the texts of a result redacted (the form the done
// hook and outcomes give).
func redactResult(r Result, red redactor) Result {
	r.Result, r.Error, r.Stack, r.ErrorCode = red.String(r.Result), red.String(r.Error), red.String(r.Stack), red.String(r.ErrorCode)
	r.SubagentID = red.String(r.SubagentID)
	if r.ErrorData != nil {
		if tree, err := jsonvalue.Normalize("error_data", r.ErrorData, nil); err == nil {
			r.ErrorData, _ = red.Value(tree).(map[string]any)
		} else {
			r.ErrorData = nil
		}
	}
	if r.Refs != nil {
		refs := make([]AttachmentRef, len(r.Refs))
		for i, ref := range r.Refs {
			refs[i] = redactRef(ref, red)
		}
		r.Refs = refs
	}
	return r
}

// redactCall returns c with its texts redacted and Redacted set when a
// secret was replaced in its arguments.
func redactCall(c ToolCall, red redactor) ToolCall {
	args := red.String(c.Arguments)
	if args != c.Arguments {
		c.Redacted = true
	}
	c.ID, c.Name, c.Arguments = red.String(c.ID), red.String(c.Name), args
	return c
}

// redactRef redacts the texts of an attachment ref: a name, path, MIME type
// or description can carry a secret into the content the model reads.
func redactRef(r AttachmentRef, red redactor) AttachmentRef {
	r.ID = red.String(r.ID)
	r.Path = red.String(r.Path)
	r.Name = red.String(r.Name)
	r.MimeType = red.String(r.MimeType)
	r.Description = red.String(r.Description)
	return r
}

// resultOf rebuilds a Result from a stored tool message.
func resultOf(m *Message) Result {
	r := Result{Status: m.ToolStatus, Refs: m.Attachments, SubagentID: m.SubagentID,
		ErrorCode: m.ErrorCode, ErrorData: m.ErrorData, Stack: m.Stack}
	if m.ToolStatus == StatusError {
		r.Error = m.Content
	} else {
		r.Result = m.Content
	}
	return r
}

func toAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
