package toolrun

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/toolrun/toolrun/internal/partialjson"
	"github.com/toolrun/toolrun/internal/safefmt"
)

// pendingCall is a tool call of the response being streamed.
type pendingCall struct {
	call    ToolCall
	rawID   string // the id the provider gave
	args    strings.Builder
	scan    partialjson.Scanner
	key     string
	fed     bool // the scanner read the streamed deltas
	fired   bool
	started bool
	size    int // the bytes of the call counted in its response's size
}

// DefaultMaxResponseBytes is the bound of RuntimeOptions.MaxResponseBytes,
// 64 MiB: the size of a whole JSON response the providers refuse past.
const DefaultMaxResponseBytes = 64 << 20

// response collects one streamed model response of a turn. A turn keeps
// one and uses it for each of its requests, so that a request allocates
// only for the calls its response makes.
type response struct {
	rt    *Runtime
	ctx   context.Context
	ts    *turnState
	b     *batch
	tools *toolset
	text  strings.Builder
	calls keyed[int, *pendingCall] // by stream index, in the order they first streamed
	ids   idSet                    // ids given to the response's calls
	err   error                    // what ended the stream early
	// nameless counts the calls that streamed no name, which are left out:
	// no tool answers to "", and a provider would refuse the call sent back.
	nameless int
	made     int // pending calls taken from the turn's scratch for this response
	size     int // the bytes counted against max so far
	max      int // the runtime's MaxResponseBytes
}

// grow counts n more bytes of the response, and fails when they take it
// past its limit.
func (r *response) grow(n int) error {
	if r.size += n; r.size > r.max {
		return &modelError{model: r.ts.model.Name, err: fmt.Errorf("the response is larger than %d bytes, the limit of RuntimeOptions.MaxResponseBytes", r.max)}
	}
	return nil
}

// growCall counts n more bytes of the call pc.
func (r *response) growCall(pc *pendingCall, n int) error {
	pc.size += n
	return r.grow(n)
}

// call returns the pending call of stream index i, added when it is new.
// The calls of a response are made in the turn's scratch, and made again
// for its next response, whose stream starts after the calls of this one
// were read (finish).
func (r *response) call(i int) (*pendingCall, error) {
	pc, ok := r.calls.find(i)
	if !ok {
		// A call costs what its bookkeeping does even when it streams no
		// byte: an endless run of empty calls is bounded too.
		if err := r.grow(callOverhead); err != nil {
			return nil, err
		}
		pc = r.spareCall()
		r.calls.add(i, pc)
	}
	return pc, nil
}

// callOverhead is what a call counts in its response's size before any of
// its bytes: about the memory its bookkeeping takes.
const callOverhead = 256

// spareCall returns an empty pending call from the turn's scratch, made
// there when the scratch has none to spare.
func (r *response) spareCall() *pendingCall {
	if r.ts == nil { // a response outside a turn
		return new(pendingCall)
	}
	l := r.ts.rows.scratchOf()
	if r.made == len(l.calls) {
		l.calls = append(l.calls, new(pendingCall))
	}
	pc := l.calls[r.made]
	r.made++
	*pc = pendingCall{}
	return pc
}

// fire emits tool_call_started for pc, once; a call the request did not
// offer gets none (the allowed-tools gate refuses it). partial tells that
// the call's arguments still stream: the event carries those streamed so
// far, where a secret cut by their end is hidden as a whole one is.
func (r *response) fire(pc *pendingCall, progress *string, partial bool) {
	if pc.fired {
		return
	}
	pc.fired = true
	if r.tools.offered(pc.call.Name) == nil {
		return // refused by the allowed-tools gate: no start and no done
	}
	args := pc.args.String()
	if !partial {
		args = pc.call.Arguments // whole, even when the call did not stream in pieces
	}
	r.b.markStarted(pc.call.ID)
	r.rt.ex.emitStarted(r.ctx, r.b, ToolCallStarted{ID: pc.call.ID, Name: pc.call.Name, Progress: progress, Arguments: args}, partial)
}

// progressKey returns the progress argument of the offered tool name.
func (r *response) progressKey(name string) string {
	if h := r.tools.offered(name); h != nil {
		return h.progress
	}
	return ""
}

// add applies one chunk of the stream.
func (r *response) add(ch *Chunk) error {
	switch ch.Type {
	case ChunkText:
		if err := r.grow(len(ch.Text)); err != nil {
			return err
		}
		r.text.WriteString(ch.Text)
	case ChunkReasoning:
		// Reasoning is not kept, but a response is bounded whatever it holds.
		return r.grow(len(ch.Text))
	case ChunkToolCallStart:
		pc, err := r.call(ch.Index)
		if err != nil {
			return err
		}
		if err := r.growCall(pc, len(ch.ToolCall.ID)+len(ch.ToolCall.Name)); err != nil {
			return err
		}
		pc.rawID, pc.call.Name = ch.ToolCall.ID, ch.ToolCall.Name
		if pc.call.ID, err = r.rt.uniqueCallID(r.ctx, r.ts.th.ID, pc.rawID, &r.ids); err != nil {
			return err
		}
		pc.started = true
		pc.key = r.progressKey(pc.call.Name)
		if pc.key == "" {
			r.fire(pc, nil, true)
		}
	case ChunkToolCallDelta:
		pc, err := r.call(ch.Index)
		if err != nil {
			return err
		}
		if err := r.growCall(pc, len(ch.ToolCall.Arguments)); err != nil {
			return err
		}
		pc.args.WriteString(ch.ToolCall.Arguments)
		if pc.key != "" && !pc.fired {
			if !pc.fed {
				countParse("stream") // one scan, fed piece by piece
			}
			pc.fed = true
			pc.scan.Feed(ch.ToolCall.Arguments)
			if v, st := pc.scan.Value(pc.key); st == partialjson.Complete {
				r.fire(pc, &v, true)
			}
		}
	case ChunkToolCall:
		pc, err := r.call(ch.Index)
		if err != nil {
			return err
		}
		// The whole call repeats what of it streamed: only what it holds
		// more counts.
		if n := len(ch.ToolCall.ID) + len(ch.ToolCall.Name) + len(ch.ToolCall.Arguments); n > pc.size {
			if err := r.growCall(pc, n-pc.size); err != nil {
				return err
			}
		}
		if pc.call.ID == "" || ch.ToolCall.ID != "" && ch.ToolCall.ID != pc.rawID {
			pc.rawID = ch.ToolCall.ID
			if pc.call.ID, err = r.rt.uniqueCallID(r.ctx, r.ts.th.ID, pc.rawID, &r.ids); err != nil {
				return err
			}
			if pc.fired {
				r.b.markStarted(pc.call.ID) // the start already fired under the first id
			}
		}
		if ch.ToolCall.Name != "" {
			pc.call.Name = ch.ToolCall.Name
		}
		pc.call.Arguments = ch.ToolCall.Arguments
	case ChunkProviderTool:
		if ch.ProviderTool != nil {
			r.rt.log.InfoContext(r.ctx, "toolrun: provider tool", "thread", r.ts.th.ID, "name", ch.ProviderTool.Name, "id", ch.ProviderTool.ID, "status", ch.ProviderTool.Status)
		}
	}
	return nil
}

// finish returns the response's text and calls, firing the starts of the
// calls whose progress argument never completed while they streamed.
func (r *response) finish() (string, []ToolCall) {
	out := make([]ToolCall, 0, len(r.calls.entries))
	for _, e := range r.calls.entries {
		pc := e.val
		if pc.call.Name == "" {
			r.nameless++
			continue
		}
		if pc.call.Arguments == "" {
			pc.call.Arguments = pc.args.String()
		}
		if !pc.fired {
			if pc.key == "" {
				pc.key = r.progressKey(pc.call.Name) // a call that never streamed its start
			}
			var progress *string
			if pc.key != "" {
				// The scanner has read what streamed; a call that came whole
				// is read now, once.
				if !pc.fed {
					countParse("stream")
					pc.scan.Feed(pc.call.Arguments)
				}
				if v, st := pc.scan.Value(pc.key); st == partialjson.Complete {
					progress = &v
				} else if pc.scan.Truncated() {
					// Past the scanner's cap the complete text is read.
					progress = progressOf(pc.call.Arguments, pc.key)
				}
			}
			r.fire(pc, progress, false)
		}
		// The name is stored in the assistant message and sent back to the
		// model as the executor runs it: cleaned, as its result's is.
		pc.call.Name = cleanName(pc.call.Name)
		out = append(out, pc.call)
	}
	return r.text.String(), out
}

// stream sends req and collects the response, firing tool_call_started as
// each call's progress argument completes.
//
// The calls' names and progress arguments are read from tools, the tools
// the request offers: a call of a name the request did not offer gets no
// tool_call_started (the allowed-tools gate refuses it).
func (rt *Runtime) stream(ctx context.Context, ts *turnState, b *batch, tools *toolset, req *Request) (text string, calls []ToolCall, err error) {
	r := &ts.resp
	r.calls.reset()
	r.ids.reset()
	r.rt, r.ctx, r.ts, r.b, r.tools, r.text, r.nameless, r.made = rt, ctx, ts, b, tools, strings.Builder{}, 0, 0
	r.size, r.max = 0, rt.maxResp
	defer func() {
		// A turn kept by a tool does not keep these, nor the calls, which
		// go back to the turn's scratch.
		r.ctx, r.b, r.tools, r.err = nil, nil, nil, nil
		r.calls.reset()
	}()
	sctx, span := rt.startChatSpan(ctx, ts, b)
	defer span.End()
	// A provider is not trusted to behave: one that panics, or yields again
	// after the loop stopped (which makes the range statement panic), fails
	// the request instead of the process.
	defer func() {
		if p := recover(); p != nil {
			if r.err == nil {
				r.err = &modelError{model: ts.model.Name, err: fmt.Errorf("provider %s failed while streaming: %s", ts.model.Provider.Name(), safefmt.Sprint(p))}
			}
			span.SetStatus(codes.Error, r.err.Error())
			text, calls, err = "", nil, redactError(r.err, rt.ex.redactor(b))
		}
	}()
	// The loop's body is a function the provider calls: it keeps what it
	// needs in r and breaks, rather than return from stream, so that stream's
	// results are not moved to the heap for it.
	for ch, err := range ts.model.Provider.Stream(sctx, req) {
		if err == nil {
			// A provider that goes on after ctx ended is stopped here, with
			// the error a provider that honours ctx would end with.
			err = sctx.Err()
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			r.err = &modelError{model: ts.model.Name, err: err}
			break
		}
		switch ch.Type {
		case ChunkUsage:
			if ch.Usage != nil && span.IsRecording() {
				span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", ch.Usage.InputTokens), attribute.Int("gen_ai.usage.output_tokens", ch.Usage.OutputTokens))
			}
		case ChunkFinish:
			if span.IsRecording() {
				span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{ch.FinishReason}))
			}
		default:
			if r.err = r.add(&ch); r.err != nil {
				span.SetStatus(codes.Error, r.err.Error())
			}
		}
		if r.err != nil {
			break
		}
	}
	if r.err != nil {
		// A provider's error may quote what it was sent.
		return "", nil, redactError(r.err, rt.ex.redactor(b))
	}
	text, calls = r.finish()
	return text, calls, nil
}

// uniqueCallID returns the id a call of the response being streamed runs
// under: the provider's id unless an earlier call of the response has it or
// a stored result on the thread answers it (servers that number the calls
// of every response call_0, call_1 …); then a new id derived from it. Only a
// call resumed from its stored assistant message keeps the id of a stored
// result. seen holds the ids given so far.
func (rt *Runtime) uniqueCallID(ctx context.Context, threadID, id string, seen *idSet) (string, error) {
	if !safeID(id) {
		id = derivedID(id)
	}
	for {
		taken := seen.has(id)
		if !taken {
			_, err := rt.store.ToolResult(ctx, threadID, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return "", &StoreError{Op: "look up tool result " + id, Err: err}
			}
			taken = err == nil
		}
		if !taken {
			seen.add(id)
			return id, nil
		}
		id = reissuedID(id)
	}
}

// modelError is a failed model request: the model's name, then the
// provider's error, whose own "toolrun: " prefix is not repeated.
type modelError struct {
	model string
	err   error
}

func (e *modelError) Error() string {
	return "toolrun: model " + e.model + ": " + strings.TrimPrefix(e.err.Error(), "toolrun: ")
}

func (e *modelError) Unwrap() error { return e.err }
