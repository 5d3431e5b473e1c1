package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/anthropic"
)

// A test server stands in for api.anthropic.com.
func Example() {
	events := []string{
		`{"type":"message_start","message":{"usage":{"input_tokens":20,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Checking."}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Oslo\"}"}}`,
		`{"type":"content_block_stop","index":1}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":15}}`,
		`{"type":"message_stop"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, "data: "+e+"\n\n")
		}
	}))
	defer srv.Close()

	p := anthropic.New(&anthropic.Options{BaseURL: srv.URL, APIKey: "sk-ant-example"})
	req := &toolrun.Request{
		Model:    "claude-sonnet-4-5",
		System:   "Be brief.",
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
		case toolrun.ChunkToolCall:
			fmt.Println("call:", chunk.ToolCall.Name, chunk.ToolCall.Arguments)
		case toolrun.ChunkUsage:
			fmt.Println("usage:", chunk.Usage.InputTokens, chunk.Usage.OutputTokens)
		case toolrun.ChunkFinish:
			fmt.Println("finish:", chunk.FinishReason)
		}
	}
	// Output:
	// text: Checking.
	// call: get_weather {"city":"Oslo"}
	// usage: 20 15
	// finish: tool_calls
}
