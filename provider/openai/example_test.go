package openai_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/openai"
)

// A test server stands in for the API; in real use BaseURL is left empty
// (OpenAI) or points at another compatible server.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"Checking."},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()

	p := openai.New(&openai.Options{BaseURL: srv.URL, APIKey: "sk-example"})
	req := &toolrun.Request{
		Model:    "gpt-4.1-mini",
		Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "Weather in Oslo?"}},
		Tools:    []toolrun.ToolSpec{{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	}
	for chunk, err := range p.Stream(context.Background(), req) {
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		switch chunk.Type {
		case toolrun.ChunkText:
			fmt.Println("text:", chunk.Text)
		case toolrun.ChunkToolCallStart:
			fmt.Println("start:", chunk.ToolCall.Name)
		case toolrun.ChunkToolCallDelta:
			fmt.Println("delta:", chunk.ToolCall.Arguments)
		case toolrun.ChunkToolCall:
			fmt.Println("call:", chunk.ToolCall.Name, chunk.ToolCall.Arguments)
		case toolrun.ChunkFinish:
			fmt.Println("finish:", chunk.FinishReason)
		}
	}
	// Output:
	// text: Checking.
	// start: get_weather
	// delta: {"city":
	// delta: "Oslo"}
	// call: get_weather {"city":"Oslo"}
	// finish: tool_calls
}
