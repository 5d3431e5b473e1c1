package sandbox

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logHost is an engineHost that keeps what the code logs.
type logHost struct {
	mu   sync.Mutex
	logs []LogEntry
}

func (h *logHost) call(int, []any, func(any, *Error)) {}
func (h *logHost) report(any)                         {}
func (h *logHost) log(e LogEntry) {
	h.mu.Lock()
	h.logs = append(h.logs, e)
	h.mu.Unlock()
}

// TestARealmMadeAheadIsLockedDown checks a realm as newRealm makes it,
// before any run takes it: the host's globals are gone, every way to
// compile code from a string throws EvalError, and console, made on first
// use, logs for the run that took the realm.
func TestARealmMadeAheadIsLockedDown(t *testing.T) {
	rl, err := newRealm()
	require.NoError(t, err)
	host := &logHost{}
	rl.eng = newEngine(&engineJob{}, host)
	rl.eng.rt = rl.rt
	got, err := rl.rt.RunString(`(() => {
  const out = [];
  for (const name of ["GoError", "process", "require", "setTimeout", "fetch"]) out.push(typeof globalThis[name]);
  for (const f of [() => Function("return 1"), () => eval("1"), () => (function () {}).constructor("return 1"),
                   () => new Function("return 1"), () => globalThis.eval("1")]) {
    try { f(); out.push("compiled"); } catch (e) { out.push(e instanceof EvalError ? e.message : "other: " + e); }
  }
  console.log("hello", 1);
  return out;
})()`)
	require.NoError(t, err)
	assert.Equal(t, []any{"undefined", "undefined", "undefined", "undefined", "undefined",
		dynamicCodeMsg, dynamicCodeMsg, dynamicCodeMsg, dynamicCodeMsg, dynamicCodeMsg}, got.Export())
	require.Len(t, host.logs, 1)
	assert.Equal(t, "log", host.logs[0].Level)
	assert.Equal(t, []any{"hello", float64(1)}, host.logs[0].Args)
}

// TestTakeRealmNeverGivesARealmTwice takes realms from many goroutines at
// once, while the goroutine that makes them ahead refills the pool, and
// checks that every realm came out once.
func TestTakeRealmNeverGivesARealmTwice(t *testing.T) {
	const goroutines, takes = 16, 40
	var mu sync.Mutex
	seen := map[*goja.Runtime]bool{} // keeps every realm alive, so no address is reused
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range takes {
				rl, err := takeRealm()
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				assert.False(t, seen[rl.rt], "a realm was taken twice")
				seen[rl.rt] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, seen, goroutines*takes)
}

// TestRunsLeaveNothingInLaterRealms runs code that changes the built-ins
// and globals of its realm, from several goroutines at once, interleaved
// with runs that look for those changes: with realms made ahead and runs
// handed to goroutines that poll, no run may see another's.
func TestRunsLeaveNothingInLaterRealms(t *testing.T) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	defer r.Close()
	const spoil = `export default () => {
  (Object.prototype as any).spoiled = true; (globalThis as any).leftover = 1;
  Array.prototype.push = () => 0; JSON.stringify = () => "spoiled";
  (globalThis as any).console = undefined;
  return 0;
};`
	const look = `export default () => {
  const a: number[] = []; a.push(1);
  return [({} as any).spoiled, typeof (globalThis as any).leftover, a.length, JSON.stringify({x: 1}), typeof console];
};`
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				if (g+i)%2 == 0 {
					res := runCode(t, r, spoil, nil)
					assert.Equal(t, StatusSuccess, res.Status, "%v", res.Error)
					continue
				}
				res := runCode(t, r, look, nil)
				if assert.Equal(t, StatusSuccess, res.Status, "%v", res.Error) {
					assert.Equal(t, []any{UndefinedValue{}, "undefined", float64(1), `{"x":1}`, "object"}, res.Value)
				}
			}
		}()
	}
	wg.Wait()
}

// TestInProcessHandoffLosesNoRun starts and waits for many runs at once,
// each calling a host function once and returning its own arguments, with
// polling at its default, with a budget too short to ever see a run, and
// off: every run settles with its own result, and no run is executed
// twice (the host function is called once a run).
func TestInProcessHandoffLosesNoRun(t *testing.T) {
	const src = `import {tick} from "h";
export default async (g: number, i: number) => { await tick(); return [g, i]; };`
	for _, spin := range []time.Duration{0, time.Nanosecond, -1} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			r := New(&RunnerOptions{Mode: ModeInProcess, SpinWait: spin})
			defer r.Close()
			var calls atomic.Int64
			imports := map[string]map[string]any{"h": {"tick": HostFunc(func(context.Context, []any) (any, error) {
				calls.Add(1)
				return nil, nil
			})}}
			const goroutines, runs = 16, 50
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range runs {
						res := runCode(t, r, src, &Options{Imports: imports, Execute: &Execute{Args: []any{g, i}}})
						if assert.Equal(t, StatusSuccess, res.Status, "%v", res.Error) {
							assert.Equal(t, []any{float64(g), float64(i)}, res.Value)
						}
					}
				}()
			}
			wg.Wait()
			assert.Equal(t, int64(goroutines*runs), calls.Load(), "host function calls, one a run")
		})
	}
}

// TestWaitPollingHonoursItsContext checks that Wait returns the context's
// error for a run that does not settle, when the context ends while Wait
// polls and when it had ended before.
func TestWaitPollingHonoursItsContext(t *testing.T) {
	r := New(&RunnerOptions{Mode: ModeInProcess, SpinWait: 500 * time.Millisecond})
	defer r.Close()
	run := r.Start(testCtx, "export default () => { for (;;) {} };", &Options{Language: LanguageJavaScript})
	defer run.Terminate("")
	ctx, cancel := context.WithTimeout(testCtx, 20*time.Millisecond)
	defer cancel()
	_, err := run.Wait(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = run.Wait(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "a context that had ended")
}

// TestTheRealmMakerEndsWhenIdle checks that the goroutine that makes realms
// ahead ends after realmIdle without a run, and lets its realms go; the
// next run starts it again.
func TestTheRealmMakerEndsWhenIdle(t *testing.T) {
	realmMaker.mu.Lock()
	old := realmMaker.idle
	realmMaker.idle = 20 * time.Millisecond
	realmMaker.mu.Unlock()
	defer func() {
		realmMaker.mu.Lock()
		realmMaker.idle = old
		realmMaker.mu.Unlock()
	}()
	stopped := func() bool {
		realmMaker.mu.Lock()
		defer realmMaker.mu.Unlock()
		return !realmMaker.running && len(readyRealms) == 0
	}
	// A wish, so that a maker already waiting with the old idle time takes
	// the new one.
	_, err := takeRealm()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(readyRealms) > 0 }, 10*time.Second, time.Millisecond, "realms are made ahead")
	require.Eventually(t, stopped, 10*time.Second, 5*time.Millisecond, "the maker ends and its realms go")
	_, err = takeRealm()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(readyRealms) > 0 }, 10*time.Second, time.Millisecond, "the next run starts it again")
}

// TestEngineTasksAreRunOnce hands many tasks to engine goroutines from
// several goroutines at once, with polling budgets so short that
// goroutines keep stopping to poll as tasks arrive: every task must run,
// and run once.
func TestEngineTasksAreRunOnce(t *testing.T) {
	const putters, tasks = 8, 12000
	var wg sync.WaitGroup
	ran := make([]atomic.Int32, putters*tasks)
	wg.Add(putters * tasks)
	for p := range putters {
		go func() {
			for i := range tasks {
				k := p*tasks + i
				spin := time.Duration(i%3) * time.Microsecond // 0 (no polling), 1µs, 2µs
				goEngine(&engineTask{run: func() { ran[k].Add(1); wg.Done() }, spin: spin})
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("tasks were lost")
	}
	for k := range ran {
		if n := ran[k].Load(); n != 1 {
			t.Fatalf("task %d ran %d times", k, n)
		}
	}
}

// TestARunStoppedBeforeItBeginsTakesNoRealm: a run whose context ended
// before Start settles terminated, in either mode, without taking a worker
// or a realm; an engine interrupted before it runs returns the
// interruption without taking a realm. Such a run used to take a fresh
// realm, for nothing.
func TestARunStoppedBeforeItBeginsTakesNoRealm(t *testing.T) {
	var realms, workers atomic.Int32
	testHookTakeRealm = func() { realms.Add(1) }
	testHookGotWorker = func(*workerProc) { workers.Add(1) }
	defer func() { testHookTakeRealm, testHookGotWorker = nil, nil }()
	ctx, cancel := context.WithCancelCause(testCtx)
	cancel(fmt.Errorf("the caller gave up"))
	src := "export default () => 'ran';"
	bothModes(t, func(t *testing.T, r *Runner) {
		requireStatus(t, runCode(t, r, src, nil), StatusSuccess) // compiled and cached
		realms.Store(0)
		workers.Store(0)
		res := wait(t, r.Start(ctx, src, nil))
		requireStatus(t, res, StatusTerminated)
		assert.Equal(t, "Code execution terminated: the caller gave up", res.Error.Message)
		assert.Zero(t, realms.Load(), "realms taken")
		assert.Zero(t, workers.Load(), "workers taken")
	})
	t.Run("engine", func(t *testing.T) {
		realms.Store(0)
		e := newEngine(&engineJob{}, &logHost{})
		stop := &outcome{status: StatusTerminated, err: &Error{Name: "Terminated", Message: "before it began"}}
		e.interrupt(stop)
		assert.Same(t, stop, e.run())
		assert.Zero(t, realms.Load(), "realms taken")
	})
}
