package scripted

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
)

// benchRequest is a small first request of a conversation.
func benchRequest(threadID string) *toolrun.Request {
	return &toolrun.Request{Model: "m", ThreadID: threadID, System: "You triage issues.", Messages: []toolrun.Message{
		{Role: toolrun.RoleUser, Content: "Please triage issue 7"},
	}}
}

// benchAnswer is a response with content and one tool call whose id is
// generated.
var benchAnswer = Calls(Call("get_issue", map[string]any{"number": 7})).WithText("Let me look.")

// drainB streams one request to its end. It reports an error with Error,
// not Fatal, so that RunParallel's goroutines may call it.
func drainB(b *testing.B, p *Provider, req *toolrun.Request) {
	for _, err := range p.Stream(context.Background(), req) {
		if err != nil {
			b.Error(err)
		}
	}
}

// BenchmarkStreamFixed is one request and response through Stream with a
// fixed script, which keeps every request by default.
func BenchmarkStreamFixed(b *testing.B) {
	for _, k := range []struct {
		name string
		keep Keep
	}{{"keep", KeepDefault}, {"nokeep", KeepNone}} {
		b.Run(k.name, func(b *testing.B) {
			p := NewWithOptions(&Options{KeepRequests: k.keep})
			for range b.N {
				p.Add(benchAnswer)
			}
			req := benchRequest("t")
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				drainB(b, p, req)
			}
		})
	}
}

// BenchmarkStreamFunc is one request and response through Stream with a
// responder, which keeps no requests.
func BenchmarkStreamFunc(b *testing.B) {
	p := NewFunc(nil, func(context.Context, *toolrun.Request) *Response { return benchAnswer })
	req := benchRequest("t")
	b.ReportAllocs()
	for b.Loop() {
		drainB(b, p, req)
	}
}

// BenchmarkStreamPerThread is one request and response through Stream with
// per-thread scripts, on one thread whose script is long enough.
func BenchmarkStreamPerThread(b *testing.B) {
	p := NewPerThread(nil, nil)
	for range b.N {
		p.AddFor("t", benchAnswer)
	}
	req := benchRequest("t")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		drainB(b, p, req)
	}
}

// BenchmarkStreamPerThreadParallel streams from GOMAXPROCS goroutines at
// once, each on threads of its own: every thread has a two-response script
// (a tool call, then text), made on its first request, and a goroutine
// moves to a new thread after two requests. The figures include making
// each thread's script.
func BenchmarkStreamPerThreadParallel(b *testing.B) {
	script := []*Response{benchAnswer, Text("Issue 7 is a crash.")}
	p := NewPerThread(nil, func(string) []*Response { return script })
	reqs := make([]*toolrun.Request, b.N/2+b.N%2+1024)
	for i := range reqs {
		reqs[i] = benchRequest(fmt.Sprint("t", i))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for {
			req := reqs[next.Add(1)-1]
			for range 2 {
				if !pb.Next() {
					return
				}
				drainB(b, p, req)
			}
		}
	})
}

// BenchmarkStreamFuncParallel streams from GOMAXPROCS goroutines at once
// through one responder, each goroutine on its own thread.
func BenchmarkStreamFuncParallel(b *testing.B) {
	p := NewFunc(nil, func(context.Context, *toolrun.Request) *Response { return benchAnswer })
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest(fmt.Sprint("t", next.Add(1)))
		for pb.Next() {
			drainB(b, p, req)
		}
	})
}
