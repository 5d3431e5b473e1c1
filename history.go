package toolrun

import (
	"context"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/toolrun/toolrun/internal/safefmt"
)

// Window bounds the chat history a prompt's requests carry. The zero value
// sends the whole history. A negative limit is refused when the prompt is
// registered: it would be read as no limit.
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
	// does; one that panics ends it with an error saying so.
	//
	// What a Filter returns is paired as the window is before it is sent,
	// because providers refuse a request that parts a tool call from its
	// result: each assistant message's calls are followed at once by their
	// results (taken from anywhere in what the Filter returned, each sent
	// once), a call without one by a failed result saying it is missing,
	// and results of calls not sent are dropped. A Filter that keeps the
	// newest messages by count can thus cut a group without breaking the
	// request.
	Filter func(ctx context.Context, threadID string, history []Message) ([]Message, error)
}

func (w Window) bounded() bool { return w.Messages > 0 || w.Tokens > 0 }

// EstimateTokens is the size a Window's Tokens limit counts for a message:
// a quarter of the bytes of its content, name and tool calls (names and
// arguments), rounded up, plus 4 for the message itself and 256 per
// attachment. It is an estimate — tokenizers differ — meant to keep a
// history safely under a model's context, not to bill.
func EstimateTokens(m Message) int { return estimateTokens(&m) }

func estimateTokens(m *Message) int {
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
		if w.Tokens > 0 {
			for k := j; k < i; k++ {
				gt += estimateTokens(&msgs[k])
			}
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
		local, err := rt.localHistory(ctx, ts)
		if err != nil {
			return nil, err
		}
		return rt.filterHistory(ctx, ts, local)
	}
	kept, err := rt.chatWindow(ctx, ts)
	if err != nil {
		return nil, err
	}
	return rt.filterHistory(ctx, ts, kept)
}

// localHistory returns what a prompt without chat sees: the system and user
// messages stored since the turn began (a tool's injected context), as the
// acting side sees them. Each request reads only the rows stored since the
// turn's previous one, into a buffer the turn reuses, and adds them to the
// perspective it keeps: a thread only grows at its end, and these rows
// carry no calls that a later row could answer.
func (rt *Runtime) localHistory(ctx context.Context, ts *turnState) ([]Message, error) {
	c := &ts.rows
	after := ts.turnStart
	if c.localRead {
		after = c.localLast
	}
	buf := c.localBuf
	if buf == nil {
		buf = rt.readBuffer(c, 8)
	}
	page, err := rt.store.listMessagesInto(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, After: after, Order: OrderAsc}, buf[:0])
	if err != nil {
		return nil, &StoreError{Op: "list messages", Err: err}
	}
	rows := page.Messages
	c.keep(rows)
	if cap(rows) > cap(buf) {
		buf = rows // the store needed more room: the next read reuses it
	}
	c.localBuf, c.localRead, c.localLast = buf[:0], true, lastSeqOf(rows, after)
	n := 0
	for i := range rows {
		if m := &rows[i]; m.Role == RoleSystem || m.Role == RoleUser {
			rows[n] = *m
			n++
		}
	}
	if n > 0 {
		if c.local.out == nil {
			c.local.out = c.buffer(viewRoom(n))
		}
		c.local.add(ts.sideKey, ts.prompt.IncludePastTools, rows[:n])
		c.keep(c.local.out)
	}
	return c.local.out, nil
}

// chatWindow returns the thread's chat as the acting side sees it, within
// the prompt's window. It reads the newest top-level rows the window can
// use (all of them without a window). A turn keeps the rows it read and
// their perspective: its next request reads only the rows stored since, as
// a thread only ever grows at its end, turns only those when it can, and
// reads again from the newest row when the window might reach past the
// kept rows.
func (rt *Runtime) chatWindow(ctx context.Context, ts *turnState) ([]Message, error) {
	p := ts.prompt
	w := p.History
	if c := &ts.rows; c.ok {
		buf := rt.readBuffer(c, 8) // the rows of a step or two
		page, err := rt.store.listMessagesInto(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, After: c.last, Order: OrderAsc}, buf)
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		c.keep(page.Messages)
		if len(page.Messages) > 0 {
			c.scratch.segs = append(c.scratch.segs, page.Messages) // c.ok: reset made the scratch
			c.last = lastSeqOf(page.Messages, c.last)
			if c.view.clean {
				c.view.add(ts.sideKey, p.IncludePastTools, page.Messages)
			} else {
				n := 0
				for _, seg := range c.scratch.segs {
					n += len(seg)
				}
				c.view = view{out: c.buffer(viewRoom(n))}
				c.view.add(ts.sideKey, p.IncludePastTools, c.scratch.segs...)
			}
			c.keep(c.view.out)
		}
		// Without older rows left out, the kept rows are the whole thread.
		if kept, limited := window(c.view.out, w); limited || !c.more {
			return kept, nil
		}
	}
	if !w.bounded() {
		// Its size is known only after: a thread of a few messages fits a
		// pooled buffer, a longer one is read into a slice of its size.
		buf := rt.readBuffer(&ts.rows, 16)
		page, err := rt.store.listMessagesInto(ctx, ts.th.ID, MessageQuery{IncludeSilent: true}, buf)
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		ts.rows.keep(page.Messages)
		ts.rows.reset(page, view{out: ts.rows.buffer(viewRoom(len(page.Messages)))})
		ts.rows.view.add(ts.sideKey, p.IncludePastTools, page.Messages)
		ts.rows.keep(ts.rows.view.out)
		kept, _ := window(ts.rows.view.out, w)
		return kept, nil
	}
	limit := 256
	if w.Messages > 0 {
		// Room for the rows the perspective drops: a few, or the tool rows
		// of a prompt without past tools.
		limit = w.Messages + 4
		if !p.IncludePastTools {
			limit = 2 * w.Messages
		}
	}
	for {
		page, err := rt.store.listMessagesInto(ctx, ts.th.ID, MessageQuery{IncludeSilent: true, Limit: limit}, rt.readBuffer(&ts.rows, limit))
		if err != nil {
			return nil, &StoreError{Op: "list messages", Err: err}
		}
		ts.rows.keep(page.Messages)
		v := view{out: ts.rows.buffer(viewRoom(len(page.Messages)))}
		v.add(ts.sideKey, p.IncludePastTools, page.Messages)
		ts.rows.keep(v.out)
		kept, limited := window(v.out, w)
		if limited || !page.HasMore {
			ts.rows.reset(page, v)
			return kept, nil
		}
		limit *= 2
	}
}

// readBuffer returns room for n rows from the pool, kept as c's, for a
// read into it; nil when the store reads into slices of its own
// (listMessagesInto), which would leave a buffer unused and the pool
// without it.
func (rt *Runtime) readBuffer(c *turnRows, n int) []Message {
	if !rt.store.readsInto() {
		return nil
	}
	buf := c.buffer(n)
	c.keep(buf)
	return buf
}

// turnRows are the rows a turn read for its requests, in the pages it
// read them, oldest first, and their perspective. The slices it reads into
// and builds in come from a pool and go back to it when the turn ends
// (release): by then no request refers to them (a Provider keeps nothing of
// a request once its stream has ended). So does the rest of what the
// turn's requests are made of (turnScratch).
type turnRows struct {
	ok      bool
	last    int64 // the Seq of the newest row read
	more    bool  // older rows exist that rows leave out
	view    view  // the perspective of the pages read (scratch.segs)
	scratch *turnScratch

	// A prompt without chat's requests (localHistory): the perspective of
	// the turn's system and user rows, whether a request read them, the Seq
	// of the newest row read, and the buffer the rows are read into.
	local     view
	localRead bool
	localLast int64
	localBuf  []Message
}

// turnScratch is what a turn's requests are made in besides their rows:
// the request itself, its tool specs, and the lists that keep track of the
// rows' slices — its pages (segs), the slices it keeps (owned), and the
// pool's boxes of the slices it took from the pool, to put them back in.
// Recycled with their room, so that none of it allocates once the pool is
// warm.
type turnScratch struct {
	req   Request
	specs []ToolSpec
	segs  [][]Message
	owned [][]Message
	boxes []*[]Message
	// am is the turn's latest assistant message, as appended (a store
	// keeps nothing of a message it appends); result the message of the
	// first result of its latest batch (see batch.slot).
	am, result Message
	// calls are the pending calls of the turn's responses (see
	// response.call).
	calls []*pendingCall
}

// maxKeptCalls is how many pending calls a scratch keeps for the next turn.
const maxKeptCalls = 8

var turnScratches = sync.Pool{New: func() any { return new(turnScratch) }}

// scratchOf returns the turn's scratch, taken from the pool on first use.
func (c *turnRows) scratchOf() *turnScratch {
	if c.scratch == nil {
		c.scratch = turnScratches.Get().(*turnScratch)
	}
	return c.scratch
}

// reset makes page the rows read so far and v their perspective.
func (c *turnRows) reset(page MessagePage, v view) {
	l := c.scratchOf()
	clear(l.segs)
	l.segs = append(l.segs[:0], page.Messages)
	c.ok, c.last, c.more, c.view = true, lastSeqOf(page.Messages, 0), page.HasMore, v
}

// buffer returns an empty slice with room for n messages, from the pool.
func (c *turnRows) buffer(n int) []Message {
	k := max(bits.Len(uint(max(n, 1)-1)), minBufBits) // room for 1<<k ≥ n
	if k >= len(messageBufs) {
		return make([]Message, 0, n)
	}
	if p, _ := messageBufs[k].Get().(*[]Message); p != nil {
		s := (*p)[:0]
		*p = nil
		l := c.scratchOf()
		l.boxes = append(l.boxes, p)
		return s
	}
	return make([]Message, 0, 1<<k)
}

// keep records s (and the array under it) as the turn's, to release; of
// two slices of one array, the longer.
func (c *turnRows) keep(s []Message) {
	if cap(s) == 0 {
		return
	}
	l := c.scratchOf()
	for i, o := range l.owned {
		if cap(o) > 0 && &o[:1][0] == &s[:1][0] {
			if len(s) > len(o) {
				l.owned[i] = s // release clears what was written
			}
			return
		}
	}
	l.owned = append(l.owned, s)
}

// release returns the turn's slices to the pool, cleared, and its scratch
// to theirs.
func (c *turnRows) release() {
	if l := c.scratch; l != nil {
		for _, s := range l.owned {
			if k := bits.Len(uint(cap(s))) - 1; k >= minBufBits && k < len(messageBufs) {
				clear(s) // rows past len were never written
				var box *[]Message
				if n := len(l.boxes); n > 0 {
					box, l.boxes = l.boxes[n-1], l.boxes[:n-1]
				} else {
					box = new([]Message)
				}
				*box = s[:0]
				messageBufs[k].Put(box) // room for 1<<k at least
			}
		}
		clear(l.owned)
		clear(l.boxes) // boxes of slices kept past their size's pools
		clear(l.segs)
		clear(l.specs[:cap(l.specs)])
		l.owned, l.boxes, l.segs, l.specs = l.owned[:0], l.boxes[:0], l.segs[:0], l.specs[:0]
		l.req, l.am, l.result = Request{}, Message{}, Message{}
		if len(l.calls) > maxKeptCalls {
			clear(l.calls[maxKeptCalls:])
			l.calls = l.calls[:maxKeptCalls]
		}
		for _, pc := range l.calls {
			*pc = pendingCall{} // keeps nothing of the turn
		}
		turnScratches.Put(l)
	}
	*c = turnRows{}
}

// messageBufs recycles the slices turns read their chat into and build
// their view in, by size (pool k holds slices with room for at least 1<<k
// messages): fresh ones, of tens of kilobytes, cost more per request than
// the rows they hold. Slices for more than 1<<13 messages are not kept.
var messageBufs [14]sync.Pool // of *[]Message

const minBufBits = 3

// viewRoom is the room a view of n rows is given: the rows, and those of a
// few more steps.
func viewRoom(n int) int { return n + max(4, n/8) }

func lastSeqOf(rows []Message, or int64) int64 {
	if len(rows) == 0 {
		return or
	}
	return rows[len(rows)-1].Seq
}

// filterHistory applies the prompt's history filter, if any. A filter
// that panics fails the turn, as one that returns an error does.
func (rt *Runtime) filterHistory(ctx context.Context, ts *turnState, msgs []Message) (out []Message, err error) {
	f := ts.prompt.History.Filter
	if f == nil {
		return msgs, nil
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("toolrun: prompt %s: history filter panicked: %s", ts.prompt.Name, safefmt.Sprint(p))
		}
	}()
	// The filter gets a copy: the turn keeps its view for its next request.
	out, err = f(ctx, ts.th.ID, slices.Clone(msgs))
	if err != nil {
		return nil, fmt.Errorf("toolrun: prompt %s: history filter: %w", ts.prompt.Name, err)
	}
	if !paired(out) {
		out = pair(out)
	}
	return out, nil
}

// paired reports that every assistant message of msgs with tool calls is
// followed at once by the results of its calls, in their order, and that
// no other message is a tool result: what the view makes, and what a
// provider accepts.
func paired(msgs []Message) bool {
	for i := 0; i < len(msgs); i++ {
		m := &msgs[i]
		if m.Role == RoleTool {
			return false // a result not right after its call
		}
		if m.Role != RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			if i+1 >= len(msgs) || msgs[i+1].Role != RoleTool || msgs[i+1].ToolCallID != c.ID {
				return false
			}
			i++
		}
	}
	return true
}

// pair returns msgs with each assistant message's calls followed by their
// results, wherever in msgs those are (a result goes with the first call of
// its id, once), or by a failed result saying it is missing, as the view
// shows a call whose result is not stored; tool results of no call in msgs
// are dropped.
func pair(msgs []Message) []Message {
	results := make(map[string]*Message)
	for i := range msgs {
		if m := &msgs[i]; m.Role == RoleTool && m.ToolCallID != "" {
			if _, dup := results[m.ToolCallID]; !dup {
				results[m.ToolCallID] = m
			}
		}
	}
	out := make([]Message, 0, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.Role == RoleTool:
			// Sent after its call, or not at all.
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			out = append(out, *m)
			for _, c := range m.ToolCalls {
				if r := results[c.ID]; r != nil {
					out = append(out, *r)
					delete(results, c.ID)
					continue
				}
				out = append(out, missingResult(c))
			}
		default:
			out = append(out, *m)
		}
	}
	return out
}
