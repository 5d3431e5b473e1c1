package toolrun

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// keyedMutex serialises work per key (a thread id) without keeping a lock
// per key forever. The keys are spread over shards, so that locking
// different threads does not contend on one mutex, and entries are reused,
// so that taking a lock allocates nothing.
//
// A shard is held only for its map: a new entry is taken from the pool
// before the shard is locked, and a freed one goes back after it is
// unlocked. Taking one from an empty pool allocates, an allocation can be
// made to help the collector for a while, and a goroutine that found the
// shard held meanwhile parks; under a load of thousands of goroutines the
// shard's mutex then hands itself from waiter to waiter (its starvation
// mode), and every turn on the shard that follows waits in that queue.
type keyedMutex struct {
	once   sync.Once
	seed   maphash.Seed
	shards [64]keyedShard
}

type keyedShard struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
	// A shard to a cache line: locking keys of two shards writes no line
	// both write.
	_ [48]byte
}

// keyedEntry is a key's lock. Taking a free one is a TryLock; a caller that
// finds it held waits for a wake-up from unlock, or for its context.
type keyedEntry struct {
	mu      sync.Mutex
	waiting atomic.Int32
	wake    chan struct{} // one token: the lock was unlocked with waiters
	refs    int
}

var keyedEntries = sync.Pool{New: func() any { return newKeyedEntry() }}

func newKeyedEntry() *keyedEntry { return &keyedEntry{wake: make(chan struct{}, 1)} }

// lock locks key and returns what unlock needs, or ctx's error when ctx
// ends first. A lock held by the caller's own goroutine chain (ctx carries
// it: a tool that calls Send on its own thread) would never be released
// while it waits: lock refuses it at once with errLockHeld.
func (k *keyedMutex) lock(ctx context.Context, key string) (*keyedEntry, error) {
	if heldBy(ctx, k, key) {
		return nil, errLockHeld
	}
	en := k.enter(key)
	if en.mu.TryLock() {
		return en, nil
	}
	// Counted as waiting before trying again: an unlock that comes after
	// the count sends a token, and one that came before leaves the lock
	// free for the try.
	en.waiting.Add(1)
	for !en.mu.TryLock() {
		select {
		case <-en.wake:
		case <-ctx.Done():
			if en.waiting.Add(-1) > 0 {
				en.signal() // the token it may have taken was another's
			}
			k.leave(key, en)
			return nil, ctx.Err()
		}
	}
	en.waiting.Add(-1)
	return en, nil
}

// signal wakes one waiter, if none is woken already.
func (en *keyedEntry) signal() {
	select {
	case en.wake <- struct{}{}:
	default:
	}
}

// errLockHeld is lock's error for a key the caller itself holds.
var errLockHeld = errors.New("the caller holds its lock: it would wait for itself")

// enter returns key's entry with the caller counted in it.
func (k *keyedMutex) enter(key string) *keyedEntry {
	k.once.Do(func() { k.seed = maphash.MakeSeed() })
	sh := k.shard(key)
	spare := keyedEntries.Get().(*keyedEntry)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[string]*keyedEntry{}
	}
	en := sh.m[key]
	if en == nil {
		en, spare = spare, nil
		sh.m[key] = en
	}
	en.refs++
	sh.mu.Unlock()
	if spare != nil {
		keyedEntries.Put(spare)
	}
	return en
}

// unlock unlocks key, which lock returned en for.
func (k *keyedMutex) unlock(key string, en *keyedEntry) {
	en.mu.Unlock()
	if en.waiting.Load() > 0 {
		en.signal()
	}
	k.leave(key, en)
}

// leave uncounts the caller from key's entry, which goes back to the pool
// when nobody is counted in it.
func (k *keyedMutex) leave(key string, en *keyedEntry) {
	sh := k.shard(key)
	sh.mu.Lock()
	en.refs--
	free := en.refs == 0
	if free {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	if free {
		keyedEntries.Put(en)
	}
}

func (k *keyedMutex) shard(key string) *keyedShard {
	return &k.shards[maphash.String(k.seed, key)%uint64(len(k.shards))]
}

// lockMark is a lock the goroutines of a ctx hold, as the ctx says: its
// Value for heldLockKey{} is the innermost mark. A runtime turn marks the
// ctx it gives its tools with a heldLock, an Executor run with its batch
// (roomyBatch).
type lockMark interface {
	// holds reports whether the mark is of k's lock of key, held now.
	holds(k *keyedMutex, key string) bool
	// outer returns the ctx the mark was put on, which carries the marks
	// of the locks held before it.
	outer() context.Context
}

type heldLockKey struct{}

// heldLock is a runtime turn's mark, and clears held when the turn
// unlocks. It is the ctx itself, so that marking one costs one allocation.
type heldLock struct {
	context.Context
	k    *keyedMutex
	key  string
	held atomic.Bool
}

// Value implements context.Context.
func (h *heldLock) Value(key any) any {
	if key == (heldLockKey{}) {
		return h
	}
	return h.Context.Value(key)
}

func (h *heldLock) holds(k *keyedMutex, key string) bool {
	return h.k == k && h.key == key && h.held.Load()
}

func (h *heldLock) outer() context.Context { return h.Context }

// release marks the lock as no longer held.
func (h *heldLock) release() { h.held.Store(false) }

// holding returns ctx marked as holding k's lock of key until release is
// called on the result.
func holding(ctx context.Context, k *keyedMutex, key string) *heldLock {
	h := &heldLock{Context: ctx, k: k, key: key}
	h.held.Store(true)
	return h
}

// A roomyBatch, the batch of an Executor run, is also the run's mark: the
// ctx its tools get, marked as holding the lock of the batch's thread in
// the table locks until release clears it. Marking allocates nothing.

// hold puts the mark on ctx and returns the marked ctx.
func (rb *roomyBatch) hold(ctx context.Context, k *keyedMutex) context.Context {
	rb.Context = ctx
	rb.locks.Store(k)
	return rb
}

// release marks the lock as no longer held.
func (rb *roomyBatch) release() { rb.locks.Store(nil) }

// Value implements context.Context.
func (rb *roomyBatch) Value(key any) any {
	if key == (heldLockKey{}) {
		return rb
	}
	return rb.Context.Value(key)
}

func (rb *roomyBatch) holds(k *keyedMutex, key string) bool {
	return rb.locks.Load() == k && rb.threadID == key
}

func (rb *roomyBatch) outer() context.Context { return rb.Context }

// heldBy reports whether ctx is marked as holding k's lock of key now.
func heldBy(ctx context.Context, k *keyedMutex, key string) bool {
	for {
		m, _ := ctx.Value(heldLockKey{}).(lockMark)
		if m == nil {
			return false
		}
		if m.holds(k, key) {
			return true
		}
		ctx = m.outer()
	}
}

// notHolding returns ctx without the locks it is marked as holding: for
// work that goes on by itself after the caller returns (a background
// subagent), which waits for those locks like anyone else.
func notHolding(ctx context.Context) context.Context {
	return context.WithValue(ctx, heldLockKey{}, nil)
}
