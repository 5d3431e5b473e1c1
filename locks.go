package toolrun

import "sync"

// keyedMutex serialises work per key without keeping a lock per key forever.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	mu   sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	en := k.m[key]
	if en == nil {
		en = &keyedEntry{}
		k.m[key] = en
	}
	en.refs++
	k.mu.Unlock()
	en.mu.Lock()
	return func() {
		en.mu.Unlock()
		k.mu.Lock()
		en.refs--
		if en.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
