package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// reply is one canned HTTP response of a test server.
type reply struct {
	status  int
	ctype   string
	headers map[string]string
	body    string
}

func sseReply(t *testing.T, file string) reply {
	return reply{status: 200, ctype: "text/event-stream", body: readTestdata(t, file)}
}

func readTestdata(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	return string(b)
}

// server replays replies in order (the last one repeats) and records the
// request bodies and headers.
type server struct {
	*httptest.Server
	replies  []reply
	calls    atomic.Int32
	bodies   chan []byte
	headers  chan http.Header
	arrivals chan time.Time
}

func newServer(t *testing.T, replies ...reply) *server {
	s := &server{replies: replies, bodies: make(chan []byte, 16), headers: make(chan http.Header, 16), arrivals: make(chan time.Time, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.arrivals <- time.Now()
		n := int(s.calls.Add(1)) - 1
		if n >= len(s.replies) {
			n = len(s.replies) - 1
		}
		b, _ := io.ReadAll(r.Body)
		s.bodies <- b
		s.headers <- r.Header.Clone()
		rp := s.replies[n]
		if rp.ctype != "" {
			w.Header().Set("Content-Type", rp.ctype)
		}
		for k, v := range rp.headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rp.status)
		_, _ = io.WriteString(w, rp.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func testProvider(url string, mod func(*Options)) *Provider {
	o := &Options{APIKey: "sk-test", BaseURL: url, RetryBaseDelay: time.Millisecond}
	if mod != nil {
		mod(o)
	}
	return New(o)
}

func collect(p toolrun.Provider, req *toolrun.Request) ([]toolrun.Chunk, error) {
	var out []toolrun.Chunk
	for c, err := range p.Stream(context.Background(), req) {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func basicRequest() *toolrun.Request {
	return &toolrun.Request{Model: "gpt-test", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}}}
}

func ofType(chunks []toolrun.Chunk, t toolrun.ChunkType) []toolrun.Chunk {
	var out []toolrun.Chunk
	for _, c := range chunks {
		if c.Type == t {
			out = append(out, c)
		}
	}
	return out
}

func text(chunks []toolrun.Chunk, t toolrun.ChunkType) string {
	var b strings.Builder
	for _, c := range ofType(chunks, t) {
		b.WriteString(c.Text)
	}
	return b.String()
}

func providerError(t *testing.T, err error) *toolrun.ProviderError {
	t.Helper()
	var pe *toolrun.ProviderError
	require.True(t, errors.As(err, &pe), "want *toolrun.ProviderError, got %T: %v", err, err)
	return pe
}

func TestPlainAnswer(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Hello, world!", text(chunks, toolrun.ChunkText))
	u := ofType(chunks, toolrun.ChunkUsage)
	require.Len(t, u, 1)
	assert.Equal(t, toolrun.Usage{InputTokens: 21, OutputTokens: 4, CachedTokens: 8}, *u[0].Usage)
	last := chunks[len(chunks)-1]
	assert.Equal(t, toolrun.ChunkFinish, last.Type)
	assert.Equal(t, "stop", last.FinishReason)
	assert.Equal(t, toolrun.ChunkUsage, chunks[len(chunks)-2].Type, "usage right before the finish")
	assert.Empty(t, ofType(chunks, toolrun.ChunkToolCall))
}

func TestParallelToolCalls(t *testing.T) {
	s := newServer(t, sseReply(t, "parallel_tools.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)

	starts := ofType(chunks, toolrun.ChunkToolCallStart)
	require.Len(t, starts, 3)
	for i, want := range []string{"call_weather_ber", "call_weather_par", "call_search_q"} {
		assert.Equal(t, i, starts[i].Index)
		assert.Equal(t, want, starts[i].ToolCall.ID)
	}
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 3)
	assert.Equal(t, toolrun.ToolCall{ID: "call_weather_ber", Name: "get_weather", Arguments: `{"city": "Berlin", "units": "celsius"}`}, calls[0].ToolCall)
	assert.Equal(t, toolrun.ToolCall{ID: "call_weather_par", Name: "get_weather", Arguments: `{"city": "Paris"}`}, calls[1].ToolCall)
	assert.Equal(t, toolrun.ToolCall{ID: "call_search_q", Name: "search_issues", Arguments: `{"query": "is:open label:\"bug\"", "limit": 5}`}, calls[2].ToolCall)

	// The deltas of each call add up to its arguments, and each call's
	// deltas come after its start and before its completion.
	for i := range 3 {
		var args strings.Builder
		phase := 0
		for _, c := range chunks {
			if c.Index != i {
				continue
			}
			switch c.Type {
			case toolrun.ChunkToolCallStart:
				assert.Equal(t, 0, phase)
				phase = 1
			case toolrun.ChunkToolCallDelta:
				assert.Equal(t, 1, phase)
				args.WriteString(c.ToolCall.Arguments)
			case toolrun.ChunkToolCall:
				assert.Equal(t, 1, phase)
				phase = 2
			}
		}
		assert.Equal(t, calls[i].ToolCall.Arguments, args.String())
	}
	// A call completes as soon as the next one starts.
	order := []toolrun.ChunkType{}
	for _, c := range chunks {
		if c.Type == toolrun.ChunkToolCallStart || c.Type == toolrun.ChunkToolCall {
			order = append(order, c.Type)
		}
	}
	assert.Equal(t, []toolrun.ChunkType{"tool_call_start", "tool_call", "tool_call_start", "tool_call", "tool_call_start", "tool_call"}, order)
	last := chunks[len(chunks)-1]
	assert.Equal(t, "tool_calls", last.FinishReason)
	assert.Equal(t, 180, ofType(chunks, toolrun.ChunkUsage)[0].Usage.InputTokens)
}

// TestArgumentDeltasArriveEarly holds back the end of the stream until the
// test has seen the first argument fragment, proving fragments are yielded
// as they arrive.
func TestArgumentDeltasArriveEarly(t *testing.T) {
	release := make(chan struct{})
	head := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\": \"notes.md\", "}}]},"finish_reason":null}]}` + "\n\n"
	tail := `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"content\": \"hello\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		_, _ = io.WriteString(w, tail)
	}))
	defer srv.Close()

	var got []toolrun.Chunk
	sawDeltaBeforeRelease := false
	for c, err := range testProvider(srv.URL, nil).Stream(context.Background(), basicRequest()) {
		require.NoError(t, err)
		got = append(got, c)
		if c.Type == toolrun.ChunkToolCallDelta && !sawDeltaBeforeRelease {
			sawDeltaBeforeRelease = true
			assert.Equal(t, `{"path": "notes.md", `, c.ToolCall.Arguments)
			assert.Empty(t, ofType(got, toolrun.ChunkToolCall), "no complete call yet")
			close(release)
		}
	}
	require.True(t, sawDeltaBeforeRelease)
	calls := ofType(got, toolrun.ChunkToolCall)
	require.Len(t, calls, 1)
	assert.Equal(t, `{"path": "notes.md", "content": "hello"}`, calls[0].ToolCall.Arguments)
}

func TestOpenRouterReasoningAndKeepAlives(t *testing.T) {
	s := newServer(t, sseReply(t, "openrouter_reasoning.sse"))
	opts := OpenRouter("or-key")
	opts.BaseURL = s.URL // the test server stands in for openrouter.ai
	opts.Headers = map[string]string{"HTTP-Referer": "https://example.com", "X-Title": "toolrun tests"}
	opts.ExtraBody = map[string]any{"provider": map[string]any{"order": []string{"anthropic"}, "allow_fallbacks": false}}
	p := New(opts)
	assert.Equal(t, "openrouter", p.Name())
	chunks, err := collect(p, basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "The user wants a short answer.", text(chunks, toolrun.ChunkReasoning))
	assert.Equal(t, "Short answer.", text(chunks, toolrun.ChunkText))
	assert.Equal(t, 12, ofType(chunks, toolrun.ChunkUsage)[0].Usage.ReasoningTokens)
	assert.Equal(t, "stop", chunks[len(chunks)-1].FinishReason)

	h := <-s.headers
	assert.Equal(t, "Bearer or-key", h.Get("Authorization"))
	assert.Equal(t, "https://example.com", h.Get("HTTP-Referer"))
	assert.Equal(t, "toolrun tests", h.Get("X-Title"))
	var body map[string]any
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	assert.Equal(t, map[string]any{"order": []any{"anthropic"}, "allow_fallbacks": false}, body["provider"])
	assert.Equal(t, true, body["stream"])
	assert.Equal(t, OpenRouterBaseURL, OpenRouter("k").BaseURL)
}

func TestRequestMapping(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	p := testProvider(s.URL, func(o *Options) { o.Strict = true })
	par := false
	req := &toolrun.Request{
		Model:  "gpt-test",
		System: "You are terse.",
		Messages: []toolrun.Message{
			{Role: toolrun.RoleUser, Content: "Weather in Berlin and Paris?"},
			{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{
				{ID: "call_1", Name: "get_weather", Arguments: `{"city":"Berlin"}`},
				{ID: "call_2", Name: "ping", Arguments: ""},
			}},
			{Role: toolrun.RoleTool, ToolCallID: "call_1", Name: "get_weather", Content: `{"temp":3}`},
			{Role: toolrun.RoleTool, ToolCallID: "call_2", Name: "ping", Content: "pong"},
			{Role: toolrun.RoleAssistant, Content: "Berlin is 3°C."},
		},
		Tools: []toolrun.ToolSpec{{
			Name: "get_weather", Description: "Weather for a city",
			Parameters: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"city":{"type":"string"},"units":{"type":"string"}},"required":["city"]}`),
		}, {Name: "ping"}},
		ToolChoice:        "auto",
		ParallelToolCalls: &par,
	}
	_, err := collect(p, req)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	want := `{
	  "model": "gpt-test",
	  "stream": true,
	  "stream_options": {"include_usage": true},
	  "tool_choice": "auto",
	  "parallel_tool_calls": false,
	  "messages": [
	    {"role": "system", "content": "You are terse."},
	    {"role": "user", "content": "Weather in Berlin and Paris?"},
	    {"role": "assistant", "content": null, "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Berlin\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\":3}"},
	    {"role": "tool", "tool_call_id": "call_2", "content": "pong"},
	    {"role": "assistant", "content": "Berlin is 3°C."}
	  ],
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city", "strict": true,
	      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "units": {"type": ["string", "null"]}},
	        "required": ["city", "units"], "additionalProperties": false}}},
	    {"type": "function", "function": {"name": "ping", "strict": true,
	      "parameters": {"type": "object", "properties": {}, "required": [], "additionalProperties": false}}}
	  ]
	}`
	var wantBody map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &wantBody))
	assert.Equal(t, wantBody, body)
}

func TestStrictFallsBackForFreeFormSchemas(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	p := testProvider(s.URL, func(o *Options) { o.Strict = true })
	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "label", Parameters: json.RawMessage(`{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`)}}
	_, err := collect(p, req)
	require.NoError(t, err)
	var body struct {
		Tools []struct {
			Function struct {
				Strict     bool            `json:"strict"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	require.Len(t, body.Tools, 1)
	assert.False(t, body.Tools[0].Function.Strict)
	assert.JSONEq(t, `{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}}}}`, string(body.Tools[0].Function.Parameters))
}

func TestProviderTools(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	p := testProvider(s.URL, func(o *Options) {
		o.ProviderTools = []ProviderTool{
			{Name: "web", Description: "OpenRouter web search", Body: map[string]any{"plugins": []any{map[string]any{"id": "web"}}}},
			{Name: "code_interpreter", Tool: json.RawMessage(`{"type":"code_interpreter"}`), Models: []string{"gpt-code"}},
		}
	})
	var lister toolrun.ProviderToolLister = p
	assert.Equal(t, []toolrun.ToolSpec{{Name: "web", Description: "OpenRouter web search", ProviderExecuted: true, Provider: "openai"}}, lister.ProviderTools("gpt-test"))
	assert.Len(t, lister.ProviderTools("gpt-code"), 2)

	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "web", ProviderExecuted: true}, {Name: "provider:code_interpreter", ProviderExecuted: true}}
	_, err := collect(p, req)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	assert.Equal(t, []any{map[string]any{"id": "web"}}, body["plugins"])
	assert.Equal(t, []any{map[string]any{"type": "code_interpreter"}}, body["tools"])

	req.Tools = []toolrun.ToolSpec{{Name: "unknown", ProviderExecuted: true}}
	_, err = collect(p, req)
	assert.Equal(t, "invalid_request", providerError(t, err).Code)
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		file      string
		status    int
		code      string
		retryable bool
		msg       string
	}{
		{"error_401.json", 401, "invalid_api_key", false, "Incorrect API key"},
		{"error_402.json", 402, "payment_required", false, "Insufficient credits"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			s := newServer(t, reply{status: c.status, ctype: "application/json", body: readTestdata(t, c.file)})
			_, err := collect(testProvider(s.URL, nil), basicRequest())
			pe := providerError(t, err)
			assert.Equal(t, c.status, pe.Status)
			assert.Equal(t, c.code, pe.Code)
			assert.Equal(t, c.retryable, pe.Retryable)
			assert.Contains(t, pe.Message, c.msg)
			assert.Equal(t, "openai", pe.Provider)
			assert.EqualValues(t, 1, s.calls.Load(), "not retried")
		})
	}
}

func TestRetryAfterThenSuccess(t *testing.T) {
	s := newServer(t,
		reply{status: 429, ctype: "application/json", headers: map[string]string{"Retry-After": "1"}, body: readTestdata(t, "error_429.json")},
		sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Hello, world!", text(chunks, toolrun.ChunkText))
	require.EqualValues(t, 2, s.calls.Load())
	first, second := <-s.arrivals, <-s.arrivals
	assert.GreaterOrEqual(t, second.Sub(first), 950*time.Millisecond, "waited for Retry-After")
	assert.Less(t, second.Sub(first), 3*time.Second)
}

func TestRetryAfterTooLongIsNotWaited(t *testing.T) {
	s := newServer(t, reply{status: 429, ctype: "application/json", headers: map[string]string{"Retry-After": "3600"}, body: readTestdata(t, "error_429.json")})
	start := time.Now()
	_, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "rate_limit_exceeded", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Equal(t, time.Hour, pe.RetryAfter)
	assert.Less(t, time.Since(start), time.Second)
	assert.EqualValues(t, 1, s.calls.Load())
}

func TestServerErrorThenSuccess(t *testing.T) {
	s := newServer(t, reply{status: 500, ctype: "application/json", body: readTestdata(t, "error_500.json")}, sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "stop", chunks[len(chunks)-1].FinishReason)
	assert.EqualValues(t, 2, s.calls.Load())
}

func TestRetriesExhausted(t *testing.T) {
	s := newServer(t, reply{status: 503, ctype: "text/html", body: "<html><body>Service Unavailable</body></html>"})
	_, err := collect(testProvider(s.URL, func(o *Options) { o.MaxRetries = 3 }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, 503, pe.Status)
	assert.Equal(t, "server_error", pe.Code)
	assert.Contains(t, pe.Message, "Service Unavailable")
	assert.EqualValues(t, 4, s.calls.Load())

	s2 := newServer(t, reply{status: 500, body: "x"})
	_, err = collect(testProvider(s2.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
	require.Error(t, err)
	assert.EqualValues(t, 1, s2.calls.Load())
}

func TestMalformedEvent(t *testing.T) {
	s := newServer(t, sseReply(t, "malformed.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, "malformed stream event")
	assert.Equal(t, "Hi", text(chunks, toolrun.ChunkText))
	assert.EqualValues(t, 1, s.calls.Load(), "not retried after a chunk was yielded")
}

func TestErrorTextsCutOnACharacterBoundary(t *testing.T) {
	long := "x" + strings.Repeat("€", 200) // € is 3 bytes
	parse := func(stream string) *toolrun.ProviderError {
		t.Helper()
		return providerError(t, parseStream("openai", strings.NewReader(stream), func(toolrun.Chunk) bool { return true }))
	}

	// OpenRouter's upstream error (metadata.raw) is cut to 500 bytes.
	event, err := json.Marshal(map[string]any{"error": map[string]any{"message": "upstream failed", "code": 502,
		"metadata": map[string]any{"raw": long, "provider_name": "P"}}})
	require.NoError(t, err)
	pe := parse("data: " + string(event) + "\n\n")
	assert.True(t, utf8.ValidString(pe.Message), "message %q", pe.Message)
	assert.Equal(t, "upstream failed (P: x"+strings.Repeat("€", 166)+"…)", pe.Message, "499 bytes of raw")

	// A malformed event is quoted, cut to 120 bytes, without the start of
	// a split character (which would show as \xe2\x82).
	pe = parse("data: " + long + "\n\n")
	assert.Contains(t, pe.Message, strconv.Quote("x"+strings.Repeat("€", 39))+"…:", "118 bytes of the event")
	assert.NotContains(t, pe.Message, `\x`)
}

func TestStreamCutMidToolCall(t *testing.T) {
	s := newServer(t, sseReply(t, "cut_tool.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "stream_truncated", pe.Code)
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 1, "only the call completed before the cut")
	assert.Equal(t, "call_done", calls[0].ToolCall.ID)
	assert.Len(t, ofType(chunks, toolrun.ChunkToolCallStart), 2)
	assert.Empty(t, ofType(chunks, toolrun.ChunkFinish))
}

func TestStreamEndsWithoutFinish(t *testing.T) {
	body := `data: {"choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n"
	s := newServer(t, reply{status: 200, ctype: "text/event-stream", body: body})
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	assert.Equal(t, "stream_truncated", providerError(t, err).Code)
	assert.Equal(t, "Hel", text(chunks, toolrun.ChunkText))
}

func TestInStreamError(t *testing.T) {
	s := newServer(t, sseReply(t, "stream_error.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Contains(t, pe.Message, "Provider disconnected")
	assert.Equal(t, "server_error", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Equal(t, "Partial", text(chunks, toolrun.ChunkText))
}

func TestResponseNotJSON(t *testing.T) {
	s := newServer(t, reply{status: 200, ctype: "application/json", body: "<html>gateway says hi</html>"})
	_, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, "not JSON")

	s2 := newServer(t, reply{status: 200, ctype: "text/html", body: "<html>login page</html>"})
	_, err = collect(testProvider(s2.URL, nil), basicRequest())
	pe = providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, "text/html")

	s3 := newServer(t, reply{status: 200, ctype: "text/event-stream", body: "data: <html>\n\n"})
	_, err = collect(testProvider(s3.URL, nil), basicRequest())
	assert.Equal(t, "invalid_response", providerError(t, err).Code)
}

func TestNonStreamedCompletion(t *testing.T) {
	s := newServer(t, reply{status: 200, ctype: "application/json", body: "\n\n   " + readTestdata(t, "completion_tool.json")})
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 1)
	assert.Equal(t, toolrun.ToolCall{ID: "call_a", Name: "get_weather", Arguments: `{"city":"Rome"}`}, calls[0].ToolCall)
	assert.Len(t, ofType(chunks, toolrun.ChunkToolCallStart), 1)
	assert.Equal(t, "tool_calls", chunks[len(chunks)-1].FinishReason)
	assert.Equal(t, 50, ofType(chunks, toolrun.ChunkUsage)[0].Usage.InputTokens)
}

func TestNetworkErrorIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	_, err := collect(testProvider(url, func(o *Options) { o.MaxRetries = 1 }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "network", pe.Code)
	assert.True(t, pe.Retryable)
	assert.NotNil(t, pe.Unwrap())
}

func TestContextCancelDuringBackoff(t *testing.T) {
	s := newServer(t, reply{status: 429, ctype: "application/json", headers: map[string]string{"Retry-After": "30"}, body: readTestdata(t, "error_429.json")})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var gotErr error
	for _, err := range testProvider(s.URL, nil).Stream(ctx, basicRequest()) {
		gotErr = err
	}
	assert.ErrorIs(t, gotErr, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestContextCancelMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errs []error
	for c, err := range testProvider(srv.URL, nil).Stream(ctx, basicRequest()) {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c.Type == toolrun.ChunkText {
			cancel()
		}
	}
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], context.Canceled)
}

func TestHeaderTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer srv.Close()
	p := testProvider(srv.URL, func(o *Options) { o.HeaderTimeout = 50 * time.Millisecond; o.MaxRetries = -1 })
	start := time.Now()
	_, err := collect(p, basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "network", pe.Code)
	assert.Less(t, time.Since(start), time.Second)
}

func TestConsumerStopsEarly(t *testing.T) {
	s := newServer(t, sseReply(t, "parallel_tools.sse"))
	n := 0
	for range testProvider(s.URL, nil).Stream(context.Background(), basicRequest()) {
		n++
		if n == 2 {
			break
		}
	}
	assert.Equal(t, 2, n)
}

func TestNoAuthorizationWithoutKey(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	_, err := collect(New(&Options{BaseURL: s.URL + "/"}), basicRequest())
	require.NoError(t, err)
	assert.Empty(t, (<-s.headers).Get("Authorization"))
}

func TestRepeatedUsageYieldsOnce(t *testing.T) {
	body := `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":{"prompt_tokens":5,"completion_tokens":1}}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2}}` + "\n\n"
	s := newServer(t, reply{status: 200, ctype: "text/event-stream", body: body})
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err, "a finish reason then the end of the body is a complete response")
	u := ofType(chunks, toolrun.ChunkUsage)
	require.Len(t, u, 1)
	assert.Equal(t, 2, u[0].Usage.OutputTokens)
}

func TestIdleTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	start := time.Now()
	chunks, err := collect(testProvider(srv.URL, func(o *Options) { o.IdleTimeout = 100 * time.Millisecond }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "stream_timeout", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Equal(t, "a", text(chunks, toolrun.ChunkText))
	assert.Less(t, time.Since(start), 2*time.Second)
}

func TestErrorEventWithoutErrorObject(t *testing.T) {
	s := newServer(t, reply{status: 200, ctype: "text/event-stream", body: "event: error\ndata: {\"message\":\"upstream went away\"}\n\n"})
	_, err := collect(testProvider(s.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "server_error", pe.Code)
	assert.Contains(t, pe.Message, "upstream went away")
}

func TestDroppedKeywordIsLogged(t *testing.T) {
	var buf bytes.Buffer
	s := newServer(t, sseReply(t, "text.sse"))
	p := testProvider(s.URL, func(o *Options) {
		o.Strict = true
		o.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "fetch", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"required":["url"]}`)}}
	for range 2 {
		_, err := collect(p, req)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, strings.Count(buf.String(), "level=WARN"), "logged once, then cached: %s", buf.String())
	assert.Contains(t, buf.String(), "tool=fetch")
	assert.Contains(t, buf.String(), "keyword=format")
}

func TestConcurrentStreams(t *testing.T) {
	s := newServer(t, sseReply(t, "parallel_tools.sse"))
	p := testProvider(s.URL, nil)
	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			chunks, err := collect(p, req)
			if err == nil && len(ofType(chunks, toolrun.ChunkToolCall)) != 3 {
				err = errors.New("wrong number of calls")
			}
			errs <- err
		}()
	}
	for range 8 {
		assert.NoError(t, <-errs)
	}
}

func TestWebAnnotationsAsProviderTool(t *testing.T) {
	s := newServer(t, sseReply(t, "web_annotations.sse"))
	p := testProvider(s.URL, func(o *Options) {
		o.ProviderTools = []ProviderTool{{Name: "web", Body: map[string]any{"plugins": []any{map[string]any{"id": "web", "max_results": 2}}}}}
	})
	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "provider:web", ProviderExecuted: true}}
	chunks, err := collect(p, req)
	require.NoError(t, err)
	pts := ofType(chunks, toolrun.ChunkProviderTool)
	require.Len(t, pts, 1)
	pt := pts[0].ProviderTool
	assert.Equal(t, "web_search", pt.Name)
	assert.Equal(t, "url_citation", pt.Type)
	assert.Equal(t, "completed", pt.Status)
	assert.Equal(t, 2, pt.Metadata["count"])
	var anns []map[string]any
	require.NoError(t, json.Unmarshal([]byte(pt.Result), &anns))
	assert.Len(t, anns, 2)
	assert.Equal(t, "Go 1.26 was released in February 2026.", text(chunks, toolrun.ChunkText))
	assert.Equal(t, toolrun.ChunkFinish, chunks[len(chunks)-1].Type)
}
