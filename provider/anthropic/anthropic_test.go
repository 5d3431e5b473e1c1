package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

type reply struct {
	status  int
	ctype   string
	headers map[string]string
	body    string
}

func readTestdata(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	return string(b)
}

func sseReply(t *testing.T, file string) reply {
	return reply{status: 200, ctype: "text/event-stream", body: readTestdata(t, file)}
}

func jsonReply(t *testing.T, status int, file string) reply {
	return reply{status: status, ctype: "application/json", body: readTestdata(t, file)}
}

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
		n := min(int(s.calls.Add(1))-1, len(s.replies)-1)
		b, _ := io.ReadAll(r.Body)
		s.bodies <- b
		h := r.Header.Clone()
		h.Set("X-Path", r.URL.Path)
		s.headers <- h
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
	o := &Options{APIKey: "sk-ant-test", BaseURL: url, RetryBaseDelay: time.Millisecond}
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
	return &toolrun.Request{Model: "claude-test", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}}}
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
	assert.Equal(t, toolrun.Usage{InputTokens: 35, OutputTokens: 6, CachedTokens: 10}, *u[0].Usage)
	last := chunks[len(chunks)-1]
	assert.Equal(t, toolrun.ChunkFinish, last.Type)
	assert.Equal(t, "stop", last.FinishReason)

	h := <-s.headers
	assert.Equal(t, "/v1/messages", h.Get("X-Path"))
	assert.Equal(t, "sk-ant-test", h.Get("x-api-key"))
	assert.Equal(t, "2023-06-01", h.Get("anthropic-version"))
}

func TestParallelToolCalls(t *testing.T) {
	s := newServer(t, sseReply(t, "parallel_tools.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Let me check.", text(chunks, toolrun.ChunkText))
	starts := ofType(chunks, toolrun.ChunkToolCallStart)
	require.Len(t, starts, 3)
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 3)
	want := []toolrun.ToolCall{
		{ID: "toolu_ber", Name: "get_weather", Arguments: `{"city": "Berlin", "units": "celsius"}`},
		{ID: "toolu_par", Name: "get_weather", Arguments: `{"city": "Paris"}`},
		{ID: "toolu_search", Name: "search_issues", Arguments: `{"query": "is:open label:\"bug\"", "limit": 5}`},
	}
	for i := range want {
		assert.Equal(t, i, starts[i].Index)
		assert.Equal(t, i, calls[i].Index, "tool calls are numbered apart from content blocks")
		assert.Equal(t, want[i], calls[i].ToolCall)
		var args strings.Builder
		for _, c := range ofType(chunks, toolrun.ChunkToolCallDelta) {
			if c.Index == i {
				args.WriteString(c.ToolCall.Arguments)
			}
		}
		assert.Equal(t, want[i].Arguments, args.String())
	}
	assert.Equal(t, "tool_calls", chunks[len(chunks)-1].FinishReason)
	assert.Equal(t, 120, ofType(chunks, toolrun.ChunkUsage)[0].Usage.OutputTokens)
}

func TestArgumentDeltasArriveEarly(t *testing.T) {
	release := make(chan struct{})
	head := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"write_file\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"path\\\": \\\"notes.md\\\", \"}}\n\n"
	tail := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"content\\\": \\\"hi\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
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
	early := false
	for c, err := range testProvider(srv.URL, nil).Stream(context.Background(), basicRequest()) {
		require.NoError(t, err)
		got = append(got, c)
		if c.Type == toolrun.ChunkToolCallDelta && !early {
			early = true
			assert.Equal(t, `{"path": "notes.md", `, c.ToolCall.Arguments)
			close(release)
		}
	}
	require.True(t, early)
	calls := ofType(got, toolrun.ChunkToolCall)
	require.Len(t, calls, 1)
	assert.Equal(t, `{"path": "notes.md", "content": "hi"}`, calls[0].ToolCall.Arguments)
}

func TestServerTools(t *testing.T) {
	s := newServer(t, sseReply(t, "web_search.sse"))
	p := testProvider(s.URL, nil)
	specs := p.ProviderTools("claude-test")
	require.Len(t, specs, 1)
	assert.Equal(t, toolrun.ToolSpec{Name: "web_search", Description: WebSearch(0).Description, ProviderExecuted: true, Provider: "anthropic"}, specs[0])

	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "provider:web_search", ProviderExecuted: true}}
	chunks, err := collect(p, req)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	assert.Equal(t, []any{map[string]any{"type": "web_search_20250305", "name": "web_search"}}, body["tools"])

	pts := ofType(chunks, toolrun.ChunkProviderTool)
	require.Len(t, pts, 4)
	assert.Equal(t, &toolrun.ProviderToolCall{ID: "srvtoolu_1", Name: "web_search", Type: "server_tool_use", Provider: "anthropic",
		Status: "in_progress", Metadata: map[string]any{"input": map[string]any{"query": "go 1.26 release notes"}}}, pts[0].ProviderTool)
	assert.Equal(t, "srvtoolu_1", pts[1].ProviderTool.ID)
	assert.Equal(t, "web_search", pts[1].ProviderTool.Name)
	assert.Equal(t, "web_search_tool_result", pts[1].ProviderTool.Type)
	assert.Equal(t, "completed", pts[1].ProviderTool.Status)
	assert.Contains(t, pts[1].ProviderTool.Result, "https://go.dev/doc/go1.26")
	assert.Equal(t, map[string]any{"url": "https://example.invalid"}, pts[2].ProviderTool.Metadata["input"], "input from the start event")
	assert.Equal(t, "failed", pts[3].ProviderTool.Status)
	assert.Equal(t, "unavailable", pts[3].ProviderTool.Metadata["error_code"])

	assert.Equal(t, "Go 1.26 is out.", text(chunks, toolrun.ChunkText))
	assert.Empty(t, ofType(chunks, toolrun.ChunkToolCall), "server tools are not local tool calls")
	assert.Equal(t, toolrun.Usage{InputTokens: 2100, OutputTokens: 80}, *ofType(chunks, toolrun.ChunkUsage)[0].Usage)

	assert.Empty(t, New(&Options{ProviderTools: []ProviderTool{}}).ProviderTools("x"))
	limited := New(&Options{ProviderTools: []ProviderTool{WebSearch(3)}})
	assert.JSONEq(t, `{"type":"web_search_20250305","name":"web_search","max_uses":3}`, string(limited.opts.ProviderTools[0].Tool))
}

func TestThinking(t *testing.T) {
	s := newServer(t, sseReply(t, "thinking.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Two plus two is four.", text(chunks, toolrun.ChunkReasoning))
	assert.Equal(t, "4", text(chunks, toolrun.ChunkText))
	assert.Equal(t, "length", chunks[len(chunks)-1].FinishReason)
}

func TestRequestMapping(t *testing.T) {
	s := newServer(t, sseReply(t, "text.sse"))
	p := testProvider(s.URL, func(o *Options) {
		o.MaxTokens = 1000
		o.ExtraBody = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 512}}
		o.Headers = map[string]string{"anthropic-beta": "test-beta"}
	})
	par := false
	req := &toolrun.Request{
		Model:  "claude-test",
		System: "You are terse.",
		Messages: []toolrun.Message{
			{Role: toolrun.RoleSystem, Content: "Answer in English."},
			{Role: toolrun.RoleUser, Content: "Weather in Berlin and Paris?"},
			{Role: toolrun.RoleAssistant, Content: "Checking.", ToolCalls: []toolrun.ToolCall{
				{ID: "toolu_1", Name: "get_weather", Arguments: `{"city":"Berlin"}`},
				{ID: "toolu_2", Name: "get_weather", Arguments: ``},
			}},
			{Role: toolrun.RoleTool, ToolCallID: "toolu_1", Name: "get_weather", Content: `{"temp":3}`, ToolStatus: toolrun.StatusSuccess},
			{Role: toolrun.RoleTool, ToolCallID: "toolu_2", Name: "get_weather", Content: `missing city`, ToolStatus: toolrun.StatusError},
			{Role: toolrun.RoleUser, Content: "And Rome?"},
		},
		Tools: []toolrun.ToolSpec{{
			Name: "get_weather", Description: "Weather for a city",
			Parameters: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"city":{"$ref":"#/$defs/city"}},"required":["city"],"$defs":{"city":{"type":"string","minLength":1}}}`),
		}},
		ToolChoice:        "required",
		ParallelToolCalls: &par,
	}
	_, err := collect(p, req)
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(<-s.bodies, &body))
	want := `{
	  "model": "claude-test",
	  "max_tokens": 1000,
	  "stream": true,
	  "system": "You are terse.\n\nAnswer in English.",
	  "thinking": {"type": "enabled", "budget_tokens": 512},
	  "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
	  "tools": [{"name": "get_weather", "description": "Weather for a city",
	    "input_schema": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1}}, "required": ["city"]}}],
	  "messages": [
	    {"role": "user", "content": [{"type": "text", "text": "Weather in Berlin and Paris?"}]},
	    {"role": "assistant", "content": [
	      {"type": "text", "text": "Checking."},
	      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Berlin"}},
	      {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}}
	    ]},
	    {"role": "user", "content": [
	      {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"temp\":3}"},
	      {"type": "tool_result", "tool_use_id": "toolu_2", "content": "missing city", "is_error": true},
	      {"type": "text", "text": "And Rome?"}
	    ]}
	  ]
	}`
	var wantBody map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &wantBody))
	assert.Equal(t, wantBody, body)
	assert.Equal(t, "test-beta", (<-s.headers).Get("anthropic-beta"))
}

func TestToolChoiceMapping(t *testing.T) {
	p := New(nil)
	tools := []toolrun.ToolSpec{{Name: "t"}}
	no := false
	for _, c := range []struct {
		choice   string
		parallel *bool
		want     string
	}{
		{"", nil, ``},
		{"auto", nil, `{"type":"auto"}`},
		{"none", nil, `{"type":"none"}`},
		{"required", nil, `{"type":"any"}`},
		{"", &no, `{"type":"auto","disable_parallel_tool_use":true}`},
	} {
		b, err := p.requestBody(&toolrun.Request{Model: "m", Tools: tools, ToolChoice: c.choice, ParallelToolCalls: c.parallel})
		require.NoError(t, err)
		var body struct {
			ToolChoice json.RawMessage `json:"tool_choice"`
		}
		require.NoError(t, json.Unmarshal(b, &body))
		if c.want == "" {
			assert.Nil(t, body.ToolChoice)
		} else {
			assert.JSONEq(t, c.want, string(body.ToolChoice))
		}
	}
	b, err := p.requestBody(&toolrun.Request{Model: "m", ToolChoice: "required"})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "tool_choice", "no tool_choice without tools")
	assert.Contains(t, string(b), `"max_tokens":4096`)
}

func TestHTTPErrors(t *testing.T) {
	cases := []struct {
		file      string
		status    int
		code      string
		retryable bool
	}{
		{"error_401.json", 401, "authentication_error", false},
		{"error_429.json", 429, "rate_limit_error", true},
		{"error_529.json", 529, "overloaded_error", true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			s := newServer(t, jsonReply(t, c.status, c.file))
			_, err := collect(testProvider(s.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
			pe := providerError(t, err)
			assert.Equal(t, c.status, pe.Status)
			assert.Equal(t, c.code, pe.Code)
			assert.Equal(t, c.retryable, pe.Retryable)
			assert.Contains(t, pe.Message, "(request req_test")
		})
	}
}

func TestRetryAfterThenSuccess(t *testing.T) {
	r := jsonReply(t, 429, "error_429.json")
	r.headers = map[string]string{"Retry-After": "1"}
	s := newServer(t, r, sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Hello, world!", text(chunks, toolrun.ChunkText))
	first, second := <-s.arrivals, <-s.arrivals
	assert.GreaterOrEqual(t, second.Sub(first), 950*time.Millisecond)
	assert.Less(t, second.Sub(first), 3*time.Second)
}

func TestOverloadedThenSuccess(t *testing.T) {
	s := newServer(t, jsonReply(t, 529, "error_529.json"), jsonReply(t, 500, "error_500.json"), sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "stop", chunks[len(chunks)-1].FinishReason)
	assert.EqualValues(t, 3, s.calls.Load())
}

func TestOverloadedEventBeforeAnyChunkIsRetried(t *testing.T) {
	s := newServer(t, sseReply(t, "overloaded_event.sse"), sseReply(t, "text.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "Hello, world!", text(chunks, toolrun.ChunkText))
	assert.EqualValues(t, 2, s.calls.Load())

	s2 := newServer(t, sseReply(t, "overloaded_event.sse"))
	_, err = collect(testProvider(s2.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "overloaded_error", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Zero(t, pe.Status)
}

func TestMalformedEvent(t *testing.T) {
	s := newServer(t, sseReply(t, "malformed.sse"))
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Equal(t, "Hi", text(chunks, toolrun.ChunkText))
	assert.EqualValues(t, 1, s.calls.Load())
}

func TestMalformedEventIsQuotedWithoutASplitCharacter(t *testing.T) {
	// The event is quoted, cut to 120 bytes, without the start of a split
	// character (which would show as \xe2\x82).
	long := "x" + strings.Repeat("€", 200) // € is 3 bytes
	err := parseStream("anthropic", strings.NewReader("data: "+long+"\n\n"), func(toolrun.Chunk) bool { return true })
	pe := providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, strconv.Quote("x"+strings.Repeat("€", 39))+"…:", "118 bytes of the event")
	assert.NotContains(t, pe.Message, `\x`)
}

func TestStreamCutMidToolCall(t *testing.T) {
	s := newServer(t, sseReply(t, "cut_tool.sse"))
	chunks, err := collect(testProvider(s.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "stream_truncated", pe.Code)
	assert.True(t, pe.Retryable)
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 1)
	assert.Equal(t, "toolu_done", calls[0].ToolCall.ID)
	assert.Len(t, ofType(chunks, toolrun.ChunkToolCallStart), 2)
	assert.Empty(t, ofType(chunks, toolrun.ChunkFinish))
}

func TestResponseNotJSON(t *testing.T) {
	s := newServer(t, reply{status: 200, ctype: "application/json", body: "<html>oops</html>"})
	_, err := collect(testProvider(s.URL, nil), basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, "not JSON")

	s2 := newServer(t, reply{status: 502, ctype: "text/html", body: "<html>Bad Gateway</html>"})
	_, err = collect(testProvider(s2.URL, func(o *Options) { o.MaxRetries = -1 }), basicRequest())
	pe = providerError(t, err)
	assert.Equal(t, 502, pe.Status)
	assert.Equal(t, "api_error", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Contains(t, pe.Message, "Bad Gateway")
}

func TestNonStreamedMessage(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"On it."},{"type":"tool_use","id":"toolu_9","name":"get_weather","input":{"city":"Rome"}}],"stop_reason":"tool_use","usage":{"input_tokens":12,"output_tokens":7}}`
	s := newServer(t, reply{status: 200, ctype: "application/json", body: body})
	chunks, err := collect(testProvider(s.URL, nil), basicRequest())
	require.NoError(t, err)
	assert.Equal(t, "On it.", text(chunks, toolrun.ChunkText))
	calls := ofType(chunks, toolrun.ChunkToolCall)
	require.Len(t, calls, 1)
	assert.Equal(t, toolrun.ToolCall{ID: "toolu_9", Name: "get_weather", Arguments: `{"city":"Rome"}`}, calls[0].ToolCall)
	assert.Equal(t, "tool_calls", chunks[len(chunks)-1].FinishReason)
}

func TestContextCancelMidStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\n\n")
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

func TestUnknownProviderTool(t *testing.T) {
	req := basicRequest()
	req.Tools = []toolrun.ToolSpec{{Name: "code_execution", ProviderExecuted: true}}
	_, err := collect(New(nil), req)
	assert.Equal(t, "invalid_request_error", providerError(t, err).Code)
}

func TestIdleTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: ping\ndata: {\"type\":\"ping\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer srv.Close()
	start := time.Now()
	p := testProvider(srv.URL, func(o *Options) { o.IdleTimeout = 100 * time.Millisecond; o.MaxRetries = 1 })
	_, err := collect(p, basicRequest())
	pe := providerError(t, err)
	assert.Equal(t, "stream_timeout", pe.Code)
	assert.True(t, pe.Retryable)
	assert.Less(t, time.Since(start), 3*time.Second, "retried once, each attempt ended by the idle limit")
}

// A history a window cut may open with the assistant; the API wants the
// user first, so a short note opens it.
func TestConversationOpeningWithTheAssistantGetsAUserNote(t *testing.T) {
	_, msgs := mapMessages(&toolrun.Request{Messages: []toolrun.Message{
		{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "c1", Name: "get_issue", Arguments: `{}`}}},
		{Role: toolrun.RoleTool, ToolCallID: "c1", Content: "issue 7"},
		{Role: toolrun.RoleUser, Content: "and now?"},
	}})
	require.Len(t, msgs, 3, "note, call, then the result merged with the user's text")
	assert.Equal(t, "user", msgs[0].Role)
	assert.Equal(t, earlierNotShown, msgs[0].Content[0].Text)
	assert.Equal(t, "assistant", msgs[1].Role)
	_, msgs = mapMessages(&toolrun.Request{Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}}})
	require.Len(t, msgs, 1, "a conversation opening with the user is left as it is")
}
