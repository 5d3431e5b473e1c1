package toolrun

import (
	"hash/maphash"
	"sync"
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

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

var keyedEntries = sync.Pool{New: func() any { return new(keyedEntry) }}

// lock locks key and returns what unlock needs.
func (k *keyedMutex) lock(key string) *keyedEntry {
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
	en.mu.Lock()
	return en
}

// unlock unlocks key, which lock returned en for.
func (k *keyedMutex) unlock(key string, en *keyedEntry) {
	en.mu.Unlock()
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
