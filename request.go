package toolrun

import (
	"context"
	"strings"
)

// buildRequest assembles the next model request of a turn: the prompt's
// text with the thread's arguments, the tools the request offers, and the
// history the prompt includes as the acting side sees it. The request is
// made in the turn's scratch, which its next request reuses: the provider
// keeps nothing of one once its stream has ended.
func (rt *Runtime) buildRequest(ctx context.Context, ts *turnState, tools *toolset) (*Request, error) {
	args := ts.th.Arguments
	sc := ts.rows.scratchOf()
	req := &sc.req
	*req = Request{
		Model:             ts.model.ID,
		ThreadID:          ts.th.ID,
		System:            interpolate(ts.prompt.Text, args),
		ToolChoice:        ts.prompt.ToolChoice,
		ParallelToolCalls: ts.prompt.ParallelToolCalls,
	}
	sc.specs = tools.specsInto(sc.specs)
	if req.Tools = sc.specs; len(req.Tools) == 0 {
		req.Tools, req.ToolChoice = nil, ""
	}
	msgs, err := rt.history(ctx, ts)
	if err != nil {
		return nil, err
	}
	req.Messages = msgs
	return req, nil
}

func sideOf(m *Message) string { return m.Side }

// perspective turns stored rows into what the acting side sees: its own
// turns as assistant, the other side's as user; only its own tool calls and
// results; tool calls paired with results, missing ones synthesised,
// orphans dropped, queued results shown as a synthetic call block. The
// rows may come in several segments, in order.
func perspective(side string, pastTools bool, segs ...[]Message) []Message {
	var v view
	v.add(side, pastTools, segs...)
	return v.out
}

// view is the perspective of the rows a turn has read, kept between its
// requests so that the rows a later request adds are turned only once.
type view struct {
	out    []Message // the perspective of the rows added so far
	called idSet     // ids of the calls of the assistant rows added
	// clean reports that more rows can only add to out: every call of the
	// rows added has its result among them, and no run of queued results
	// was still open at their end.
	clean bool
}

// add turns segs, which follow the rows added before (when v is clean) or
// are all the rows (when v is new), and appends their perspective to out.
func (v *view) add(side string, pastTools bool, segs ...[]Message) {
	// The rows' results by call id and the ids of their calls, counted
	// first so that the map and the list are allocated once each.
	called := &v.called
	n, nres, ncalls := 0, 0, 0
	for _, rows := range segs {
		n += len(rows)
		for i := range rows {
			switch m := &rows[i]; {
			case m.Role == RoleTool && m.ToolCallID != "":
				nres++
			case m.Role == RoleAssistant:
				ncalls += len(m.ToolCalls)
			}
		}
	}
	results := make(map[string]*Message, nres) // up to 8 on the stack
	if ncalls > 0 {
		called.k.grow(ncalls)
	}
	for _, rows := range segs {
		for i := range rows {
			m := &rows[i]
			if m.Role == RoleTool && m.ToolCallID != "" {
				results[m.ToolCallID] = m
			}
			if m.Role == RoleAssistant {
				for _, c := range m.ToolCalls {
					called.add(c.ID)
				}
			}
		}
	}
	out := v.out
	if cap(out)-len(out) < n {
		// Room for these rows, and for a few more steps' rows after them.
		out = append(make([]Message, 0, viewRoom(len(out)+n)), out...)
	}
	clean := true
	var queued []Message    // a run of queued results waiting for their synthetic call block
	var queuedArgs []string // their calls' (redacted) arguments
	flushQueued := func() {
		if len(queued) == 0 {
			return
		}
		calls := make([]ToolCall, len(queued))
		for i, q := range queued {
			calls[i] = ToolCall{ID: q.ToolCallID, Name: q.Name, Arguments: queuedArgs[i]}
		}
		out = append(out, Message{})
		out[len(out)-1].Role, out[len(out)-1].ToolCalls = RoleAssistant, calls
		out = append(out, queued...)
		queued, queuedArgs = nil, nil
	}
	for _, rows := range segs {
		for i := range rows {
			m := &rows[i]
			own := sideOf(m) == side || sideOf(m) == ""
			switch m.Role {
			case RoleTool:
				if !pastTools || !own {
					continue
				}
				if m.Queued && !called.has(m.ToolCallID) {
					queued = appendModel(queued, m)
					queuedArgs = append(queuedArgs, m.Arguments)
				}
				// Results of model calls are emitted after their call; orphans are dropped.
				continue
			case RoleAssistant:
				flushQueued()
				if !own {
					if strings.TrimSpace(m.Content) != "" {
						out = append(out, Message{})
						d := &out[len(out)-1]
						d.Role, d.Content, d.Attachments = RoleUser, m.Content, m.Attachments
					}
					continue
				}
				if !pastTools {
					if strings.TrimSpace(m.Content) == "" {
						continue
					}
					out = appendModel(out, m)
					out[len(out)-1].ToolCalls = nil
					continue
				}
				out = appendModel(out, m)
				for _, c := range m.ToolCalls {
					if r := results[c.ID]; r != nil {
						out = appendModel(out, r)
					} else {
						clean = false // its result may come later
						out = append(out, missingResult(c))
					}
				}
			case RoleUser:
				flushQueued()
				if sideOf(m) == side && side == "b" {
					// Side B's own messages are its assistant turns.
					out = append(out, Message{})
					d := &out[len(out)-1]
					d.Role, d.Content, d.Attachments = RoleAssistant, m.Content, m.Attachments
					continue
				}
				out = appendModel(out, m)
			default:
				if isStopRecord(m) {
					continue // bookkeeping for Resume: the model never sees it
				}
				flushQueued()
				out = appendModel(out, m)
			}
		}
	}
	if len(queued) > 0 {
		clean = false // more queued results would join this run's block
	}
	flushQueued()
	v.out, v.clean = out, clean
}

// appendModel appends to out the fields of m a provider needs, without a
// Message temporary on the stack.
func appendModel(out []Message, m *Message) []Message {
	out = append(out, Message{})
	d := &out[len(out)-1]
	d.ID, d.Role, d.Content, d.ToolCalls, d.ToolCallID = m.ID, m.Role, m.Content, m.ToolCalls, m.ToolCallID
	d.Name, d.ToolStatus, d.Attachments = m.Name, m.ToolStatus, m.Attachments
	return out
}
