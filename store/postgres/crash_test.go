package postgres_test

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/toolrun/toolrun/store/postgres"
)

// The crash test re-runs this test binary as a child process (selected by
// these environment variables) that executes a batch of slow tool calls
// against a PostgreSQL schema, and kills it with SIGKILL mid-batch.
const (
	envCrashDB    = "TOOLRUN_POSTGRES_CRASH_DB"
	envCrashLog   = "TOOLRUN_POSTGRES_CRASH_LOG"
	envCrashCalls = "TOOLRUN_POSTGRES_CRASH_CALLS"
	envCrashDelay = "TOOLRUN_POSTGRES_CRASH_DELAY"
	crashThread   = "thr-crash"
)

type slowArgs struct {
	N int `json:"n"`
}

// slowTool appends "n\n" to logPath when a call starts (outside the
// database, so executions are counted even when the process dies), then
// sleeps for delay.
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
			return toolrun.Text(fmt.Sprintf("done %d", a.N)), nil
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

func newCrashExecutor(t testing.TB, st toolrun.Store, logPath string, delay time.Duration) *toolrun.Executor {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(slowTool(logPath, delay)); err != nil {
		t.Fatal(err)
	}
	return toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st, CodeRunner: toolrun.NoCodeRunner{}})
}

// TestCrashHelper is the child process of TestCrashResume; it does nothing
// in a normal test run.
func TestCrashHelper(t *testing.T) {
	db := os.Getenv(envCrashDB)
	if db == "" {
		t.Skip("helper process of TestCrashResume")
	}
	st, err := postgres.Open(context.Background(), os.Getenv("TOOLRUN_POSTGRES_URL"), &postgres.Options{Schema: db})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Getenv(envCrashCalls))
	delay, _ := time.ParseDuration(os.Getenv(envCrashDelay))
	ex := newCrashExecutor(t, st, os.Getenv(envCrashLog), delay)
	if _, err := ex.Run(context.Background(), crashThread, crashBatch(n)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(0) // not reached when the parent kills us in time
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

// A process killed with SIGKILL in the middle of a batch loses no stored
// result and stores none twice; the database opens cleanly; running the
// batch again executes only the calls without a stored result. "slow" kills
// the child while a tool runs; "fast" (tools that return at once, hundreds
// of commits a second) most likely kills it in the middle of a write.
func TestCrashResume(t *testing.T) {
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
		t.Run(mode.name, func(t *testing.T) { crashResume(t, mode.calls, mode.delay, mode.killAt) })
	}
}

func crashResume(t *testing.T, crashCalls int, delay time.Duration, killAt int) {
	url := dbURL(t)
	dir := t.TempDir()
	db, logPath := newSchema(t), filepath.Join(dir, "executions.log")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDB+"="+db, envCrashLog+"="+logPath,
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
	st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: db})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer st.Close()
	ctx := t.Context()
	page, err := st.ListMessages(ctx, crashThread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Every stored result is there exactly once, in batch order, and is the
	// result of a call that ran; the calls that ran before the one the kill
	// interrupted are all stored.
	var stored []string
	for _, m := range page.Messages {
		if m.Role == toolrun.RoleTool {
			stored = append(stored, m.ToolCallID)
		}
	}
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
	rerunLog := filepath.Join(dir, "rerun.log")
	ex := newCrashExecutor(t, st, rerunLog, 0)
	outcomes, err := ex.Run(ctx, crashThread, crashBatch(crashCalls))
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
	page, err = st.ListMessages(ctx, crashThread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, m := range page.Messages {
		if m.Role == toolrun.RoleTool {
			seen[m.ToolCallID]++
		}
	}
	for _, c := range crashBatch(crashCalls) {
		if seen[c.ID] != 1 {
			t.Errorf("after the rerun %s has %d stored results, want 1", c.ID, seen[c.ID])
		}
	}
}
