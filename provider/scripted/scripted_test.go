package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

func collect(seq iter.Seq2[toolrun.Chunk, error]) ([]toolrun.Chunk, error) {
	var out []toolrun.Chunk
	for c, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func stream(t *testing.T, p *Provider, req *toolrun.Request) ([]toolrun.Chunk, error) {
	t.Helper()
	if req == nil {
		req = &toolrun.Request{Model: "m"}
	}
	return collect(p.Stream(context.Background(), req))
}

// shape renders chunks compactly: type, index and payload.
func shape(chunks []toolrun.Chunk) string {
	var b []string
	for _, c := range chunks {
		switch c.Type {
		case toolrun.ChunkText, toolrun.ChunkReasoning:
			b = append(b, fmt.Sprintf("%s(%s)", c.Type, c.Text))
		case toolrun.ChunkToolCallStart:
			b = append(b, fmt.Sprintf("start%d(%s)", c.Index, c.ToolCall.Name))
		case toolrun.ChunkToolCallDelta:
			b = append(b, fmt.Sprintf("delta%d(%s)", c.Index, c.ToolCall.Arguments))
		case toolrun.ChunkToolCall:
			b = append(b, fmt.Sprintf("call%d(%s %s)", c.Index, c.ToolCall.Name, c.ToolCall.Arguments))
		case toolrun.ChunkProviderTool:
			b = append(b, fmt.Sprintf("provider_tool(%s)", c.ProviderTool.Name))
		case toolrun.ChunkUsage:
			b = append(b, fmt.Sprintf("usage(%d/%d/%d)", c.Usage.InputTokens, c.Usage.OutputTokens, c.Usage.ReasoningTokens))
		case toolrun.ChunkFinish:
			b = append(b, "finish("+c.FinishReason+")")
		default:
			b = append(b, string(c.Type))
		}
	}
	return strings.Join(b, " ")
}

var callID = regexp.MustCompile(`^call_[0-9a-f]{8}$`)

// responseRequest is the request responseCases are streamed for.
var responseRequest = &toolrun.Request{System: "12345678", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "1234"}}}

// responseCases are responses and how they stream for responseRequest.
// They are shared by tests, which only read them.
var responseCases = []struct {
	name string
	resp *Response
	want string
}{
	{"text", Text("hello"), "text(hello) usage(3/2/0) finish(stop)"},
	{"empty text", Text(""), "usage(3/0/0) finish(stop)"},
	{"reasoning", Reasoning("answer", "think"), "text(answer) reasoning(think) usage(3/3/2) finish(stop)"},
	{"call", Calls(Call("get_issue", map[string]any{"number": 1})),
		`start0(get_issue) call0(get_issue {"number":1}) usage(3/6/0) finish(tool_calls)`},
	{"call nil args", Calls(Call("ping", nil)), `start0(ping) call0(ping {}) usage(3/2/0) finish(tool_calls)`},
	{"call struct args", Calls(Call("f", struct {
		A string `json:"a"`
	}{"x"})), `start0(f) call0(f {"a":"x"}) usage(3/3/0) finish(tool_calls)`},
	{"raw call", Calls(RawCall("f", `{"a":`)), `start0(f) call0(f {"a":) usage(3/2/0) finish(tool_calls)`},
	{"raw message", Calls(Call("f", json.RawMessage(`{"b": 2}`))), `start0(f) call0(f {"b":2}) usage(3/2/0) finish(tool_calls)`},
	{"calls with content", Calls(Call("a", nil), Call("b", nil)).WithText("Let me check."),
		`text(Let me check.) start0(a) call0(a {}) start1(b) call1(b {}) usage(3/5/0) finish(tool_calls)`},
	{"fragments", Fragments("write_file", `{"description":"writ`, `ing a.txt","content":"...`),
		`start0(write_file) delta0({"description":"writ) delta0(ing a.txt","content":"...) call0(write_file {"description":"writing a.txt","content":"...) usage(3/14/0) finish(tool_calls)`},
	{"fragment call among calls", Calls(Call("a", nil), FragmentCall("b", `{"x"`, `:1}`)),
		`start0(a) call0(a {}) start1(b) delta1({"x") delta1(:1}) call1(b {"x":1}) usage(3/3/0) finish(tool_calls)`},
	{"fragments ignore arguments", Calls(ToolCall{Name: "f", Arguments: "ignored", Fragments: []string{"{}"}}),
		`start0(f) delta0({}) call0(f {}) usage(3/1/0) finish(tool_calls)`},
	{"chunked text", Text("abcdefg").WithChunks(3, 0), "text(abc) text(def) text(g) usage(3/2/0) finish(stop)"},
	{"chunked runes", Text("äöüß").WithChunks(3, 0), "text(äöü) text(ß) usage(3/1/0) finish(stop)"},
	{"chunked args", Calls(RawCall("f", `{"a":"bc"}`)).WithChunks(4, 0),
		`start0(f) delta0({"a") delta0(:"bc) delta0("}) call0(f {"a":"bc"}) usage(3/3/0) finish(tool_calls)`},
	{"chunked reasoning", Reasoning("", "abcd").WithChunks(2, 0), "reasoning(ab) reasoning(cd) usage(3/1/1) finish(stop)"},
	{"provider tools", Text("found").WithProviderTools(toolrun.ProviderToolCall{ID: "ws1", Name: "web_search", Status: "completed", Result: "r"}),
		"text(found) provider_tool(web_search) usage(3/2/0) finish(stop)"},
	{"usage given", Text("x").WithUsage(toolrun.Usage{InputTokens: 10, OutputTokens: 20, ReasoningTokens: 5}), "text(x) usage(10/20/5) finish(stop)"},
	{"finish override", Text("cut").WithFinish("length"), "text(cut) usage(3/1/0) finish(length)"},
	{"literal", &Response{Text: "t", ToolCalls: []ToolCall{{ID: "c1", Name: "n", Arguments: "{}"}}}, "text(t) start0(n) call0(n {}) usage(3/1/0) finish(tool_calls)"},
}

func TestResponses(t *testing.T) {
	for _, tt := range responseCases {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.resp)
			chunks, err := stream(t, p, responseRequest)
			if err != nil {
				t.Fatal(err)
			}
			if got := shape(chunks); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			// Every call chunk of one call carries the same id.
			ids := map[int]string{}
			for _, c := range chunks {
				switch c.Type {
				case toolrun.ChunkToolCallStart, toolrun.ChunkToolCallDelta, toolrun.ChunkToolCall:
					if ids[c.Index] == "" {
						ids[c.Index] = c.ToolCall.ID
					} else if ids[c.Index] != c.ToolCall.ID {
						t.Errorf("call %d: id %q then %q", c.Index, ids[c.Index], c.ToolCall.ID)
					}
				}
			}
			for i, id := range ids {
				if i < len(tt.resp.ToolCalls) && tt.resp.ToolCalls[i].ID != "" {
					if id != tt.resp.ToolCalls[i].ID {
						t.Errorf("call %d id %q, want %q", i, id, tt.resp.ToolCalls[i].ID)
					}
				} else if !callID.MatchString(id) {
					t.Errorf("call %d: generated id %q", i, id)
				}
			}
			if !p.Done() {
				t.Error("not done")
			}
		})
	}
}

func TestCallIDs(t *testing.T) {
	p := New(Calls(Call("a", nil).WithID("given"), Call("b", nil)))
	chunks, _ := stream(t, p, nil)
	var ids []string
	for _, c := range chunks {
		if c.Type == toolrun.ChunkToolCall {
			ids = append(ids, c.ToolCall.ID)
		}
	}
	if len(ids) != 2 || ids[0] != "given" || !callID.MatchString(ids[1]) {
		t.Errorf("ids %q", ids)
	}

	// Generated ids are fresh for every request, also after Reset.
	p.Reset()
	chunks, _ = stream(t, p, nil)
	for _, c := range chunks {
		if c.Type == toolrun.ChunkToolCall && c.Index == 1 && c.ToolCall.ID == ids[1] {
			t.Errorf("id %q reused", ids[1])
		}
	}

	n := 0
	p = NewWithOptions(&Options{NewCallID: func() string { n++; return fmt.Sprintf("id%d", n) }}, Calls(Call("a", nil), Call("b", nil)))
	chunks, _ = stream(t, p, nil)
	if s := chunks[0].ToolCall.ID + chunks[2].ToolCall.ID; s != "id1id2" {
		t.Errorf("NewCallID ids: %s", s)
	}
}

func TestCallPanicsOnBadArgs(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Call("f", map[string]any{"ch": make(chan int)})
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name       string
		resp       *Response
		wantChunks string
		want       toolrun.ProviderError
	}{
		{"defaults", Fail("boom", nil), "", toolrun.ProviderError{Provider: "scripted", Code: "unknown", Message: "boom"}},
		{"options", Fail("rate limited", &ErrorOptions{Code: "rate_limit", Status: 429, Retryable: true, RetryAfter: time.Second}), "",
			toolrun.ProviderError{Provider: "scripted", Code: "rate_limit", Status: 429, Retryable: true, RetryAfter: time.Second, Message: "rate limited"}},
		{"after partial output", Fail("stream broke", &ErrorOptions{Status: 502}).WithText("partial").WithProviderTools(toolrun.ProviderToolCall{Name: "x"}),
			"text(partial)", toolrun.ProviderError{Provider: "scripted", Code: "unknown", Status: 502, Message: "stream broke"}},
		{"after call", &Response{ToolCalls: []ToolCall{FragmentCall("f", `{"a`)}, Error: &toolrun.ProviderError{Message: "cut", Code: "server_error"}},
			`start0(f) delta0({"a) call0(f {"a)`, toolrun.ProviderError{Provider: "scripted", Code: "server_error", Message: "cut"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.resp, Text("after"))
			chunks, err := stream(t, p, nil)
			if got := shape(chunks); got != tt.wantChunks {
				t.Errorf("chunks %q, want %q", got, tt.wantChunks)
			}
			var pe *toolrun.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
			}
			if *pe != tt.want {
				t.Errorf("got %+v\nwant %+v", *pe, tt.want)
			}
			// The script goes on after an error response.
			chunks, err = stream(t, p, nil)
			if err != nil || shape(chunks) != "text(after) usage(0/2/0) finish(stop)" {
				t.Errorf("next response: %s %v", shape(chunks), err)
			}
		})
	}
}

func TestExhausted(t *testing.T) {
	p := New(Text("a"), Text("b"))
	for range 2 {
		if _, err := stream(t, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Done() || p.Remaining() != 0 {
		t.Errorf("Done %v Remaining %d", p.Done(), p.Remaining())
	}
	for range 2 {
		chunks, err := stream(t, p, nil)
		var pe *toolrun.ProviderError
		if len(chunks) != 0 || !errors.As(err, &pe) {
			t.Fatalf("chunks %d err %v", len(chunks), err)
		}
		if pe.Message != "Script exhausted after 2 responses" || pe.Code != "invalid_request" || pe.Provider != "scripted" || pe.Retryable {
			t.Errorf("%+v", pe)
		}
	}
	if n := len(p.Requests()); n != 4 {
		t.Errorf("%d requests logged, want 4 (exhausted requests are logged too)", n)
	}
	p.Add(Text("c"))
	if p.Done() || p.Remaining() != 1 {
		t.Errorf("after Add: Done %v Remaining %d", p.Done(), p.Remaining())
	}
	if chunks, err := stream(t, p, nil); err != nil || chunks[0].Text != "c" {
		t.Errorf("after Add: %s %v", shape(chunks), err)
	}
}

func TestUnscripted(t *testing.T) {
	p := New()
	for range 3 {
		chunks, err := stream(t, p, nil)
		if err != nil || chunks[0].Text != DefaultText {
			t.Fatalf("%s %v", shape(chunks), err)
		}
	}
	if !p.Done() || p.Remaining() != 0 || len(p.Requests()) != 3 {
		t.Errorf("Done %v Remaining %d Requests %d", p.Done(), p.Remaining(), len(p.Requests()))
	}
	if p.Name() != "scripted" {
		t.Errorf("Name %q", p.Name())
	}
}

func TestResetAndRemaining(t *testing.T) {
	p := New(Text("a"), Text("b"), Text("c"))
	if p.Remaining() != 3 || p.Done() || p.LastRequest() != nil {
		t.Fatal("fresh provider state")
	}
	stream(t, p, &toolrun.Request{Model: "one"})
	if p.Remaining() != 2 || p.LastRequest().Model != "one" {
		t.Errorf("Remaining %d", p.Remaining())
	}
	p.Reset()
	if p.Remaining() != 3 || len(p.Requests()) != 0 || p.LastRequest() != nil {
		t.Errorf("after Reset: Remaining %d Requests %d", p.Remaining(), len(p.Requests()))
	}
	chunks, _ := stream(t, p, nil)
	if chunks[0].Text != "a" {
		t.Errorf("after Reset served %q", chunks[0].Text)
	}
}

func TestAddCopiesResponse(t *testing.T) {
	r := Calls(Call("f", nil)).WithText("original").WithUsage(toolrun.Usage{OutputTokens: 1})
	p := New(r)
	r.Text = "changed"
	r.ToolCalls[0].Name = "changed"
	r.Usage.OutputTokens = 99
	chunks, _ := stream(t, p, nil)
	if got := shape(chunks); got != "text(original) start0(f) call0(f {}) usage(0/1/0) finish(tool_calls)" {
		t.Errorf("%s", got)
	}
}

func TestRequestLogDeepCopy(t *testing.T) {
	parallel := true
	req := &toolrun.Request{
		Model:  "m",
		System: "sys",
		Messages: []toolrun.Message{
			{Role: toolrun.RoleUser, Content: "hi", Metadata: map[string]any{"k": map[string]any{"n": []any{"x"}}}},
			{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}},
				Attachments: []toolrun.AttachmentRef{{Path: "/a"}}},
		},
		Tools:             []toolrun.ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice:        "auto",
		ParallelToolCalls: &parallel,
	}
	p := New(Text("a"))
	if _, err := stream(t, p, req); err != nil {
		t.Fatal(err)
	}
	snapshot := func(r *toolrun.Request) string {
		b, _ := json.Marshal(r)
		return fmt.Sprintf("%s %v", b, *r.ParallelToolCalls)
	}
	before := snapshot(p.LastRequest())

	// Mutate everything reachable from the request.
	req.System = "changed"
	req.Messages[0].Content = "changed"
	req.Messages[0].Metadata["k"].(map[string]any)["n"].([]any)[0] = "changed"
	req.Messages[0].Metadata["new"] = 1
	req.Messages[1].ToolCalls[0].Arguments = "changed"
	req.Messages[1].Attachments[0].Path = "changed"
	req.Tools[0].Parameters[2] = 'X'
	parallel = false
	req.Messages = append(req.Messages, toolrun.Message{Content: "more"})

	if after := snapshot(p.LastRequest()); after != before {
		t.Errorf("log changed with the request:\nbefore %s\nafter  %s", before, after)
	}
	// Mutating what Requests returns does not change the log either.
	got := p.Requests()[0]
	got.Messages[0].Metadata["k"].(map[string]any)["n"] = nil
	got.Tools[0].Parameters[0] = 'X'
	*got.ParallelToolCalls = false
	if after := snapshot(p.Requests()[0]); after != before {
		t.Errorf("log changed through Requests:\nbefore %s\nafter  %s", before, after)
	}
}

func TestExpect(t *testing.T) {
	errNoSystem := errors.New("no system prompt")
	check := func(r *toolrun.Request) error {
		if r.System == "" {
			return errNoSystem
		}
		return nil
	}
	p := New(Text("a").Expect(check), Text("b").Expect(check))
	if _, err := stream(t, p, &toolrun.Request{System: "s"}); err != nil {
		t.Fatal(err)
	}
	_, err := stream(t, p, &toolrun.Request{})
	var pe *toolrun.ProviderError
	if !errors.As(err, &pe) || pe.Code != "invalid_request" || !errors.Is(err, errNoSystem) {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(pe.Message, "request 2") || !strings.Contains(pe.Message, "no system prompt") {
		t.Errorf("message %q", pe.Message)
	}

	// The check sees a copy: changing it does not reach the log.
	p = New(Text("a").Expect(func(r *toolrun.Request) error { r.Model = "mutated"; return nil }))
	stream(t, p, &toolrun.Request{Model: "m"})
	if p.LastRequest().Model != "m" {
		t.Error("Expect mutated the log")
	}
}

func TestDelayCancellation(t *testing.T) {
	tests := []struct {
		name string
		resp *Response
		want string // chunks before the error
	}{
		{"delay", Text("late").WithDelay(time.Hour), ""},
		{"chunk delay", Text("abcdef").WithChunks(2, time.Hour), "text(ab)"},
		{"argument chunk delay", Calls(RawCall("f", "{}{}")).WithChunks(2, time.Hour), "start0(f) delta0({})"},
		{"fragment delay", Fragments("f", "{", "}").WithChunks(0, time.Hour), "start0(f) delta0({)"},
		{"wait", Text("held").Wait(make(chan struct{})), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			p := New(tt.resp)
			var chunks []toolrun.Chunk
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				for c, e := range p.Stream(ctx, &toolrun.Request{}) {
					if e != nil {
						err = e
						return
					}
					chunks = append(chunks, c)
				}
			}()
			// Wait for the request to arrive, then cancel.
			for len(p.Requests()) == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Stream did not stop on cancellation")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled", err)
			}
			if got := shape(chunks); got != tt.want {
				t.Errorf("chunks %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := collect(New(Text("x").WithDelay(time.Hour)).Stream(ctx, &toolrun.Request{}))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err %v", err)
	}
}

func TestDelayElapses(t *testing.T) {
	p := NewWithOptions(&Options{ChunkSize: 1, ChunkDelay: time.Millisecond}, Text("abc").WithDelay(5*time.Millisecond))
	start := time.Now()
	chunks, err := stream(t, p, nil)
	if err != nil || shape(chunks) != "text(a) text(b) text(c) usage(0/1/0) finish(stop)" {
		t.Fatalf("%s %v", shape(chunks), err)
	}
	if d := time.Since(start); d < 7*time.Millisecond {
		t.Errorf("took %v, want at least the delays", d)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := New(Text("a"))
	chunks, err := collect(p.Stream(ctx, &toolrun.Request{}))
	if len(chunks) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("%s %v", shape(chunks), err)
	}
	if p.Remaining() != 1 || len(p.Requests()) != 0 {
		t.Error("a cancelled request consumed the script")
	}
}

func TestWaitReleases(t *testing.T) {
	release := make(chan struct{})
	p := New(Text("first").Wait(release), Text("second"))
	got := make(chan string, 2)
	go func() {
		chunks, _ := stream(t, p, nil)
		got <- chunks[0].Text
	}()
	for len(p.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	// The held response does not block the next request.
	chunks, err := stream(t, p, nil)
	if err != nil || chunks[0].Text != "second" {
		t.Fatalf("%s %v", shape(chunks), err)
	}
	select {
	case s := <-got:
		t.Fatalf("released early: %q", s)
	case <-time.After(10 * time.Millisecond):
	}
	close(release)
	if s := <-got; s != "first" {
		t.Errorf("got %q", s)
	}
}

func TestWaitFunc(t *testing.T) {
	errGate := errors.New("gate refused")
	p := New(Text("a").WaitFunc(func(ctx context.Context) error { return errGate }),
		Text("b").WaitFunc(func(ctx context.Context) error { return nil }))
	if _, err := stream(t, p, nil); !errors.Is(err, errGate) {
		t.Errorf("err %v", err)
	}
	if chunks, err := stream(t, p, nil); err != nil || chunks[0].Text != "b" {
		t.Errorf("%s %v", shape(chunks), err)
	}
}

func TestEarlyBreak(t *testing.T) {
	p := New(Calls(Call("a", nil), Call("b", nil)).WithText("t"), Text("next"))
	n := 0
	for range p.Stream(context.Background(), &toolrun.Request{}) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 || p.Remaining() != 1 {
		t.Errorf("n %d Remaining %d", n, p.Remaining())
	}
}

func TestProviderTools(t *testing.T) {
	var p toolrun.ProviderToolLister = New()
	if tools := p.ProviderTools("any"); len(tools) != 0 {
		t.Errorf("default tools %v", tools)
	}
	opts := &Options{ProviderTools: []toolrun.ToolSpec{
		{Name: "web_search", Description: "Search the web", Parameters: json.RawMessage(`{}`)},
		{Name: "code", Provider: "other"},
	}}
	sp := NewWithOptions(opts)
	opts.ProviderTools[0].Name = "changed"
	tools := sp.ProviderTools("model-x")
	if len(tools) != 2 || tools[0].Name != "web_search" || !tools[0].ProviderExecuted || tools[0].Provider != "scripted" || tools[1].Provider != "other" {
		t.Fatalf("%+v", tools)
	}
	tools[0].Name = "mutated"
	if sp.ProviderTools("m")[0].Name != "web_search" {
		t.Error("ProviderTools returned shared specs")
	}
}

func TestUsageEstimate(t *testing.T) {
	req := &toolrun.Request{
		System: "abcd",
		Messages: []toolrun.Message{
			{Content: "abcdefgh"},
			{ToolCalls: []toolrun.ToolCall{{Name: "ab", Arguments: "cd"}}},
		},
		Tools: []toolrun.ToolSpec{{Name: "ab", Description: "cd", Parameters: json.RawMessage(`{}`)}},
	}
	// Input: 4 + 8 + 4 + 6 = 22 chars = 6 tokens (rounded up).
	p := New(Text("ünï"))
	chunks, _ := stream(t, p, req)
	u := chunks[1].Usage
	if u.InputTokens != 6 || u.OutputTokens != 1 {
		t.Errorf("%+v", u)
	}
}

// TestConcurrent streams from many goroutines at once: every response is
// served exactly once, and the log holds every request.
func TestConcurrent(t *testing.T) {
	const n = 64
	var responses []*Response
	for i := range n {
		responses = append(responses, Text(fmt.Sprint(i)).WithChunks(1, 0))
	}
	p := New(responses...)
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i := range n + 8 {
		wg.Go(func() {
			req := &toolrun.Request{Model: fmt.Sprint(i)}
			var text strings.Builder
			for c, err := range p.Stream(context.Background(), req) {
				if err != nil {
					var pe *toolrun.ProviderError
					if !errors.As(err, &pe) || pe.Code != "invalid_request" {
						t.Errorf("unexpected error %v", err)
					}
					return
				}
				if c.Type == toolrun.ChunkText {
					text.WriteString(c.Text)
				}
				p.Remaining()
				p.LastRequest()
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[text.String()] {
				t.Errorf("response %q served twice", text.String())
			}
			seen[text.String()] = true
		})
	}
	wg.Wait()
	if len(seen) != n || !p.Done() || len(p.Requests()) != n+8 {
		t.Errorf("seen %d, Done %v, requests %d", len(seen), p.Done(), len(p.Requests()))
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		s    string
		size int
		want []string
	}{
		{"abc", 0, []string{"abc"}},
		{"abc", 3, []string{"abc"}},
		{"abcd", 3, []string{"abc", "d"}},
		{"日本語です", 2, []string{"日本", "語で", "す"}},
		{"", 2, []string{""}},
	}
	for _, tt := range tests {
		// Cut pieces off as deltas does: at least one, until nothing is left.
		var got []string
		for s, first := tt.s, true; first || s != ""; first = false {
			var piece string
			piece, s = cut(s, tt.size)
			got = append(got, piece)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("cut(%q, %d) pieces %q", tt.s, tt.size, got)
		}
	}
}
