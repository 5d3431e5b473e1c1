// Package openai is a toolrun.Provider for the OpenAI chat-completions API
// and the many servers that speak it: OpenAI itself, OpenRouter, vLLM,
// Ollama, Groq, DeepSeek, Mistral and other OpenAI-compatible endpoints.
// It is a thin net/http client; no vendor SDK is involved.
//
// # Use
//
//	p := openai.New(&openai.Options{APIKey: os.Getenv("OPENAI_API_KEY")})
//	model := &toolrun.Model{Name: "fast", Provider: p, ID: "gpt-4.1-mini"}
//
// For OpenRouter, start from [OpenRouter]:
//
//	opts := openai.OpenRouter(os.Getenv("OPENROUTER_API_KEY"))
//	opts.Headers = map[string]string{"HTTP-Referer": "https://example.com", "X-Title": "Example"}
//	opts.ExtraBody = map[string]any{"provider": map[string]any{"sort": "throughput"}}
//	p := openai.New(opts)
//
// For a local server, set BaseURL ("http://localhost:11434/v1" for Ollama,
// "http://localhost:8000/v1" for vLLM) and leave APIKey empty.
//
// # Streaming
//
// Requests are always streamed ("stream": true with usage included). Text
// arrives as toolrun.ChunkText, reasoning ("reasoning_content",
// OpenRouter's "reasoning", Mistral's thinking parts) as
// toolrun.ChunkReasoning. Each tool call yields a ChunkToolCallStart as
// soon as its name is known, a ChunkToolCallDelta per argument fragment,
// and a ChunkToolCall with the whole arguments when the next call starts
// or the response finishes. Tool calls are numbered 0, 1, … in order of
// appearance, whatever indexes the server used. Usage comes as one
// ChunkUsage just before the ChunkFinish, and the sequence ends with a ChunkFinish ("stop",
// "tool_calls", "length", "content_filter" or the server's own reason).
// Citations a server-side search attached ("annotations", as OpenAI search
// models and OpenRouter's web plugin send them) are yielded before the usage
// as one toolrun.ChunkProviderTool per annotation type: Name "web_search"
// for "url_citation", the annotations as JSON in Result.
// SSE comment lines (OpenRouter's ": OPENROUTER PROCESSING") are ignored;
// a server that answers with a whole JSON completion instead of a stream
// is handled too.
//
// # Provider tools
//
// Options.ProviderTools lists what the server runs itself; the Provider
// offers them through toolrun.ProviderToolLister, and a request that selects
// one sends its Tool entry verbatim in "tools" and merges its Body into the
// request (OpenRouter's {"plugins": [{"id": "web"}]}).
//
// # Tool schemas
//
// Tool parameter schemas are rewritten to what the API accepts: "$ref"s are
// inlined, "$schema" and "$defs" removed. With Options.Strict, tools are
// sent with "strict": true and their schemas follow OpenAI's strict rules
// (every property required, optional ones nullable, no extra keys); a
// dropped keyword is logged as a warning. The runtime still validates
// arguments against the tool's own schema.
//
// # Errors and retries
//
// Failures are *toolrun.ProviderError values carrying the HTTP status, the
// error code from the body ("invalid_api_key", "rate_limit_exceeded", …,
// or one derived from the status such as "payment_required" for
// OpenRouter's 402), and whether a retry may succeed. A stream that breaks
// off yields Code "stream_truncated"; a payload that cannot be parsed
// "invalid_response"; a connection failure "network"; a redirect, which the
// default client does not follow, "redirect". Retryable failures
// (network errors, 408, 409, 429, 5xx) are retried with exponential backoff
// and jitter, honouring Retry-After, but only until the first chunk was
// yielded: a response is never replayed to the consumer. Cancelling the
// context stops the request and ends the sequence with the context's error.
package openai
