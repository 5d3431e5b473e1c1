package sandbox

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEngineSlotLeavesNoTaskBehind hands tasks to goroutines polling
// the engine slot, many rounds over: in each, a few goroutines poll
// (nextEngineTask) and more put tasks (goEngine) at once. Once every
// poller and putter has returned and none polls any more, no task may be
// left in the slot: nobody would come for it, and its run would never
// start.
//
// The interleaving it catches: a poller takes task A from the slot while
// it still counts as polling; Start puts task B, sees the count and
// leaves it; the poller leaves the count without emptying the slot again
// (it has a task), so B stays there until some goroutine polls later.
func TestEngineSlotLeavesNoTaskBehind(t *testing.T) {
	const pollers, putters = 4, 8
	const budget = 10 * time.Microsecond
	// Goroutines of earlier tests may still poll: give each a task after
	// which it does not poll, so that the count is this test's own.
	deadline := time.Now().Add(10 * time.Second)
	for enginePolls.count.Load() > 0 {
		if time.Now().After(deadline) {
			t.Skip("goroutines of other tests keep polling the slot")
		}
		goEngine(&engineTask{run: func() {}})
		time.Sleep(time.Millisecond)
	}
	var rounds int
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); rounds++ {
		// Polls that kept running out would make the rule skip polling.
		enginePolls.rule.mu.Lock()
		enginePolls.rule.rule = spinRule{}
		enginePolls.rule.mu.Unlock()
		var ran atomic.Int32
		got := make(chan *engineTask, pollers)
		for range pollers {
			go func() { got <- nextEngineTask(budget) }()
		}
		for enginePolls.count.Load() < pollers && len(got) == 0 {
			runtime.Gosched()
		}
		var wg sync.WaitGroup
		wg.Add(putters)
		for range putters {
			// spin 0: a goroutine that runs the task does not poll after.
			go func() { defer wg.Done(); goEngine(&engineTask{run: func() { ran.Add(1) }}) }()
		}
		for range pollers {
			if task := <-got; task != nil {
				task.run()
			}
		}
		wg.Wait()
		if enginePolls.count.Load() == 0 {
			if left := enginePolls.slot.Swap(nil); left != nil {
				left.run()
				t.Fatalf("round %d: a task was left in the slot with no goroutine polling for it", rounds)
			}
		}
		for wait := time.Now().Add(waitTimeout); ran.Load() < putters; runtime.Gosched() {
			if time.Now().After(wait) {
				t.Fatalf("round %d: %d of %d tasks ran", rounds, ran.Load(), putters)
			}
		}
		require.Equal(t, int32(putters), ran.Load(), "round %d: a task ran twice", rounds)
	}
	t.Logf("%d rounds", rounds)
}

// TestWorkerRealmsAheadAreNotChargedToARun runs, in worker processes
// told they have 256 CPUs, a trivial run that waits for a host call, under
// a memory limit of 1 MiB that such a run fits in many times over (it did
// before realms were made ahead). The realms a worker makes ahead, one for
// each CPU, must not be charged to the run: they were, and every run ended
// with status memory (each such worker is retired, so the next run is the
// first of a fresh worker again).
func TestWorkerRealmsAheadAreNotChargedToARun(t *testing.T) {
	t.Setenv("GOMAXPROCS", "256") // inherited by the worker processes only
	r := New(&RunnerOptions{PoolSize: 1})
	defer r.Close()
	imports := map[string]map[string]any{"h": {"wait": HostFunc(func(context.Context, []any) (any, error) {
		time.Sleep(100 * time.Millisecond) // the worker's memory watchdog ticks every 2 ms
		return nil, nil
	})}}
	const src = `import {wait} from "h"; export default async () => { await wait(); return 1; };`
	// Compiled once under the default limit first: the runs below then
	// take the bundle from the cache, so that the 1 MiB limit measures the
	// runs alone and not a compile, whose garbage a loaded machine
	// collects late.
	requireStatus(t, runCode(t, r, src, &Options{Imports: imports}), StatusSuccess)
	for i := range 3 {
		res := runCode(t, r, src, &Options{Imports: imports, MemoryLimitBytes: 1 << 20})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, 1.0, res.Value, "run %d", i)
	}
}

// TestKeyMemoKeepsNoLargeMemoryAlive checks that the memo of request
// keys keeps alive no more than keyMemoMaxBytes a request: not a large
// filename (which the source size does not count), and not the large
// string a small source was cut from.
func TestKeyMemoKeepsNoLargeMemoryAlive(t *testing.T) {
	var m keyMemo
	long := strings.Repeat("f", 4<<20)
	req := &compileRequest{source: "export default 1", filename: long, lang: LanguageJavaScript}
	assert.Equal(t, req.key(), m.key(req))
	for _, e := range m.ents {
		assert.NotEqual(t, len(long), len(e.req.filename), "a 4 MiB filename is kept")
	}

	freed := make(chan struct{})
	func() {
		b := make([]byte, 16<<20)
		src := "export default 2;"
		copy(b, src)
		whole := unsafe.String(&b[0], len(b)) // shares b's memory, which is not changed again
		runtime.AddCleanup(&b[0], func(ch chan struct{}) { close(ch) }, freed)
		req := &compileRequest{source: whole[:len(src)], filename: "a.js", lang: LanguageJavaScript}
		assert.Equal(t, req.key(), m.key(req))
	}()
	for end := time.Now().Add(5 * time.Second); ; {
		runtime.GC()
		select {
		case <-freed:
			runtime.KeepAlive(&m)
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatal("the 16 MiB string a 17-byte source was cut from is kept alive by the memo")
		}
	}
}
