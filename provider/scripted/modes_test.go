package scripted

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
)

// text streams one request for the thread and returns its text, or the
// error's message.
func text(t *testing.T, p *Provider, threadID string) string {
	t.Helper()
	chunks, err := stream(t, p, &toolrun.Request{Model: "m", ThreadID: threadID})
	if err != nil {
		return "error: " + err.Error()
	}
	var b strings.Builder
	for _, c := range chunks {
		if c.Type == toolrun.ChunkText {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// providerError returns err as a *toolrun.ProviderError, failing the test
// if it is not one.
func providerError(t *testing.T, err error) *toolrun.ProviderError {
	t.Helper()
	var pe *toolrun.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
	}
	return pe
}

// wantPanic runs f and checks that it panics with a message containing
// every one of want.
func wantPanic(t *testing.T, f func(), want ...string) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		for _, w := range want {
			if !strings.Contains(fmt.Sprint(r), w) {
				t.Errorf("panic %q does not mention %q", r, w)
			}
		}
	}()
	f()
}

func TestPerThreadOrder(t *testing.T) {
	var made []string
	p := NewPerThread(nil, func(id string) []*Response {
		made = append(made, id)
		return []*Response{Text(id + "1"), Text(id + "2")}
	})
	if !p.Done() || p.Remaining() != 0 {
		t.Errorf("fresh: Done %v Remaining %d", p.Done(), p.Remaining())
	}
	// Interleaved requests of three threads: each thread's script is
	// served in order, unmoved by the others.
	var got []string
	for _, id := range []string{"a", "b", "a", "c", "b"} {
		got = append(got, text(t, p, id))
	}
	if s := strings.Join(got, " "); s != "a1 b1 a2 c1 b2" {
		t.Errorf("served %s", s)
	}
	if s := strings.Join(made, " "); s != "a b c" {
		t.Errorf("script function called for %s, want once per thread", s)
	}
	if p.Remaining() != 1 || p.Done() || p.RemainingFor("a") != 0 || p.RemainingFor("c") != 1 {
		t.Errorf("Remaining %d, a %d, c %d", p.Remaining(), p.RemainingFor("a"), p.RemainingFor("c"))
	}
	if text(t, p, "c") != "c2" || !p.Done() {
		t.Errorf("c not finished: Done %v", p.Done())
	}

	// Reset rewinds every thread without making the scripts again.
	p.Reset()
	if p.Remaining() != 6 || text(t, p, "b") != "b1" || len(made) != 3 {
		t.Errorf("after Reset: Remaining %d, made %q", p.Remaining(), made)
	}
}

func TestPerThreadExhausted(t *testing.T) {
	p := NewPerThread(nil, func(id string) []*Response {
		if id == "none" {
			return nil
		}
		return []*Response{Text("a"), Text("b")}
	})
	text(t, p, "t1")
	text(t, p, "t1")
	for range 2 {
		_, err := stream(t, p, &toolrun.Request{ThreadID: "t1"})
		pe := providerError(t, err)
		if pe.Message != `Script for thread "t1" exhausted after 2 responses` || pe.Code != "invalid_request" || pe.Provider != Name || pe.Retryable {
			t.Errorf("%+v", pe)
		}
	}
	// Another thread is not affected.
	if s := text(t, p, "t2"); s != "a" {
		t.Errorf("t2 served %q", s)
	}
	// A thread whose script function gives nothing has no script.
	_, err := stream(t, p, &toolrun.Request{ThreadID: "none"})
	if pe := providerError(t, err); pe.Message != `No script for thread "none"` || pe.Code != "invalid_request" {
		t.Errorf("%+v", pe)
	}
	// AddFor gives it one, and extends an exhausted one.
	p.AddFor("none", Text("late"))
	p.AddFor("t1", Text("c"))
	if s := text(t, p, "none") + text(t, p, "t1"); s != "latec" {
		t.Errorf("after AddFor: %q", s)
	}
}

func TestPerThreadAddFor(t *testing.T) {
	// Without a script function, threads have only what AddFor gives them.
	p := NewPerThread(nil, nil)
	_, err := stream(t, p, &toolrun.Request{})
	if pe := providerError(t, err); pe.Message != `No script for thread ""` {
		t.Errorf("%+v", pe)
	}
	r := Text("x")
	p.AddFor("t", r, nil, Text("y"))
	r.Text = "changed" // AddFor copied it
	if s := text(t, p, "t") + text(t, p, "t"); s != "xy" {
		t.Errorf("served %q", s)
	}

	// With one, AddFor appends to the thread's script, which is made first.
	calls := 0
	p = NewPerThread(nil, func(id string) []*Response { calls++; return []*Response{Text("scripted")} })
	p.AddFor("t", Text("added"))
	if p.RemainingFor("t") != 2 || calls != 1 {
		t.Fatalf("RemainingFor %d, script calls %d", p.RemainingFor("t"), calls)
	}
	if s := text(t, p, "t") + " " + text(t, p, "t"); s != "scripted added" {
		t.Errorf("served %q", s)
	}
}

func TestPerThreadCheckNamesThread(t *testing.T) {
	errCheck := errors.New("wrong model")
	p := NewPerThread(nil, nil)
	p.AddFor("t7", Text("a"), Text("b").Expect(func(r *toolrun.Request) error { return errCheck }))
	text(t, p, "t7")
	_, err := stream(t, p, &toolrun.Request{ThreadID: "t7"})
	pe := providerError(t, err)
	if !errors.Is(err, errCheck) || !strings.Contains(pe.Message, `request 2 of thread "t7"`) {
		t.Errorf("%v", err)
	}
}

func TestPerThreadCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := NewPerThread(nil, func(string) []*Response { return []*Response{Text("a")} })
	if _, err := collect(p.Stream(ctx, &toolrun.Request{ThreadID: "t"})); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if p.RemainingFor("t") != 1 {
		t.Error("a cancelled request consumed the thread's script")
	}
}

// TestPerThreadConcurrent drives many threads at once, one goroutine per
// thread as the runtime does, plus several goroutines sharing one thread
// (run with -race).
func TestPerThreadConcurrent(t *testing.T) {
	const threads, steps = 200, 5
	var made sync.Map
	p := NewPerThread(nil, func(id string) []*Response {
		if id == "shared" {
			return nil // given by AddFor below
		}
		if _, dup := made.LoadOrStore(id, true); dup {
			t.Errorf("script of %s made twice", id)
		}
		var rs []*Response
		for i := range steps {
			rs = append(rs, Text(fmt.Sprintf("%s/%d", id, i)).WithChunks(2, 0))
		}
		return rs
	})
	var wg sync.WaitGroup
	for th := range threads {
		wg.Go(func() {
			id := fmt.Sprint("t", th)
			for i := range steps {
				if got, want := text(t, p, id), fmt.Sprintf("%s/%d", id, i); got != want {
					t.Errorf("got %q, want %q", got, want)
				}
			}
			if got := text(t, p, id); !strings.Contains(got, "exhausted after 5 responses") {
				t.Errorf("after the script: %q", got)
			}
		})
	}

	// Eight goroutines share thread "shared": every response is served
	// exactly once.
	const shared = 400
	for i := range shared {
		p.AddFor("shared", Text(fmt.Sprint(i)))
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	for range 8 {
		wg.Go(func() {
			for range shared / 8 {
				s := text(t, p, "shared")
				mu.Lock()
				if seen[s] {
					t.Errorf("%q served twice", s)
				}
				seen[s] = true
				mu.Unlock()
				p.Remaining()
			}
		})
	}
	wg.Wait()
	if len(seen) != shared || !p.Done() {
		t.Errorf("seen %d, Done %v, Remaining %d, shared %d", len(seen), p.Done(), p.Remaining(), p.RemainingFor("shared"))
	}
}

func TestFunc(t *testing.T) {
	type key struct{}
	p := NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *Response {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == toolrun.RoleTool {
			return Text(fmt.Sprintf("%s read %s (%v)", req.ThreadID, last.Content, ctx.Value(key{})))
		}
		return Calls(Call("read", map[string]any{"thread": req.ThreadID}).WithID("c1"))
	})
	ctx := context.WithValue(context.Background(), key{}, "ctx passed")
	first := &toolrun.Request{ThreadID: "t1", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "go"}}}
	chunks, err := collect(p.Stream(ctx, first))
	if got := shape(chunks); err != nil || got != `start0(read) call0(read {"thread":"t1"}) usage(1/5/0) finish(tool_calls)` {
		t.Fatalf("%s %v", got, err)
	}
	second := &toolrun.Request{ThreadID: "t1", Messages: append(first.Messages,
		toolrun.Message{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{chunks[1].ToolCall}},
		toolrun.Message{Role: toolrun.RoleTool, Content: "the file"})}
	chunks, err = collect(p.Stream(ctx, second))
	if got := shape(chunks); err != nil || got != "text(t1 read the file (ctx passed)) usage(8/8/0) finish(stop)" {
		t.Fatalf("%s %v", got, err)
	}
	if p.Remaining() != 0 || !p.Done() || p.RemainingFor("t1") != 0 {
		t.Errorf("Remaining %d", p.Remaining())
	}
}

// TestFuncStreamsLikeScript streams every scripted response case through a
// responder: the chunks are the same as from a fixed script.
func TestFuncStreamsLikeScript(t *testing.T) {
	for _, tt := range responseCases {
		t.Run(tt.name, func(t *testing.T) {
			p := NewFunc(nil, func(context.Context, *toolrun.Request) *Response { return tt.resp })
			for range 2 { // the same response, served twice, streams the same
				chunks, err := stream(t, p, responseRequest)
				if got := shape(chunks); err != nil || got != tt.want {
					t.Errorf("got  %s %v\nwant %s", got, err, tt.want)
				}
			}
		})
	}
	// Errors, options' chunking and generated call ids apply too.
	n := 0
	p := NewFunc(&Options{ChunkSize: 2, NewCallID: func() string { n++; return fmt.Sprint("id", n) }},
		func(context.Context, *toolrun.Request) *Response {
			return Fail("cut", &ErrorOptions{Status: 502}).WithText("abc")
		})
	chunks, err := stream(t, p, nil)
	if pe := providerError(t, err); shape(chunks) != "text(ab) text(c)" || pe.Status != 502 || pe.Code != "unknown" {
		t.Errorf("%s %+v", shape(chunks), pe)
	}
	p = NewFunc(&Options{NewCallID: func() string { n++; return fmt.Sprint("id", n) }},
		func(context.Context, *toolrun.Request) *Response { return Calls(Call("f", nil)) })
	chunks, _ = stream(t, p, nil)
	if chunks[0].ToolCall.ID != "id1" {
		t.Errorf("id %q", chunks[0].ToolCall.ID)
	}
}

func TestFuncNilResponse(t *testing.T) {
	p := NewFunc(nil, func(context.Context, *toolrun.Request) *Response { return nil })
	_, err := stream(t, p, &toolrun.Request{ThreadID: "t9"})
	if pe := providerError(t, err); pe.Code != "invalid_request" || !strings.Contains(pe.Message, `"t9"`) {
		t.Errorf("%+v", pe)
	}
	wantPanic(t, func() { NewFunc(nil, nil) }, "nil respond")
}

func TestFuncCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	p := NewFunc(nil, func(context.Context, *toolrun.Request) *Response { called = true; return Text("x") })
	if _, err := collect(p.Stream(ctx, &toolrun.Request{})); !errors.Is(err, context.Canceled) || called {
		t.Errorf("err %v, respond called %v", err, called)
	}
}

// TestFuncDeterministic runs the same conversations on many goroutines:
// every thread gets the answer computed from its own request, and equal
// requests get equal streams.
func TestFuncDeterministic(t *testing.T) {
	var calls atomic.Int64
	p := NewFunc(&Options{ChunkSize: 3}, func(ctx context.Context, req *toolrun.Request) *Response {
		calls.Add(1)
		return Reasoning("answer for "+req.ThreadID, req.Messages[0].Content).
			WithProviderTools(toolrun.ProviderToolCall{Name: "web", Metadata: map[string]any{"q": req.ThreadID}})
	})
	const goroutines, requests = 32, 50
	want := func(id string) string {
		r := &toolrun.Request{ThreadID: id, Messages: []toolrun.Message{{Content: "why " + id}}}
		chunks, err := stream(t, p, r)
		if err != nil {
			t.Fatal(err)
		}
		return shape(chunks)
	}
	wants := make([]string, goroutines)
	for g := range goroutines {
		wants[g] = want(fmt.Sprint("t", g))
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			id := fmt.Sprint("t", g)
			for range requests {
				r := &toolrun.Request{ThreadID: id, Messages: []toolrun.Message{{Content: "why " + id}}}
				chunks, err := collect(p.Stream(context.Background(), r))
				if got := shape(chunks); err != nil || got != wants[g] {
					t.Errorf("got %s %v\nwant %s", got, err, wants[g])
					return
				}
				for _, c := range chunks {
					if c.Type == toolrun.ChunkProviderTool {
						c.ProviderTool.Metadata["q"] = "mutated" // a copy: the next stream is unchanged
					}
				}
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != goroutines*(requests+1) {
		t.Errorf("respond called %d times", n)
	}
}

func TestModeMisuse(t *testing.T) {
	wantPanic(t, func() { NewPerThread(nil, nil).Add(Text("x")) }, "per-thread", "AddFor")
	wantPanic(t, func() { NewFunc(nil, func(context.Context, *toolrun.Request) *Response { return nil }).Add(Text("x")) }, "responder", "no script")
	wantPanic(t, func() { New().AddFor("t", Text("x")) }, "fixed-script", "NewPerThread")
	// A fixed script is shared by every thread.
	p := New(Text("a"), Text("b"))
	if p.RemainingFor("any") != 2 || text(t, p, "x") != "a" || text(t, p, "y") != "b" {
		t.Error("fixed script not shared by threads")
	}
}

func TestKeepRequests(t *testing.T) {
	respond := func(context.Context, *toolrun.Request) *Response { return Text("r") }
	script := func(string) []*Response { return []*Response{Text("r"), Text("r")} }
	tests := []struct {
		name string
		make func(*Options) *Provider
		keep bool // by default
	}{
		{"fixed", func(o *Options) *Provider { return NewWithOptions(o, Text("r"), Text("r"), Text("r"), Text("r")) }, true},
		{"per-thread", func(o *Options) *Provider { return NewPerThread(o, script) }, false},
		{"responder", func(o *Options) *Provider { return NewFunc(o, respond) }, false},
	}
	for _, tt := range tests {
		for _, k := range []Keep{KeepDefault, KeepAll, KeepNone} {
			keep := k == KeepAll || k == KeepDefault && tt.keep
			t.Run(fmt.Sprintf("%s/%d", tt.name, k), func(t *testing.T) {
				p := tt.make(&Options{KeepRequests: k})
				for _, id := range []string{"t1", "t2", "t1", "t2"} {
					if _, err := stream(t, p, &toolrun.Request{ThreadID: id, Model: "m-" + id}); err != nil {
						t.Fatal(err)
					}
				}
				if !keep {
					if len(p.log) != 0 {
						t.Errorf("kept %d requests", len(p.log))
					}
					wantPanic(t, func() { p.Requests() }, "Requests", "keeps no requests", "KeepAll")
					wantPanic(t, func() { p.LastRequest() }, "LastRequest", "keeps no requests", "KeepAll")
					return
				}
				var got []string
				for _, r := range p.Requests() {
					got = append(got, r.ThreadID+"/"+r.Model)
				}
				if s := strings.Join(got, " "); s != "t1/m-t1 t2/m-t2 t1/m-t1 t2/m-t2" {
					t.Errorf("kept %s", s)
				}
				if r := p.LastRequest(); r.ThreadID != "t2" {
					t.Errorf("LastRequest %+v", r)
				}
				p.Reset()
				if len(p.Requests()) != 0 || p.LastRequest() != nil {
					t.Error("Reset kept requests")
				}
			})
		}
	}
}

// TestNotKeepingStaysFlat makes 10,000 requests on providers that keep no
// requests: nothing accumulates, and a request allocates no more after
// them than before, and less than when requests are kept.
func TestNotKeepingStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 requests")
	}
	req := &toolrun.Request{ThreadID: "t", System: "You triage issues.", Messages: []toolrun.Message{
		{Role: toolrun.RoleUser, Content: "Please triage issue 7", Metadata: map[string]any{"k": "v"}},
	}}
	answer := Calls(Call("get_issue", map[string]any{"number": 7}).WithID("c1")).WithText("Let me look.")
	drain := func(p *Provider, req *toolrun.Request) {
		for _, err := range p.Stream(context.Background(), req) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	respond := func(context.Context, *toolrun.Request) *Response { return answer }
	threads := make([]string, 100)
	for i := range threads {
		threads[i] = fmt.Sprint("t", i)
	}

	t.Run("responder", func(t *testing.T) {
		p := NewFunc(nil, respond)
		before := testing.AllocsPerRun(100, func() { drain(p, req) })
		for range 10_000 {
			drain(p, req)
		}
		after := testing.AllocsPerRun(100, func() { drain(p, req) })
		kept := NewFunc(&Options{KeepRequests: KeepAll}, respond)
		keeping := testing.AllocsPerRun(100, func() { drain(kept, req) })
		if len(p.log) != 0 || after > before || before >= keeping {
			t.Errorf("log %d; allocations per request: %v before, %v after, %v when keeping", len(p.log), before, after, keeping)
		}
		// A responder's request allocates only the iterator and the usage.
		if before > 2 {
			t.Errorf("%v allocations per request", before)
		}
	})

	t.Run("per-thread", func(t *testing.T) {
		// Each thread has a script long enough for every request below.
		long := make([]*Response, 0, 200)
		for range cap(long) {
			long = append(long, answer)
		}
		p := NewPerThread(nil, func(string) []*Response { return long })
		thread := make([]*toolrun.Request, len(threads))
		for i, id := range threads {
			r := *req
			r.ThreadID = id
			thread[i] = &r
			drain(p, &r) // makes the thread's script
		}
		i := 0
		next := func() { drain(p, thread[i%len(thread)]); i++ }
		before := testing.AllocsPerRun(100, next)
		for range 10_000 {
			next()
		}
		after := testing.AllocsPerRun(100, next)
		n := 0
		p.threads.Range(func(_, _ any) bool { n++; return true })
		if len(p.log) != 0 || n != len(threads) || after > before || before > 2 {
			t.Errorf("log %d, threads %d; allocations per request: %v before, %v after", len(p.log), n, before, after)
		}
	})
}
