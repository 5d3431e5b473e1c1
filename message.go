package toolrun

import "time"

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
	// Redacted reports that secret values in Arguments were replaced by
	// placeholders (the call as stored or returned, not as the tool saw it).
	Redacted bool `json:"redacted,omitempty"`
}

// Message is one stored message of a thread. Tool results are messages with
// Role RoleTool, ToolCallID set and ToolStatus set.
//
// A Message is a plain value; copies share the Metadata map and slices, so
// treat a stored message as read-only.
type Message struct {
	// ID identifies the message within its thread. The executor and the
	// runtime give each message they store one; a store keeps the ID it is
	// given and refuses a message without one.
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
	// ErrorCode, ErrorData and Stack are the tool result's (a recovered
	// panic's stack included), kept and never sent to a model. ErrorCode is
	// also set on the assistant message the repeated-error breaker stores,
	// is StopStopped on the silent system message that records a turn a
	// tool ended with Execution.Stop, and is "handoff" on the silent system
	// message that records a handoff a tool made through InvokeTool (its one
	// ToolCall is the handoff's, arguments redacted); no model is sent
	// either.
	ErrorCode string         `json:"error_code,omitempty"`
	ErrorData map[string]any `json:"error_data,omitempty"`
	Stack     string         `json:"stack,omitempty"`
	// Queued reports that a tool queued the call this result answers
	// (QueueTool), rather than a model; Arguments are then that call's
	// (redacted) arguments, which the model is shown with the result.
	Queued    bool   `json:"queued,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// QueuedCalls are the calls the call of this result queued, redacted, so
	// a batch resumed after a crash queues them again.
	QueuedCalls []ToolCall `json:"queued_calls,omitempty"`
	// Side is the agent side the message belongs to: "a" or "b" ("" for
	// messages outside a runtime turn).
	Side string `json:"side,omitempty"`

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
	// Metadata holds the caller's own data (InjectMessage's metadata, for
	// example): stored, never sent to a model, never read by toolrun.
	Metadata map[string]any `json:"metadata,omitempty"`

	CreatedAt time.Time `json:"created_at"`
}

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
