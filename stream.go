package toolrun

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/toolrun/toolrun/internal/partialjson"
)

// stream sends req and collects the response, firing tool_call_started as
// each call's progress argument completes.
//
// The calls' names and progress arguments are read from tools, the tools
// the request offers: a call of a name the request did not offer gets no
// tool_call_started (the allowed-tools gate refuses it).
func (rt *Runtime) stream(ctx context.Context, ts *turnState, b *batch, tools *toolset, req *Request) (string, []ToolCall, error) {
	type pendingCall struct {
		call    ToolCall
		rawID   string // the id the provider gave
		args    strings.Builder
		scan    partialjson.Scanner
		key     string
		fed     bool // the scanner read the streamed deltas
		fired   bool
		started bool
	}
	var text strings.Builder
	calls := map[int]*pendingCall{}
	ids := map[string]bool{} // ids given to this response's calls
	var order []int
	get := func(i int) *pendingCall {
		pc := calls[i]
		if pc == nil {
			pc = &pendingCall{}
			calls[i] = pc
			order = append(order, i)
		}
		return pc
	}
	fire := func(pc *pendingCall, progress *string) {
		if pc.fired {
			return
		}
		pc.fired = true
		if tools.offered[pc.call.Name] == nil {
			return // refused by the allowed-tools gate: no start and no done
		}
		b.markStarted(pc.call.ID)
		rt.ex.emitStarted(ctx, b, ToolCallStarted{ID: pc.call.ID, Name: pc.call.Name, Progress: progress, Arguments: pc.args.String()})
	}
	progressKey := func(name string) string {
		if h := tools.offered[name]; h != nil {
			return h.progress
		}
		return ""
	}
	sctx, span := rt.startChatSpan(ctx, ts)
	defer span.End()
	for ch, err := range ts.model.Provider.Stream(sctx, req) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			return "", nil, &modelError{model: ts.model.Name, err: err}
		}
		switch ch.Type {
		case ChunkText:
			text.WriteString(ch.Text)
		case ChunkToolCallStart:
			pc := get(ch.Index)
			pc.rawID, pc.call.Name = ch.ToolCall.ID, ch.ToolCall.Name
			if pc.call.ID, err = rt.uniqueCallID(ctx, ts.th.ID, pc.rawID, ids); err != nil {
				return "", nil, err
			}
			pc.started = true
			pc.key = progressKey(pc.call.Name)
			if pc.key == "" {
				fire(pc, nil)
			}
		case ChunkToolCallDelta:
			pc := get(ch.Index)
			pc.args.WriteString(ch.ToolCall.Arguments)
			if pc.key != "" && !pc.fired {
				if !pc.fed {
					countParse("stream") // one scan, fed piece by piece
				}
				pc.fed = true
				pc.scan.Feed(ch.ToolCall.Arguments)
				if v, st := pc.scan.Value(pc.key); st == partialjson.Complete {
					fire(pc, &v)
				}
			}
		case ChunkToolCall:
			pc := get(ch.Index)
			if pc.call.ID == "" || ch.ToolCall.ID != "" && ch.ToolCall.ID != pc.rawID {
				pc.rawID = ch.ToolCall.ID
				if pc.call.ID, err = rt.uniqueCallID(ctx, ts.th.ID, pc.rawID, ids); err != nil {
					return "", nil, err
				}
				if pc.fired {
					b.markStarted(pc.call.ID) // the start already fired under the first id
				}
			}
			if ch.ToolCall.Name != "" {
				pc.call.Name = ch.ToolCall.Name
			}
			pc.call.Arguments = ch.ToolCall.Arguments
		case ChunkProviderTool:
			if ch.ProviderTool != nil {
				rt.log.InfoContext(ctx, "toolrun: provider tool", "thread", ts.th.ID, "name", ch.ProviderTool.Name, "id", ch.ProviderTool.ID, "status", ch.ProviderTool.Status)
			}
		case ChunkUsage:
			if ch.Usage != nil && span.IsRecording() {
				span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", ch.Usage.InputTokens), attribute.Int("gen_ai.usage.output_tokens", ch.Usage.OutputTokens))
			}
		case ChunkFinish:
			if span.IsRecording() {
				span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{ch.FinishReason}))
			}
		}
	}
	out := make([]ToolCall, 0, len(order))
	for _, i := range order {
		pc := calls[i]
		if pc.call.Name == "" {
			continue
		}
		if pc.call.Arguments == "" {
			pc.call.Arguments = pc.args.String()
		}
		if !pc.fired {
			if pc.key == "" {
				pc.key = progressKey(pc.call.Name) // a call that never streamed its start
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
			fire(pc, progress)
		}
		out = append(out, pc.call)
	}
	return text.String(), out, nil
}

// uniqueCallID returns the id a call of the response being streamed runs
// under: the provider's id unless an earlier call of the response has it or
// a stored result on the thread answers it (servers that number the calls
// of every response call_0, call_1 …); then a new id derived from it. Only a
// call resumed from its stored assistant message keeps the id of a stored
// result. seen holds the ids given so far.
func (rt *Runtime) uniqueCallID(ctx context.Context, threadID, id string, seen map[string]bool) (string, error) {
	if !safeID(id) {
		id = newRecordID("call")
	}
	for {
		taken := seen[id]
		if !taken {
			_, err := rt.store.ToolResult(ctx, threadID, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return "", &StoreError{Op: "look up tool result " + id, Err: err}
			}
			taken = err == nil
		}
		if !taken {
			seen[id] = true
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
