// Package scripted is a deterministic [toolrun.Provider]: it answers model
// requests with responses written in advance. It is the provider of users'
// agent tests and the default provider of the examples.
//
// A script is a list of responses served in order, one per request:
//
//	p := scripted.New(
//		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})),
//		scripted.Text("Issue 1 is a bug."),
//	)
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
//
// # Requests
//
// Every request is logged as a deep copy: [Provider.Requests],
// [Provider.LastRequest]. [Provider.Remaining] and [Provider.Done] tell how
// much of the script is left. Once the script is consumed a further request
// fails with a *toolrun.ProviderError with code "invalid_request" and the
// message "Script exhausted after N responses". A Provider that was never
// given a response answers every request with [DefaultText].
//
// # Cancellation
//
// Delays, chunk delays and gates respect the Stream context: cancelling it
// ends the sequence with the context's error.
package scripted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"iter"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// Name is the provider name, reported by [Provider.Name] and in errors.
const Name = "scripted"

// DefaultText is the answer of a Provider that was never given a response.
const DefaultText = "Test response received."

// Options configure a Provider. The zero value, and a nil *Options, mean the
// defaults described on each field. NewWithOptions copies the struct (and
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
}

// Provider serves scripted responses. It implements [toolrun.Provider] and
// [toolrun.ProviderToolLister]. A Provider is safe for concurrent use: each
// request takes the next response under a lock, and streams it on its own.
type Provider struct {
	opts Options

	mu        sync.Mutex
	responses []*Response
	next      int
	scripted  bool
	log       []*toolrun.Request
}

var (
	_ toolrun.Provider           = (*Provider)(nil)
	_ toolrun.ProviderToolLister = (*Provider)(nil)
)

// New returns a Provider serving responses in order, with default options.
func New(responses ...*Response) *Provider {
	return NewWithOptions(nil, responses...)
}

// NewWithOptions returns a Provider serving responses in order; opts nil
// means defaults.
func NewWithOptions(opts *Options, responses ...*Response) *Provider {
	p := &Provider{}
	if opts != nil {
		p.opts = *opts
		p.opts.ProviderTools = cloneSpecs(opts.ProviderTools)
	}
	p.Add(responses...)
	return p
}

// Add appends responses to the script. Each is copied.
func (p *Provider) Add(responses ...*Response) {
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

// Requests returns deep copies of the requests received so far, oldest first.
func (p *Provider) Requests() []*toolrun.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*toolrun.Request, len(p.log))
	for i, r := range p.log {
		out[i] = cloneRequest(r)
	}
	return out
}

// LastRequest returns a deep copy of the latest request, or nil if none
// has been received.
func (p *Provider) LastRequest() *toolrun.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.log) == 0 {
		return nil
	}
	return cloneRequest(p.log[len(p.log)-1])
}

// Remaining returns the number of responses not yet served.
func (p *Provider) Remaining() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.responses) - p.next
}

// Done reports whether every scripted response has been served.
func (p *Provider) Done() bool { return p.Remaining() == 0 }

// Reset rewinds the script to its first response and clears the request log.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = 0
	p.log = nil
}

// Stream serves the next response. The request is logged and the response
// taken when the sequence is iterated (each iteration is one request); if
// ctx is already cancelled nothing is logged or taken and the sequence
// yields ctx's error.
func (p *Provider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	return func(yield func(toolrun.Chunk, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(toolrun.Chunk{}, err)
			return
		}
		logged := cloneRequest(req)
		p.mu.Lock()
		p.log = append(p.log, logged)
		var resp *Response
		n := p.next
		switch {
		case !p.scripted:
			resp = Text(DefaultText)
		case p.next < len(p.responses):
			resp = p.responses[p.next]
			p.next++
		}
		p.mu.Unlock()

		if resp == nil {
			yield(toolrun.Chunk{}, &toolrun.ProviderError{
				Provider: Name,
				Code:     "invalid_request",
				Message:  fmt.Sprintf("Script exhausted after %d responses", n),
			})
			return
		}
		s := streamer{ctx: ctx, yield: yield, p: p, resp: resp}
		s.run(cloneRequest(req), n)
	}
}

type streamer struct {
	ctx   context.Context
	yield func(toolrun.Chunk, error) bool
	p     *Provider
	resp  *Response
}

// emit yields c unless ctx is cancelled; it reports whether to go on.
func (s *streamer) emit(c toolrun.Chunk) bool {
	if err := s.ctx.Err(); err != nil {
		s.yield(toolrun.Chunk{}, err)
		return false
	}
	return s.yield(c, nil)
}

// sleep waits d; on cancellation it yields ctx's error and reports false.
func (s *streamer) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		s.yield(toolrun.Chunk{}, s.ctx.Err())
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

// deltas emits parts built by mk, waiting the chunk delay between them.
func (s *streamer) deltas(parts []string, mk func(string) toolrun.Chunk) bool {
	for i, part := range parts {
		if i > 0 && !s.sleep(s.chunkDelay()) {
			return false
		}
		if !s.emit(mk(part)) {
			return false
		}
	}
	return true
}

func (s *streamer) run(req *toolrun.Request, index int) {
	r := s.resp
	if r.Check != nil {
		if err := r.Check(req); err != nil {
			s.yield(toolrun.Chunk{}, &toolrun.ProviderError{
				Provider: Name,
				Code:     "invalid_request",
				Message:  fmt.Sprintf("request %d did not meet the script's expectation: %v", index+1, err),
				Err:      err,
			})
			return
		}
	}
	if r.Gate != nil {
		if err := r.Gate(s.ctx); err != nil {
			s.yield(toolrun.Chunk{}, err)
			return
		}
	}
	if !s.sleep(r.Delay) {
		return
	}
	size := s.chunkSize()
	if r.Text != "" && !s.deltas(split(r.Text, size), func(t string) toolrun.Chunk {
		return toolrun.Chunk{Type: toolrun.ChunkText, Text: t}
	}) {
		return
	}
	if r.Reasoning != "" && !s.deltas(split(r.Reasoning, size), func(t string) toolrun.Chunk {
		return toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: t}
	}) {
		return
	}
	var argChars int
	for i, tc := range r.ToolCalls {
		id := tc.ID
		if id == "" {
			id = s.p.newCallID()
		}
		if !s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCallStart, Index: i, ToolCall: toolrun.ToolCall{ID: id, Name: tc.Name}}) {
			return
		}
		args := tc.arguments()
		argChars += utf8.RuneCountInString(args) + utf8.RuneCountInString(tc.Name)
		var parts []string
		switch {
		case len(tc.Fragments) > 0:
			parts = tc.Fragments
		case size > 0 && args != "":
			parts = split(args, size)
		}
		if !s.deltas(parts, func(a string) toolrun.Chunk {
			return toolrun.Chunk{Type: toolrun.ChunkToolCallDelta, Index: i, ToolCall: toolrun.ToolCall{ID: id, Name: tc.Name, Arguments: a}}
		}) {
			return
		}
		if !s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCall, Index: i, ToolCall: toolrun.ToolCall{ID: id, Name: tc.Name, Arguments: args}}) {
			return
		}
	}
	if r.Error != nil {
		e := *r.Error
		e.Provider = Name
		if e.Code == "" {
			e.Code = "unknown"
		}
		s.yield(toolrun.Chunk{}, &e)
		return
	}
	for i, pt := range r.ProviderTools {
		pt := pt
		if pt.Metadata != nil {
			pt.Metadata = cloneMap(pt.Metadata)
		}
		if !s.emit(toolrun.Chunk{Type: toolrun.ChunkProviderTool, Index: i, ProviderTool: &pt}) {
			return
		}
	}
	var u toolrun.Usage
	if r.Usage != nil {
		u = *r.Usage
	} else {
		u = toolrun.Usage{
			InputTokens:     tokens(inputChars(req)),
			OutputTokens:    tokens(utf8.RuneCountInString(r.Text) + utf8.RuneCountInString(r.Reasoning) + argChars),
			ReasoningTokens: tokens(utf8.RuneCountInString(r.Reasoning)),
		}
	}
	if !s.emit(toolrun.Chunk{Type: toolrun.ChunkUsage, Usage: &u}) {
		return
	}
	finish := r.FinishReason
	if finish == "" {
		finish = "stop"
		if len(r.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	s.emit(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: finish})
}

func (p *Provider) newCallID() string {
	if p.opts.NewCallID != nil {
		return p.opts.NewCallID()
	}
	var b [4]byte
	rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// tokens estimates a token count from a character count: about four
// characters per token, rounded up.
func tokens(chars int) int { return (chars + 3) / 4 }

// inputChars counts the characters of what a request sends.
func inputChars(req *toolrun.Request) int {
	n := utf8.RuneCountInString(req.System)
	for _, m := range req.Messages {
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

// split cuts s into pieces of at most size runes; size <= 0 means one piece.
func split(s string, size int) []string {
	if size <= 0 || utf8.RuneCountInString(s) <= size {
		return []string{s}
	}
	var parts []string
	for s != "" {
		i, n := 0, 0
		for i < len(s) && n < size {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			n++
		}
		parts = append(parts, s[:i])
		s = s[i:]
	}
	return parts
}

// cloneRequest copies a request deeply: messages, their tool calls,
// attachments and metadata, tools and their parameters.
func cloneRequest(r *toolrun.Request) *toolrun.Request {
	if r == nil {
		return &toolrun.Request{}
	}
	c := *r
	if r.Messages != nil {
		c.Messages = make([]toolrun.Message, len(r.Messages))
		for i, m := range r.Messages {
			if m.ToolCalls != nil {
				m.ToolCalls = append([]toolrun.ToolCall(nil), m.ToolCalls...)
			}
			if m.Attachments != nil {
				m.Attachments = append([]toolrun.AttachmentRef(nil), m.Attachments...)
			}
			if m.Metadata != nil {
				m.Metadata = cloneMap(m.Metadata)
			}
			c.Messages[i] = m
		}
	}
	c.Tools = cloneSpecs(r.Tools)
	if r.ParallelToolCalls != nil {
		b := *r.ParallelToolCalls
		c.ParallelToolCalls = &b
	}
	return &c
}

func cloneSpecs(specs []toolrun.ToolSpec) []toolrun.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]toolrun.ToolSpec, len(specs))
	for i, t := range specs {
		if t.Parameters != nil {
			t.Parameters = append(json.RawMessage(nil), t.Parameters...)
		}
		out[i] = t
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

// cloneValue copies the mutable containers JSON-like values are built from.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []string:
		return append([]string(nil), x...)
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out
	case json.RawMessage:
		return append(json.RawMessage(nil), x...)
	case []byte:
		return append([]byte(nil), x...)
	}
	return v
}
