package toolrun

import (
	"hash/maphash"
	"sync"
)

// keyedMutex serialises work per key (a thread id) without keeping a lock
// per key forever. The keys are spread over shards, so that locking
// different threads does not contend on one mutex, and entries are reused,
// so that taking a lock allocates nothing.
type keyedMutex struct {
	once   sync.Once
	seed   maphash.Seed
	shards [64]keyedShard
}

type keyedShard struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
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
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = map[string]*keyedEntry{}
	}
	en := sh.m[key]
	if en == nil {
		en = keyedEntries.Get().(*keyedEntry)
		sh.m[key] = en
	}
	en.refs++
	sh.mu.Unlock()
	en.mu.Lock()
	return en
}

// unlock unlocks key, which lock returned en for.
func (k *keyedMutex) unlock(key string, en *keyedEntry) {
	en.mu.Unlock()
	sh := k.shard(key)
	sh.mu.Lock()
	if en.refs--; en.refs == 0 {
		delete(sh.m, key)
		keyedEntries.Put(en)
	}
	sh.mu.Unlock()
}

func (k *keyedMutex) shard(key string) *keyedShard {
	return &k.shards[maphash.String(k.seed, key)%uint64(len(k.shards))]
}
