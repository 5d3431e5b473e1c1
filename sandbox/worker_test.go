package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkerCommandOption(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	r := New(&RunnerOptions{WorkerCommand: []string{exe}, PoolSize: 1})
	defer r.Close()
	res := runCode(t, r, "export default () => 'from helper';", nil)
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "from helper", res.Value)

	bad := New(&RunnerOptions{WorkerCommand: []string{filepath.Join(t.TempDir(), "no-such-worker")}})
	defer bad.Close()
	res = runCode(t, bad, "export default () => 1;", nil)
	requireStatus(t, res, StatusError)
	assert.Equal(t, "WorkerUnavailable", res.Error.Name)

	// A command that is not a worker at all: the run fails, the host lives.
	notWorker := New(&RunnerOptions{WorkerCommand: []string{"/bin/true"}})
	defer notWorker.Close()
	res = runCode(t, notWorker, "export default () => 1;", nil)
	requireStatus(t, res, StatusError)
	assert.Equal(t, "WorkerCrashed", res.Error.Name)
}

func TestHelperBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "toolrun-sandbox-worker")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/toolrun-sandbox-worker").CombinedOutput()
	require.NoError(t, err, string(out))
	r := New(&RunnerOptions{WorkerCommand: []string{bin}, PoolSize: 1})
	defer r.Close()
	res := runCode(t, r, "export default (a: number) => a * 3;", &Options{Execute: &Execute{Args: []any{14}}})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, 42.0, res.Value)

	// Run by hand it explains itself and exits non-zero.
	err = exec.Command(bin).Run()
	assert.Error(t, err)
}

// TestTerminateWithOneCPU checks that a worker started with GOMAXPROCS=1
// still notices a terminate frame promptly while JavaScript spins.
func TestTerminateWithOneCPU(t *testing.T) {
	t.Setenv("GOMAXPROCS", "1") // inherited by the worker processes only
	r := New(&RunnerOptions{PoolSize: 1})
	defer r.Close()
	var times []time.Duration
	for i := 0; i < 7; i++ {
		started := make(chan struct{}, 1)
		run := r.Start(testCtx, "export default () => { report(1); for(;;){} }", &Options{Report: func(any) {
			select {
			case started <- struct{}{}:
			default:
			}
		}})
		<-started
		time.Sleep(5 * time.Millisecond)
		t0 := time.Now()
		run.Terminate("stop")
		res := wait(t, run)
		requireStatus(t, res, StatusTerminated)
		times = append(times, time.Since(t0))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	// Without the second P the frame waits for a scheduler tick (10 ms or
	// more); well below the kill grace period either way.
	assert.Less(t, times[len(times)/2], 8*time.Millisecond, "median terminate")
}

func TestMaxWorkersQueuesRuns(t *testing.T) {
	r := New(&RunnerOptions{PoolSize: 1, MaxWorkers: 1})
	defer r.Close()
	release := make(chan struct{})
	gate := HostFunc(func(ctx context.Context, args []any) (any, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "first", nil
	})
	first := r.Start(testCtx, "import {gate} from 'g';\nexport default () => gate();", &Options{Imports: map[string]map[string]any{"g": {"gate": gate}}})
	second := r.Start(testCtx, "export default () => 'second';", nil)
	third := r.Start(testCtx, "export default () => 'third';", nil)
	time.Sleep(100 * time.Millisecond)
	assert.True(t, second.Running(), "the second run waits for the only worker")

	t0 := time.Now()
	third.Terminate("not needed")
	res := wait(t, third)
	requireStatus(t, res, StatusTerminated)
	assert.Less(t, time.Since(t0), time.Second, "a waiting run terminates at once")

	close(release)
	res = wait(t, first)
	requireStatus(t, res, StatusSuccess)
	res = wait(t, second)
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "second", res.Value)

	r.pool.mu.Lock()
	live := len(r.pool.live)
	r.pool.mu.Unlock()
	assert.LessOrEqual(t, live, 3, "at most MaxWorkers busy plus the warm pool")
}

// TestBlockingHostCallDoesNotStopReading has a host function that blocks
// until a second call arrives in a later frame: the goroutine serving the
// first call reads frames, so another one must take over reading.
func TestBlockingHostCallDoesNotStopReading(t *testing.T) {
	_, wk := runners()
	bCalled := make(chan struct{})
	res := runCode(t, wk, `import {a, b} from 'h';
export default async () => {
  const pa = a();
  const t = Date.now();
  while (Date.now() - t < 20) {} // a goes out alone, before b is made
  return [await b(), await pa];
}`, &Options{Timeout: 20 * time.Second, Imports: map[string]map[string]any{"h": {
		"a": HostFunc(func(ctx context.Context, args []any) (any, error) {
			select {
			case <-bCalled:
				return "a", nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}),
		"b": HostFunc(func(ctx context.Context, args []any) (any, error) { close(bCalled); return "b", nil }),
	}}})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, []any{"b", "a"}, res.Value)
}

// TestRunOfAWorkerThatDiedBeforeTakingItSettles: a worker that dies after
// the pool handed it out, before the run was made its own, does not take
// the run with it: the run goes to another worker, and fails with
// WorkerCrashed when they all die so. It used to wait for ever (seen with
// a WorkerCommand of /bin/true on a loaded machine, before workers said
// they were ready).
func TestRunOfAWorkerThatDiedBeforeTakingItSettles(t *testing.T) {
	testHookGotWorker = func(w *workerProc) {
		for !w.dead.Load() { // the worker says it is ready and exits
			time.Sleep(time.Millisecond)
		}
	}
	defer func() { testHookGotWorker = nil }()
	r := New(&RunnerOptions{WorkerCommand: standInCommand(t, "ready-then-exit", t.TempDir())})
	defer r.Close()
	res := runCode(t, r, "export default () => 1;", nil)
	requireStatus(t, res, StatusError)
	assert.Equal(t, "WorkerCrashed", res.Error.Name)
	assert.Contains(t, res.Error.Message, "exited before it could take the run")
}

// TestWorkerKilledFromOutside kills, with SIGKILL, the worker running a
// run, as an operator or the system's out-of-memory killer would. When the
// kernel says its out-of-memory killer killed nothing meanwhile, the run is
// not blamed: it ends with WorkerCrashed naming the kill. When it killed a
// process, the worker is taken to be that process, and the run to have
// exceeded its memory.
func TestWorkerKilledFromOutside(t *testing.T) {
	for _, tc := range []struct {
		name     string
		oomKills func() int64
		want     Status
	}{
		{"by another process", func() int64 { return 7 }, StatusError},
		{"by the out-of-memory killer", func() func() int64 {
			var n atomic.Int64
			return func() int64 { return n.Add(1) }
		}(), StatusMemory},
		{"where the kernel does not say", func() int64 { return -1 }, StatusMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oomKillStandIn.Store(&tc.oomKills)
			defer oomKillStandIn.Store(nil)
			r := New(&RunnerOptions{PoolSize: 1, MaxWorkers: 1})
			defer r.Close()
			run := r.Start(testCtx, "export default () => { for (;;) {} };", &Options{Timeout: time.Minute})
			pid := runningWorker(t, r)
			require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
			res := waitBounded(t, run)
			requireStatus(t, res, tc.want)
			if tc.want == StatusMemory {
				assert.Equal(t, "MemoryLimitExceeded", res.Error.Name)
				return
			}
			assert.Equal(t, "WorkerCrashed", res.Error.Name)
			assert.Contains(t, res.Error.Message, "killed (SIGKILL) while running, by a process other than the runner")
			assert.Contains(t, res.Error.Message, "out-of-memory killer has killed no process since the worker started")
			// The pool replaces the worker: the next run succeeds.
			requireStatus(t, runCode(t, r, "export default () => 2;", nil), StatusSuccess)
		})
	}
}

// TestOOMKillsAreCounted reads the kernel's count of out-of-memory kills.
func TestOOMKillsAreCounted(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the count is read on Linux only")
	}
	if _, err := os.Stat("/proc/vmstat"); err != nil {
		t.Skip("no /proc/vmstat:", err)
	}
	assert.GreaterOrEqual(t, oomKills(), int64(0), "no oom_kill line in /proc/vmstat")
}

// runningWorker returns the pid of the worker of r that runs a run, once
// the run has reached it.
func runningWorker(t *testing.T, r *Runner) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p := r.pool
		p.mu.Lock()
		for w := range p.live {
			w.mu.Lock()
			wr := w.cur
			w.mu.Unlock()
			if wr != nil && wr.phase.Load() == phaseRunning {
				p.mu.Unlock()
				return w.cmd.Process.Pid
			}
		}
		p.mu.Unlock()
	}
	t.Fatal("no worker took the run")
	return 0
}
