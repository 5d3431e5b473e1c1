package toolrun

import (
	"encoding/json"
	"time"
)

// Role is the author of a message.
type Role string

// The message roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one call a model (or a tool, through QueueTool) asked for.
// Arguments is the JSON text of the arguments as the model produced it.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one stored message of a thread. Tool results are messages with
// Role RoleTool, ToolCallID set and ToolStatus set.
//
// A Message is a plain value; copies share the Metadata map and slices, so
// treat a stored message as read-only.
type Message struct {
	// ID identifies the message within its thread. Callers normally leave it
	// empty and the executor or store assigns one.
	ID       string `json:"id"`
	ThreadID string `json:"thread_id"`
	// Seq orders the messages of a thread; the store assigns it on append,
	// strictly increasing in append order.
	Seq     int64  `json:"seq"`
	Role    Role   `json:"role"`
	Content string `json:"content"`

	// ToolCalls are the calls of an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`

	// ToolCallID, Name and ToolStatus describe a tool-result message.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	ToolStatus Status `json:"tool_status,omitempty"`

	// Attachments are references to thread files that belong to the message.
	Attachments []AttachmentRef `json:"attachments,omitempty"`

	// ParentID links rows of a sub-prompt to the caller's tool message; Depth
	// is 0 for the top level and grows by one per sub-prompt level.
	ParentID string `json:"parent_id,omitempty"`
	Depth    int    `json:"depth,omitempty"`

	// Silent messages are kept from GetMessages unless asked for, and from UIs.
	Silent bool `json:"silent,omitempty"`
	// Prompt is the name of the prompt that was active when the row was made.
	Prompt string `json:"prompt,omitempty"`
	// SubagentID is the child thread a tool result concerns, for UI grouping.
	SubagentID string `json:"subagent_id,omitempty"`
	// CallDigest identifies the call a tool result answers (a digest of its
	// tool name and redacted arguments), so a call resumed after a crash is
	// told from another call that reuses its id.
	CallDigest string `json:"call_digest,omitempty"`
	// Metadata holds data that is stored but never sent to a model: a tool
	// result's error_code, error_data and stack, the arguments of a queued call.
	Metadata map[string]any `json:"metadata,omitempty"`

	CreatedAt time.Time `json:"created_at"`
}

// Metadata keys the executor writes on tool-result messages.
const (
	MetaErrorCode = "error_code" // string: Result.ErrorCode
	MetaErrorData = "error_data" // map[string]any: Result.ErrorData
	MetaStack     = "stack"      // string: Result.Stack, or a recovered panic's stack
	MetaQueued    = "queued"     // bool: the call was queued by a tool, not issued by a model
	MetaArguments = "arguments"  // string: the JSON arguments of a queued call
	// MetaQueuedCalls lists the calls ([]{id, name, arguments}) a call
	// queued, so a resumed batch queues them again. Their arguments are
	// redacted.
	MetaQueuedCalls = "queued_calls"
)

// metaArgumentsRedacted marks a queued_calls entry whose arguments had a
// secret replaced.
const metaArgumentsRedacted = "arguments_redacted"

// AttachmentRef points at a file in a thread's file system (spec
// AttachmentRef). Refs on a message are always valid for that message's thread.
type AttachmentRef struct {
	ID          string `json:"id"`
	Type        string `json:"type"` // always "file"
	Path        string `json:"path"`
	Name        string `json:"name"`
	MimeType    string `json:"mimeType"`
	Size        int64  `json:"size"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	Description string `json:"description,omitempty"`
}

// clone returns a copy of m whose slices and metadata map are not shared.
func (m *Message) clone() *Message {
	c := *m
	if m.ToolCalls != nil {
		c.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
	}
	if m.Attachments != nil {
		c.Attachments = append([]AttachmentRef(nil), m.Attachments...)
	}
	if m.Metadata != nil {
		c.Metadata = cloneJSONMap(m.Metadata)
	}
	return &c
}

// cloneJSONMap copies a map of JSON-like values deeply.
func cloneJSONMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneJSONValue(v)
	}
	return out
}

func cloneJSONValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneJSONMap(x)
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = cloneJSONValue(e)
		}
		return a
	case json.RawMessage:
		return append(json.RawMessage(nil), x...)
	}
	return v
}
