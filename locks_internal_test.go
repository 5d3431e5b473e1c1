package toolrun

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestKeyedMutexSerialisesEachKey(t *testing.T) {
	var k keyedMutex
	const keys, goroutines, rounds = 5, 16, 200
	var counts [keys]int // written only under the key's lock
	var inside [keys]int // holders of each key at once, under the key's lock
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				i := (g + r) % keys
				key := fmt.Sprintf("thread-%d", i)
				en, _ := k.lock(context.Background(), key)
				inside[i]++
				if inside[i] != 1 {
					t.Errorf("%s is held by %d goroutines at once", key, inside[i])
				}
				counts[i]++
				runtime.Gosched()
				inside[i]--
				k.unlock(key, en)
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, c := range counts {
		total += c
	}
	if total != goroutines*rounds {
		t.Fatalf("%d locked sections ran, want %d", total, goroutines*rounds)
	}
	for i := range k.shards {
		if n := len(k.shards[i].m); n != 0 {
			t.Errorf("shard %d keeps %d entries after every key was unlocked", i, n)
		}
	}
}

// A shard must not be held while an entry is made: making one can take
// long, and goroutines locking other keys of the shard would queue behind
// it.
func TestKeyedMutexMakesEntriesWithNoShardHeld(t *testing.T) {
	var k keyedMutex
	saved := keyedEntries.New
	defer func() { keyedEntries.New = saved }()
	made := 0
	keyedEntries.New = func() any {
		made++
		for i := range k.shards {
			if !k.shards[i].mu.TryLock() {
				t.Errorf("shard %d is held while a new entry is made", i)
				continue
			}
			k.shards[i].mu.Unlock()
		}
		return newKeyedEntry()
	}
	runtime.GC()
	runtime.GC() // empties the pool, its victim cache included
	const n = 300
	held := make([]*keyedEntry, n)
	for i := range held {
		held[i], _ = k.lock(context.Background(), fmt.Sprint("thread-", i))
	}
	for i, en := range held {
		k.unlock(fmt.Sprint("thread-", i), en)
	}
	if made == 0 {
		t.Fatal("no entry was made: nothing was checked")
	}
}

func TestKeyedShardsDoNotShareACacheLine(t *testing.T) {
	if s := unsafe.Sizeof(keyedShard{}); s < 64 {
		t.Fatalf("a keyedShard takes %d bytes: two shards' mutexes can share a 64-byte cache line", s)
	}
}

func TestKeyedMutexWaitEndsWithItsContext(t *testing.T) {
	var k keyedMutex
	held, err := k.lock(context.Background(), "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := k.lock(ctx, "t")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait for a held key ended with %v, want its context's error", err)
	}
	k.unlock("t", held)
	if n := len(k.shard("t").m); n != 0 {
		t.Fatalf("%d entries left after the waiter gave up and the holder unlocked", n)
	}
	again, err := k.lock(context.Background(), "t")
	if err != nil {
		t.Fatalf("the key could not be locked again: %v", err)
	}
	k.unlock("t", again)
}

func TestKeyedMutexRefusesAKeyItsCallerHolds(t *testing.T) {
	var k, other keyedMutex
	en, _ := k.lock(context.Background(), "t")
	h := holding(context.Background(), &k, "t")
	var ctx context.Context = h
	if _, err := k.lock(ctx, "t"); !errors.Is(err, errLockHeld) {
		t.Fatalf("locking a key the caller holds gave %v, want errLockHeld", err)
	}
	if en2, err := k.lock(ctx, "u"); err != nil {
		t.Fatalf("another key: %v", err)
	} else {
		k.unlock("u", en2)
	}
	if en3, err := other.lock(ctx, "t"); err != nil {
		t.Fatalf("the same key of another keyedMutex: %v", err)
	} else {
		other.unlock("t", en3)
	}
	if heldBy(notHolding(ctx), &k, "t") {
		t.Fatal("notHolding kept the mark")
	}
	h.release()
	k.unlock("t", en)
	en4, err := k.lock(ctx, "t") // released: waits like anyone, and gets it
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	k.unlock("t", en4)
}

// TestKeyedMutexWaitersThatGiveUpLoseNoWakeUp: waiters that give up while
// others wait pass on the wake-up they may have taken, so every waiter that
// stays gets the lock in the end (the test would hang otherwise), and the
// key is held by one goroutine at a time throughout.
func TestKeyedMutexWaitersThatGiveUpLoseNoWakeUp(t *testing.T) {
	var k keyedMutex
	var inside atomic.Int32
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 200 {
				ctx, cancel := context.WithCancel(context.Background())
				if (g+r)%3 == 0 {
					go func() { runtime.Gosched(); cancel() }()
				}
				en, err := k.lock(ctx, "t")
				if err != nil {
					cancel()
					continue
				}
				if n := inside.Add(1); n != 1 {
					t.Errorf("the key is held by %d goroutines at once", n)
				}
				runtime.Gosched()
				inside.Add(-1)
				k.unlock("t", en)
				cancel()
			}
		}()
	}
	wg.Wait()
	if n := len(k.shard("t").m); n != 0 {
		t.Errorf("%d entries left", n)
	}
}
