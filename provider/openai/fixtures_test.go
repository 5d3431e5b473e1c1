package openai

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// fixturesDir returns the shared recorded provider payloads
// (<repo parent>/shared/fixtures/providers), skipping the test when the
// folder is absent.
func fixturesDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("repository root not found")
		}
		dir = parent
	}
	fx := filepath.Join(filepath.Dir(dir), "shared", "fixtures", "providers")
	if _, err := os.Stat(fx); err != nil {
		t.Skipf("shared fixtures not present at %s", fx)
	}
	return fx
}

// linesToSSE turns an O-lines file into its wire form.
func linesToSSE(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, "data: "+line+"\n\n")
		}
	}
	return append(out, "data: [DONE]\n\n")
}

// openRouterToSSE rebuilds the wire form of an OR-jsonl recording, one
// write per record, so events split across reads stay split.
func openRouterToSSE(t *testing.T, path string) []string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	inEvent := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			JSON    json.RawMessage `json:"json"`
			Comment *string         `json:"comment"`
			Text    *string         `json:"text"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &rec))
		switch {
		case rec.JSON != nil:
			out = append(out, "data: "+string(rec.JSON)+"\n\n")
		case rec.Comment != nil:
			out = append(out, *rec.Comment)
		case rec.Text != nil:
			s := *rec.Text
			if !inEvent {
				s = "data: " + s
			}
			inEvent = !strings.HasSuffix(s, "\n\n")
			out = append(out, s)
		}
	}
	require.NoError(t, sc.Err())
	if inEvent {
		out = append(out, "\n\n")
	}
	return out
}

// replay serves the given writes, flushing after each one.
func replay(t *testing.T, status int, ctype string, writes []string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		for _, s := range writes {
			_, _ = io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func streamFixture(t *testing.T, writes []string) []toolrun.Chunk {
	srv := replay(t, 200, "text/event-stream", writes)
	chunks, err := collect(testProvider(srv.URL, nil), basicRequest())
	require.NoError(t, err)
	require.NotEmpty(t, chunks)
	require.Equal(t, toolrun.ChunkFinish, chunks[len(chunks)-1].Type)
	return chunks
}

func TestSharedFixturesStreams(t *testing.T) {
	fx := fixturesDir(t)
	p := func(parts ...string) string { return filepath.Join(append([]string{fx}, parts...)...) }

	t.Run("openai-text", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-chat", "openai-text.chunks.txt")))
		assert.Greater(t, len(text(c, toolrun.ChunkText)), 200)
		assert.Equal(t, "stop", c[len(c)-1].FinishReason)
		assert.Len(t, ofType(c, toolrun.ChunkUsage), 1)
	})
	t.Run("azure-model-router", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-chat", "azure-model-router.1.chunks.txt")))
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
		assert.Equal(t, 64, ofType(c, toolrun.ChunkUsage)[0].Usage.ReasoningTokens)
	})
	t.Run("deepseek-tool-call", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-compatible", "deepseek-tool-call.chunks.txt")))
		assert.NotEmpty(t, text(c, toolrun.ChunkReasoning))
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.Equal(t, "weather", calls[0].ToolCall.Name)
		assert.True(t, json.Valid([]byte(calls[0].ToolCall.Arguments)))
		assert.GreaterOrEqual(t, len(ofType(c, toolrun.ChunkToolCallDelta)), 9)
		assert.Equal(t, "tool_calls", c[len(c)-1].FinishReason)
		assert.Equal(t, toolrun.Usage{InputTokens: 339, OutputTokens: 83, CachedTokens: 320, ReasoningTokens: 39}, *ofType(c, toolrun.ChunkUsage)[0].Usage)
	})
	t.Run("alibaba-tool-call", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-compatible", "alibaba-tool-call.chunks.txt")))
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.NotEmpty(t, calls[0].ToolCall.ID, "the empty ids of continuation deltas are ignored")
		assert.True(t, json.Valid([]byte(calls[0].ToolCall.Arguments)), calls[0].ToolCall.Arguments)
	})
	t.Run("anthropic-fallback", func(t *testing.T) {
		b, err := os.ReadFile(p("openai-compatible", "anthropic-fallback-tool-call.sse"))
		require.NoError(t, err)
		c := streamFixture(t, []string{string(b)})
		assert.Equal(t, "Reading it.", text(c, toolrun.ChunkText))
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.Equal(t, 0, calls[0].Index, "wire index 1 is the first call")
		assert.Equal(t, toolrun.ToolCall{ID: "toolu_sanitized", Name: "read_file", Arguments: `{"path": "a.txt"}`}, calls[0].ToolCall)
	})
	t.Run("mistral-tool-call", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-compatible", "mistral-tool-call.chunks.txt")))
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.True(t, json.Valid([]byte(calls[0].ToolCall.Arguments)))
		assert.Equal(t, "tool_calls", c[len(c)-1].FinishReason)
	})
	t.Run("mistral-reasoning", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-compatible", "mistral-reasoning.chunks.txt")))
		assert.NotEmpty(t, text(c, toolrun.ChunkReasoning))
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
	})
	t.Run("groq-tool-call", func(t *testing.T) {
		c := streamFixture(t, linesToSSE(t, p("openai-compatible", "groq-tool-call.chunks.txt")))
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.Equal(t, "{}", calls[0].ToolCall.Arguments)
	})
	t.Run("openrouter-split-event", func(t *testing.T) {
		c := streamFixture(t, openRouterToSSE(t, p("openrouter", "P8ZSCtkLaD6", "response.jsonl")))
		assert.Contains(t, text(c, toolrun.ChunkText), "_calls>")
		assert.Equal(t, "stop", c[len(c)-1].FinishReason)
		assert.Equal(t, 97, ofType(c, toolrun.ChunkUsage)[0].Usage.OutputTokens)
	})
	t.Run("openrouter-reasoning", func(t *testing.T) {
		c := streamFixture(t, openRouterToSSE(t, p("openrouter", "JlkjtO2qFKO", "response.jsonl")))
		assert.NotEmpty(t, text(c, toolrun.ChunkReasoning))
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
		assert.Equal(t, 82, ofType(c, toolrun.ChunkUsage)[0].Usage.ReasoningTokens)
	})
}

func TestSharedFixturesBodies(t *testing.T) {
	fx := fixturesDir(t)
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{fx}, parts...)...))
		require.NoError(t, err)
		return string(b)
	}
	for _, f := range []string{"openai-chat/openai-text.json", "openai-compatible/deepseek-tool-call.json", "openrouter/DonLtUixM2O/response.json"} {
		t.Run(f, func(t *testing.T) {
			srv := replay(t, 200, "application/json", []string{read(strings.Split(f, "/")...)})
			chunks, err := collect(testProvider(srv.URL, nil), basicRequest())
			require.NoError(t, err)
			assert.Equal(t, toolrun.ChunkFinish, chunks[len(chunks)-1].Type)
			assert.NotEmpty(t, ofType(chunks, toolrun.ChunkUsage))
			if strings.Contains(f, "deepseek") {
				assert.Len(t, ofType(chunks, toolrun.ChunkToolCall), 1)
				assert.NotEmpty(t, text(chunks, toolrun.ChunkReasoning))
			} else {
				assert.NotEmpty(t, text(chunks, toolrun.ChunkText))
			}
		})
	}
	t.Run("legacy-parameter-error", func(t *testing.T) {
		srv := replay(t, 400, "application/json", []string{read("openai-chat", "reasoning-model-legacy-parameter-error.json")})
		_, err := collect(testProvider(srv.URL, nil), basicRequest())
		pe := providerError(t, err)
		assert.Equal(t, 400, pe.Status)
		assert.Equal(t, "unsupported_parameter", pe.Code)
		assert.False(t, pe.Retryable)
	})
	t.Run("openrouter-upstream-error", func(t *testing.T) {
		srv := replay(t, 400, "application/json", []string{read("openrouter", "5RVgXhodnB9", "response.json")})
		_, err := collect(testProvider(srv.URL, nil), basicRequest())
		pe := providerError(t, err)
		assert.Equal(t, "invalid_request", pe.Code)
		assert.Contains(t, pe.Message, "Provider returned error")
		assert.Contains(t, pe.Message, "Anthropic")
		assert.True(t, bytes.Contains([]byte(pe.Message), []byte("media_type")))
	})
}
