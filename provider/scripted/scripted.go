// Package scripted is a deterministic [toolrun.Provider]: it answers model
// requests with responses written in advance or computed from the request.
// It is the provider of users' agent tests and load tests, and the default
// provider of the examples.
//
// A Provider works in one of three modes, chosen by its constructor. A fixed
// script ([New], [NewWithOptions]) is a list of responses served in order,
// one per request, whichever thread asks:
//
//	p := scripted.New(
//		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})),
//		scripted.Text("Issue 1 is a bug."),
//	)
//
// Per-thread scripts ([NewPerThread], [Provider.AddFor]) give each thread
// its own list of responses, keyed by [toolrun.Request.ThreadID] and served
// in order to that thread only, so that many conversations can run at once:
//
//	p := scripted.NewPerThread(nil, func(threadID string) []*scripted.Response {
//		return []*scripted.Response{
//			scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})),
//			scripted.Text("Issue 1 is a bug."),
//		}
//	})
//
// A responder ([NewFunc]) computes each response from the request with a
// function and keeps no state per request or per thread, which suits load
// tests with any number of threads:
//
//	p := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
//		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == toolrun.RoleTool {
//			return scripted.Text("Issue 1 is a bug.")
//		}
//		return scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1}))
//	})
//
// # Responses
//
// [Text] answers with content and finishes with "stop". [Calls] makes tool
// calls, built with [Call] (arguments from a Go value), [RawCall] (argument
// text sent verbatim) or [FragmentCall], and finishes with "tool_calls".
// [Fragments] streams a call's arguments as the given raw deltas, to test
// progress arguments and malformed JSON. [Fail] fails with a
// *toolrun.ProviderError. Chaining methods add content, reasoning, provider
// tools, usage, delays, chunking, request checks ([Response.Expect]) and
// gates that hold a response until a test releases it ([Response.Wait]).
// A response streams the same way in every mode.
//
// # Scripts
//
// [Provider.Remaining] and [Provider.Done] tell how much of the script is
// left (of every thread's script, for per-thread scripts), and
// [Provider.Reset] rewinds it. Once a fixed script is consumed a further
// request fails with a *toolrun.ProviderError with code "invalid_request"
// and the message "Script exhausted after N responses". A fixed-script
// Provider that was never given a response answers every request with
// [DefaultText]. A thread whose own script is consumed, or that has none,
// fails in the same way, with a message that names the thread.
//
// # Requests
//
// A Provider can keep a deep copy of every request it receives, for
// [Provider.Requests] and [Provider.LastRequest]; [Options.KeepRequests]
// decides. By default a fixed script keeps every request, which is what a
// test of one conversation inspects, while per-thread scripts and
// responders keep none, so that memory stays flat under load. Asking a
// Provider that keeps no requests for them panics, because an empty answer
// would read as "no request was made".
//
// # Concurrency
//
// A Provider is safe for concurrent use. A request holds a lock only while
// it takes its response: the script's lock for a fixed script, its own
// thread's lock for per-thread scripts, none for a responder (keeping
// requests adds a short lock to append to the log). Streaming runs without
// locks, so requests do not wait for each other's streams.
//
// # Cancellation
//
// Delays, chunk delays and gates respect the Stream context: cancelling it
// ends the sequence with the context's error.
package scripted

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// Name is the provider name, reported by [Provider.Name] and in errors.
const Name = "scripted"

// DefaultText is the answer of a fixed-script Provider that was never given
// a response.
const DefaultText = "Test response received."

// Keep says which requests a Provider keeps for [Provider.Requests] and
// [Provider.LastRequest].
type Keep int

const (
	// KeepDefault keeps every request for a fixed script ([New],
	// [NewWithOptions]) and none for per-thread scripts ([NewPerThread])
	// and responders ([NewFunc]).
	KeepDefault Keep = iota
	// KeepAll keeps a deep copy of every request, including requests that
	// fail because a script is exhausted. The log grows with every request
	// until [Provider.Reset].
	KeepAll
	// KeepNone keeps no request. Requests and LastRequest then panic.
	KeepNone
)

// Options configure a Provider. The zero value, and a nil *Options, mean the
// defaults described on each field. The constructors copy the struct (and
// the ProviderTools slice); changing it afterwards has no effect.
type Options struct {
	// ProviderTools are the provider-executed tools ProviderTools returns for
	// every model id. ProviderExecuted is set on each, and Provider is set to
	// "scripted" when empty. Nil means none.
	ProviderTools []toolrun.ToolSpec
	// NewCallID generates the id of a call scripted without one. Nil means
	// "call_" followed by 8 random hex digits. It may be called from several
	// goroutines at once.
	NewCallID func() string
	// ChunkSize is the default Response.ChunkSize; 0 means no chunking.
	ChunkSize int
	// ChunkDelay is the default Response.ChunkDelay; 0 means none.
	ChunkDelay time.Duration
	// KeepRequests says which requests the Provider keeps. KeepDefault, the
	// zero value, keeps every request for a fixed script and none for
	// per-thread scripts and responders.
	KeepRequests Keep
}

// mode is how a Provider chooses responses.
type mode int

const (
	modeFixed mode = iota
	modePerThread
	modeFunc
)

// Provider serves scripted responses. It implements [toolrun.Provider] and
// [toolrun.ProviderToolLister]. A Provider is safe for concurrent use; see
// the package documentation for what a request locks.
type Provider struct {
	opts    Options
	mode    mode
	keep    bool
	respond func(context.Context, *toolrun.Request) *Response
	script  func(threadID string) []*Response

	// mu guards the fixed script and the request log.
	mu        sync.Mutex
	responses []*Response
	next      int
	scripted  bool
	log       []*toolrun.Request

	// threads maps a thread id to its *threadScript (per-thread mode).
	threads sync.Map
}

// threadScript is one thread's script and position.
type threadScript struct {
	mu        sync.Mutex
	made      bool // the script function has been called
	responses []*Response
	next      int
}

var (
	_ toolrun.Provider           = (*Provider)(nil)
	_ toolrun.ProviderToolLister = (*Provider)(nil)
)

// New returns a Provider serving responses in order, with default options.
// It keeps every request.
func New(responses ...*Response) *Provider {
	return NewWithOptions(nil, responses...)
}

// NewWithOptions returns a Provider serving responses in order; opts nil
// means defaults. It keeps every request unless opts.KeepRequests is
// KeepNone.
func NewWithOptions(opts *Options, responses ...*Response) *Provider {
	p := newProvider(opts, modeFixed)
	p.Add(responses...)
	return p
}

// NewPerThread returns a Provider that serves each thread its own script:
// a request is answered with the next response of the script of its
// Request.ThreadID, and no other thread's requests move that script on.
// Every request made to this Provider for a thread takes from that
// thread's script, including those of prompt tools that run in the
// thread; requests of one thread that overlap (prompt tools run in
// parallel) take its responses in the order they arrive. opts nil means
// defaults; the Provider keeps no requests unless opts.KeepRequests is
// KeepAll.
//
// script, when not nil, gives a thread's script. It is called once per
// thread, when the thread first makes a request or is first given
// responses with [Provider.AddFor], whichever comes first; its responses
// are copied, and AddFor appends to them. It may be called from several
// goroutines at once, for different threads, and must not call the
// Provider's methods. A nil script, or one that returns no responses,
// leaves a thread without a script until AddFor gives it one.
//
// A request for a thread without a script, or whose script is consumed,
// fails with a *toolrun.ProviderError with code "invalid_request" whose
// message names the thread. The Provider holds every thread's script and
// position for its whole life; for an unbounded number of threads use
// [NewFunc], which holds nothing per thread.
func NewPerThread(opts *Options, script func(threadID string) []*Response) *Provider {
	p := newProvider(opts, modePerThread)
	p.script = script
	return p
}

// NewFunc returns a Provider that answers each request with the response
// respond computes from it. opts nil means defaults; the Provider keeps no
// requests unless opts.KeepRequests is KeepAll, and holds no other state
// per request or per thread.
//
// respond is called once per request, when the Stream sequence is
// iterated, with the Stream context and the request. It is called from
// several goroutines at once when requests overlap, so it must be safe for
// concurrent use, and must treat the request, which is the caller's, as
// read-only and keep nothing of it after returning (copy what it keeps). The Provider does not copy the response respond returns
// and only reads it, so respond may return one Response to many requests
// at once, provided nothing changes it meanwhile. A nil response fails the
// request with a *toolrun.ProviderError with code "invalid_request".
func NewFunc(opts *Options, respond func(ctx context.Context, req *toolrun.Request) *Response) *Provider {
	if respond == nil {
		panic("scripted.NewFunc: nil respond function")
	}
	p := newProvider(opts, modeFunc)
	p.respond = respond
	return p
}

func newProvider(opts *Options, m mode) *Provider {
	p := &Provider{mode: m}
	if opts != nil {
		p.opts = *opts
		p.opts.ProviderTools = cloneSpecs(opts.ProviderTools)
	}
	switch p.opts.KeepRequests {
	case KeepAll:
		p.keep = true
	case KeepNone:
		p.keep = false
	default:
		p.keep = m == modeFixed
	}
	return p
}

// Add appends responses to a fixed script. Each is copied. Add panics on
// a Provider made by NewPerThread (use [Provider.AddFor]) or NewFunc.
func (p *Provider) Add(responses ...*Response) {
	switch p.mode {
	case modePerThread:
		panic("scripted: Add on a per-thread Provider; use AddFor to give a thread responses")
	case modeFunc:
		panic("scripted: Add on a responder Provider, which has no script")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range responses {
		if r == nil {
			continue
		}
		p.responses = append(p.responses, r.clone())
		p.scripted = true
	}
}

// AddFor appends responses to the script of the thread with the given id,
// on a Provider made by NewPerThread. Each is copied. If the Provider has a
// script function and the thread has not been seen yet, the function's
// responses come first. AddFor panics on any other Provider.
func (p *Provider) AddFor(threadID string, responses ...*Response) {
	if p.mode != modePerThread {
		panic("scripted: AddFor on a " + p.mode.String() + " Provider; only NewPerThread serves scripts per thread")
	}
	ts := p.thread(threadID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.make(p, threadID)
	ts.responses = appendClones(ts.responses, responses)
}

func (m mode) String() string {
	switch m {
	case modePerThread:
		return "per-thread"
	case modeFunc:
		return "responder"
	}
	return "fixed-script"
}

// Name returns "scripted".
func (p *Provider) Name() string { return Name }

// ProviderTools returns Options.ProviderTools, for any model id.
func (p *Provider) ProviderTools(modelID string) []toolrun.ToolSpec {
	out := cloneSpecs(p.opts.ProviderTools)
	for i := range out {
		out[i].ProviderExecuted = true
		if out[i].Provider == "" {
			out[i].Provider = Name
		}
	}
	return out
}

// Requests returns deep copies of the requests received so far, oldest
// first, across all threads. It panics if the Provider keeps no requests
// (see [Options.KeepRequests]).
func (p *Provider) Requests() []*toolrun.Request {
	p.mustKeep("Requests")
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*toolrun.Request, len(p.log))
	for i, r := range p.log {
		out[i] = cloneRequest(r)
	}
	return out
}

// LastRequest returns a deep copy of the latest request, or nil if none
// has been received. It panics if the Provider keeps no requests (see
// [Options.KeepRequests]).
func (p *Provider) LastRequest() *toolrun.Request {
	p.mustKeep("LastRequest")
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.log) == 0 {
		return nil
	}
	return cloneRequest(p.log[len(p.log)-1])
}

func (p *Provider) mustKeep(method string) {
	if !p.keep {
		panic("scripted: " + method + " on a " + p.mode.String() +
			" Provider that keeps no requests; set Options.KeepRequests to KeepAll to keep them")
	}
}

// Remaining returns the number of responses not yet served: of the fixed
// script, or of the scripts of every thread seen so far (threads whose
// script function has not been called yet do not count). It is 0 for a
// responder.
func (p *Provider) Remaining() int {
	switch p.mode {
	case modePerThread:
		n := 0
		p.threads.Range(func(_, v any) bool {
			ts := v.(*threadScript)
			ts.mu.Lock()
			n += len(ts.responses) - ts.next
			ts.mu.Unlock()
			return true
		})
		return n
	case modeFunc:
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.responses) - p.next
}

// RemainingFor returns the number of responses not yet served to the
// thread with the given id. For per-thread scripts that is what is left of
// the thread's own script (calling the script function first if the thread
// has not been seen yet); for a fixed script, which every thread shares,
// it is Remaining; for a responder it is 0.
func (p *Provider) RemainingFor(threadID string) int {
	if p.mode != modePerThread {
		return p.Remaining()
	}
	ts := p.thread(threadID)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.make(p, threadID)
	return len(ts.responses) - ts.next
}

// Done reports whether every scripted response has been served
// (Remaining is 0).
func (p *Provider) Done() bool { return p.Remaining() == 0 }

// Reset rewinds the script, or every thread's script, to its first
// response and clears the request log.
func (p *Provider) Reset() {
	p.threads.Range(func(_, v any) bool {
		ts := v.(*threadScript)
		ts.mu.Lock()
		ts.next = 0
		ts.mu.Unlock()
		return true
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = 0
	p.log = nil
}

// Stream serves the next response. The request is kept (when the Provider
// keeps requests) and the response taken when the sequence is iterated
// (each iteration is one request); if ctx is already cancelled nothing is
// kept or taken and the sequence yields ctx's error.
func (p *Provider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	return func(yield func(toolrun.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(toolrun.Chunk{}, err)
			return
		}
		req := req
		if req == nil {
			req = &toolrun.Request{}
		}
		var kept *toolrun.Request
		if p.keep {
			kept = cloneRequest(req)
		}
		s := streamer{p: p}
		var err error
		switch p.mode {
		case modeFixed:
			err = p.takeFixed(&s, kept)
		case modePerThread:
			p.appendLog(kept)
			err = p.takeThread(&s, req.ThreadID)
		default:
			p.appendLog(kept)
			if s.resp = p.respond(ctx, req); s.resp == nil {
				err = &toolrun.ProviderError{
					Provider: Name,
					Code:     "invalid_request",
					Message:  fmt.Sprintf("the respond function returned no response (thread %q)", req.ThreadID),
				}
			}
		}
		if err != nil {
			yield(toolrun.Chunk{}, err)
			return
		}
		s.run(ctx, yield, req)
	}
}

func (p *Provider) appendLog(kept *toolrun.Request) {
	if kept == nil {
		return
	}
	p.mu.Lock()
	p.log = append(p.log, kept)
	p.mu.Unlock()
}

// takeFixed logs the request and takes the next response of the fixed
// script under one lock, so that the log is in serving order.
func (p *Provider) takeFixed(s *streamer, kept *toolrun.Request) error {
	p.mu.Lock()
	if kept != nil {
		p.log = append(p.log, kept)
	}
	s.index = p.next
	switch {
	case !p.scripted:
		s.resp = defaultResponse
	case p.next < len(p.responses):
		s.resp = p.responses[p.next]
		p.next++
	}
	p.mu.Unlock()
	if s.resp == nil {
		return &toolrun.ProviderError{
			Provider: Name,
			Code:     "invalid_request",
			Message:  fmt.Sprintf("Script exhausted after %d responses", s.index),
		}
	}
	return nil
}

// defaultResponse answers every request of a fixed-script Provider that was
// never given a response. It is only read.
var defaultResponse = Text(DefaultText)

// takeThread takes the next response of the thread's script.
func (p *Provider) takeThread(s *streamer, threadID string) error {
	ts := p.thread(threadID)
	ts.mu.Lock()
	ts.make(p, threadID)
	s.index, s.thread, s.perThread = ts.next, threadID, true
	if ts.next < len(ts.responses) {
		s.resp = ts.responses[ts.next]
		ts.next++
	}
	n := len(ts.responses)
	ts.mu.Unlock()
	switch {
	case s.resp != nil:
		return nil
	case n == 0:
		return &toolrun.ProviderError{
			Provider: Name,
			Code:     "invalid_request",
			Message:  fmt.Sprintf("No script for thread %q", threadID),
		}
	}
	return &toolrun.ProviderError{
		Provider: Name,
		Code:     "invalid_request",
		Message:  fmt.Sprintf("Script for thread %q exhausted after %d responses", threadID, n),
	}
}

// thread returns the script state of a thread, creating it empty.
func (p *Provider) thread(id string) *threadScript {
	if v, ok := p.threads.Load(id); ok {
		return v.(*threadScript)
	}
	v, _ := p.threads.LoadOrStore(id, &threadScript{})
	return v.(*threadScript)
}

// make calls the script function for the thread once; ts.mu must be held.
func (ts *threadScript) make(p *Provider, id string) {
	if ts.made {
		return
	}
	ts.made = true
	if p.script != nil {
		ts.responses = appendClones(ts.responses, p.script(id))
	}
}

func appendClones(dst, responses []*Response) []*Response {
	for _, r := range responses {
		if r != nil {
			dst = append(dst, r.clone())
		}
	}
	return dst
}

// streamer streams one response. The context and the yield function are
// passed to each method rather than held, so that the compiler can see
// that yield is only called and need not move it to the heap.
type streamer struct {
	p    *Provider
	resp *Response
	// index is the response's position in its script, thread the thread
	// of a per-thread script; they name the request in Check failures.
	index     int
	thread    string
	perThread bool
}

// emit yields c unless ctx is cancelled; it reports whether to go on.
func (s *streamer) emit(ctx context.Context, yield func(toolrun.Chunk, error) bool, c toolrun.Chunk) bool {
	if err := ctx.Err(); err != nil {
		yield(toolrun.Chunk{}, err)
		return false
	}
	return yield(c, nil)
}

// sleep waits d; on cancellation it yields ctx's error and reports false.
func (s *streamer) sleep(ctx context.Context, yield func(toolrun.Chunk, error) bool, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		yield(toolrun.Chunk{}, ctx.Err())
		return false
	}
}

func (s *streamer) chunkSize() int {
	if s.resp.ChunkSize != 0 {
		return s.resp.ChunkSize
	}
	return s.p.opts.ChunkSize
}

func (s *streamer) chunkDelay() time.Duration {
	if s.resp.ChunkDelay != 0 {
		return s.resp.ChunkDelay
	}
	return s.p.opts.ChunkDelay
}

// deltas emits text in pieces of at most size runes (one piece when size
// is not positive), each a copy of c carrying the piece in Text or, for
// argument deltas, in ToolCall.Arguments; it waits the chunk delay between
// pieces.
func (s *streamer) deltas(ctx context.Context, yield func(toolrun.Chunk, error) bool, c toolrun.Chunk, text string, size int) bool {
	for first := true; first || text != ""; first = false {
		if !first && !s.sleep(ctx, yield, s.chunkDelay()) {
			return false
		}
		var piece string
		piece, text = cut(text, size)
		if c.Type == toolrun.ChunkToolCallDelta {
			c.ToolCall.Arguments = piece
		} else {
			c.Text = piece
		}
		if !s.emit(ctx, yield, c) {
			return false
		}
	}
	return true
}

// fragments emits each fragment as an argument delta, a copy of c, waiting
// the chunk delay between them.
func (s *streamer) fragments(ctx context.Context, yield func(toolrun.Chunk, error) bool, c toolrun.Chunk, fragments []string) bool {
	for i, f := range fragments {
		if i > 0 && !s.sleep(ctx, yield, s.chunkDelay()) {
			return false
		}
		c.ToolCall.Arguments = f
		if !s.emit(ctx, yield, c) {
			return false
		}
	}
	return true
}

func (s *streamer) checkFailed(err error) error {
	which := fmt.Sprintf("request %d", s.index+1)
	switch {
	case s.perThread:
		which = fmt.Sprintf("request %d of thread %q", s.index+1, s.thread)
	case s.p.mode == modeFunc:
		which = "the request"
	}
	return &toolrun.ProviderError{
		Provider: Name,
		Code:     "invalid_request",
		Message:  fmt.Sprintf("%s did not meet the script's expectation: %v", which, err),
		Err:      err,
	}
}

func (s *streamer) run(ctx context.Context, yield func(toolrun.Chunk, error) bool, req *toolrun.Request) {
	r := s.resp
	inChars := inputChars(req)
	if r.Check != nil {
		if err := r.Check(cloneRequest(req)); err != nil {
			yield(toolrun.Chunk{}, s.checkFailed(err))
			return
		}
	}
	if r.Gate != nil {
		if err := r.Gate(ctx); err != nil {
			yield(toolrun.Chunk{}, err)
			return
		}
	}
	if !s.sleep(ctx, yield, r.Delay) {
		return
	}
	size := s.chunkSize()
	if r.Text != "" && !s.deltas(ctx, yield, toolrun.Chunk{Type: toolrun.ChunkText}, r.Text, size) {
		return
	}
	if r.Reasoning != "" && !s.deltas(ctx, yield, toolrun.Chunk{Type: toolrun.ChunkReasoning}, r.Reasoning, size) {
		return
	}
	var argChars int
	for i, tc := range r.ToolCalls {
		id := tc.ID
		if id == "" {
			id = s.p.newCallID()
		}
		c := toolrun.Chunk{Type: toolrun.ChunkToolCallStart, Index: i, ToolCall: toolrun.ToolCall{ID: id, Name: tc.Name}}
		if !s.emit(ctx, yield, c) {
			return
		}
		args := tc.arguments()
		argChars += utf8.RuneCountInString(args) + utf8.RuneCountInString(tc.Name)
		c.Type = toolrun.ChunkToolCallDelta
		switch {
		case len(tc.Fragments) > 0:
			if !s.fragments(ctx, yield, c, tc.Fragments) {
				return
			}
		case size > 0 && args != "":
			if !s.deltas(ctx, yield, c, args, size) {
				return
			}
		}
		c.Type, c.ToolCall.Arguments = toolrun.ChunkToolCall, args
		if !s.emit(ctx, yield, c) {
			return
		}
	}
	if r.Error != nil {
		e := *r.Error
		e.Provider = Name
		if e.Code == "" {
			e.Code = "unknown"
		}
		yield(toolrun.Chunk{}, &e)
		return
	}
	for i, pt := range r.ProviderTools {
		if pt.Metadata != nil {
			pt.Metadata = cloneMap(pt.Metadata)
		}
		if !s.emit(ctx, yield, toolrun.Chunk{Type: toolrun.ChunkProviderTool, Index: i, ProviderTool: &pt}) {
			return
		}
	}
	var u toolrun.Usage
	if r.Usage != nil {
		u = *r.Usage
	} else {
		u = toolrun.Usage{
			InputTokens:     tokens(inChars),
			OutputTokens:    tokens(utf8.RuneCountInString(r.Text) + utf8.RuneCountInString(r.Reasoning) + argChars),
			ReasoningTokens: tokens(utf8.RuneCountInString(r.Reasoning)),
		}
	}
	if !s.emit(ctx, yield, toolrun.Chunk{Type: toolrun.ChunkUsage, Usage: &u}) {
		return
	}
	finish := r.FinishReason
	if finish == "" {
		finish = "stop"
		if len(r.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	s.emit(ctx, yield, toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: finish})
}

func (p *Provider) newCallID() string {
	if p.opts.NewCallID != nil {
		return p.opts.NewCallID()
	}
	const hexDigits = "0123456789abcdef"
	b := [13]byte{'c', 'a', 'l', 'l', '_'}
	v := rand.Uint32()
	for i := 12; i >= 5; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// tokens estimates a token count from a character count: about four
// characters per token, rounded up.
func tokens(chars int) int { return (chars + 3) / 4 }

// inputChars counts the characters of what a request sends.
func inputChars(req *toolrun.Request) int {
	n := utf8.RuneCountInString(req.System)
	for i := range req.Messages {
		m := &req.Messages[i] // not a copy of each message: a long history is most of the count's time
		n += utf8.RuneCountInString(m.Content)
		for _, tc := range m.ToolCalls {
			n += utf8.RuneCountInString(tc.Name) + utf8.RuneCountInString(tc.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += utf8.RuneCountInString(t.Name) + utf8.RuneCountInString(t.Description) + len(t.Parameters)
	}
	return n
}

// cut splits off the first piece of s of at most size runes; size <= 0
// means all of s.
func cut(s string, size int) (piece, rest string) {
	if size <= 0 {
		return s, ""
	}
	i := 0
	for n := 0; i < len(s) && n < size; n++ {
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return s[:i], s[i:]
}
