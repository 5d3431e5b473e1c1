package anthropic

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// TestLiveAnthropic calls the real API; it runs only when ANTHROPIC_API_KEY
// is set (model from ANTHROPIC_MODEL, default claude-haiku-4-5).
func TestLiveAnthropic(t *testing.T) {
	key := os.Getenv("ANTHROPIC_API_KEY")
	if key == "" {
		t.Skip("ANTHROPIC_API_KEY not set")
	}
	model := os.Getenv("ANTHROPIC_MODEL")
	if model == "" {
		model = "claude-haiku-4-5"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := &toolrun.Request{
		Model:    model,
		System:   "Use the tool to answer.",
		Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "What is the weather in Oslo? Call get_weather."}},
		Tools: []toolrun.ToolSpec{{Name: "get_weather", Description: "Current weather for a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		ToolChoice: "required",
	}
	var calls []toolrun.ToolCall
	var finish string
	for c, err := range New(&Options{APIKey: key, MaxTokens: 512}).Stream(ctx, req) {
		require.NoError(t, err)
		switch c.Type {
		case toolrun.ChunkToolCall:
			calls = append(calls, c.ToolCall)
		case toolrun.ChunkFinish:
			finish = c.FinishReason
		}
	}
	require.NotEmpty(t, calls)
	assert.Equal(t, "get_weather", calls[0].Name)
	assert.True(t, json.Valid([]byte(calls[0].Arguments)))
	assert.Equal(t, "tool_calls", finish)
}
