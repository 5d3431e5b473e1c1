package sandbox

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// caseModes says in which modes a hostile case runs.
type caseModes int

const (
	onWorker caseModes = 1 << iota
	onInProcess
	onBoth = onWorker | onInProcess
)

func (m caseModes) has(mode Mode) bool {
	if mode == ModeInProcess {
		return m&onInProcess != 0
	}
	return m&onWorker != 0
}

func modeName(m Mode) string {
	if m == ModeInProcess {
		return "inprocess"
	}
	return "worker"
}

// hostileCase is one attack of the catalogue: what the code attacks, what
// must hold afterwards, and how to check it.
type hostileCase struct {
	name   string
	attack string // what the code attacks, in one line
	holds  string // what must hold, in one line
	modes  caseModes
	// child runs the case in a child process of the test binary: without
	// the protection the attack kills the process (a failed test, not a
	// dead test binary), or the case measures the host's memory, which
	// other tests running alongside would disturb.
	child bool
	// runner gives the case its own Runner; nil uses the shared ones.
	runner  func(mode Mode) *RunnerOptions
	src     func() string
	opts    func() *Options
	mapOpts map[string]any
	// drive replaces the single run of src when the attack needs several
	// runs; it returns the result to check.
	drive func(t *testing.T, r *Runner) Result

	statuses []Status // acceptable statuses; the first is the usual one
	errName  string   // expected error name, "" = any
	message  string   // substring of the error message, "" = any
	// heapGrowth bounds how much the host's heap (after GC, with the
	// result still held) may grow by the run; allocGrowth bounds what the
	// host allocates during it in total. 0 = not measured (only in a
	// child process, where nothing else runs).
	heapGrowth  uint64
	allocGrowth uint64
	check       func(t *testing.T, res Result, r *Runner)
}

func src(s string) func() string { return func() string { return s } }

// nested returns an entry whose default export is open×n + inner + close×n.
func nested(prefix, open, inner, close string, n int) func() string {
	return func() string {
		return prefix + strings.Repeat(open, n) + inner + strings.Repeat(close, n) + ";"
	}
}

// hostileCatalogue returns the attacks, with fresh state for one use.
func hostileCatalogue() []hostileCase {
	short := func() *Options { return &Options{Timeout: 300 * time.Millisecond, MemoryLimitBytes: memoryTestSize} }
	mem := func() *Options { return &Options{Timeout: 30 * time.Second, MemoryLimitBytes: memoryTestSize} }
	long := func() *Options { return &Options{Timeout: 60 * time.Second} }
	big := func() *Options { return &Options{Timeout: 60 * time.Second, MemoryLimitBytes: 1 << 30} }
	hostFn := func(f HostFunc) func() *Options {
		return func() *Options {
			return &Options{Timeout: 20 * time.Second, Imports: map[string]map[string]any{"h": {"f": f}}}
		}
	}
	link := []Status{StatusLinkError}
	textCut := func(t *testing.T, s string, max int) {
		t.Helper()
		assert.LessOrEqual(t, len(s), max)
		assert.True(t, strings.HasSuffix(s, cutMarker), "a cut text ends with the marker")
	}

	var panicked atomic.Int32
	hostCfg := map[string]any{
		"settings": map[string]any{"limit": 10},
		"list":     []any{"a"},
		"get":      HostFunc(func(ctx context.Context, args []any) (any, error) { return "fine", nil }),
	}

	cases := []hostileCase{
		// Time and the event loop.
		{name: "infinite loop", attack: "a JS loop that never ends", holds: "the timeout terminates it",
			modes: onBoth, src: src("export default () => { for(;;){} }"), opts: short,
			statuses: []Status{StatusTerminated}, errName: "Terminated", message: "timed out"},
		{name: "endless microtasks", attack: "a promise chain that never lets the loop idle", holds: "the timeout (or, as the chain grows, the memory limit) ends it",
			modes: onBoth, src: src("export default () => { const spin = () => Promise.resolve().then(spin); spin(); return new Promise(() => {}); }"), opts: short,
			statuses: []Status{StatusTerminated, StatusMemory}},
		{name: "endless awaits", attack: "an async loop awaiting forever", holds: "the timeout terminates it",
			modes: onBoth, src: src("export default async () => { for(;;) await null; }"), opts: short, statuses: []Status{StatusTerminated}},
		{name: "await never settles", attack: "a promise that never settles", holds: "the timeout terminates the run",
			modes: onBoth, src: src("export default async () => { await new Promise(() => {}); };"), opts: short, statuses: []Status{StatusTerminated}},
		{name: "catastrophic regexp", attack: "a builtin that ignores interrupts", holds: "the worker is killed after the grace period",
			modes: onWorker, src: src("export default () => /^((a+)+)\\2x$/.test('a'.repeat(40));"), opts: short, statuses: []Status{StatusTerminated}},

		// The stack.
		{name: "unbounded recursion", attack: "JS recursion without end", holds: "RangeError at the call stack limit",
			modes: onBoth, src: src("function f(n: number): number { return f(n + 1) + 1; }\nexport default () => f(0);"), opts: mem,
			statuses: []Status{StatusError}, errName: "RangeError", message: "Maximum call stack size exceeded"},
		{name: "recursion through builtins", attack: "recursion through a native builtin (Array.prototype.map)", holds: "RangeError, not a Go stack overflow",
			modes: onBoth, src: src("function f(): any { return [1].map(f); }\nexport default () => f();"), opts: func() *Options {
				return &Options{Timeout: 30 * time.Second, MemoryLimitBytes: memoryTestSize, MaxCallStackSize: 3000}
			}, statuses: []Status{StatusError}, errName: "RangeError"},

		// Memory.
		{name: "gradual heap growth", attack: "a heap that grows step by step", holds: "status memory",
			modes: onWorker, src: src("export default () => { const a: number[][] = []; for(;;) a.push(new Array(1000).fill(1)); }"), opts: mem,
			statuses: []Status{StatusMemory}, errName: "MemoryLimitExceeded"},
		{name: "repeat 2**40", attack: "one allocation far past the limit", holds: "status memory",
			modes: onWorker, src: src("export default () => 'x'.repeat(2**40).length;"), opts: mem, statuses: []Status{StatusMemory}},
		{name: "padEnd 2**40", attack: "one allocation far past the limit", holds: "status memory",
			modes: onWorker, src: src("export default () => 'x'.padEnd(2**40).length;"), opts: mem, statuses: []Status{StatusMemory}},
		{name: "huge array fill", attack: "a builtin filling a huge array", holds: "status memory",
			modes: onWorker, src: src("export default () => new Array(2e8).fill(0).length;"), opts: mem, statuses: []Status{StatusMemory}},
		{name: "huge typed array", attack: "a huge typed array", holds: "status memory",
			modes: onWorker, src: src("export default () => new Uint8Array(2**40).length;"), opts: mem, statuses: []Status{StatusMemory}},
		{name: "string doubling", attack: "a string doubled until it is huge", holds: "status memory",
			modes: onWorker, src: src("export default () => { let s = 'x'; for(;;) s += s; }"), opts: mem, statuses: []Status{StatusMemory}},
		{name: "repeat 2**28 builtin", attack: "one builtin allocating past the limit", holds: "status memory",
			modes: onWorker, src: src("export default () => 'x'.repeat(2**28).length;"), opts: mem, statuses: []Status{StatusMemory}},

		// Escaping the realm.
		{name: "Function constructor", attack: "dynamic code through Function", holds: "EvalError",
			modes: onBoth, src: src("export default () => Function('return this')();"), opts: short,
			statuses: []Status{StatusError}, errName: "EvalError", message: "Dynamic code loading is disabled"},
		{name: "constructor chain", attack: "dynamic code through .constructor.constructor", holds: "EvalError",
			modes: onBoth, src: src("export default () => (globalThis as any).constructor.constructor('return process')();"), opts: short,
			statuses: []Status{StatusError}, errName: "EvalError"},
		{name: "host objects", attack: "looking for host globals", holds: "none is there",
			modes: onBoth, src: src(`export default () => {
  const g: any = globalThis;
  return [typeof g.process, typeof g.require, typeof g.fetch, typeof g.global, typeof g.Deno,
    Object.getOwnPropertyNames(g).filter(n => /process|require|fetch|setTimeout|Go|go/.test(n))];
}`), opts: short, statuses: []Status{StatusSuccess}, check: func(t *testing.T, res Result, _ *Runner) {
				assert.Equal(t, []any{"undefined", "undefined", "undefined", "undefined", "undefined", []any{}}, res.Value)
			}},
		{name: "prototype pollution of bridged object", attack: "mutating imported values and shared prototypes", holds: "the host's values are unchanged",
			modes: onBoth, src: src(`import * as cfg from "cfg";
export default async () => {
  const c: any = cfg;
  c.settings.limit = 1e9; c.settings.__proto__.admin = true; c.list.push("evil");
  Object.prototype.toString = () => "pwned"; (Array.prototype as any).push = () => 0;
  try { c.extra = 1; } catch {}
  return [await c.get(), ({} as any).admin];
}`), opts: func() *Options {
				return &Options{Timeout: 10 * time.Second, Imports: map[string]map[string]any{"cfg": hostCfg}}
			}, statuses: []Status{StatusSuccess}, check: func(t *testing.T, res Result, _ *Runner) {
				assert.Equal(t, []any{"fine", true}, res.Value)
				assert.Equal(t, map[string]any{"limit": 10}, hostCfg["settings"], "the host's value is unchanged")
				assert.Equal(t, []any{"a"}, hostCfg["list"])
			}},

		// Host functions.
		{name: "panicking host function", attack: "a HostFunc that panics", holds: "the call rejects, the host lives",
			modes: onBoth, src: src("import {f} from 'h';\nexport default async () => { await f(); };"), opts: hostFn(func(ctx context.Context, args []any) (any, error) {
				panicked.Add(1)
				var m map[string]int
				m["x"] = 1 //lint:ignore SA5000 a nil map write is the runtime panic under test
				return nil, nil
			}), statuses: []Status{StatusError}, message: "host function panicked", check: func(t *testing.T, res Result, _ *Runner) {
				assert.Equal(t, int32(1), panicked.Load())
			}},
		{name: "panic value whose String panics", attack: "a HostFunc panicking with a value whose String method panics with itself", holds: "the call rejects naming the type; the host lives",
			modes: onBoth, child: true, src: src("import {f} from 'h';\nexport default async () => { await f(); };"), opts: hostFn(func(ctx context.Context, args []any) (any, error) {
				panic(selfPanicker{})
			}), statuses: []Status{StatusError}, message: "host function panicked: value of type sandbox.selfPanicker"},
		{name: "error whose Error panics", attack: "a HostFunc returning an error whose Error method panics with a value whose String panics", holds: "the call rejects; the host lives",
			modes: onBoth, child: true, src: src("import {f} from 'h';\nexport default async () => { await f(); };"), opts: hostFn(func(ctx context.Context, args []any) (any, error) {
				return nil, panickingError{}
			}), statuses: []Status{StatusError}, message: "value of type sandbox.panickingError (formatting it panicked)"},
		{name: "host function ends its goroutine", attack: "a HostFunc calling runtime.Goexit", holds: "the call rejects at once instead of never settling",
			modes: onBoth, src: src("import {f} from 'h';\nexport default async () => { await f(); };"), opts: hostFn(func(ctx context.Context, args []any) (any, error) {
				runtime.Goexit()
				return nil, nil
			}), statuses: []Status{StatusError}, message: "runtime.Goexit"},
		{name: "host call flood", attack: "bridged calls in a tight loop", holds: "the timeout terminates the run",
			modes: onBoth, src: src("import {f} from 'h';\nexport default () => { for (;;) f(); };"), opts: func() *Options {
				o := hostFn(func(ctx context.Context, args []any) (any, error) { return 1, nil })()
				o.Timeout = 300 * time.Millisecond
				return o
			}, statuses: []Status{StatusTerminated}},
		{name: "too many pending host calls", attack: "5000 bridged calls left pending", holds: "RangeError past 1000",
			modes: onBoth, src: src("import {f} from 'h';\nexport default async () => { const ps = []; for (let i = 0; i < 5000; i++) ps.push(f()); await Promise.all(ps); };"),
			opts: hostFn(func(ctx context.Context, args []any) (any, error) { return 1, nil }), statuses: []Status{StatusError}, errName: "RangeError", message: "Too many pending host calls"},
		{name: "pending call data flood", attack: "100 pending bridged calls of 8 MiB each, held by a slow host function", holds: "calls past 64 MiB of pending arguments reject; the host heap stays small",
			modes: onBoth, child: true, drive: drivePendingData, statuses: []Status{StatusSuccess}},

		// Output.
		{name: "report flood", attack: "report() without end", holds: "RangeError after 10000 reports",
			modes: onBoth, src: src("export default () => { for (let i = 0; ; i++) report(i); };"), opts: func() *Options {
				return &Options{Timeout: 30 * time.Second, Report: func(any) {}}
			}, statuses: []Status{StatusError}, errName: "RangeError", message: "Report limit exceeded", check: func(t *testing.T, res Result, _ *Runner) {
				assert.Len(t, res.Reports, maxReports)
			}},
		{name: "log flood", attack: "20000 console.log calls of 1000 bytes", holds: "at most 1000 entries are kept",
			modes: onBoth, src: src("export default () => { for (let i = 0; i < 20000; i++) console.log('x'.repeat(1000)); return 1; };"), opts: mem,
			statuses: []Status{StatusSuccess}, check: func(t *testing.T, res Result, _ *Runner) {
				assert.LessOrEqual(t, len(res.Logs), maxLogs)
			}},
		{name: "huge error name and stack", attack: "an Error whose name and stack are 20 MB each", holds: "the host keeps them cut to 256 bytes and 64 KiB",
			modes: onBoth, child: true, heapGrowth: 16 << 20,
			src: src("export default () => { const e: any = new Error('m'); e.name = 'N'.repeat(20e6); e.stack = 'S'.repeat(20e6); throw e; };"), opts: big,
			statuses: []Status{StatusError}, check: func(t *testing.T, res Result, _ *Runner) {
				textCut(t, res.Error.Name, maxErrorName)
				textCut(t, res.Error.Stack, maxErrorStack)
			}},
		{name: "huge thrown string", attack: "throwing a 24 MB string", holds: "the message is cut to 64 KiB",
			modes: onBoth, child: true, heapGrowth: 16 << 20,
			src: src("export default () => { throw 'é'.repeat(12e6); };"), opts: big,
			statuses: []Status{StatusError}, check: func(t *testing.T, res Result, _ *Runner) {
				textCut(t, res.Error.Message, maxErrorMessage)
				assert.True(t, strings.HasPrefix(res.Error.Message, "éé"))
			}},
		{name: "deeply nested runtime RegExp", attack: "a RegExp built at run time with groups 10^6 deep: regexp2 recurses over its tree (kills an in-process host, see the package doc)", holds: "the worker dies or hits its limit; the run fails, the host lives",
			modes: onWorker, src: src("export default () => new RegExp('('.repeat(1e6) + ')'.repeat(1e6) + '\\\\1').test('');"), opts: long,
			statuses: []Status{StatusMemory, StatusError}},
		{name: "huge regexp error", attack: "a runtime SyntaxError quoting a 200 KB pattern", holds: "the message is cut to 64 KiB",
			modes: onBoth, src: src("export default () => new RegExp('('.repeat(1e5) + ')'.repeat(1e5));"), opts: long,
			statuses: link, errName: "SyntaxError", check: func(t *testing.T, res Result, _ *Runner) {
				textCut(t, res.Error.Message, maxErrorMessage)
			}},

		// Sources and compiling.
		{name: "deeply nested brackets", attack: "[ 10^6 deep (2 MB): esbuild's recursive parser overflows its stack", holds: "link_error; the compile ran in a worker, the host lives with a small heap",
			modes: onBoth, child: true, heapGrowth: 64 << 20, src: nested("export default () => ", "[", "", "]", 1e6), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "deeply nested unary operators", attack: "! 2·10^6 deep", holds: "link_error from the compiling worker",
			modes: onBoth, child: true, src: nested("export default () => ", "!", "1", "", 2e6), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "deeply nested conditionals", attack: "a?1: 5·10^5 deep", holds: "link_error from the compiling worker",
			modes: onBoth, child: true, src: nested("export default (a: any) => ", "a?1:", "2", "", 5e5), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "deeply nested arrow functions", attack: "()=> 5·10^5 deep", holds: "link_error from the compiling worker",
			modes: onBoth, child: true, src: nested("export default ", "()=>", "1", "", 5e5), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "deeply nested new", attack: "new 5·10^5 deep", holds: "link_error from the compiling worker",
			modes: onBoth, child: true, src: nested("class X {}\nexport default () => ", "new ", "X", "", 5e5), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "deeply nested templates", attack: "`${ 3·10^5 deep", holds: "link_error from the compiling worker",
			modes: onBoth, child: true, src: nested("export default () => ", "`${", "1", "}`", 3e5), opts: long,
			statuses: link, errName: "RangeError", message: "nested too deeply"},
		{name: "quadratic compile", attack: "{ 5000 deep: esbuild needs about 400 MB and a second", holds: "status memory at the run's limit; the host heap stays small",
			modes: onBoth, child: true, heapGrowth: 32 << 20, src: nested("export default () => ", "{", "", "}", 5000), opts: mem,
			statuses: []Status{StatusMemory}, message: "while compiling"},
		{name: "source over the cap", attack: "an entry source over 4 MiB", holds: "link_error naming the cap, without compiling",
			modes: onBoth, src: func() string { return "export default () => 1;//" + strings.Repeat("x", DefaultMaxSourceBytes) }, opts: long,
			statuses: link, errName: "SourceTooLarge", message: "limit of 4194304 bytes (RunnerOptions.MaxSourceBytes)"},
		{name: "modules over the cap", attack: "five 1 MiB modules", holds: "link_error naming the cap: entry and modules count together",
			modes: onBoth, src: src("export default () => 1;"), opts: func() *Options {
				m := map[string]string{}
				for i := 0; i < 5; i++ {
					m[fmt.Sprintf("./m%d.ts", i)] = "//" + strings.Repeat("x", 1<<20)
				}
				return &Options{Timeout: 60 * time.Second, Modules: m}
			}, statuses: link, errName: "SourceTooLarge"},
		{name: "huge import specifier", attack: "an import of a 3 MB specifier", holds: "link_error with message and specifier cut",
			modes: onBoth, src: func() string { return "import x from '" + strings.Repeat("a", 3e6) + "';\nexport default () => x;" }, opts: long,
			statuses: link, errName: "ModuleNotFoundError", check: func(t *testing.T, res Result, _ *Runner) {
				textCut(t, res.Error.Message, maxErrorMessage)
				textCut(t, res.Error.Specifier, maxErrorFilename)
			}},
		{name: "many large bundles", attack: "8 distinct 512 KiB sources filling a 4 MiB bundle cache (about 4.5 MB each uncapped)", holds: "the cache stays within its byte bound, and so does the host heap",
			modes: onBoth, child: true, heapGrowth: 24 << 20,
			runner: func(mode Mode) *RunnerOptions { return &RunnerOptions{Mode: mode, CacheBytes: 4 << 20} },
			drive:  driveLargeBundles, statuses: []Status{StatusSuccess}, check: func(t *testing.T, res Result, r *Runner) {
				n, b := r.cache.stats()
				assert.LessOrEqual(t, b, int64(4<<20))
				assert.Positive(t, n, "bundles within the bound are kept")
			}},
		{name: "syntax error", attack: "a source that does not parse", holds: "link_error SyntaxError",
			modes: onBoth, src: src("export default () => {"), opts: short, statuses: link, errName: "SyntaxError"},
		{name: "typescript type syntax error", attack: "bad type syntax", holds: "link_error with the user's line",
			modes: onBoth, src: src("let x: Array<number = [];\nexport default () => x;"), opts: short, statuses: link, errName: "SyntaxError", message: "Line 1 of <runCode>"},
		{name: "missing export", attack: "an entry export that does not exist", holds: "link_error",
			modes: onBoth, src: src("export const a = 1;"), opts: func() *Options { return &Options{Execute: &Execute{Fn: "main"}} },
			statuses: link, message: "does not provide an export named 'main'"},
		{name: "bad option key", attack: "an unknown option", holds: "link_error InvalidCodeExecutionOptions",
			modes: onBoth, src: src("export default () => 1;"), mapOpts: map[string]any{"memoryLimit": 1},
			statuses: link, errName: "InvalidCodeExecutionOptions", message: "Unknown runCode option: memoryLimit"},
	}
	// A compromised worker: what it sends is checked before the host
	// believes or allocates it.
	for _, ev := range []struct {
		name, attack, holds, behaviour, message string
		statuses                                []Status
		check                                   func(t *testing.T, res Result, _ *Runner)
	}{
		{name: "oversized frame", attack: "a frame header claiming 1 GiB (under the old limit)", holds: "refused before allocating; the run fails",
			behaviour: "huge-header", message: "frame too large"},
		{name: "amplifying frame", attack: "a result of 8 million nulls in an 8 MB frame (128 MiB as Go values)", holds: "refused by the decoder's budget before allocating",
			behaviour: "amplify", message: "costing more than allowed"},
		{name: "huge error from worker", attack: "a done frame whose error name is 20 MB", holds: "the name is cut on decoding",
			behaviour: "huge-error", statuses: []Status{StatusError}, check: func(t *testing.T, res Result, _ *Runner) {
				textCut(t, res.Error.Name, maxErrorName)
			}},
		{name: "report flood from worker", attack: "10001 report frames", holds: "the run fails past 10000",
			behaviour: "reports", message: "reports over the run's limits"},
		{name: "call flood from worker", attack: "1001 pending call frames", holds: "the run fails past 1000 pending calls",
			behaviour: "calls", message: "pending host calls"},
		{name: "unexpected frame from worker", attack: "a run frame sent to the host", holds: "the run fails",
			behaviour: "run-frame", message: "frame of type"},
	} {
		ev := ev
		statuses := ev.statuses
		errName := ""
		if statuses == nil {
			statuses, errName = []Status{StatusError}, "WorkerProtocolError"
		}
		cases = append(cases, hostileCase{name: ev.name, attack: ev.attack, holds: ev.holds, modes: onWorker, child: true,
			allocGrowth: 64 << 20, runner: evilRunner(ev.behaviour), opts: hostFn(func(ctx context.Context, args []any) (any, error) {
				<-ctx.Done()
				return nil, nil
			}), src: src("import {f} from 'h';\nexport default () => f();"),
			statuses: statuses, errName: errName, message: ev.message, check: ev.check})
	}
	return cases
}

// selfPanicker panics with itself when formatted.
type selfPanicker struct{}

func (selfPanicker) String() string { panic(selfPanicker{}) }

// panickingError's Error method panics with a selfPanicker.
type panickingError struct{}

func (panickingError) Error() string { panic(selfPanicker{}) }

// drivePendingData makes 100 bridged calls of 8 MiB each that the host
// holds; past the pending-data limit calls reject at once. While the held
// calls are pending the host measures its heap.
func drivePendingData(t *testing.T, r *Runner) Result {
	release := make(chan struct{})
	var held atomic.Int32
	base := heapAfterGC()
	var during uint64
	res := runCode(t, r, `import {hold, measure} from 'h';
export default async () => {
  const s = 'x'.repeat(8 << 20);
  let refused = 0;
  const ps = [];
  for (let i = 0; i < 100; i++) ps.push(hold(s + i).catch((e: any) => { if (/pending host calls/.test(e.message)) refused++; }));
  await measure();
  await Promise.all(ps);
  return refused;
}`, &Options{Timeout: 60 * time.Second, MemoryLimitBytes: 1 << 30, Imports: map[string]map[string]any{"h": {
		"hold": HostFunc(func(ctx context.Context, args []any) (any, error) {
			held.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		}),
		"measure": HostFunc(func(ctx context.Context, args []any) (any, error) {
			// Let the held calls arrive, then measure with them pending.
			deadline := time.Now().Add(10 * time.Second)
			for held.Load() < 7 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			during = heapAfterGC()
			close(release)
			return nil, nil
		}),
	}}})
	requireStatus(t, res, StatusSuccess)
	assert.GreaterOrEqual(t, res.Value, 90.0, "calls past the limit are refused")
	assert.LessOrEqual(t, int(held.Load()), 8, "at most 64 MiB of arguments reach the host")
	assert.Less(t, int64(during)-int64(base), int64(96<<20), "host heap while the calls were pending")
	return res
}

// bigSource returns a distinct TypeScript source of about size bytes.
func bigSource(seed, size int) string {
	var b strings.Builder
	b.WriteString("const data: Record<string, number> = {};\n")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "data[\"k%d_%d\"] = %d + Math.max(%d, 3) * 2; function f%d(x: number): number { return x * %d + %d; }\n", seed, i, i, i, i, i, seed)
	}
	b.WriteString("export default () => Object.keys(data).length;\n")
	return b.String()
}

// driveLargeBundles runs 8 distinct 512 KiB sources.
func driveLargeBundles(t *testing.T, r *Runner) Result {
	var res Result
	for i := 0; i < 8; i++ {
		res = runCode(t, r, bigSource(i, 512<<10), &Options{Timeout: 60 * time.Second, MemoryLimitBytes: 1 << 30})
		requireStatus(t, res, StatusSuccess)
	}
	return res
}

// runHostileCase runs c in mode on r and checks what must hold.
func runHostileCase(t *testing.T, c hostileCase, mode Mode, r *Runner) Result {
	t.Helper()
	var code string
	if c.src != nil {
		code = c.src()
	}
	var ms0, ms1 runtime.MemStats
	base := heapAfterGC()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	var res Result
	switch {
	case c.drive != nil:
		res = c.drive(t, r)
	case c.mapOpts != nil:
		res = wait(t, r.StartMap(testCtx, code, c.mapOpts))
	default:
		res = wait(t, r.Start(testCtx, code, c.opts()))
	}
	code = ""
	runtime.ReadMemStats(&ms1)
	after := heapAfterGC()
	require.Contains(t, c.statuses, res.Status, "error: %v (after %s)", res.Error, time.Since(start))
	if c.errName != "" {
		assert.Equal(t, c.errName, res.Error.Name, "%v", res.Error)
	}
	if c.message != "" {
		assert.Contains(t, res.Error.Message, c.message)
	}
	if c.heapGrowth > 0 {
		assert.Less(t, int64(after)-int64(base), int64(c.heapGrowth), "host heap growth (after GC, result held)")
	}
	if c.allocGrowth > 0 {
		assert.Less(t, ms1.TotalAlloc-ms0.TotalAlloc, c.allocGrowth, "bytes the host allocated during the run")
	}
	if c.check != nil {
		c.check(t, res, r)
	}
	runtime.KeepAlive(res)
	return res
}

// hostileCaseEnv selects, in a child process, the case to run: "<mode>/<name>".
const hostileCaseEnv = "TOOLRUN_SANDBOX_HOSTILE_CASE"

func caseRunner(c hostileCase, mode Mode, shared map[Mode]*Runner) (r *Runner, done func()) {
	if c.runner != nil {
		r := New(c.runner(mode))
		return r, func() { r.Close() }
	}
	return shared[mode], func() {}
}

// TestHostileCatalogue runs every hostile case in every mode it applies to
// and checks what must hold; cases marked child run in a child process of
// the test binary, so an attack that kills the process fails its case
// instead of killing the test binary. Afterwards the host must be
// healthy: new runs work in both modes and nothing leaked.
func TestHostileCatalogue(t *testing.T) {
	if sel := os.Getenv(hostileCaseEnv); sel != "" {
		runHostileChild(t, sel)
		return
	}
	wk := New(&RunnerOptions{PoolSize: 2})
	defer wk.Close()
	ip, _ := runners()
	shared := map[Mode]*Runner{ModeWorker: wk, ModeInProcess: ip}
	goroutinesBefore := runtime.NumGoroutine()
	t.Run("cases", func(t *testing.T) {
		for _, mode := range []Mode{ModeWorker, ModeInProcess} {
			for _, c := range hostileCatalogue() {
				if !c.modes.has(mode) {
					continue
				}
				require.True(t, c.attack != "" && c.holds != "", "case %q says what it attacks and what must hold", c.name)
				require.True(t, c.child || (c.heapGrowth == 0 && c.allocGrowth == 0), "case %q measures memory, so it runs in a child", c.name)
				t.Run(modeName(mode)+"/"+c.name, func(t *testing.T) {
					t.Parallel()
					if c.child {
						runInChild(t, mode, c)
						return
					}
					r, done := caseRunner(c, mode, shared)
					defer done()
					runHostileCase(t, c, mode, r)
				})
			}
		}
	})

	// The host is healthy: new runs work, in both modes, and nothing leaked.
	res := runCode(t, wk, "export default () => ({} as any).admin ?? 'clean';", nil)
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "clean", res.Value)
	res = runCode(t, ip, "export default () => 1 + 1;", nil)
	requireStatus(t, res, StatusSuccess)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapAlloc, uint64(512<<20), "host heap stayed small")
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() < goroutinesBefore+50 }, 10*time.Second, 50*time.Millisecond, "goroutines leaked")
}

// runInChild runs one case in a child process and checks that it exited
// cleanly after reporting that the case held.
func runInChild(t *testing.T, mode Mode, c hostileCase) {
	sel := modeName(mode) + "/" + c.name
	cmd := exec.Command(os.Args[0], "-test.run=^TestHostileCatalogue$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), hostileCaseEnv+"="+sel)
	out, err := cmd.CombinedOutput()
	text := string(out)
	if len(text) > 8<<10 {
		text = text[:4<<10] + "\n…\n" + text[len(text)-4<<10:]
	}
	require.NoError(t, err, "the child process running %q must exit cleanly; it printed:\n%s", sel, text)
	assert.Contains(t, text, "hostile case "+sel+" held", "the child ran the case; it printed:\n%s", text)
}

// runHostileChild is the child's side of runInChild.
func runHostileChild(t *testing.T, sel string) {
	mode := ModeWorker
	if strings.HasPrefix(sel, "inprocess/") {
		mode = ModeInProcess
	}
	name := sel[strings.Index(sel, "/")+1:]
	for _, c := range hostileCatalogue() {
		if c.name != name {
			continue
		}
		wk := New(&RunnerOptions{PoolSize: 1})
		defer wk.Close()
		ip := New(&RunnerOptions{Mode: ModeInProcess})
		defer ip.Close()
		r, done := caseRunner(c, mode, map[Mode]*Runner{ModeWorker: wk, ModeInProcess: ip})
		defer done()
		res := runHostileCase(t, c, mode, r)
		if !t.Failed() {
			fmt.Printf("hostile case %s held: status %s\n", sel, res.Status)
		}
		return
	}
	t.Fatalf("no hostile case %q", sel)
}

// evilEnv selects, in a stand-in worker process, how it misbehaves.
const evilEnv = "TOOLRUN_SANDBOX_TEST_EVIL"

// evilRunner returns runner options whose workers are this test binary
// misbehaving as behaviour says (see TestEvilWorkerProcess).
func evilRunner(behaviour string) func(Mode) *RunnerOptions {
	return func(Mode) *RunnerOptions {
		env, err := exec.LookPath("env")
		if err != nil {
			panic("the compromised-worker cases need env(1): " + err.Error())
		}
		return &RunnerOptions{PoolSize: 1, WorkerCommand: []string{env, "-u", WorkerEnv, evilEnv + "=" + behaviour,
			os.Args[0], "-test.run=^TestEvilWorkerProcess$"}}
	}
}

// TestEvilWorkerProcess is not a test: it is the stand-in for a
// compromised worker, started by evilRunner. It says it is ready and
// compiles honestly, then answers a run frame with what evilEnv says.
func TestEvilWorkerProcess(t *testing.T) {
	behaviour := os.Getenv(evilEnv)
	if behaviour == "" {
		t.Skip("stand-in worker process for the compromised-worker cases")
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(f *frame) { _ = writeFrame(out, f) }
	send(&frame{T: frReady, ID: wireVersion})
	_ = out.Flush()
	for {
		f, err := readHostFrame(in)
		if err != nil {
			os.Exit(0)
		}
		switch f.T {
		case frCompile:
			c, lerr := compile(requestFromSpec(f.Comp))
			if lerr != nil {
				send(&frame{T: frCompiled, ID: f.ID, Err: lerr})
			} else {
				send(&frame{T: frCompiled, ID: f.ID, Bund: c.spec()})
			}
		case frRun:
			switch behaviour {
			case "huge-header":
				var hdr [4]byte
				binary.BigEndian.PutUint32(hdr[:], 1<<30-16)
				_, _ = out.Write(hdr[:])
			case "amplify":
				e := &encoder{b: make([]byte, 4, 8<<20+64)}
				e.byte(frDone)
				e.uvarint(f.ID)
				e.str(string(StatusSuccess))
				e.err(nil)
				e.byte(tagArray)
				e.uvarint(8 << 20)
				for i := 0; i < 8<<20; i++ {
					e.byte(tagNull)
				}
				binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
				_, _ = out.Write(e.b)
			case "huge-error":
				send(&frame{T: frDone, ID: f.ID, St: StatusError, Err: &Error{Name: strings.Repeat("N", 20e6), Message: "m"}})
			case "reports":
				for i := 0; i <= maxReports; i++ {
					send(&frame{T: frReport, ID: f.ID, V: 1.0})
				}
			case "calls":
				for i := 0; i <= maxPendingCalls; i++ {
					send(&frame{T: frCall, ID: f.ID, C: uint64(i + 1), Fn: 0, Args: []any{}})
				}
			case "run-frame":
				send(&frame{T: frRun, ID: f.ID, Run: &runSpec{}})
			}
		}
		_ = out.Flush()
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

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestTypeErrorsShowNoGoValues: goja writes an object's Go value, host
// memory addresses included, into the TypeError for an object it cannot
// turn into a primitive; the error a run ends with shows the standard
// text instead.
func TestTypeErrorsShowNoGoValues(t *testing.T) {
	sources := []string{
		`export default () => "" + Object.create(null);`,
		`export default () => String(Object.create(null));`,
		"export default () => `${Object.create(null)}`;",
		`export default () => [Object.create(null)].join();`,
		`export default () => Object.create(null) < 1;`,
		`export default () => { const o = {a: {b: 1}}; o.toString = o.valueOf = null; return "" + o; };`,
	}
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, src := range sources {
			res := runCode(t, r, src, nil)
			requireStatus(t, res, StatusError)
			assert.Equal(t, "TypeError", res.Error.Name, src)
			assert.Contains(t, res.Error.Message, "Cannot convert object to primitive value", src)
			for _, text := range []string{res.Error.Message, res.Error.Stack} {
				for _, bad := range []string{"0x", "&{", "goja", "Could not convert"} {
					assert.NotContains(t, text, bad, "%s: %q", src, text)
				}
			}
		}
	})
}

func TestWithoutGoValues(t *testing.T) {
	dump := "Could not convert &{Object 0xc000123456 <nil> true map[] [] 0 0 <nil> map[]} (*goja.baseObject) to primitive"
	for in, want := range map[string]string{
		"":                                 "",
		"Could not convert x to primitive": "Could not convert x to primitive",
		"Value is not a constructor":       "Value is not a constructor",
		dump:                               primitiveText,
		"TypeError: " + dump + "\n\tat f (x.js:1:2)":                         "TypeError: " + primitiveText + "\n\tat f (x.js:1:2)",
		"a " + dump + " b " + dump + " c":                                    "a " + primitiveText + " b " + primitiveText + " c",
		"cut: " + dump[:30]:                                                  "cut: " + primitiveText,
		"Could not convert &{Object 0x1 map[a: to primitive]} to primitive!": primitiveText + "!",
	} {
		if got := withoutGoValues(in); got != want {
			t.Errorf("withoutGoValues(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCaughtTypeErrorsShowNoGoValues: code that catches such an error and
// passes its text on, as its value, in a log or report, to a host
// function, or inside an error of its own, passes the standard wording.
func TestCaughtTypeErrorsShowNoGoValues(t *testing.T) {
	const catch = `let text = ""; try { "" + Object.create(null); } catch (e) { text = e.message; }`
	bothModes(t, func(t *testing.T, r *Runner) {
		var hostGot []string
		var mu sync.Mutex
		opts := &Options{Imports: map[string]map[string]any{"host": {"send": HostFunc(func(ctx context.Context, args []any) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			hostGot = append(hostGot, fmt.Sprint(args...))
			return nil, nil
		})}}, Report: func(v any) {
			mu.Lock()
			defer mu.Unlock()
			hostGot = append(hostGot, fmt.Sprint(v))
		}}
		res := runCode(t, r, `import {send} from "host";
export default async () => {
  `+catch+`
  let err;
  try { "" + Object.create(null); } catch (e) { err = e; }
  console.log(err);
  console.log(String(err), {m: text});
  report({text, stack: String(err.stack)});
  await send(text.slice(0, 40));
  return [text, String(err)];
};`, opts)
		requireStatus(t, res, StatusSuccess)
		texts := append([]string{fmt.Sprint(res.Value)}, hostGot...)
		for _, l := range res.Logs {
			texts = append(texts, fmt.Sprint(l.Args...))
		}
		require.Len(t, texts, 5, "the value, the report, the host call and two logs")
		for _, s := range texts {
			assert.NotContains(t, s, "0x", s)
			assert.NotContains(t, s, "&{", s)
			assert.Contains(t, s, primitiveText, s)
		}
		res = runCode(t, r, `export default () => { `+catch+` throw new TypeError("wrapped: " + text); };`, nil)
		requireStatus(t, res, StatusError)
		assert.Contains(t, res.Error.Message, "wrapped: "+primitiveText)
		assert.NotContains(t, res.Error.Message+res.Error.Stack, "0x")
	})
}

// TestRemovedBuiltinsFailTheConversionCleanly: code that removes or
// replaces Map.prototype.set, Set.prototype.add or Uint8Array with
// something that is not a function, before a host function answers with a
// Map, a Set or bytes, gets an error naming what is missing from the call;
// it used to end the run with a Go panic ("sandbox engine panic"). Code
// that replaces them with functions of its own has them called.
func TestRemovedBuiltinsFailTheConversionCleanly(t *testing.T) {
	imports := map[string]map[string]any{"host": {
		"m": HostFunc(func(ctx context.Context, args []any) (any, error) { return Map{{Key: "a", Value: 1.0}}, nil }),
		"s": HostFunc(func(ctx context.Context, args []any) (any, error) { return Set{"b"}, nil }),
		"b": HostFunc(func(ctx context.Context, args []any) (any, error) { return []byte{1, 2}, nil }),
	}}
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, c := range []struct{ spoil, call, want string }{
			{`Map.prototype.set = 1;`, "m", "Map.prototype.set is not a function"},
			{`delete Map.prototype.set;`, "m", "Map.prototype.set is not a function"},
			{`Set.prototype.add = null;`, "s", "Set.prototype.add is not a function"},
			{`delete Set.prototype.add;`, "s", "Set.prototype.add is not a function"},
			{`Map.prototype.set = function () { throw new Error("own set"); };`, "m", "own set"},
			{`delete globalThis.Uint8Array;`, "b", "not transferable (typed array Uint8Array)"},
		} {
			res := runCode(t, r, `import {m, s, b} from "host";
export default async () => {
  `+c.spoil+`
  try { await `+c.call+`(); return "no error"; } catch (e) { return String(e); }
};`, &Options{Imports: imports})
			requireStatus(t, res, StatusSuccess)
			assert.Contains(t, res.Value, c.want, c.spoil)
		}
		res := runCode(t, r, `import {m} from "host";
let calls = 0;
const set = Map.prototype.set;
export default async () => {
  Map.prototype.set = function (k, v) { calls++; return set.call(this, k, v); };
  const v = await m();
  return [v.get("a"), calls];
};`, &Options{Imports: imports})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{1.0, 1.0}, res.Value)
	})
}
