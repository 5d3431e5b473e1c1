package toolrun

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrun/toolrun/internal/jsonvalue"
	"github.com/toolrun/toolrun/internal/safefmt"
)

// Hooks are called by the executor around tool calls. Hooks run
// synchronously on the executing goroutine; a slow hook slows the batch.
// A panicking hook is recovered and logged. The zero value has no hooks.
type Hooks struct {
	// ToolCallStarted fires exactly once per call: as soon as its progress
	// argument has streamed (runtime), or just before Execute for calls that
	// did not stream (queued calls and bare Executor.Run batches). Its
	// Arguments, those streamed so far, have their secrets redacted, and
	// so has the start of a secret that their end cuts.
	ToolCallStarted func(ctx context.Context, threadID string, ev ToolCallStarted)
	// ToolCallDone fires after a call has run, success or error, once its
	// result is shaped for storage (attachments written as thread files and
	// listed in Refs, secrets redacted) and before it is stored. The hook
	// gets its own copy of the result: changing it changes neither what is
	// stored nor the outcome. It does not fire for calls refused by the
	// allowed-tools gate, nor for InvokeTool.
	ToolCallDone func(ctx context.Context, threadID string, ev ToolCallDone)
}

// Thread event types sent by toolrun.
const (
	EventToolCallStarted = "tool_call_started"
	EventToolCallDone    = "tool_call_done"
)

// events fans thread events out to subscribers. It is safe for concurrent use.
type events struct {
	mu   sync.RWMutex
	next int
	subs map[string]map[int]func(Event) // thread id ("" = all threads) → subscribers
	// n counts the subscriptions, so that with none a call reads one
	// word and takes no lock.
	n atomic.Int32
}

// subscribe registers fn for threadID ("" for every thread) and returns the
// function that removes it.
func (b *events) subscribe(threadID string, fn func(Event)) (cancel func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[string]map[int]func(Event){}
	}
	b.next++
	id := b.next
	m := b.subs[threadID]
	if m == nil {
		m = map[int]func(Event){}
		b.subs[threadID] = m
	}
	m[id] = fn
	b.n.Add(1)
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[threadID][id]; ok {
			b.n.Add(-1)
		}
		delete(b.subs[threadID], id)
		if len(b.subs[threadID]) == 0 {
			delete(b.subs, threadID)
		}
	}
}

// has reports whether anyone listens to threadID.
func (b *events) has(threadID string) bool {
	if b.n.Load() == 0 {
		return false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs[threadID]) > 0 || len(b.subs[""]) > 0
}

func (b *events) publish(ev Event) {
	if b.n.Load() == 0 {
		return
	}
	b.mu.RLock()
	var fns []func(Event)
	for _, fn := range b.subs[ev.ThreadID] {
		fns = append(fns, fn)
	}
	for _, fn := range b.subs[""] {
		fns = append(fns, fn)
	}
	b.mu.RUnlock()
	for _, fn := range fns {
		func() {
			defer func() { _ = recover() }()
			own := ev
			own.Data = ownData(ev.Data)
			fn(own)
		}()
	}
}

// ownData returns a copy of an event's data that a subscriber may change
// without changing what the other subscribers get: a JSON tree (the data
// a tool emits) is copied deeply, a ToolCallStarted's progress text gets
// a pointer of its own, and the other data hold no references.
func ownData(d any) any {
	if s, ok := d.(ToolCallStarted); ok {
		s.Progress = ownText(s.Progress)
		return s
	}
	return jsonvalue.Clone(d)
}

// ownText returns a pointer to a copy of *p, or nil for nil.
func ownText(p *string) *string {
	if p == nil {
		return nil
	}
	s := *p
	return &s
}

// ownResult returns a copy of a result that a hook may change without
// changing the result's other holders: its error_data, refs and
// attachments are copied deeply.
func ownResult(r Result) Result {
	if r.ErrorData != nil {
		r.ErrorData, _ = jsonvalue.Clone(r.ErrorData).(map[string]any)
	}
	r.Refs = slices.Clone(r.Refs)
	if r.Attachments != nil {
		as := make([]Attachment, len(r.Attachments))
		for i, a := range r.Attachments {
			a.Data = slices.Clone(a.Data)
			as[i] = a
		}
		r.Attachments = as
	}
	return r
}

// fireStarted fires tool_call_started for a call that did not stream (a
// queued call, a bare batch's call) just before it runs; progress is its
// handler's progress argument.
func (e *Executor) fireStarted(ctx context.Context, b *batch, c ToolCall, progress string) {
	if e.hooks.ToolCallStarted == nil && !e.ev.has(b.threadID) {
		return
	}
	if !b.markStarted(c.ID) {
		return // it fired while the response streamed
	}
	ev := ToolCallStarted{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	if progress != "" {
		ev.Progress = progressOf(c.Arguments, progress)
	}
	e.emitStarted(ctx, b, ev, false)
}

// emitStarted calls the hook and publishes the thread event. partial
// tells that ev.Arguments are the first part of the call's arguments, the
// rest of which still streams: a secret cut by their end is hidden too.
func (e *Executor) emitStarted(ctx context.Context, b *batch, ev ToolCallStarted, partial bool) {
	red := e.redactor(b)
	if ev.Progress != nil {
		p := red.String(*ev.Progress)
		ev.Progress = &p
	}
	if partial {
		ev.Arguments = red.Partial(ev.Arguments)
	} else {
		ev.Arguments = red.String(ev.Arguments)
	}
	if h := e.hooks.ToolCallStarted; h != nil {
		// The hook gets a progress text of its own, which the subscribers
		// do not share.
		hev := ev
		hev.Progress = ownText(ev.Progress)
		e.safeHook(ctx, "tool_call_started", func() { h(ctx, b.threadID, hev) })
	}
	if e.ev.has(b.threadID) {
		e.ev.publish(Event{ThreadID: b.threadID, Type: EventToolCallStarted, Data: ev, Timestamp: time.Now().UTC()})
	}
}

// listensDone reports whether a hook or a subscriber waits for the
// thread's tool_call_done.
func (e *Executor) listensDone(b *batch) bool {
	return e.hooks.ToolCallDone != nil || e.ev.has(b.threadID)
}

// fireDone calls the tool_call_done hook with a copy of the call's shaped
// result res, which shares its error_data and refs with the message about
// to be stored and with the outcome, and publishes the thread event.
func (e *Executor) fireDone(ctx context.Context, b *batch, c ToolCall, res Result) {
	if h := e.hooks.ToolCallDone; h != nil {
		ev := ToolCallDone{ID: c.ID, Name: c.Name, Status: res.Status, Result: ownResult(res)}
		e.safeHook(ctx, "tool_call_done", func() { h(ctx, b.threadID, ev) })
	}
	if e.ev.has(b.threadID) {
		e.ev.publish(Event{ThreadID: b.threadID, Type: EventToolCallDone, Data: ToolCallDone{ID: c.ID, Name: c.Name, Status: res.Status}, Timestamp: time.Now().UTC()})
	}
}

func (e *Executor) safeHook(ctx context.Context, name string, fn func()) {
	defer func() {
		if p := recover(); p != nil {
			e.log.ErrorContext(ctx, "toolrun: hook panicked", "hook", name, "panic", safefmt.Sprint(p))
		}
	}()
	fn()
}

// progressOf reads a top-level string argument from complete argument text.
func progressOf(args, key string) *string {
	countParse("progress")
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &m) != nil {
		return nil
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return nil
	}
	return &s
}
