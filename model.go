package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"time"
)

// Model is a model definition (spec defineModel): a name prompts refer to,
// the provider that serves it and the provider's model id.
type Model struct {
	// Name is what prompts use in their Model field.
	Name string
	// Provider serves the model.
	Provider Provider
	// ID is the provider's model id, such as "anthropic/claude-sonnet-5.5".
	ID string
	// ProviderTools is the opt-in list of provider-executed tools a prompt
	// may select with "provider:<name>"; a provider tool not listed here is
	// never offered.
	ProviderTools []string
	// Capabilities describe what the model supports.
	Capabilities Capabilities
}

func (m *Model) definitionName() string { return m.Name }

// Capabilities describe a model. The zero value means a model that
// supports tool calls and text.
type Capabilities struct {
	// NoToolCalls means the model cannot call tools: no tools and no tool
	// choice are sent.
	NoToolCalls bool
}

// Provider serves model requests. Implementations live in provider/...:
// provider/scripted (deterministic, for tests and examples),
// provider/openai (OpenAI-compatible chat completions) and
// provider/anthropic. A Provider must be safe for concurrent use.
type Provider interface {
	// Name identifies the provider in logs and errors ("openai", "scripted").
	Name() string
	// Stream sends req and yields the response as it arrives. The sequence
	// ends after a ChunkFinish, or with a non-nil error (a *ProviderError
	// for failures the provider reported). Cancelling ctx must stop the
	// request and end the sequence with ctx's error. req and what it refers
	// to are the caller's: Stream must not change them, nor keep them once
	// the sequence has ended (copy what it keeps).
	Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error]
}

// NullableOptionals is implemented by providers whose schema dialect makes
// every optional property required and nullable (OpenAI's strict mode), so
// their models send null for a property they mean to leave out. For such a
// model, the runtime removes a null the model sent for a property that the
// tool's own schema leaves optional and does not let be null, before
// validation; defaults then apply as for any other model.
type NullableOptionals interface {
	// NullableOptionals reports whether the dialect applies to modelID.
	NullableOptionals(modelID string) bool
}

// ProviderToolLister is implemented by providers that execute tools
// themselves (web search, code interpreter …).
type ProviderToolLister interface {
	// ProviderTools returns the provider-executed tools available for a model id.
	ProviderTools(modelID string) []ToolSpec
}

// Request is one model request.
type Request struct {
	// Model is the provider's model id.
	Model string
	// ThreadID is the thread the request is made for. Providers may use it
	// to route or label requests (provider/scripted serves scripts per
	// thread); it is not part of what the model is sent.
	ThreadID string
	// System is the system prompt ("" for none).
	System string
	// Messages is the conversation, oldest first, as the acting side sees
	// it: its own turns as RoleAssistant, the other side's as RoleUser; tool
	// calls on assistant messages; results as RoleTool messages.
	Messages []Message
	// Tools offered to the model. Nil when the model cannot call tools.
	Tools []ToolSpec
	// ToolChoice is "", "auto", "none" or "required".
	ToolChoice string
	// ParallelToolCalls, when set, asks the provider to allow (or not)
	// several tool calls in one response.
	ParallelToolCalls *bool
}

// ToolSpec describes a tool: as offered to a model (Request.Tools) and as
// a Registry lists its function tools. Providers send a model the name, the
// description and the parameters; the fields from Variables on describe
// the definition and are never sent (in Request.Tools they are empty).
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments; nil for none.
	Parameters json.RawMessage
	// ProviderExecuted marks a tool the provider runs itself
	// (executionMode "provider"); the local executor never runs it.
	ProviderExecuted bool
	// Provider names the provider that executes a ProviderExecuted tool.
	Provider string

	// Variables, Uses, ProgressArgument and Annotations are the function
	// tool's definition's, unchanged.
	Variables        []Variable
	Uses             []string
	ProgressArgument string
	Annotations      map[string]any
}

// ChunkType says what a Chunk carries.
type ChunkType string

// The chunk types of a streamed response.
const (
	// ChunkText carries a text delta in Text.
	ChunkText ChunkType = "text"
	// ChunkReasoning carries a reasoning delta in Text.
	ChunkReasoning ChunkType = "reasoning"
	// ChunkToolCallStart announces tool call number Index with its ID and
	// Name; its arguments follow.
	ChunkToolCallStart ChunkType = "tool_call_start"
	// ChunkToolCallDelta carries a fragment of the arguments of tool call
	// Index in ToolCall.Arguments.
	ChunkToolCallDelta ChunkType = "tool_call_delta"
	// ChunkToolCall carries the complete tool call Index (ID, Name and the
	// whole argument text). Providers send it for every call, after any deltas.
	ChunkToolCall ChunkType = "tool_call"
	// ChunkProviderTool carries a tool the provider executed itself.
	ChunkProviderTool ChunkType = "provider_tool"
	// ChunkUsage carries token usage.
	ChunkUsage ChunkType = "usage"
	// ChunkFinish ends the response with FinishReason.
	ChunkFinish ChunkType = "finish"
)

// Chunk is one piece of a streamed model response.
type Chunk struct {
	Type         ChunkType
	Text         string
	Index        int
	ToolCall     ToolCall
	ProviderTool *ProviderToolCall
	Usage        *Usage
	// FinishReason is "stop", "tool_calls", "length", "content_filter" or
	// a provider's own reason.
	FinishReason string
}

// ProviderToolCall is a tool call the provider executed itself:
// logged, not stored as a tool message.
type ProviderToolCall struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Type     string         `json:"type,omitempty"`
	Provider string         `json:"provider,omitempty"`
	Status   string         `json:"status"` // completed, failed or in_progress
	Result   string         `json:"result,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens     int `json:"input_tokens"`
	OutputTokens    int `json:"output_tokens"`
	CachedTokens    int `json:"cached_tokens,omitempty"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// ProviderError is a failure a provider reported (an HTTP error, a rate
// limit, a malformed stream). Providers return it from Stream.
type ProviderError struct {
	Provider string
	// Status is the HTTP status, or 0.
	Status int
	// Code is the provider's error code ("rate_limit_exceeded",
	// "invalid_request", …) or "".
	Code    string
	Message string
	// Retryable reports whether the same request may succeed later.
	Retryable bool
	// RetryAfter is the provider's requested wait, or 0.
	RetryAfter time.Duration
	// Err is the underlying error, if any.
	Err error
}

// Error names the provider, the status, the code and the message.
func (e *ProviderError) Error() string {
	s := "toolrun: provider " + e.Provider
	if e.Status != 0 {
		s += fmt.Sprintf(" (status %d)", e.Status)
	}
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	return s + ": " + e.Message
}

// Unwrap returns the underlying error.
func (e *ProviderError) Unwrap() error { return e.Err }
