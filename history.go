package toolrun

import (
	"context"
	"fmt"
)

// Window bounds the chat history a prompt's requests carry. The zero value
// sends the whole history.
//
// The window keeps the newest messages, as the model would see them, that
// fit both limits: whole groups, so an assistant message with tool calls
// is never sent without its results, nor results without their calls. The
// newest group is always kept, even when it alone exceeds a limit. A
// window may begin with an assistant message; providers whose API wants a
// user message first add one (provider/anthropic does).
type Window struct {
	// Messages keeps at most this many messages; 0 means no limit.
	Messages int
	// Tokens keeps messages whose estimated size (EstimateTokens) adds up
	// to at most this many tokens; 0 means no limit.
	Tokens int
	// Filter, when set, gets the windowed history (oldest first, as the
	// model will see it) and returns the messages to send instead: it may
	// drop, rewrite or summarise them. threadID is the thread's. A Filter
	// that fails ends the turn with its error, as a failed model request
	// does.
	Filter func(ctx context.Context, threadID string, history []Message) ([]Message, error)
}

func (w Window) bounded() bool { return w.Messages > 0 || w.Tokens > 0 }

// EstimateTokens is the size a Window's Tokens limit counts for a message:
// a quarter of the bytes of its content, name and tool calls (names and
// arguments), rounded up, plus 4 for the message itself and 256 per
// attachment. It is an estimate — tokenizers differ — meant to keep a
// history safely under a model's context, not to bill.
func EstimateTokens(m Message) int {
	n := len(m.Content) + len(m.Name)
	for _, c := range m.ToolCalls {
		n += len(c.Name) + len(c.Arguments)
	}
	return (n+3)/4 + 4 + 256*len(m.Attachments)
}

// window keeps the newest messages of msgs that fit w. limited reports
// that a limit left older messages out, so that messages older than msgs
// would be left out too.
func window(msgs []Message, w Window) (kept []Message, limited bool) {
	if !w.bounded() {
		return msgs, false
	}
	count, tokens := 0, 0
	i := len(msgs)
	for i > 0 {
		j := groupStart(msgs, i)
		gt := 0
		for _, m := range msgs[j:i] {
			gt += EstimateTokens(m)
		}
		if count > 0 && (w.Messages > 0 && count+(i-j) > w.Messages || w.Tokens > 0 && tokens+gt > w.Tokens) {
			limited = true
			break
		}
		count, tokens, i = count+(i-j), tokens+gt, j
	}
	return msgs[i:], limited
}

// groupStart returns where the group that ends at msgs[end-1] starts: an
// assistant message with tool calls and the results that follow it are one
// group; every other message is a group of its own.
func groupStart(msgs []Message, end int) int {
	j := end - 1
	if msgs[j].Role != RoleTool {
		return j
	}
	for j > 0 && msgs[j].Role == RoleTool {
		j--
	}
	if msgs[j].Role == RoleAssistant && len(msgs[j].ToolCalls) > 0 {
		return j
	}
	return j + 1 // results without their call message: a group of their own
}

// history returns the messages a request of the turn carries, as the
// acting side sees them. It reads only what it can send: with IncludeChat
// off, the messages stored since the turn began; with a Window, the newest
// rows, read in growing pages until the window is full or the thread has
// no more.
func (rt *Runtime) history(ctx context.Context, ts *turnState) ([]Message, error) {
	p := ts.prompt
	if !p.IncludeChat {
		// Only messages injected during this turn (prompt-local context).
		page, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, After: ts.turnStart, Order: OrderAsc})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		var local []Message
		for _, m := range page.Messages {
			if m.Role == RoleSystem || m.Role == RoleUser {
				local = append(local, m)
			}
		}
		return rt.filterHistory(ctx, ts, perspective(ts.sideKey, p.IncludePastTools, local))
	}
	kept, err := rt.chatWindow(ctx, ts)
	if err != nil {
		return nil, err
	}
	return rt.filterHistory(ctx, ts, kept)
}

// chatWindow returns the thread's chat as the acting side sees it, within
// the prompt's window. It reads the newest top-level rows the window can
// use (all of them without a window). A turn keeps the rows it read: its
// next request reads only the rows stored since, as a thread only ever
// grows at its end, and reads again from the newest row when the window
// might reach past the kept ones.
func (rt *Runtime) chatWindow(ctx context.Context, ts *turnState) ([]Message, error) {
	p := ts.prompt
	w := p.History
	view := func(segs ...[]Message) ([]Message, bool) {
		return window(perspective(ts.sideKey, p.IncludePastTools, segs...), w)
	}
	if c := &ts.rows; c.ok {
		page, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, After: c.last, Order: OrderAsc})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		if len(page.Messages) > 0 {
			c.segs = append(c.segs, page.Messages)
			c.last = lastSeqOf(page.Messages, c.last)
		}
		// Without older rows left out, the kept rows are the whole thread.
		if kept, limited := view(c.segs...); limited || !c.more {
			return kept, nil
		}
	}
	if !w.bounded() {
		page, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		ts.rows = turnRows{ok: true, segs: [][]Message{page.Messages}, last: lastSeqOf(page.Messages, 0)}
		kept, _ := view(page.Messages)
		return kept, nil
	}
	limit := 256
	if w.Messages > 0 {
		limit = w.Messages + 8 // room for a few rows the perspective drops
	}
	for {
		page, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, Limit: limit})
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		kept, limited := view(page.Messages)
		if limited || !page.HasMore {
			ts.rows = turnRows{ok: true, segs: [][]Message{page.Messages}, last: lastSeqOf(page.Messages, 0), more: page.HasMore}
			return kept, nil
		}
		limit *= 2
	}
}

// turnRows are the rows a turn read for its requests, in the pages it
// read them, oldest first.
type turnRows struct {
	ok   bool
	segs [][]Message
	last int64 // the Seq of the newest row read
	more bool  // older rows exist that rows leave out
}

func lastSeqOf(rows []Message, or int64) int64 {
	if len(rows) == 0 {
		return or
	}
	return rows[len(rows)-1].Seq
}

// filterHistory applies the prompt's history filter, if any.
func (rt *Runtime) filterHistory(ctx context.Context, ts *turnState, msgs []Message) ([]Message, error) {
	f := ts.prompt.History.Filter
	if f == nil {
		return msgs, nil
	}
	out, err := f(ctx, ts.th.ID, msgs)
	if err != nil {
		return nil, fmt.Errorf("toolrun: prompt %s: history filter: %w", ts.prompt.Name, err)
	}
	return out, nil
}
