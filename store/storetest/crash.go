//go:build unix

package storetest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// The crash check re-runs the test binary as a child process (selected by
// these environment variables) that executes a batch of slow tool calls
// against the store, and kills it with SIGKILL mid-batch.
const (
	envCrashLoc   = "TOOLRUN_STORETEST_CRASH_LOC"
	envCrashLog   = "TOOLRUN_STORETEST_CRASH_LOG"
	envCrashCalls = "TOOLRUN_STORETEST_CRASH_CALLS"
	envCrashDelay = "TOOLRUN_STORETEST_CRASH_DELAY"
	crashThread   = "thr-crash"
)

// CrashOptions configures Crash. Open and HelperTest are required.
type CrashOptions struct {
	// Open opens the store kept at loc (a file path, a schema name …), in
	// the test process and in the child process.
	Open func(ctx context.Context, loc string) (toolrun.Store, error)
	// HelperTest names the test of the calling package whose first line is
	// CrashHelper(t, open); the child process runs only that test.
	HelperTest string
	// AfterReopen, when set, checks the reopened store before the results
	// are checked (for example a database integrity check).
	AfterReopen func(t *testing.T, st toolrun.Store)
}

// CrashHelper is the child side of Crash. Call it at the start of the
// test named by CrashOptions.HelperTest; in a normal test run it skips the
// test. In the child it runs the batch against the store open opens and
// exits.
func CrashHelper(t *testing.T, open func(ctx context.Context, loc string) (toolrun.Store, error)) {
	loc := os.Getenv(envCrashLoc)
	if loc == "" {
		t.Skip("helper process of the storetest crash check")
	}
	st, err := open(context.Background(), loc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Getenv(envCrashCalls))
	delay, _ := time.ParseDuration(os.Getenv(envCrashDelay))
	ex := crashExecutor(t, st, os.Getenv(envCrashLog), delay)
	if _, err := ex.Run(context.Background(), crashThread, crashBatch(n)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0) // not reached when the parent kills the child in time
}

// Crash checks crash safety: a process killed with SIGKILL in the middle
// of a batch loses no stored result and stores none twice; the store opens
// cleanly; running the batch again executes only the calls without a
// stored result. newLoc returns a fresh, empty location for each of its two
// modes: "slow" kills the child while a tool runs; "fast" (tools that
// return at once, hundreds of commits a second) most likely kills it in
// the middle of a write.
func Crash(t *testing.T, newLoc func(t *testing.T) string, opts *CrashOptions) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	for _, mode := range []struct {
		name   string
		calls  int
		delay  time.Duration
		killAt int // started calls before the kill
	}{
		{"slow", 12, 150 * time.Millisecond, 6},
		{"fast", 3000, 0, 200},
	} {
		t.Run(mode.name, func(t *testing.T) { crashResume(t, newLoc(t), opts, mode.calls, mode.delay, mode.killAt) })
	}
}

type slowArgs struct {
	N int `json:"n"`
}

// slowTool appends "n\n" to logPath when a call starts (outside the store,
// so executions are counted even when the process dies), then sleeps.
func slowTool(logPath string, delay time.Duration) *toolrun.Func[slowArgs] {
	return &toolrun.Func[slowArgs]{
		Name:        "slow",
		Description: "Works for a while.",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a slowArgs) (toolrun.Result, error) {
			f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return toolrun.Result{}, err
			}
			fmt.Fprintf(f, "%d\n", a.N)
			f.Close()
			time.Sleep(delay)
			return toolrun.Textf("done %d", a.N), nil
		},
	}
}

func crashBatch(n int) []toolrun.ToolCall {
	calls := make([]toolrun.ToolCall, n)
	for i := range calls {
		calls[i] = toolrun.ToolCall{ID: fmt.Sprintf("call-%02d", i), Name: "slow", Arguments: fmt.Sprintf(`{"n":%d}`, i)}
	}
	return calls
}

func crashExecutor(t testing.TB, st toolrun.Store, logPath string, delay time.Duration) *toolrun.Executor {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(slowTool(logPath, delay)); err != nil {
		t.Fatal(err)
	}
	return toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st})
}

// readExecutions returns the call numbers the tool started, in order.
func readExecutions(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "%d", &n); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func storedResults(t *testing.T, st toolrun.Store) []string {
	t.Helper()
	page, err := st.ListMessages(t.Context(), crashThread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Messages {
		if m.Role == toolrun.RoleTool {
			ids = append(ids, m.ToolCallID)
		}
	}
	return ids
}

func crashResume(t *testing.T, loc string, opts *CrashOptions, crashCalls int, delay time.Duration, killAt int) {
	logPath := filepath.Join(t.TempDir(), "executions.log")
	cmd := exec.Command(os.Args[0], "-test.run=^"+opts.HelperTest+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashLoc+"="+loc, envCrashLog+"="+logPath,
		envCrashCalls+"="+strconv.Itoa(crashCalls), envCrashDelay+"="+delay.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill the child once it is well into the batch.
	deadline := time.Now().Add(30 * time.Second)
	for len(readExecutions(t, logPath)) < killAt {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the child made no progress; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(delay / 4) // slow mode: land inside a call, not between two
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v; stderr:\n%s", err, stderr.String())
	}
	executed := readExecutions(t, logPath)
	if len(executed) >= crashCalls {
		t.Fatalf("the child finished all %d calls before the kill", crashCalls)
	}

	// The store opens cleanly.
	st, err := opts.Open(t.Context(), loc)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	if c, ok := st.(io.Closer); ok {
		defer c.Close()
	}
	if opts.AfterReopen != nil {
		opts.AfterReopen(t, st)
	}
	// Every stored result is there exactly once, in batch order; the calls
	// that ran before the one the kill interrupted are all stored.
	stored := storedResults(t, st)
	want := make([]string, len(stored))
	for i := range want {
		want[i] = fmt.Sprintf("call-%02d", i)
	}
	if !slices.Equal(stored, want) {
		t.Fatalf("stored results %q; want each of the first %d calls once, in order", stored, len(stored))
	}
	if k := len(stored); k < len(executed)-1 || k > len(executed) {
		t.Errorf("%d results stored for %d started calls; only the call in flight at the kill may lack one", k, len(executed))
	}
	t.Logf("killed after %d calls started, %d results stored", len(executed), len(stored))

	// Run the same batch again: stored calls are not executed again.
	rerunLog := filepath.Join(t.TempDir(), "rerun.log")
	outcomes, err := crashExecutor(t, st, rerunLog, 0).Run(t.Context(), crashThread, crashBatch(crashCalls))
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	rerun := readExecutions(t, rerunLog)
	for _, n := range rerun {
		if n < len(stored) {
			t.Errorf("call-%02d ran again although its result was stored", n)
		}
	}
	if len(rerun) != crashCalls-len(stored) {
		t.Errorf("rerun executed %d calls (%v), want the %d without a stored result", len(rerun), rerun, crashCalls-len(stored))
	}
	resumed := 0
	for _, o := range outcomes {
		if o.Resumed {
			resumed++
		}
	}
	if resumed != len(stored) {
		t.Errorf("%d outcomes report Resumed, want %d", resumed, len(stored))
	}
	after := storedResults(t, st)
	want = make([]string, crashCalls)
	for i := range want {
		want[i] = fmt.Sprintf("call-%02d", i)
	}
	if !slices.Equal(after, want) {
		t.Errorf("after the rerun the stored results are %q, want every call once, in order", after)
	}
}
