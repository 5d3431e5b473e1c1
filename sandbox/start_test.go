package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// standInEnv selects, in a stand-in worker process started by
// standInCommand, how it behaves (see TestStandInWorkerProcess);
// standInDirEnv names a directory the stand-ins of one test share.
const (
	standInEnv    = "TOOLRUN_SANDBOX_TEST_STAND_IN"
	standInDirEnv = "TOOLRUN_SANDBOX_TEST_STAND_IN_DIR"
)

// standInCommand returns a WorkerCommand starting this test binary as a
// stand-in worker that behaves as behaviour says, sharing dir with the
// other stand-ins of the test.
func standInCommand(t *testing.T, behaviour, dir string) []string {
	env, err := exec.LookPath("env")
	if err != nil {
		t.Skip("the stand-in workers need env(1):", err)
	}
	return []string{env, "-u", WorkerEnv, standInEnv + "=" + behaviour, standInDirEnv + "=" + dir,
		os.Args[0], "-test.run=^TestStandInWorkerProcess$"}
}

// TestStandInWorkerProcess is not a test: it is a stand-in worker, started
// by standInCommand, that behaves as standInEnv says:
//   - "silent-twice": the first two processes started never say they are
//     ready (nor read anything); later ones are real workers.
//   - "ready-then-exit": says it is ready and exits.
//   - "deaf": says it is ready, compiles the first source it is sent, and
//     then stops reading its stdin.
//   - "unversioned", "next-version": says it is ready in version 0 of the
//     worker protocol (a worker from before versions) or in the version
//     after this one, then waits for frames it never answers.
func TestStandInWorkerProcess(t *testing.T) {
	behaviour := os.Getenv(standInEnv)
	if behaviour == "" {
		t.Skip("stand-in worker process for the start-up tests")
	}
	out := bufio.NewWriter(os.Stdout)
	send := func(f *frame) {
		_ = writeFrame(out, f)
		_ = out.Flush()
	}
	switch behaviour {
	case "silent-twice":
		dir := os.Getenv(standInDirEnv)
		for i := 1; i <= 2; i++ {
			if os.Mkdir(filepath.Join(dir, strconv.Itoa(i)), 0o700) == nil {
				time.Sleep(time.Hour)
				os.Exit(0)
			}
		}
		env := append(os.Environ(), WorkerEnv+"=1")
		err := syscall.Exec(os.Args[0], os.Args[:1], env)
		t.Fatalf("exec as a worker: %v", err)
	case "unversioned", "next-version":
		v := uint64(0)
		if behaviour == "next-version" {
			v = wireVersion + 1
		}
		send(&frame{T: frReady, ID: v})
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "ready-then-exit":
		send(&frame{T: frReady, ID: wireVersion})
		os.Exit(0)
	case "deaf":
		send(&frame{T: frReady, ID: wireVersion})
		f, err := readHostFrame(bufio.NewReader(os.Stdin))
		if err != nil || f.T != frCompile {
			os.Exit(2)
		}
		c, lerr := compile(requestFromSpec(f.Comp))
		if lerr != nil {
			send(&frame{T: frCompiled, ID: f.ID, Err: lerr})
		} else {
			send(&frame{T: frCompiled, ID: f.ID, Bund: c.spec()})
		}
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	t.Fatalf("no stand-in behaviour %q", behaviour)
}

// waitBounded waits for run for up to a minute: long enough for any
// loaded machine, short enough that a run that never ends fails the test
// instead of hanging it.
func waitBounded(t *testing.T, run *Run) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx, time.Minute)
	defer cancel()
	res, err := run.Wait(ctx)
	require.NoError(t, err, "the run did not end")
	return res
}

// watchWorkers returns the pids of the workers of r's pool seen alive from
// now until run has settled, until no worker of the pool is alive or
// starting, or until a minute has passed. When closeAfter, r is closed
// once run has settled.
func watchWorkers(r *Runner, run *Run, closeAfter bool) (pids []int, settled bool) {
	seen := map[int]bool{}
	closed := false
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		done := !run.Running()
		if done && closeAfter && !closed {
			_ = r.Close()
			closed = true
		}
		p := r.pool
		p.mu.Lock()
		for w := range p.live {
			if !seen[w.cmd.Process.Pid] {
				seen[w.cmd.Process.Pid] = true
				pids = append(pids, w.cmd.Process.Pid)
			}
		}
		empty := len(p.live) == 0 && p.spawning == 0
		p.mu.Unlock()
		if done && (empty || !closeAfter) {
			return pids, true
		}
	}
	return pids, false
}

// childOfOurs reports whether pid is a child of this process, running or
// a zombie waiting to be reaped (from /proc/<pid>/stat).
func childOfOurs(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 1 && fields[1] == strconv.Itoa(os.Getpid())
}

// requireReaped requires every pid to be neither running nor a zombie
// child of this process, soon.
func requireReaped(t *testing.T, pids []int) {
	t.Helper()
	for _, pid := range pids {
		require.Eventually(t, func() bool { return !childOfOurs(pid) }, 30*time.Second, 10*time.Millisecond,
			"worker process %d is still running or was never reaped", pid)
	}
}

// requireNoGoroutineLeak requires the goroutines to come back to before
// (or fewer), soon: workers stopped by Close are killed after two seconds
// if they linger. (It counts on the test's goroutine: assert.Eventually
// would count its own.)
func requireNoGoroutineLeak(t *testing.T, before int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if runtime.NumGoroutine() <= before {
			return
		}
	}
	buf := make([]byte, 1<<20)
	t.Errorf("goroutines leaked: %d before, %d now:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
}

// TestAWorkerThatNeverSaysItIsReadyIsKilled: a worker command that starts
// but never serves (a stand-in that sleeps, or a wrapper script whose
// child keeps the worker's pipes open) does not hold a run: after
// WorkerStartTimeout the worker is killed and reaped, the run ends with
// WorkerUnavailable naming the timeout, and the pool goes on starting
// workers, which serve the next run. The run used to wait for ever.
func TestAWorkerThatNeverSaysItIsReadyIsKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("needs sh(1):", err)
	}
	for _, tc := range []struct {
		name    string
		command func(t *testing.T, dir string) []string
	}{
		{"silent", func(t *testing.T, dir string) []string { return standInCommand(t, "silent-twice", dir) }},
		{"wrapper whose child keeps the pipes", func(t *testing.T, dir string) []string {
			// The first two starts leave a sleep holding stdout and stderr
			// behind the killed shell (its pid is written down, for the
			// test to end it); later ones become this binary as a real
			// worker (WorkerEnv=1 is inherited).
			t.Cleanup(func() {
				files, _ := filepath.Glob(filepath.Join(dir, "sleep.*"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			return []string{sh, "-c", `if mkdir "$1/1" 2>/dev/null || mkdir "$1/2" 2>/dev/null; then
  sleep 120 & echo $! >"$1/sleep.$$"; wait; exit 0
fi
exec "$0"`, os.Args[0], dir}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			dir := t.TempDir()
			r := New(&RunnerOptions{PoolSize: 1, WorkerCommand: tc.command(t, dir), WorkerStartTimeout: 300 * time.Millisecond})
			defer r.Close()
			run := r.Start(testCtx, "export default () => 'never';", nil)
			pids, settled := watchWorkers(r, run, false)
			require.True(t, settled, "the run did not end")
			res := waitBounded(t, run)
			requireStatus(t, res, StatusError)
			assert.Equal(t, "WorkerUnavailable", res.Error.Name)
			assert.Contains(t, res.Error.Message, "started but did not say it was ready within 300ms")
			assert.Contains(t, res.Error.Message, "it was killed")
			assert.NotEmpty(t, pids)

			// The pool starts fresh workers, which serve.
			run = r.Start(testCtx, "export default () => 'served';", nil)
			more, settled := watchWorkers(r, run, true)
			require.True(t, settled, "the second run did not end, or its workers did not stop")
			res = waitBounded(t, run)
			requireStatus(t, res, StatusSuccess)
			assert.Equal(t, "served", res.Value)

			requireReaped(t, append(pids, more...))
			requireNoGoroutineLeak(t, before)
		})
	}
}

// TestAWorkerOfAnotherProtocolVersionIsRefused: a worker whose ready frame
// says another version of the worker protocol (a binary of another toolrun
// release, or one from before versions) is killed and reaped at once, and
// the run that waited for it ends with WorkerUnavailable naming both
// versions, instead of exchanging frames with it that neither side reads
// as the other meant.
func TestAWorkerOfAnotherProtocolVersionIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	for _, tc := range []struct {
		behaviour string
		version   uint64
	}{{"unversioned", 0}, {"next-version", wireVersion + 1}} {
		t.Run(tc.behaviour, func(t *testing.T) {
			before := runtime.NumGoroutine()
			r := New(&RunnerOptions{PoolSize: 1, MaxWorkers: 1, WorkerCommand: standInCommand(t, tc.behaviour, t.TempDir())})
			run := r.Start(testCtx, "export default () => 'never';", nil)
			pids, settled := watchWorkers(r, run, true)
			require.True(t, settled, "the run did not end, or its worker did not stop")
			res := waitBounded(t, run)
			requireStatus(t, res, StatusError)
			assert.Equal(t, "WorkerUnavailable", res.Error.Name)
			assert.Contains(t, res.Error.Message, fmt.Sprintf("speaks version %d of the worker protocol, and this host version %d", tc.version, wireVersion))
			assert.NotEmpty(t, pids)
			requireReaped(t, pids)
			requireNoGoroutineLeak(t, before)
		})
	}
}

// TestARunDoesNotWaitForAWorkerThatStoppedReading: a worker that said it
// was ready and then stopped reading its stdin, with a run frame too large
// for the pipe on its way, does not keep the run's slot, a goroutine and
// the process once the run's timeout has passed: the run ends terminated,
// and the worker is killed TerminateGrace later and reaped. The run used
// to end while the write, the slot and the worker stayed for ever.
func TestARunDoesNotWaitForAWorkerThatStoppedReading(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("checks processes through /proc")
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration // long enough for the run frame to be on its way
		command func(t *testing.T, dir string) []string
	}{
		{"plain", 300 * time.Millisecond, func(t *testing.T, dir string) []string { return standInCommand(t, "deaf", dir) }},
		// A wrapper (a jail, a shell) whose child keeps the worker's pipes
		// open after the worker is killed: the host's write of the run
		// frame, and its reading of the worker's frames, used to wait for
		// that child's end, and so did the run's slot and the worker.
		{"wrapper whose child keeps the pipes", 2 * time.Second, func(t *testing.T, dir string) []string {
			sh, err := exec.LookPath("sh")
			if err != nil {
				t.Skip("needs sh(1):", err)
			}
			t.Cleanup(func() {
				if b, err := os.ReadFile(filepath.Join(dir, "sleep")); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			})
			return append([]string{sh, "-c", `d=$1; shift; sleep 120 & echo $! >"$d/sleep"; exec "$@"`, "sh", dir},
				standInCommand(t, "deaf", dir)...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			r := New(&RunnerOptions{PoolSize: 1, MaxWorkers: 1, WorkerCommand: tc.command(t, t.TempDir()),
				TerminateGrace: 100 * time.Millisecond})
			defer r.Close()
			run := r.Start(testCtx, "export default (s: string) => s.length;", &Options{
				Execute: &Execute{Args: []any{strings.Repeat("x", 1<<20)}}, Timeout: tc.timeout})
			pids, settled := watchWorkers(r, run, true)
			res := waitBounded(t, run)
			requireStatus(t, res, StatusTerminated)
			assert.Contains(t, res.Error.Message, "timed out")
			require.True(t, settled, "the worker holding the run frame was not stopped")
			assert.NotEmpty(t, pids)
			assert.Eventually(t, func() bool {
				select {
				case r.pool.slots <- struct{}{}:
					<-r.pool.slots
					return true
				default:
					return false
				}
			}, 30*time.Second, 10*time.Millisecond, "the run's slot was not freed")
			requireReaped(t, pids)
			requireNoGoroutineLeak(t, before)
		})
	}
}
