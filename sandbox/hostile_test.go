package sandbox

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type hostileCase struct {
	name    string
	src     string
	opts    func() *Options
	mapOpts map[string]any
	status  Status
	errName string // expected error name, "" = any
	message string // substring of the error message, "" = any
	check   func(t *testing.T, res Result)
}

func hostileCatalogue(panicked *atomic.Int32, hostCfg map[string]any) []hostileCase {
	short := func() *Options { return &Options{Timeout: 300 * time.Millisecond, MemoryLimitBytes: memoryTestSize} }
	mem := func() *Options { return &Options{Timeout: 30 * time.Second, MemoryLimitBytes: memoryTestSize} }
	return []hostileCase{
		{name: "infinite loop", src: "export default () => { for(;;){} }", opts: short, status: StatusTerminated, errName: "Terminated", message: "timed out"},
		{name: "endless microtasks", src: "export default () => { const spin = () => Promise.resolve().then(spin); spin(); return new Promise(() => {}); }", opts: short, status: StatusTerminated},
		{name: "endless awaits", src: "export default async () => { for(;;) await null; }", opts: short, status: StatusTerminated},
		{name: "unbounded recursion", src: "function f(n: number): number { return f(n + 1) + 1; }\nexport default () => f(0);", opts: mem, status: StatusError, errName: "RangeError", message: "Maximum call stack size exceeded"},
		{name: "recursion through builtins", src: "function f(): any { return [1].map(f); }\nexport default () => f();", opts: func() *Options {
			return &Options{Timeout: 30 * time.Second, MemoryLimitBytes: memoryTestSize, MaxCallStackSize: 3000}
		}, status: StatusError, errName: "RangeError"},
		{name: "catastrophic regexp", src: "export default () => /^((a+)+)\\2x$/.test('a'.repeat(40));", opts: short, status: StatusTerminated},
		{name: "gradual heap growth", src: "export default () => { const a: number[][] = []; for(;;) a.push(new Array(1000).fill(1)); }", opts: mem, status: StatusMemory, errName: "MemoryLimitExceeded"},
		{name: "repeat 2**40", src: "export default () => 'x'.repeat(2**40).length;", opts: mem, status: StatusMemory},
		{name: "padEnd 2**40", src: "export default () => 'x'.padEnd(2**40).length;", opts: mem, status: StatusMemory},
		{name: "huge array fill", src: "export default () => new Array(2e8).fill(0).length;", opts: mem, status: StatusMemory},
		{name: "huge typed array", src: "export default () => new Uint8Array(2**40).length;", opts: mem, status: StatusMemory},
		{name: "string doubling", src: "export default () => { let s = 'x'; for(;;) s += s; }", opts: mem, status: StatusMemory},
		{name: "repeat 2**28 builtin", src: "export default () => 'x'.repeat(2**28).length;", opts: mem, status: StatusMemory},
		{name: "Function constructor", src: "export default () => Function('return this')();", opts: short, status: StatusError, errName: "EvalError", message: "Dynamic code loading is disabled"},
		{name: "constructor chain", src: "export default () => (globalThis as any).constructor.constructor('return process')();", opts: short, status: StatusError, errName: "EvalError"},
		{name: "host objects", src: `export default () => {
  const g: any = globalThis;
  return [typeof g.process, typeof g.require, typeof g.fetch, typeof g.global, typeof g.Deno,
    Object.getOwnPropertyNames(g).filter(n => /process|require|fetch|setTimeout|Go|go/.test(n))];
}`, opts: short, status: StatusSuccess, check: func(t *testing.T, res Result) {
			assert.Equal(t, []any{"undefined", "undefined", "undefined", "undefined", "undefined", []any{}}, res.Value)
		}},
		{name: "prototype pollution of bridged object", src: `import * as cfg from "cfg";
export default async () => {
  const c: any = cfg;
  c.settings.limit = 1e9; c.settings.__proto__.admin = true; c.list.push("evil");
  Object.prototype.toString = () => "pwned"; (Array.prototype as any).push = () => 0;
  try { c.extra = 1; } catch {}
  return [await c.get(), ({} as any).admin];
}`, opts: func() *Options {
			return &Options{Timeout: 10 * time.Second, Imports: map[string]map[string]any{"cfg": hostCfg}}
		}, status: StatusSuccess, check: func(t *testing.T, res Result) {
			assert.Equal(t, []any{"fine", true}, res.Value)
		}},
		{name: "panicking host function", src: "import {boom} from 'h';\nexport default async () => { await boom(); };", opts: func() *Options {
			return &Options{Timeout: 10 * time.Second, Imports: map[string]map[string]any{"h": {"boom": HostFunc(func(ctx context.Context, args []any) (any, error) {
				panicked.Add(1)
				var m map[string]int
				m["x"] = 1 // nil map write: a real runtime panic
				return nil, nil
			})}}}
		}, status: StatusError, message: "host function panicked"},
		{name: "report flood", src: "export default () => { for (let i = 0; ; i++) report(i); };", opts: func() *Options {
			return &Options{Timeout: 30 * time.Second, Report: func(any) {}}
		}, status: StatusError, errName: "RangeError", message: "Report limit exceeded", check: func(t *testing.T, res Result) {
			assert.Len(t, res.Reports, maxReports)
		}},
		{name: "log flood", src: "export default () => { for (let i = 0; i < 100000; i++) console.log('x'.repeat(1000)); return 1; };", opts: mem, status: StatusSuccess, check: func(t *testing.T, res Result) {
			assert.LessOrEqual(t, len(res.Logs), maxLogs)
		}},
		{name: "host call flood", src: "import {f} from 'h';\nexport default () => { for (;;) f(); };", opts: func() *Options {
			return &Options{Timeout: 300 * time.Millisecond, Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) { return 1, nil })}}}
		}, status: StatusTerminated},
		{name: "too many pending host calls", src: "import {f} from 'h';\nexport default async () => { const ps = []; for (let i = 0; i < 5000; i++) ps.push(f()); await Promise.all(ps); };", opts: func() *Options {
			return &Options{Timeout: 20 * time.Second, Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) { return 1, nil })}}}
		}, status: StatusError, errName: "RangeError", message: "Too many pending host calls"},
		{name: "await never settles", src: "export default async () => { await new Promise(() => {}); };", opts: short, status: StatusTerminated},
		{name: "syntax error", src: "export default () => {", opts: short, status: StatusLinkError, errName: "SyntaxError"},
		{name: "typescript type syntax error", src: "let x: Array<number = [];\nexport default () => x;", opts: short, status: StatusLinkError, errName: "SyntaxError", message: "Line 1 of <runCode>"},
		{name: "missing export", src: "export const a = 1;", opts: func() *Options { return &Options{Execute: &Execute{Fn: "main"}} }, status: StatusLinkError, message: "does not provide an export named 'main'"},
		{name: "bad option key", src: "export default () => 1;", mapOpts: map[string]any{"memoryLimit": 1}, status: StatusLinkError, errName: "InvalidCodeExecutionOptions", message: "Unknown runCode option: memoryLimit"},
	}
}

// TestHostileCatalogue runs hostile code in worker mode; every case must end
// with its status, and the host must stay healthy afterwards.
func TestHostileCatalogue(t *testing.T) {
	r := New(&RunnerOptions{PoolSize: 2})
	defer r.Close()
	var panicked atomic.Int32
	hostCfg := map[string]any{
		"settings": map[string]any{"limit": 10},
		"list":     []any{"a"},
		"get":      HostFunc(func(ctx context.Context, args []any) (any, error) { return "fine", nil }),
	}
	goroutinesBefore := runtime.NumGoroutine()
	t.Run("cases", func(t *testing.T) {
		for _, c := range hostileCatalogue(&panicked, hostCfg) {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				var run *Run
				start := time.Now()
				if c.mapOpts != nil {
					run = r.StartMap(testCtx, c.src, c.mapOpts)
				} else {
					run = r.Start(testCtx, c.src, c.opts())
				}
				res := wait(t, run)
				require.Equal(t, c.status, res.Status, "error: %v (after %s)", res.Error, time.Since(start))
				if c.errName != "" {
					assert.Equal(t, c.errName, res.Error.Name, "%v", res.Error)
				}
				if c.message != "" {
					assert.Contains(t, res.Error.Message, c.message)
				}
				if c.check != nil {
					c.check(t, res)
				}
			})
		}
	})
	assert.Equal(t, int32(1), panicked.Load())
	assert.Equal(t, map[string]any{"limit": 10}, hostCfg["settings"], "the host's value is unchanged")
	assert.Equal(t, []any{"a"}, hostCfg["list"])

	// The host is healthy: new runs work, in both modes, and nothing leaked.
	res := runCode(t, r, "export default () => ({} as any).admin ?? 'clean';", nil)
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "clean", res.Value)
	ip, _ := runners()
	res = runCode(t, ip, "export default () => 1 + 1;", nil)
	requireStatus(t, res, StatusSuccess)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapAlloc, uint64(512<<20), "host heap stayed small")
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() < goroutinesBefore+50 }, 10*time.Second, 50*time.Millisecond, "goroutines leaked")
}

// TestHostileInProcess covers what in-process mode can contain: loops,
// microtasks, recursion and dynamic code (memory bombs need worker mode).
func TestHostileInProcess(t *testing.T) {
	ip, _ := runners()
	var panicked atomic.Int32
	for _, c := range hostileCatalogue(&panicked, map[string]any{"settings": map[string]any{}, "list": []any{}, "get": HostFunc(func(ctx context.Context, args []any) (any, error) { return "fine", nil })}) {
		if c.status == StatusMemory || strings.Contains(c.name, "regexp") || strings.Contains(c.name, "builtins") || c.name == "log flood" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			var run *Run
			if c.mapOpts != nil {
				run = ip.StartMap(testCtx, c.src, c.mapOpts)
			} else {
				run = ip.Start(testCtx, c.src, c.opts())
			}
			res := wait(t, run)
			require.Equal(t, c.status, res.Status, "error: %v", res.Error)
			if c.errName != "" {
				assert.Equal(t, c.errName, res.Error.Name)
			}
		})
	}
}

// TestWorkerCrashIsReplaced kills a worker mid-run: the run settles with an
// error and the pool keeps working.
func TestWorkerCrashIsReplaced(t *testing.T) {
	r := New(&RunnerOptions{PoolSize: 1})
	defer r.Close()
	run := r.Start(testCtx, "export default () => new Promise(() => {})", nil)
	require.Eventually(t, func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		return run.term != nil
	}, 5*time.Second, time.Millisecond)
	w := findBusyWorker(t, r)
	require.NotNil(t, w)
	require.NoError(t, w.cmd.Process.Signal(syscall.SIGTERM))
	res := wait(t, run)
	require.Equal(t, StatusError, res.Status, "%v", res.Error)
	assert.Equal(t, "WorkerCrashed", res.Error.Name)
	res = runCode(t, r, "export default () => 'alive';", nil)
	requireStatus(t, res, StatusSuccess)
}

func findBusyWorker(t *testing.T, r *Runner) *workerProc {
	t.Helper()
	var found *workerProc
	require.Eventually(t, func() bool {
		r.pool.mu.Lock()
		defer r.pool.mu.Unlock()
		for w := range r.pool.live {
			w.mu.Lock()
			busy := w.cur != nil
			w.mu.Unlock()
			if busy {
				found = w
				return true
			}
		}
		return false
	}, 5*time.Second, time.Millisecond)
	return found
}

func TestTransferSizeLimits(t *testing.T) {
	_, wk := runners()
	res := runCode(t, wk, "export default () => 'x'.repeat(80 * 1024 * 1024);", &Options{MemoryLimitBytes: 512 << 20, Timeout: 30 * time.Second})
	requireStatus(t, res, StatusError)
	assert.Equal(t, "RangeError", res.Error.Name)
	assert.Contains(t, res.Error.Message, "too large to transfer")

	called := false
	res = runCode(t, wk, "import {f} from 'h';\nexport default async () => { try { await f('y'.repeat(80 * 1024 * 1024)); } catch (e: any) { return e.message; } };", &Options{
		MemoryLimitBytes: 512 << 20, Timeout: 30 * time.Second,
		Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) { called = true; return nil, nil })}},
	})
	requireStatus(t, res, StatusSuccess)
	assert.Contains(t, res.Value, "too large to transfer")
	assert.False(t, called)

	res = runCode(t, wk, "export default () => { try { report('z'.repeat(20 * 1024 * 1024)); } catch (e: any) { return e.name; } };", &Options{Report: func(any) {}, Timeout: 30 * time.Second})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "RangeError", res.Value)
	assert.Empty(t, res.Reports)
}
