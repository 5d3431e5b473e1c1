package scripted_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

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

// A load test: 1,000 threads of one agent each take a turn at once. The
// responder calls a tool when the conversation ends with the user's
// message and answers from the tool's result once it has one, so every
// turn is a tool call and then text, whatever the thread. It keeps no
// requests, so memory does not grow with the number of turns.
func ExampleNewFunc() {
	type IssueArgs struct {
		Number int `json:"number"`
	}
	model := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == toolrun.RoleTool {
			return scripted.Text("Triaged: " + last.Content)
		}
		return scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 7}))
	})
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		&toolrun.Func[IssueArgs]{
			Name: "get_issue", Description: "Read an issue",
			Execute: func(ctx context.Context, s toolrun.ThreadState, a IssueArgs) (toolrun.Result, error) {
				return toolrun.Textf("issue %d crashes on start", a.Number), nil
			},
		},
		&toolrun.Model{Name: "m", Provider: model, ID: "any-model"},
		&toolrun.Prompt{Name: "triager", Model: "m", IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("get_issue")}},
		&toolrun.Agent{Name: "triage", SideA: toolrun.Side{Prompt: "triager"}, SideB: toolrun.Side{Human: true}},
	)
	if err != nil {
		panic(err)
	}
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()

	const threads = 1000
	replies := make([]string, threads)
	var wg sync.WaitGroup
	for i := range threads {
		th, err := rt.NewThread(ctx, "triage", nil)
		if err != nil {
			panic(err)
		}
		wg.Go(func() {
			reply, err := rt.Send(ctx, th.ID, "Please triage issue 7")
			if err != nil {
				replies[i] = err.Error()
				return
			}
			replies[i] = reply.Text
		})
	}
	wg.Wait()
	count := map[string]int{}
	for _, r := range replies {
		count[r]++
	}
	fmt.Println(count[replies[0]], "of", threads, "turns replied:", replies[0])
	// Output:
	// 1000 of 1000 turns replied: Triaged: issue 7 crashes on start
}

// Per-thread scripts: each thread is served its own script in order, and a
// thread whose script is consumed fails with an error naming it.
func ExampleNewPerThread() {
	p := scripted.NewPerThread(nil, func(threadID string) []*scripted.Response {
		return []*scripted.Response{scripted.Text(threadID + ": first"), scripted.Text(threadID + ": second")}
	})
	ctx := context.Background()
	for _, id := range []string{"a", "b", "a", "a"} {
		for c, err := range p.Stream(ctx, &toolrun.Request{ThreadID: id}) {
			if err != nil {
				fmt.Println(err)
			} else if c.Type == toolrun.ChunkText {
				fmt.Println(c.Text)
			}
		}
	}
	fmt.Println("remaining:", p.RemainingFor("a"), p.RemainingFor("b"))
	// Output:
	// a: first
	// b: first
	// a: second
	// toolrun: provider scripted [invalid_request]: Script for thread "a" exhausted after 2 responses
	// remaining: 0 1
}
