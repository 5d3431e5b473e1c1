package openai

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

// The live tests call the real APIs and run only when a key is set:
// OPENAI_API_KEY (model from OPENAI_MODEL, default gpt-4.1-mini) and
// OPENROUTER_API_KEY (model from OPENROUTER_MODEL, default openai/gpt-4.1-mini).
func liveToolCall(t *testing.T, p *Provider, model string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := &toolrun.Request{
		Model:    model,
		System:   "Use the tool to answer.",
		Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "What is the weather in Oslo? Call get_weather."}},
		Tools: []toolrun.ToolSpec{{Name: "get_weather", Description: "Current weather for a city",
			Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`)}},
		ToolChoice: "required",
	}
	var calls []toolrun.ToolCall
	var finish string
	for c, err := range p.Stream(ctx, req) {
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

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func TestLiveOpenAI(t *testing.T) {
	key := os.Getenv("OPENAI_API_KEY")
	if key == "" {
		t.Skip("OPENAI_API_KEY not set")
	}
	liveToolCall(t, New(&Options{APIKey: key, Strict: true}), envOr("OPENAI_MODEL", "gpt-4.1-mini"))
}

func TestLiveOpenRouter(t *testing.T) {
	key := os.Getenv("OPENROUTER_API_KEY")
	if key == "" {
		t.Skip("OPENROUTER_API_KEY not set")
	}
	opts := OpenRouter(key)
	opts.Headers = map[string]string{"X-Title": "toolrun live test"}
	liveToolCall(t, New(opts), envOr("OPENROUTER_MODEL", "openai/gpt-4.1-mini"))
}
