// Package anthropic is a toolrun.Provider for the Anthropic Messages API
// (POST /v1/messages), written as a thin net/http client without a vendor
// SDK.
//
// # Use
//
//	p := anthropic.New(&anthropic.Options{APIKey: os.Getenv("ANTHROPIC_API_KEY")})
//	model := &toolrun.Model{Name: "smart", Provider: p, ID: "claude-sonnet-4-5",
//		ProviderTools: []string{"web_search"}}
//
// Requests always stream. The system prompt (Request.System and any system
// messages) goes to the top-level "system" field; assistant tool calls
// become tool_use blocks; tool results become tool_result blocks, and the
// results of one turn (with any user text after them) are merged into a
// single user message, as the API requires. max_tokens, which the API
// requires, is Options.MaxTokens or DefaultMaxTokens. Other request fields
// ("thinking", "temperature", …) go in Options.ExtraBody.
//
// # Streaming
//
// text_delta events yield toolrun.ChunkText and thinking_delta events
// toolrun.ChunkReasoning. A tool_use block yields ChunkToolCallStart when it
// opens, a ChunkToolCallDelta per input_json_delta fragment and a
// ChunkToolCall when it closes; tool calls are numbered 0, 1, … apart from
// the content-block indexes. Server tools (web search, web fetch, code
// execution) are not local calls: a server_tool_use block yields a
// ChunkProviderTool with Status "in_progress" and its input in
// Metadata["input"], and its *_tool_result block another with Status
// "completed" (or "failed" for an error result) and the raw result JSON in
// Result. Usage is yielded once, before the ChunkFinish: InputTokens counts
// all input tokens including cache reads and writes, CachedTokens the cache
// reads. Stop reasons map to toolrun's: end_turn and stop_sequence → "stop",
// tool_use → "tool_calls", max_tokens → "length", refusal →
// "content_filter"; others (pause_turn) pass through.
//
// # Errors and retries
//
// Failures are *toolrun.ProviderError values with the HTTP status (0 for an
// error event inside the stream), the API's error type as Code
// ("overloaded_error", "rate_limit_error", …) and the request id in the
// message. Network errors, 408, 409, 429, 5xx, 529 and retryable error
// events are retried with exponential backoff and jitter, honouring
// Retry-After, as long as no chunk was yielded. A stream that ends before
// message_stop yields Code "stream_truncated", and no ChunkToolCall is
// yielded for a tool_use block that did not close. A redirect, which the
// default client does not follow, yields Code "redirect".
package anthropic
