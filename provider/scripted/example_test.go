package scripted_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

func Example() {
	p := scripted.New(
		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1}).WithID("call_1")).
			WithText("Let me look."),
		scripted.Text("Issue 1 is a bug."),
	)
	ctx := context.Background()
	for range 2 {
		for c, err := range p.Stream(ctx, &toolrun.Request{Model: "test"}) {
			if err != nil {
				fmt.Println("error:", err)
				break
			}
			switch c.Type {
			case toolrun.ChunkText:
				fmt.Println("text:", c.Text)
			case toolrun.ChunkToolCall:
				fmt.Println("call:", c.ToolCall.ID, c.ToolCall.Name, c.ToolCall.Arguments)
			case toolrun.ChunkFinish:
				fmt.Println("finish:", c.FinishReason)
			}
		}
	}
	fmt.Println("done:", p.Done(), "requests:", len(p.Requests()))

	// A further request fails: the script is exhausted.
	for _, err := range p.Stream(ctx, &toolrun.Request{}) {
		fmt.Println(err)
	}
	// Output:
	// text: Let me look.
	// call: call_1 get_issue {"number":1}
	// finish: tool_calls
	// text: Issue 1 is a bug.
	// finish: stop
	// done: true requests: 2
	// toolrun: provider scripted [invalid_request]: Script exhausted after 2 responses
}

func ExampleFragments() {
	// Stream a call's arguments in raw pieces, as a model does; the last
	// one leaves the JSON unfinished.
	p := scripted.New(scripted.Fragments("write_file", `{"description":"writ`, `ing a.txt","content":"...`))
	for c := range p.Stream(context.Background(), &toolrun.Request{}) {
		switch c.Type {
		case toolrun.ChunkToolCallDelta:
			fmt.Printf("delta %q\n", c.ToolCall.Arguments)
		case toolrun.ChunkToolCall:
			fmt.Printf("complete %q\n", c.ToolCall.Arguments)
		}
	}
	// Output:
	// delta "{\"description\":\"writ"
	// delta "ing a.txt\",\"content\":\"..."
	// complete "{\"description\":\"writing a.txt\",\"content\":\"..."
}

func ExampleFail() {
	p := scripted.New(scripted.Fail("rate limited", &scripted.ErrorOptions{Code: "rate_limit", Status: 429, Retryable: true}))
	for _, err := range p.Stream(context.Background(), &toolrun.Request{}) {
		var pe *toolrun.ProviderError
		if errors.As(err, &pe) {
			fmt.Println(pe.Code, pe.Status, pe.Retryable)
		}
	}
	// Output:
	// rate_limit 429 true
}

func ExampleResponse_Wait() {
	release := make(chan struct{})
	p := scripted.New(scripted.Text("held").Wait(release))
	done := make(chan string)
	go func() {
		for c := range p.Stream(context.Background(), &toolrun.Request{}) {
			if c.Type == toolrun.ChunkText {
				done <- c.Text
			}
		}
	}()
	close(release)
	fmt.Println(<-done)
	// Output:
	// held
}
