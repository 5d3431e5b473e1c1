package toolrun

import (
	"context"
	"sync"
)

// Hooks are called by the executor around tool calls. Hooks run
// synchronously on the executing goroutine; a slow hook slows the batch.
// A panicking hook is recovered and logged. The zero value has no hooks.
type Hooks struct {
	// ToolCallStarted fires exactly once per call: as soon as its progress
	// argument has streamed (runtime), or just before Execute for calls that
	// did not stream (queued calls and bare Executor.Run batches).
	ToolCallStarted func(ctx context.Context, threadID string, ev ToolCallStarted)
	// ToolCallDone fires after a call has run, success or error, before its
	// result is shaped and stored. It does not fire for calls refused by the
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
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.subs[threadID], id)
		if len(b.subs[threadID]) == 0 {
			delete(b.subs, threadID)
		}
	}
}

// has reports whether anyone listens to threadID.
func (b *events) has(threadID string) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.subs[threadID]) > 0 || len(b.subs[""]) > 0
}

func (b *events) publish(ev Event) {
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
			fn(ev)
		}()
	}
}
