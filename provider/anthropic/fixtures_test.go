package anthropic

import (
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

// fixturesDir returns <repo parent>/shared/fixtures/providers/anthropic,
// skipping the test when it is absent.
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
	fx := filepath.Join(filepath.Dir(dir), "shared", "fixtures", "providers", "anthropic")
	if _, err := os.Stat(fx); err != nil {
		t.Skipf("shared fixtures not present at %s", fx)
	}
	return fx
}

// linesToSSE turns an A-lines file into its wire form: each line is sent
// as "event: <type>" plus "data: <line>".
func linesToSSE(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var sb strings.Builder
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		var ev struct {
			Type string `json:"type"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev))
		sb.WriteString("event: " + ev.Type + "\ndata: " + line + "\n\n")
	}
	return sb.String()
}

func serve(t *testing.T, status int, ctype, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestSharedFixtures(t *testing.T) {
	fx := fixturesDir(t)
	stream := func(t *testing.T, body string) []toolrun.Chunk {
		chunks, err := collect(testProvider(serve(t, 200, "text/event-stream", body), nil), basicRequest())
		require.NoError(t, err)
		require.Equal(t, toolrun.ChunkFinish, chunks[len(chunks)-1].Type)
		return chunks
	}
	lines := func(t *testing.T, name string) []toolrun.Chunk {
		return stream(t, linesToSSE(t, filepath.Join(fx, name)))
	}

	t.Run("text", func(t *testing.T) {
		c := lines(t, "anthropic-text.chunks.txt")
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
		assert.Equal(t, "stop", c[len(c)-1].FinishReason)
		assert.Len(t, ofType(c, toolrun.ChunkUsage), 1)
	})
	t.Run("tool-no-args", func(t *testing.T) {
		c := lines(t, "anthropic-tool-no-args.chunks.txt")
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		assert.Equal(t, "updateIssueList", calls[0].ToolCall.Name)
		assert.Equal(t, "{}", calls[0].ToolCall.Arguments)
		assert.Equal(t, "tool_calls", c[len(c)-1].FinishReason)
	})
	t.Run("quoted-tool-input", func(t *testing.T) {
		c := lines(t, "anthropic-issue-11719-quoted-tool-input.chunks.txt")
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 1)
		var args map[string]any
		require.NoError(t, json.Unmarshal([]byte(calls[0].ToolCall.Arguments), &args))
		assert.Contains(t, calls[0].ToolCall.Arguments, `\"`)
	})
	t.Run("three-parallel", func(t *testing.T) {
		c := lines(t, "anthropic-issue-15652-false.chunks.txt")
		calls := ofType(c, toolrun.ChunkToolCall)
		require.Len(t, calls, 3)
		for i, call := range calls {
			assert.Equal(t, i, call.Index)
			assert.Equal(t, "searchDocs", call.ToolCall.Name)
			assert.True(t, json.Valid([]byte(call.ToolCall.Arguments)))
		}
		assert.Equal(t, `{"query": "alpha"}`, calls[0].ToolCall.Arguments)
	})
	t.Run("web-search", func(t *testing.T) {
		c := lines(t, "anthropic-web-search-tool.1.chunks.txt")
		pts := ofType(c, toolrun.ChunkProviderTool)
		require.Len(t, pts, 2)
		assert.Equal(t, "in_progress", pts[0].ProviderTool.Status)
		assert.Contains(t, pts[0].ProviderTool.Metadata["input"], "query")
		assert.Equal(t, "completed", pts[1].ProviderTool.Status)
		assert.Equal(t, "web_search", pts[1].ProviderTool.Name)
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
		assert.Empty(t, ofType(c, toolrun.ChunkToolCall))
	})
	t.Run("code-execution", func(t *testing.T) {
		c := lines(t, "anthropic-code-execution-20250825.1.chunks.txt")
		pts := ofType(c, toolrun.ChunkProviderTool)
		require.Len(t, pts, 4)
		assert.Equal(t, "bash_code_execution", pts[3].ProviderTool.Name)
		assert.Contains(t, pts[3].ProviderTool.Result, "Fibonacci")
	})
	t.Run("thinking", func(t *testing.T) {
		c := lines(t, "anthropic-clear-thinking.1.chunks.txt")
		assert.NotEmpty(t, text(c, toolrun.ChunkReasoning))
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
	})
	t.Run("refusal", func(t *testing.T) {
		c := lines(t, "anthropic-refusal.chunks.txt")
		assert.Equal(t, "content_filter", c[len(c)-1].FinishReason)
	})
	t.Run("cache-read", func(t *testing.T) {
		c := lines(t, "anthropic-issue-5942-cache-read.chunks.txt")
		u := ofType(c, toolrun.ChunkUsage)[0].Usage
		assert.Equal(t, 18639, u.CachedTokens)
		assert.Equal(t, "length", c[len(c)-1].FinishReason)
	})
	t.Run("raw-sse", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(fx, "issue-13057-approved-tool.2.chunks.txt"))
		require.NoError(t, err)
		c := stream(t, string(b))
		assert.NotEmpty(t, text(c, toolrun.ChunkText))
	})
	t.Run("whole-message", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(fx, "anthropic-text.json"))
		require.NoError(t, err)
		chunks, err := collect(testProvider(serve(t, 200, "application/json", string(b)), nil), basicRequest())
		require.NoError(t, err)
		assert.NotEmpty(t, text(chunks, toolrun.ChunkText))
	})
	t.Run("web-fetch-error-message", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(fx, "anthropic-web-fetch-tool.error.json"))
		require.NoError(t, err)
		chunks, err := collect(testProvider(serve(t, 200, "application/json", string(b)), nil), basicRequest())
		require.NoError(t, err)
		var failed int
		for _, c := range ofType(chunks, toolrun.ChunkProviderTool) {
			if c.ProviderTool.Status == "failed" {
				failed++
			}
		}
		assert.Equal(t, 1, failed)
	})
	t.Run("error-body", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(fx, "anthropic-issue-17366-error.json"))
		require.NoError(t, err)
		_, err = collect(testProvider(serve(t, 400, "application/json", string(b)), nil), basicRequest())
		pe := providerError(t, err)
		assert.Equal(t, 400, pe.Status)
		assert.Equal(t, "invalid_request_error", pe.Code)
		assert.Contains(t, pe.Message, "tool_result")
		assert.False(t, pe.Retryable)
	})
}
