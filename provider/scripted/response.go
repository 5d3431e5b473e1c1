package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
)

// Response is one scripted model response. Build it with [Text], [Calls],
// [Fragments], [Reasoning] or [Fail] and refine it with the chaining methods,
// or write the struct literally. A Provider copies a Response when it is
// added to a script, so changing it afterwards does not change the script;
// a responder's responses ([NewFunc]) are not copied, only read.
//
// Streaming order: text deltas, reasoning deltas, then for each tool call a
// start chunk, argument deltas (when the call has Fragments or ChunkSize is
// set) and the complete call; then provider tools, usage and finish. If
// Error is set, whatever text, reasoning and calls the response has are
// streamed first and the sequence then ends with the error instead of usage
// and finish.
//
// The chaining methods modify the Response they are called on and return
// it; a Response is not safe for concurrent modification.
type Response struct {
	// Text is the assistant content.
	Text string
	// Reasoning is the reasoning text, streamed after the content.
	Reasoning string
	// ToolCalls are the calls the model makes.
	ToolCalls []ToolCall
	// ProviderTools are tools the provider executed itself, streamed as
	// ChunkProviderTool after the calls.
	ProviderTools []toolrun.ProviderToolCall
	// Usage is reported as given; nil means estimated at about four
	// characters per token.
	Usage *toolrun.Usage
	// FinishReason overrides the finish reason; "" means "tool_calls" when
	// there are tool calls and "stop" otherwise.
	FinishReason string
	// Error, when set, ends the response with a copy of it (Provider set to
	// "scripted", Code "unknown" when empty).
	Error *toolrun.ProviderError

	// Delay is waited before the first chunk.
	Delay time.Duration
	// ChunkSize, when positive, splits the text, the reasoning and the
	// arguments of calls without Fragments into deltas of at most that many
	// characters (runes). 0 uses the provider's Options.ChunkSize.
	ChunkSize int
	// ChunkDelay is waited between deltas; 0 uses Options.ChunkDelay.
	ChunkDelay time.Duration

	// Check, when set, is called with (a copy of) the request; an error ends
	// the response with a *toolrun.ProviderError with code
	// "invalid_request" that wraps it.
	Check func(*toolrun.Request) error
	// Gate, when set, is called once the request has been received (and
	// kept, when the Provider keeps requests) and Check has passed, before
	// anything is streamed; the response waits until it returns. A non-nil
	// error ends the sequence with that error. The context is the Stream
	// context.
	Gate func(ctx context.Context) error
}

// ToolCall is a scripted tool call. It is a plain value; a Provider copies
// it when the Response holding it is added.
type ToolCall struct {
	// ID is the call id; "" means generated (call_<8 hex> unless
	// Options.NewCallID says otherwise), fresh for every request.
	ID string
	// Name is the tool name.
	Name string
	// Arguments is the JSON text of the arguments, sent verbatim.
	Arguments string
	// Fragments, when non-empty, are streamed as argument deltas one by one,
	// and the complete call carries their concatenation (Arguments is then
	// ignored). Nothing checks that the result is valid JSON.
	Fragments []string
}

// Call returns a call of the named tool with args encoded as JSON. A nil
// args means {}. Call panics if args cannot be encoded; use [RawCall] for
// argument text that is already JSON.
func Call(name string, args any) ToolCall {
	if args == nil {
		return ToolCall{Name: name, Arguments: "{}"}
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("scripted.Call(%q): %v", name, err))
	}
	return ToolCall{Name: name, Arguments: string(b)}
}

// RawCall returns a call of the named tool whose argument text is arguments,
// sent verbatim even if it is not valid JSON.
func RawCall(name, arguments string) ToolCall {
	return ToolCall{Name: name, Arguments: arguments}
}

// FragmentCall returns a call of the named tool whose arguments are streamed
// as the given deltas; the complete call carries their concatenation.
func FragmentCall(name string, fragments ...string) ToolCall {
	return ToolCall{Name: name, Fragments: append([]string(nil), fragments...)}
}

// WithID returns c with its id set.
func (c ToolCall) WithID(id string) ToolCall {
	c.ID = id
	return c
}

func (c ToolCall) arguments() string {
	if len(c.Fragments) > 0 {
		return strings.Join(c.Fragments, "")
	}
	return c.Arguments
}

// Text returns a response with content text that finishes with "stop".
func Text(text string) *Response {
	return &Response{Text: text}
}

// Reasoning returns a response with content text and reasoning that
// finishes with "stop".
func Reasoning(text, reasoning string) *Response {
	return &Response{Text: text, Reasoning: reasoning}
}

// Calls returns a response that makes the given tool calls and finishes
// with "tool_calls". Add content text with [Response.WithText].
func Calls(calls ...ToolCall) *Response {
	return &Response{ToolCalls: append([]ToolCall(nil), calls...)}
}

// Fragments returns a response with one call of the named tool whose
// arguments are streamed as the given deltas; the complete call carries
// their concatenation, valid JSON or not.
func Fragments(name string, fragments ...string) *Response {
	return Calls(FragmentCall(name, fragments...))
}

// ErrorOptions describe a scripted provider error. The zero value means
// code "unknown", no status and not retryable. Fail copies the fields, so
// the value may be reused.
type ErrorOptions struct {
	// Code is the error code; "" means "unknown".
	Code string
	// Status is the HTTP status, or 0.
	Status int
	// Retryable reports whether the same request may succeed later.
	Retryable bool
	// RetryAfter is the wait the provider asks for, or 0.
	RetryAfter time.Duration
}

// Fail returns a response that fails with a *toolrun.ProviderError carrying
// message and the options (nil means defaults).
func Fail(message string, opts *ErrorOptions) *Response {
	if opts == nil {
		opts = &ErrorOptions{}
	}
	return &Response{Error: &toolrun.ProviderError{
		Message:    message,
		Code:       opts.Code,
		Status:     opts.Status,
		Retryable:  opts.Retryable,
		RetryAfter: opts.RetryAfter,
	}}
}

// WithText sets the content text.
func (r *Response) WithText(text string) *Response {
	r.Text = text
	return r
}

// WithReasoning sets the reasoning text.
func (r *Response) WithReasoning(reasoning string) *Response {
	r.Reasoning = reasoning
	return r
}

// WithProviderTools adds tools the provider executed itself.
func (r *Response) WithProviderTools(tools ...toolrun.ProviderToolCall) *Response {
	r.ProviderTools = append(r.ProviderTools, tools...)
	return r
}

// WithUsage sets the usage reported instead of the estimate.
func (r *Response) WithUsage(u toolrun.Usage) *Response {
	r.Usage = &u
	return r
}

// WithFinish sets the finish reason.
func (r *Response) WithFinish(reason string) *Response {
	r.FinishReason = reason
	return r
}

// WithDelay sets the wait before the first chunk.
func (r *Response) WithDelay(d time.Duration) *Response {
	r.Delay = d
	return r
}

// WithChunks streams text, reasoning and arguments in deltas of at most
// size runes, waiting delay between deltas.
func (r *Response) WithChunks(size int, delay time.Duration) *Response {
	r.ChunkSize, r.ChunkDelay = size, delay
	return r
}

// Expect sets a check run on the request before anything is streamed; an
// error fails the response with code "invalid_request".
func (r *Response) Expect(check func(*toolrun.Request) error) *Response {
	r.Check = check
	return r
}

// Wait holds the response, once its request has been received, until ch
// is closed or receives a value, or the Stream context is cancelled.
func (r *Response) Wait(ch <-chan struct{}) *Response {
	r.Gate = func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r
}

// WaitFunc holds the response, once its request has been received, until f
// returns; a non-nil error from f ends the sequence with that error.
func (r *Response) WaitFunc(f func(ctx context.Context) error) *Response {
	r.Gate = f
	return r
}

// clone copies r so that later changes by the caller do not reach the
// script.
func (r *Response) clone() *Response {
	c := *r
	c.ToolCalls = make([]ToolCall, len(r.ToolCalls))
	for i, tc := range r.ToolCalls {
		tc.Fragments = append([]string(nil), tc.Fragments...)
		c.ToolCalls[i] = tc
	}
	c.ProviderTools = make([]toolrun.ProviderToolCall, len(r.ProviderTools))
	for i, pt := range r.ProviderTools {
		if pt.Metadata != nil {
			pt.Metadata = cloneMap(pt.Metadata)
		}
		c.ProviderTools[i] = pt
	}
	if r.Usage != nil {
		u := *r.Usage
		c.Usage = &u
	}
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	return &c
}
