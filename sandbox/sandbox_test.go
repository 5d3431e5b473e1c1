package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	runnersOnce    sync.Once
	inProcRunner   *Runner
	workerRunner   *Runner
	testCtx        = context.Background()
	waitTimeout    = 60 * time.Second
	memoryTestSize = int64(64 << 20)
)

func runners() (inproc, worker *Runner) {
	runnersOnce.Do(func() {
		inProcRunner = New(&RunnerOptions{Mode: ModeInProcess})
		workerRunner = New(&RunnerOptions{Mode: ModeWorker, PoolSize: 2})
	})
	return inProcRunner, workerRunner
}

// bothModes runs f as a subtest against an in-process and a worker Runner.
func bothModes(t *testing.T, f func(t *testing.T, r *Runner)) {
	t.Helper()
	ip, wk := runners()
	t.Run("inprocess", func(t *testing.T) { f(t, ip) })
	t.Run("worker", func(t *testing.T) { f(t, wk) })
}

func wait(t *testing.T, run *Run) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(testCtx, waitTimeout)
	defer cancel()
	res, err := run.Wait(ctx)
	require.NoError(t, err, "run did not settle")
	return res
}

func runCode(t *testing.T, r *Runner, src string, opts *Options) Result {
	t.Helper()
	return wait(t, r.Start(testCtx, src, opts))
}

func requireStatus(t *testing.T, res Result, want Status) {
	t.Helper()
	require.Equal(t, want, res.Status, "error: %v", res.Error)
}

func TestEntrySemantics(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		src := `
export default async function (a: number, b: number) { await null; return a + b; }
export function sync(x: string) { return x.toUpperCase(); }
export const value = {answer: 42};
export const chained = Promise.resolve(Promise.resolve(5));
export function promised() { return Promise.resolve().then(() => Promise.resolve("deep")); }
`
		res := runCode(t, r, src, &Options{Execute: &Execute{Args: []any{2, 3}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, 5.0, res.Value)

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "sync", Args: []any{"go"}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "GO", res.Value)

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "value"}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, map[string]any{"answer": 42.0}, res.Value)

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "chained"}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, 5.0, res.Value)

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "promised"}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "deep", res.Value)

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "value", Args: []any{1}}})
		requireStatus(t, res, StatusError)
		assert.Equal(t, "TypeError", res.Error.Name)
		assert.Contains(t, res.Error.Message, "not a function")

		res = runCode(t, r, src, &Options{Execute: &Execute{Fn: "nope"}})
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "does not provide an export named 'nope'")

		res = runCode(t, r, "export const x = 1;", nil)
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "does not provide an export named 'default'")
	})
}

func TestMissingExportDoesNotRun(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		var calls atomic.Int32
		res := runCode(t, r, `import {hit} from "probe"; await hit(); export const x = 1;`, &Options{
			Imports: map[string]map[string]any{"probe": {"hit": HostFunc(func(ctx context.Context, args []any) (any, error) {
				calls.Add(1)
				return nil, nil
			})}},
		})
		requireStatus(t, res, StatusLinkError)
		assert.Zero(t, calls.Load(), "a link error must not run any code")
	})
}

func TestErrorsMapToUserSource(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		src := `interface Point { x: number; y: number }
type Alias = Point;

function area(p: Alias): number {
  const unused: string = "x";
  throw new RangeError("bad point " + p.x);
}
export default () => area({x: 1, y: 2});
`
		res := runCode(t, r, src, &Options{Filename: "shapes.ts"})
		requireStatus(t, res, StatusError)
		e := res.Error
		assert.Equal(t, "RangeError", e.Name)
		assert.Equal(t, "Line 6 of shapes.ts: bad point 1", e.Message)
		assert.Equal(t, 6, e.Line)
		assert.Equal(t, 9, e.Column)
		assert.Equal(t, "shapes.ts", e.Filename)
		assert.Contains(t, e.Stack, "shapes.ts:6:")

		// Default filename and an error raised by the engine itself.
		res = runCode(t, r, "export default () => {\n  const o: any = null;\n  return o.field;\n}", nil)
		requireStatus(t, res, StatusError)
		assert.Equal(t, "TypeError", res.Error.Name)
		assert.True(t, strings.HasPrefix(res.Error.Message, "Line 3 of <runCode>: "), res.Error.Message)
		assert.Equal(t, 3, res.Error.Line)

		// An error thrown in a module maps to that module.
		res = runCode(t, r, "import {f} from './lib/util';\nexport default () => f();", &Options{
			Modules: map[string]string{"./lib/util.ts": "export function f(): never {\n\n  throw new Error('in lib');\n}"},
		})
		requireStatus(t, res, StatusError)
		assert.Equal(t, "Line 3 of ./lib/util.ts: in lib", res.Error.Message)
		assert.Equal(t, "./lib/util.ts", res.Error.Filename)

		// Non-Error throws.
		res = runCode(t, r, "export default () => { throw 'plain'; }", nil)
		requireStatus(t, res, StatusError)
		assert.Equal(t, "Error", res.Error.Name)
		assert.Equal(t, "plain", res.Error.Message)
	})
}

func TestCompileErrorsAreLinkErrors(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, "export default () => 1;\nlet x: = 5;", &Options{Filename: "bad.ts"})
		requireStatus(t, res, StatusLinkError)
		assert.Equal(t, "SyntaxError", res.Error.Name)
		assert.Equal(t, 2, res.Error.Line)
		assert.True(t, strings.HasPrefix(res.Error.Message, "Line 2 of bad.ts: "), res.Error.Message)

		// Type syntax is an error in JavaScript.
		res = runCode(t, r, "export default (x: number) => x;", &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusLinkError)
		assert.Equal(t, 1, res.Error.Line)

		res = runCode(t, r, "export default () => { return }}", &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusLinkError)

		res = runCode(t, r, "import x from './missing';\nexport default () => x;", nil)
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "Cannot find module")
		assert.Equal(t, "ModuleNotFoundError", res.Error.Name)
		assert.Equal(t, "./missing", res.Error.Specifier)
		assert.Equal(t, 1, res.Error.Line)

		res = runCode(t, r, "import x from 'left-pad';\nexport default () => x;", nil)
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "left-pad")

		res = runCode(t, r, "import {nope} from './a';\nexport default () => nope;", &Options{Modules: map[string]string{"./a.ts": "export const yes = 1;"}})
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "nope")
	})
}

func TestModuleGraph(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		var order []string
		var mu sync.Mutex
		fetch := HostFunc(func(ctx context.Context, args []any) (any, error) {
			mu.Lock()
			order = append(order, args[0].(string))
			mu.Unlock()
			return "data:" + args[0].(string), nil
		})
		mods := map[string]string{
			"./config.ts":         "import {get} from 'net';\nexport const config = await get('config');",
			"./lib/index.ts":      "export {helper} from './helper';\nexport * as json from '../data.json';",
			"./lib/helper.js":     "export const helper = (s) => `<${s}>`;",
			"./data.json":         `{"k": [1, 2]}`,
			"./deep/a/b.mjs":      "import {config} from '../../config';\nexport const b = 'b:' + config;",
			"./tsx/component.tsx": "export const C = (n: number) => n * 2;",
		}
		src := `import {config} from "./config";
import {helper, json} from "./lib";
import {b} from "./deep/a/b.mjs";
import {C} from "./tsx/component";
import {get} from "net";
const late = await get("entry");
export async function main(x: string) { return [config, helper(x), json.k, b, C(2), late, await get(x)]; }
`
		res := runCode(t, r, src, &Options{Modules: mods, Execute: &Execute{Fn: "main", Args: []any{"arg"}},
			Imports: map[string]map[string]any{"net": {"get": fetch}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{"data:config", "<arg>", []any{1.0, 2.0}, "b:data:config", 4.0, "data:entry", "data:arg"}, res.Value)
		assert.Equal(t, []string{"config", "entry", "arg"}, order, "the non-entry module's top-level await settles first")

		res = runCode(t, r, "import x from '../outside';\nexport default () => x;", nil)
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "escapes the module root")

		res = runCode(t, r, "import {x} from './a';\nexport default () => x;", &Options{Modules: map[string]string{"./a.ts": "import {y} from '../../b';\nexport const x = y;"}})
		requireStatus(t, res, StatusLinkError)
		assert.Contains(t, res.Error.Message, "escapes the module root")
	})
}

func TestValuesCrossBothWays(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		when := time.Date(2024, 5, 6, 7, 8, 9, 10e6, time.UTC)
		big1, _ := new(big.Int).SetString("123456789012345678901234567890", 10)
		in := []any{
			nil, Undefined, true, 1.5, -3, "str",
			[]any{1, "a", []any{}},
			map[string]any{"nested": map[string]any{"k": "v"}},
			when,
			Map{{Key: "a", Value: 1}, {Key: 2.0, Value: []any{"x"}}},
			Set{1, "two"},
			[]byte{1, 2, 3},
			ArrayBuffer{9, 8},
			TypedArray{Type: "Float64Array", Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
			big1,
			struct {
				Name string `json:"name"`
				N    int    `json:"n"`
			}{"s", 3},
			[]string{"typed", "slice"},
		}
		src := `export default (...args: any[]) => {
  const kinds = args.map(a => a === null ? "null" : a === undefined ? "undefined" :
    a instanceof Date ? "Date" : a instanceof Map ? "Map" : a instanceof Set ? "Set" :
    a instanceof Uint8Array ? "Uint8Array" : a instanceof ArrayBuffer ? "ArrayBuffer" :
    a instanceof Float64Array ? "Float64Array:" + a[0] : Array.isArray(a) ? "Array" : typeof a);
  return [kinds, args];
}`
		res := runCode(t, r, src, &Options{Execute: &Execute{Args: in}})
		requireStatus(t, res, StatusSuccess)
		out := res.Value.([]any)
		assert.Equal(t, []any{"null", "undefined", "boolean", "number", "number", "string", "Array", "object",
			"Date", "Map", "Set", "Uint8Array", "ArrayBuffer", "Float64Array:1", "bigint", "object", "Array"}, out[0])
		back := out[1].([]any)
		assert.Equal(t, nil, back[0])
		assert.Equal(t, Undefined, back[1])
		assert.Equal(t, true, back[2])
		assert.Equal(t, 1.5, back[3])
		assert.Equal(t, -3.0, back[4])
		assert.Equal(t, "str", back[5])
		assert.Equal(t, []any{1.0, "a", []any{}}, back[6])
		assert.Equal(t, map[string]any{"nested": map[string]any{"k": "v"}}, back[7])
		assert.True(t, when.Equal(back[8].(time.Time)), "date %v", back[8])
		assert.Equal(t, Map{{Key: "a", Value: 1.0}, {Key: 2.0, Value: []any{"x"}}}, back[9])
		assert.Equal(t, Set{1.0, "two"}, back[10])
		assert.Equal(t, []byte{1, 2, 3}, back[11])
		assert.Equal(t, ArrayBuffer{9, 8}, back[12])
		assert.Equal(t, TypedArray{Type: "Float64Array", Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}}, back[13])
		assert.Equal(t, 0, big1.Cmp(back[14].(*big.Int)))
		assert.Equal(t, map[string]any{"name": "s", "n": 3.0}, back[15])
		assert.Equal(t, []any{"typed", "slice"}, back[16])
	})
}

// TestResultGettersRunOnce: telling whether a result (or the bundle's
// namespace) is a promise reads none of it, so a result's getters run once,
// when the value is transferred.
func TestResultGettersRunOnce(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		src := `let reads = 0;
export default () => ({ get n() { reads++; return reads; }, get later() { return reads; } });`
		res := runCode(t, r, src, &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, map[string]any{"n": 1.0, "later": 1.0}, res.Value)
	})
}

func TestNonTransferable(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, expr := range []string{"() => 1", "Symbol('s')", "new (class Foo {})()", "new Error('e')", "/re/", "NaN", "Promise.resolve", "new WeakMap()"} {
			res := runCode(t, r, "export default () => { const v = "+expr+"; return {v}; }", nil)
			requireStatus(t, res, StatusError)
			assert.Equal(t, "SerializationError", res.Error.Name, expr)
			assert.Contains(t, res.Error.Message, "value is not transferable", expr)
		}
		res := runCode(t, r, "export default () => { const a: any = {}; a.self = a; return a; }", nil)
		requireStatus(t, res, StatusError)
		assert.Equal(t, "SerializationError", res.Error.Name)

		// Passing a function to a host function rejects inside the sandbox.
		called := false
		res = runCode(t, r, `import {f} from "h";
export default async () => { try { await f(() => 1); return "no"; } catch (e) { return e.name + ": " + e.message; } }`,
			&Options{Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) {
				called = true
				return nil, nil
			})}}})
		requireStatus(t, res, StatusSuccess)
		assert.Contains(t, res.Value, "SerializationError: value is not transferable")
		assert.False(t, called)

		// A host function returning a non-transferable value.
		res = runCode(t, r, `import {f} from "h";
export default async () => { try { await f(); return "no"; } catch (e) { return e.name; } }`,
			&Options{Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) {
				return make(chan int), nil
			})}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "SerializationError", res.Value)
	})
}

type codedErr struct{}

func (codedErr) Error() string     { return "quota exhausted" }
func (codedErr) ErrorName() string { return "QuotaError" }

func TestHostFunctions(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		imports := map[string]map[string]any{"host": {
			"plain": HostFunc(func(ctx context.Context, args []any) (any, error) { return nil, errors.New("plain failure") }),
			"named": HostFunc(func(ctx context.Context, args []any) (any, error) { return nil, codedErr{} }),
			"typed": HostFunc(func(ctx context.Context, args []any) (any, error) {
				return nil, &Error{Name: "NotFound", Message: "no such file"}
			}),
			"panics": HostFunc(func(ctx context.Context, args []any) (any, error) { panic("kaboom") }),
			"echo":   func(ctx context.Context, args []any) (any, error) { return args, nil },
		}}
		src := `import * as host from "host";
async function name(f: () => Promise<unknown>) { try { await f(); return "ok"; } catch (e: any) { return e.name + "|" + e.message + "|" + (e instanceof Error); } }
export default async () => [
  await name(host.plain), await name(host.named), await name(host.typed), await name(host.panics),
  await host.echo(1, "two"), typeof host.echo, host.echo(0) instanceof Promise,
];`
		res := runCode(t, r, src, &Options{Imports: imports})
		requireStatus(t, res, StatusSuccess)
		v := res.Value.([]any)
		assert.Equal(t, "Error|plain failure|true", v[0])
		assert.Equal(t, "QuotaError|quota exhausted|true", v[1])
		assert.Equal(t, "NotFound|no such file|true", v[2])
		assert.Equal(t, "Error|host function panicked: kaboom|true", v[3])
		assert.Equal(t, []any{1.0, "two"}, v[4])
		assert.Equal(t, "function", v[5])
		assert.Equal(t, true, v[6])

		// Globals may be host functions too, and an uncaught host error fails the run.
		res = runCode(t, r, "export default async () => { await fail(); }", &Options{Globals: map[string]any{
			"fail": HostFunc(func(ctx context.Context, args []any) (any, error) { return nil, codedErr{} }),
		}})
		requireStatus(t, res, StatusError)
		assert.Equal(t, "QuotaError", res.Error.Name)
		assert.Contains(t, res.Error.Message, "quota exhausted")
	})
}

func TestHostCallContextEndsWithRun(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		began := make(chan struct{})
		ctxDone := make(chan struct{})
		res := runCode(t, r, "import {slow, started} from 'h';\nexport default async () => { slow(); await started(); return 1; }", &Options{
			Imports: map[string]map[string]any{"h": {
				"slow": HostFunc(func(ctx context.Context, args []any) (any, error) {
					close(began)
					<-ctx.Done()
					close(ctxDone)
					return nil, ctx.Err()
				}),
				"started": HostFunc(func(ctx context.Context, args []any) (any, error) {
					<-began
					return nil, nil
				}),
			}},
		})
		requireStatus(t, res, StatusSuccess)
		select {
		case <-ctxDone:
		case <-time.After(5 * time.Second):
			t.Fatal("host call context was not cancelled when the run settled")
		}
	})
}

func TestBridgeUnavailableAfterRun(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		var late atomic.Int32
		// The result's getter runs while the result is copied out, after the
		// run has settled: its bridged call must be refused.
		src := `import {late} from "h";
export default async () => {
  let seen = "";
  return { get x() { late().catch((e: any) => { seen = e.name; }); return 1; } };
}`
		res := runCode(t, r, src, &Options{Imports: map[string]map[string]any{"h": {
			"late": HostFunc(func(ctx context.Context, args []any) (any, error) { late.Add(1); return nil, nil }),
		}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, map[string]any{"x": 1.0}, res.Value)
		time.Sleep(50 * time.Millisecond)
		assert.Zero(t, late.Load(), "a bridge called after the run settled must not reach the host")
	})
}

func TestBridgeUnavailableInHost(t *testing.T) {
	r := newRun(nil)
	r.settle(&outcome{status: StatusSuccess})
	called := false
	_, herr := invokeHost(r, func(ctx context.Context, args []any) (any, error) { called = true; return nil, nil }, nil)
	require.NotNil(t, herr)
	assert.Equal(t, "BridgeUnavailable", herr.Name)
	assert.False(t, called)
}

func TestConsoleLogs(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		before := time.Now()
		res := runCode(t, r, `export default () => {
  console.log("a", 1, {k: true});
  console.info("i"); console.warn("w"); console.error("e"); console.debug("d");
  console.log(() => 1);
  return 0;
}`, nil)
		requireStatus(t, res, StatusSuccess)
		require.Len(t, res.Logs, 6)
		assert.Equal(t, "log", res.Logs[0].Level)
		assert.Equal(t, []any{"a", 1.0, map[string]any{"k": true}}, res.Logs[0].Args)
		var levels []string
		for _, l := range res.Logs {
			levels = append(levels, l.Level)
			assert.False(t, l.Timestamp.Before(before.Add(-time.Second)), "timestamp")
		}
		assert.Equal(t, []string{"log", "info", "warn", "error", "debug", "log"}, levels)
		assert.Equal(t, "() => 1", res.Logs[5].Args[0], "non-transferable log args are shown as text")
	})
}

func TestReports(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, "export default () => typeof report;", nil)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "undefined", res.Value, "report exists only with the option")

		var mu sync.Mutex
		var live []any
		release := make(chan struct{})
		run := r.Start(testCtx, `import {gate} from "g";
export default async () => { report(1); report({two: 2}); await gate(); report("three"); return "ok"; }`, &Options{
			Report: func(v any) { mu.Lock(); live = append(live, v); mu.Unlock() },
			Imports: map[string]map[string]any{"g": {"gate": HostFunc(func(ctx context.Context, args []any) (any, error) {
				<-release
				return nil, nil
			})}},
		})
		require.Eventually(t, func() bool { return len(run.Reports()) == 2 }, 10*time.Second, time.Millisecond)
		assert.True(t, run.Running())
		mu.Lock()
		assert.Equal(t, []any{1.0, map[string]any{"two": 2.0}}, live, "reports are delivered live")
		mu.Unlock()
		close(release)
		res = wait(t, run)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{1.0, map[string]any{"two": 2.0}, "three"}, res.Reports)
		assert.Equal(t, res.Reports, run.Reports())
		assert.False(t, run.Running())
	})
}

func TestIsolation(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		names := `["process","global","window","self","document","require","Deno","Bun","fetch","Request","Response","URL","URLSearchParams","WebSocket","WebAssembly","crypto","setTimeout","setInterval","setImmediate","performance","atob","btoa","TextEncoder","TextDecoder","Atomics","SharedArrayBuffer"]`
		res := runCode(t, r, "export default () => "+names+".filter(n => typeof (globalThis as any)[n] !== 'undefined');", nil)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{}, res.Value)

		res = runCode(t, r, "export default () => [typeof fetch, typeof process, typeof (globalThis as any).fetch];", &Options{
			Globals: map[string]any{"fetch": HostFunc(func(ctx context.Context, args []any) (any, error) { return 1, nil }), "process": map[string]any{"env": map[string]any{}}},
		})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{"function", "object", "function"}, res.Value, "globals can supply isolated names")

		for _, expr := range []string{
			"Function('return this')()",
			"new Function('return 1')()",
			"(function(){}).constructor('return 1')()",
			"(async () => {}).constructor('return 1')",
			"(function*(){}).constructor('yield 1')",
			"(async function*(){}).constructor('yield 1')",
			"Object.getPrototypeOf(async function*(){}).constructor('yield 1')",
			"Object.getPrototypeOf(function(){}).constructor('return 1')()",
			"Reflect.construct(Function, ['return 1'])",
			"({*g(){}}).g.constructor('yield 1')",
			"(class { static *g(){} }).g.constructor('yield 1')",
			"({async m(){}}).m.constructor('return 1')",
			"(class { async m(){} }).prototype.m.constructor('return 1')",
			"Object.getPrototypeOf(async () => {}).constructor('return 1')",
			"eval('1+1')",
			"(0, eval)('1+1')",
			"globalThis.eval('1')",
		} {
			res := runCode(t, r, "export default () => { try { return "+expr+"; } catch (e: any) { return e.name + ': ' + e.message; } }", nil)
			requireStatus(t, res, StatusSuccess)
			assert.Equal(t, "EvalError: Dynamic code loading is disabled", res.Value, expr)
		}
		// A keyword written with an escape is not a way around the lockdown:
		// it is either refused or locked down like the plain keyword.
		res = runCode(t, r, "export default () => { try { return (\\u0061sync () => 1).constructor('return 1'); } catch (e: any) { return e.name + ': ' + e.message; } }", &Options{Language: LanguageJavaScript})
		if res.Status == StatusSuccess {
			assert.Equal(t, "EvalError: Dynamic code loading is disabled", res.Value)
		} else {
			requireStatus(t, res, StatusLinkError)
		}
		res = runCode(t, r, `async function* gen() { yield 1; await null; yield 2; }
export default async () => {
  const out: number[] = [];
  for await (const v of gen()) out.push(v);
  function* g() { yield 3; }
  return [(() => 1) instanceof Function, typeof Function.prototype.call, [1,2].map(x => x * 2), out, [...g()]];
};`, nil)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{true, "function", []any{2.0, 4.0}, []any{1.0, 2.0}, []any{3.0}}, res.Value, "ordinary, generator and async generator functions still work")
	})
}

func TestGoValuesAreCopied(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		cfg := map[string]any{"name": "host", "list": []any{1, 2}, "inner": map[string]any{"x": 1}}
		buf := []byte{1, 2, 3}
		src := `export default () => {
  const c: any = (globalThis as any).cfg;
  c.name = "pwned"; c.list.push(3); c.inner.x = 99; c.__proto__.polluted = true;
  Object.prototype.toString = () => "hacked";
  (globalThis as any).buf[0] = 42;
  return [c.name, ({} as any).polluted];
}`
		res := runCode(t, r, src, &Options{Globals: map[string]any{"cfg": cfg, "buf": buf}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{"pwned", true}, res.Value)
		assert.Equal(t, map[string]any{"name": "host", "list": []any{1, 2}, "inner": map[string]any{"x": 1}}, cfg)
		assert.Equal(t, []byte{1, 2, 3}, buf)

		// The next run's realm is fresh: no pollution survives.
		res = runCode(t, r, "export default () => [({} as any).polluted, typeof (globalThis as any).cfg, ({}).toString()];", nil)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{Undefined, "undefined", "[object Object]"}, res.Value)
	})
}

func TestOptionValidation(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		ok := "export default () => 1;"
		cases := map[string]*Options{
			"language":        {Language: "python"},
			"memory":          {MemoryLimitBytes: -1},
			"relative import": {Imports: map[string]map[string]any{"./x": {}}},
			"absolute import": {Imports: map[string]map[string]any{"/x": {}}},
			"scheme import":   {Imports: map[string]map[string]any{"node:fs": {}}},
			"function arg":    {Execute: &Execute{Args: []any{func() {}}}},
			"channel arg":     {Execute: &Execute{Args: []any{make(chan int)}}},
			"nan arg":         {Execute: &Execute{Args: []any{nanValue()}}},
			"bare module key": {Modules: map[string]string{"lib": "export const x = 1"}},
			"escaping module": {Modules: map[string]string{"../lib.ts": "export const x = 1"}},
			"timeout":         {Timeout: -time.Second},
			"global func":     {Globals: map[string]any{"f": func(int) int { return 1 }}},
		}
		for name, opts := range cases {
			res := runCode(t, r, ok, opts)
			requireStatus(t, res, StatusLinkError)
			assert.Equal(t, "InvalidCodeExecutionOptions", res.Error.Name, name)
		}

		run := r.StartMap(testCtx, ok, map[string]any{"execute": map[string]any{"fn": "default"}, "bogus": 1})
		res := wait(t, run)
		requireStatus(t, res, StatusLinkError)
		assert.Equal(t, "InvalidCodeExecutionOptions", res.Error.Name)
		assert.Equal(t, "Unknown runCode option: bogus", res.Error.Message)

		for _, m := range []map[string]any{
			{"memoryLimitBytes": 0}, {"memoryLimitBytes": "big"}, {"language": "ruby"}, {"execute": map[string]any{"args": "x"}},
			{"modules": map[string]any{"./a.ts": 1}}, {"report": "no"},
		} {
			res := wait(t, r.StartMap(testCtx, ok, m))
			requireStatus(t, res, StatusLinkError)
			assert.Equal(t, "InvalidCodeExecutionOptions", res.Error.Name, "%v", m)
		}

		var reps []any
		res = wait(t, r.StartMap(testCtx, "export function main(a: number) { report(a); return a * 2; }", map[string]any{
			"execute": map[string]any{"fn": "main", "args": []any{21}}, "language": "typescript", "filename": "m.ts",
			"memoryLimitBytes": 64 << 20, "timeoutMs": 10000, "report": func(v any) { reps = append(reps, v) },
			"globals": map[string]any{}, "imports": map[string]any{}, "modules": map[string]any{}, "maxCallStackSize": 500,
		}))
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, 42.0, res.Value)
		assert.Equal(t, []any{21.0}, reps)
	})
}

func TestHugeMaxCallStackSizeIsTheSameLimitInBothModes(t *testing.T) {
	// The worker protocol carries at most math.MaxInt32; a larger limit
	// is taken as that in both modes, not cut to its low 31 bits.
	rec := func(depth int) string {
		return fmt.Sprintf("function g(n) { return n ? g(n - 1) : 0; } export default () => g(%d);", depth)
	}
	bothModes(t, func(t *testing.T, r *Runner) {
		// 1<<32+1 would be a limit of 1 frame.
		res := wait(t, r.StartMap(testCtx, rec(50), map[string]any{"maxCallStackSize": float64(1<<32 + 1), "language": "javascript"}))
		requireStatus(t, res, StatusSuccess)
		// 1<<31 would be 0, the default of 10000 frames.
		res = runCode(t, r, rec(20000), &Options{MaxCallStackSize: 1 << 31, Language: LanguageJavaScript})
		requireStatus(t, res, StatusSuccess)
		// The default still applies without a limit.
		res = runCode(t, r, rec(20000), &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusError)
		assert.Contains(t, res.Error.Message, "Maximum call stack size exceeded")
	})
}

// A positive fraction of a byte or a nanosecond is the smallest limit, not
// zero, which means the default (for timeouts: none).
func TestTinyNumericMapOptionsAreRoundedUp(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want Options
	}{
		{map[string]any{"memoryLimitBytes": 0.5}, Options{MemoryLimitBytes: 1}},
		{map[string]any{"memoryLimitBytes": 1e-300}, Options{MemoryLimitBytes: 1}},
		{map[string]any{"memoryLimitBytes": 1024.25}, Options{MemoryLimitBytes: 1025}},
		{map[string]any{"timeoutMs": 1e-7}, Options{Timeout: 1}},
		{map[string]any{"timeoutMs": 1.5e-6}, Options{Timeout: 2}},
		{map[string]any{"timeoutMs": 5e-324}, Options{Timeout: 1}},
		{map[string]any{"timeoutMs": 250}, Options{Timeout: 250 * time.Millisecond}},
	} {
		o, err := OptionsFromMap(c.m)
		require.NoError(t, err, "%v", c.m)
		assert.Equal(t, c.want, *o, "%v", c.m)
	}
}

func TestHugeNumericMapOptionsAreCapped(t *testing.T) {
	for _, c := range []struct {
		m    map[string]any
		want Options
	}{
		{map[string]any{"memoryLimitBytes": 1e300}, Options{MemoryLimitBytes: 1 << 50}},
		{map[string]any{"memoryLimitBytes": float64(1<<50 + 1<<40)}, Options{MemoryLimitBytes: 1 << 50}},
		{map[string]any{"memoryLimitBytes": 1e15}, Options{MemoryLimitBytes: 1e15}},
		{map[string]any{"timeoutMs": 1e13}, Options{Timeout: math.MaxInt64}},
		{map[string]any{"timeoutMs": 1e300}, Options{Timeout: math.MaxInt64}},
		{map[string]any{"timeoutMs": 9.2e12}, Options{Timeout: 9.2e12 * time.Millisecond}},
		{map[string]any{"maxCallStackSize": 1e300}, Options{MaxCallStackSize: math.MaxInt32}},
		{map[string]any{"maxCallStackSize": float64(1 << 40)}, Options{MaxCallStackSize: math.MaxInt32}},
		{map[string]any{"maxCallStackSize": 500}, Options{MaxCallStackSize: 500}},
	} {
		o, err := OptionsFromMap(c.m)
		require.NoError(t, err, "%v", c.m)
		assert.Equal(t, c.want, *o, "%v", c.m)
	}
	for _, m := range []map[string]any{
		{"memoryLimitBytes": math.Inf(1)}, {"timeoutMs": math.Inf(1)}, {"maxCallStackSize": math.Inf(1)},
	} {
		_, err := OptionsFromMap(m)
		var e *Error
		require.ErrorAs(t, err, &e, "%v", m)
		assert.Equal(t, "InvalidCodeExecutionOptions", e.Name)
		assert.Contains(t, e.Message, "must be a positive", "%v", m)
	}

	bothModes(t, func(t *testing.T, r *Runner) {
		res := wait(t, r.StartMap(testCtx, "export default () => 1 + 1;", map[string]any{
			"memoryLimitBytes": 1e300, "timeoutMs": 1e13, "maxCallStackSize": 1e300,
		}))
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, 2.0, res.Value)
	})
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestTerminate(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		run := r.Start(testCtx, "export default () => { console.log('start'); report(1); for(;;){} }", &Options{Report: func(any) {}})
		require.Eventually(t, func() bool { return len(run.Reports()) == 1 }, 10*time.Second, time.Millisecond)
		run.Terminate("user stop")
		res := wait(t, run)
		requireStatus(t, res, StatusTerminated)
		assert.Equal(t, &Error{Name: "Terminated", Message: "user stop"}, res.Error)
		assert.Equal(t, []any{1.0}, res.Reports, "reports so far are kept")
		require.Len(t, res.Logs, 1, "logs so far are kept")
		run.Terminate("again")
		res2 := wait(t, run)
		assert.Equal(t, res, res2, "terminate after settlement is a no-op")

		run = r.Start(testCtx, "export default () => new Promise(() => {})", nil)
		time.Sleep(20 * time.Millisecond)
		run.Terminate("")
		res = wait(t, run)
		requireStatus(t, res, StatusTerminated)
		assert.Equal(t, "Code execution terminated", res.Error.Message)

		ctx, cancel := context.WithCancel(testCtx)
		run = r.Start(ctx, "export default async () => { for(;;) await null; }", nil)
		cancel()
		res = wait(t, run)
		requireStatus(t, res, StatusTerminated)
		assert.Contains(t, res.Error.Message, "context canceled")

		res = runCode(t, r, "export default () => 1;", nil)
		requireStatus(t, res, StatusSuccess)
		res2, _ = r.Start(testCtx, "export default () => 1;", nil).Wait(testCtx)
		_ = res2

		waitCtx, wcancel := context.WithTimeout(testCtx, 10*time.Millisecond)
		defer wcancel()
		run = r.Start(testCtx, "export default () => new Promise(() => {})", &Options{Timeout: 5 * time.Second})
		_, err := run.Wait(waitCtx)
		assert.ErrorIs(t, err, context.DeadlineExceeded, "Wait's ctx bounds only the wait")
		assert.True(t, run.Running())
		run.Terminate("cleanup")
		wait(t, run)
	})
}

func TestCompileCache(t *testing.T) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	src := "const x: number = 40;\nexport default (y: number) => x + y;"
	res := runCode(t, r, src, &Options{Execute: &Execute{Args: []any{1}}})
	requireStatus(t, res, StatusSuccess)
	builds := r.cache.builds.Load()
	res = runCode(t, r, src, &Options{Execute: &Execute{Args: []any{2}}})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, 42.0, res.Value)
	assert.Equal(t, builds, r.cache.builds.Load(), "a repeated run must not invoke esbuild")

	// Different modules, filename or language are different bundles.
	runCode(t, r, src, &Options{Filename: "other.ts"})
	assert.Equal(t, builds+1, r.cache.builds.Load())
	// Compile errors are cached too.
	runCode(t, r, "export default (", nil)
	b := r.cache.builds.Load()
	res = runCode(t, r, "export default (", nil)
	requireStatus(t, res, StatusLinkError)
	assert.Equal(t, b, r.cache.builds.Load())

	small := New(&RunnerOptions{Mode: ModeInProcess, CacheSize: 2})
	for i := 0; i < 5; i++ {
		runCode(t, small, "export default () => "+string(rune('0'+i)), nil)
	}
	assert.Equal(t, 2, small.cache.ll.Len(), "the cache is bounded")
}

func TestRunnerClose(t *testing.T) {
	r := New(&RunnerOptions{PoolSize: 1})
	res := runCode(t, r, "export default () => 1;", nil)
	requireStatus(t, res, StatusSuccess)
	require.NoError(t, r.Close())
	res = runCode(t, r, "export default () => 1;", nil)
	requireStatus(t, res, StatusError)
	assert.Equal(t, "RunnerClosed", res.Error.Name)
}

func TestDefaultRunner(t *testing.T) {
	require.Same(t, Default(), Default())
	res := runCode(t, Default(), "export default () => 'hi';", &Options{Language: LanguageJavaScript})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, "hi", res.Value)
}

func TestConcurrentRuns(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := r.Start(testCtx, "export default async (n: number) => { await null; return n * n; }", &Options{Execute: &Execute{Args: []any{i}}}).Wait(testCtx)
				if err != nil || res.Status != StatusSuccess || res.Value != float64(i*i) {
					errs <- errors.New("bad concurrent result")
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})
}

func TestReportCallbackPanicIsContained(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, "export default () => { report(1); report(2); return 'done'; }", &Options{Report: func(v any) { panic("callback broke") }})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "done", res.Value)
		assert.Equal(t, []any{1.0, 2.0}, res.Reports)
	})
}

func TestLargeValues(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		big := strings.Repeat("x", 4<<20)
		res := runCode(t, r, "export default (s: string) => ({len: s.length, back: s + 'y', arr: new Uint8Array(1 << 20).fill(7)});", &Options{Execute: &Execute{Args: []any{big}}})
		requireStatus(t, res, StatusSuccess)
		v := res.Value.(map[string]any)
		assert.Equal(t, float64(4<<20), v["len"])
		assert.Equal(t, big+"y", v["back"])
		assert.Len(t, v["arr"], 1<<20)
	})
}

// TestConcurrentHostCalls checks that a blocking host function does not
// hold up other bridged calls of the same run.
func TestConcurrentHostCalls(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		bCalled := make(chan struct{})
		res := runCode(t, r, "import {a, b} from 'h';\nexport default () => Promise.all([a(), b(), a()]);", &Options{
			Timeout: 20 * time.Second,
			Imports: map[string]map[string]any{"h": {
				"a": HostFunc(func(ctx context.Context, args []any) (any, error) {
					select {
					case <-bCalled:
						return "a", nil
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}),
				"b": HostFunc(func(ctx context.Context, args []any) (any, error) {
					close(bCalled)
					return "b", nil
				}),
			}},
		})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{"a", "b", "a"}, res.Value)
	})
}
