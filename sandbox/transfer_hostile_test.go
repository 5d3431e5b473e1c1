package sandbox

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStackOverflowWhileExporting: a stack overflow in user code that runs
// after the entry returned (a getter of the result, the message getter or
// toString of what was thrown) ends the run with RangeError, as any other
// stack overflow does, not with an InternalError holding goja's stack.
func TestStackOverflowWhileExporting(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, src := range []string{
			`const f = () => f();
export default () => ({ get x() { return f(); } });`,
			`const f = () => f();
export default () => { const e = new Error("m"); Object.defineProperty(e, "message", { get: f }); throw e; };`,
			`const f = () => f();
export default () => { throw { toString: f }; };`,
		} {
			res := runCode(t, r, src, &Options{Language: LanguageJavaScript})
			requireStatus(t, res, StatusError)
			assert.Equal(t, "RangeError", res.Error.Name, "%s\n%v", src, res.Error)
			assert.Contains(t, res.Error.Message, "Maximum call stack size exceeded", src)
			assert.Equal(t, 1, res.Error.Line, "the position is in the user's source: %s", src)
		}
	})
}

// TestMapAndSetMemberErrors: what a getter of a Map's or Set's member
// throws ends the run (or the report call) as it was thrown, as it does in
// a plain object, not as a SerializationError quoting goja; an object that
// only inherits from Map.prototype or Set.prototype is not transferable.
func TestMapAndSetMemberErrors(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, expr := range []string{
			`new Map([[1, { get x() { throw new TypeError("boom"); } }]])`,
			`new Map([[{ get k() { throw new TypeError("boom"); } }, 1]])`,
			`new Set([{ get x() { throw new TypeError("boom"); } }])`,
		} {
			src := "export default () => " + expr + ";"
			res := runCode(t, r, src, &Options{Language: LanguageJavaScript})
			requireStatus(t, res, StatusError)
			assert.Equal(t, "TypeError", res.Error.Name, "%s: %v", expr, res.Error)
			assert.Equal(t, "Line 1 of <runCode>: boom", res.Error.Message, expr)

			res = runCode(t, r, "export default () => { try { report("+expr+"); return 'reported'; } catch (e) { return e.name + ': ' + e.message; } };",
				&Options{Language: LanguageJavaScript, Report: func(any) {}})
			requireStatus(t, res, StatusSuccess)
			assert.Equal(t, "TypeError: boom", res.Value, expr)
		}

		res := runCode(t, r, "const f = () => f();\nexport default () => new Map([[1, { get x() { return f(); } }]]);", &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusError)
		assert.Equal(t, "RangeError", res.Error.Name, "%v", res.Error)
		assert.Contains(t, res.Error.Message, "Maximum call stack size exceeded")

		for _, expr := range []string{"Object.create(Map.prototype)", "Object.create(Set.prototype)"} {
			res := runCode(t, r, "export default () => "+expr+";", &Options{Language: LanguageJavaScript})
			requireStatus(t, res, StatusError)
			assert.Equal(t, "SerializationError", res.Error.Name, expr)
			assert.Equal(t, "value is not transferable (Object instance)", res.Error.Message, expr)
		}
	})
}

// TestReentrantOutputStaysInLimits: report and console.log calls made by
// getters while another report or log argument is being copied count
// against the same limits, so together they never go past 10000 reports
// or 16 MiB of output (which in worker mode the host would take for a
// broken protocol).
func TestReentrantOutputStaysInLimits(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		opts := func() *Options {
			return &Options{Language: LanguageJavaScript, Report: func(any) {}, MemoryLimitBytes: 1 << 30, Timeout: 30 * time.Second}
		}
		res := runCode(t, r, `export default () => {
  for (let i = 0; i < 9999; i++) report(i);
  try { report({ get x() { report(1); return 1; } }); return "reported"; } catch (e) { return e.name; }
};`, opts())
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "RangeError", res.Value)
		assert.Equal(t, maxReports, len(res.Reports))

		res = runCode(t, r, `export default () => {
  try { report({ get x() { report("a".repeat(9 << 20)); return "b".repeat(9 << 20); } }); return "reported"; } catch (e) { return e.name; }
};`, opts())
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "RangeError", res.Value)
		assert.Equal(t, 1, len(res.Reports))
		assert.LessOrEqual(t, valuesCost(res.Reports), int64(maxOutputBytes))

		res = runCode(t, r, `export default () => {
  console.log({ get x() { console.log("a".repeat(9 << 20)); return "b".repeat(9 << 20); } });
  return 1;
};`, opts())
		requireStatus(t, res, StatusSuccess)
		var out int64
		for _, l := range res.Logs {
			out += valuesCost(l.Args)
		}
		assert.Equal(t, 1, len(res.Logs))
		assert.LessOrEqual(t, out, int64(maxOutputBytes))
	})
}

// TestReentrantHostCallsStayInLimits: bridged calls made by getters while
// another call's arguments are copied count against the same limits, so
// the host never has more than 1000 calls or 64 MiB of arguments pending.
func TestReentrantHostCallsStayInLimits(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		var calls, argBytes atomic.Int64
		opts := &Options{Language: LanguageJavaScript, MemoryLimitBytes: 1 << 30, Timeout: 30 * time.Second,
			Imports: map[string]map[string]any{"h": {"f": HostFunc(func(ctx context.Context, args []any) (any, error) {
				calls.Add(1)
				argBytes.Add(valuesCost(args))
				return nil, nil
			})}}}
		res := runCode(t, r, `import {f} from "h";
export default async () => {
  const ps = [];
  for (let i = 0; i < 999; i++) ps.push(f(1));
  const outer = f({ get x() { ps.push(f(2)); return 1; } });
  await Promise.all(ps);
  return outer.then(() => "called", (e) => e.message);
};`, opts)
		requireStatus(t, res, StatusSuccess)
		assert.Contains(t, res.Value, "Too many pending host calls")
		assert.LessOrEqual(t, calls.Load(), int64(maxPendingCalls))

		calls.Store(0)
		argBytes.Store(0)
		res = runCode(t, r, `import {f} from "h";
export default async () => {
  let inner;
  const outer = f({ get x() { inner = f("y".repeat(40 << 20)); return "z".repeat(40 << 20); } });
  await inner;
  return outer.then(() => "called", (e) => e.message);
};`, opts)
		requireStatus(t, res, StatusSuccess)
		assert.Contains(t, res.Value, "Too much data in pending host calls")
		assert.Equal(t, int64(1), calls.Load())
		assert.LessOrEqual(t, argBytes.Load(), int64(maxPendingCallBytes))
	})
}

// TestDateExportRunsNoCode: a Date crosses as its time value; its valueOf
// or Symbol.toPrimitive, which the code may have replaced, is not called.
func TestDateExportRunsNoCode(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, `let calls = 0;
export default () => {
  const d = new Date(0), e = new Date(1000);
  d.valueOf = () => { calls++; return NaN; };
  Object.defineProperty(e, Symbol.toPrimitive, { value: () => { calls++; throw new Error("called"); } });
  return [d, e, { get calls() { return calls; } }];
};`, &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{time.UnixMilli(0).UTC(), time.UnixMilli(1000).UTC(), map[string]any{"calls": 0.0}}, res.Value)

		res = runCode(t, r, "export default () => new Date(NaN);", nil)
		requireStatus(t, res, StatusError)
		assert.Equal(t, "value is not transferable (invalid Date)", res.Error.Message)
	})
}

// TestConsoleLogTextNeverThrows: a log argument that is not transferable is
// logged as its text; when it has none (no usable toString, or one that
// throws) it is logged as "[object <class>]" and console.log does not throw.
func TestConsoleLogTextNeverThrows(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, `export default () => {
  console.log(Object.assign(Object.create(null), { f() {} }));
  console.log({ toString() { throw new Error("no text"); }, f() {} }, 2);
  console.log({ toString() { return "shown"; }, f() {} });
  return "logged";
};`, &Options{Language: LanguageJavaScript})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, "logged", res.Value)
		var args [][]any
		for _, l := range res.Logs {
			args = append(args, l.Args)
		}
		assert.Equal(t, [][]any{{"[object Object]"}, {"[object Object]", 2.0}, {"shown"}}, args)
	})
}

// TestObjectKeysArriveAsOwnProperties: every key of a Go map becomes an own
// data property of the JS object, "__proto__" included (it does not set the
// prototype), and setters the code defined on Object.prototype are not
// called; the object crosses back unchanged.
func TestObjectKeysArriveAsOwnProperties(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		in := map[string]any{"__proto__": map[string]any{"admin": true}, "x": 1}
		res := runCode(t, r, `import {get} from "h";
export default async (v) => {
  let stolen = 0;
  Object.defineProperty(Object.prototype, "x", { set(v) { stolen++; }, configurable: true });
  const w = await get();
  delete Object.prototype.x;
  return [Object.keys(v), Object.getPrototypeOf(v) === Object.prototype, v.admin === undefined, v,
    Object.keys(w), Object.getPrototypeOf(w) === Object.prototype, stolen];
};`, &Options{Language: LanguageJavaScript, Execute: &Execute{Args: []any{in}},
			Imports: map[string]map[string]any{"h": {"get": HostFunc(func(ctx context.Context, args []any) (any, error) { return in, nil })}}})
		requireStatus(t, res, StatusSuccess)
		want := map[string]any{"__proto__": map[string]any{"admin": true}, "x": 1.0}
		assert.Equal(t, []any{[]any{"__proto__", "x"}, true, true, want, []any{"__proto__", "x"}, true, 0.0}, res.Value)
	})
}

// TestBufferLookalikesAreNotTransferable: only a real typed array or
// ArrayBuffer crosses as one, and telling runs none of the code's methods:
// an object (or a DataView, or a typed array of another kind) given a typed
// array's or ArrayBuffer's prototype is not transferable, its iterator and
// getters are not called, and no typed array whose bytes do not fit its
// element size reaches the host.
func TestBufferLookalikesAreNotTransferable(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, expr := range []string{
			`Object.setPrototypeOf({ *[Symbol.iterator]() { calls++; yield 1; yield 2; } }, Float64Array.prototype)`,
			`Object.setPrototypeOf({ *[Symbol.iterator]() { calls++; yield 1; } }, Uint8Array.prototype)`,
			`Object.setPrototypeOf(new Uint8Array(3), Float64Array.prototype)`,
			`Object.setPrototypeOf(new DataView(new ArrayBuffer(3)), Int16Array.prototype)`,
			`Object.setPrototypeOf({ get x() { calls++; return 1; } }, ArrayBuffer.prototype)`,
		} {
			res := runCode(t, r, `let calls = 0;
export default () => { try { report(`+expr+`); return "reported"; } catch (e) { return [e.name, calls]; } };`,
				&Options{Language: LanguageJavaScript, Report: func(any) {}})
			requireStatus(t, res, StatusSuccess)
			assert.Equal(t, []any{"SerializationError", 0.0}, res.Value, expr)
			assert.Empty(t, res.Reports, expr)
		}

		// Real typed arrays of every kind still cross.
		for name, size := range typedArraySizes {
			res := runCode(t, r, "export default () => new "+name+"(2);", &Options{Language: LanguageJavaScript})
			requireStatus(t, res, StatusSuccess)
			want := any(TypedArray{Type: name, Data: make([]byte, 2*size)})
			if name == "Uint8Array" {
				want = make([]byte, 2)
			}
			assert.Equal(t, want, res.Value, name)
		}
	})
}

// TestImportMembersAreOwnProperties: an import member named "__proto__"
// is a member like any other, not the namespace's prototype.
func TestImportMembersAreOwnProperties(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, "import {__proto__ as p, x} from 'h';\nexport default () => [typeof p, p, x];",
			&Options{Language: LanguageJavaScript, Imports: map[string]map[string]any{"h": {"__proto__": "v", "x": 1}}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, []any{"string", "v", 1.0}, res.Value)
	})
}

// TestATooLargeResultIsNotChargedAsMemory: a result past the transfer limit
// (a text that is cleaned on its way out, as goja's texts of Go values are)
// under a memory limit several times its size is refused as too large to
// transfer, in a worker too, also when the test binary (and with it the
// worker it re-executes) is built with the race detector: RLIMIT_DATA
// counted the detector's shadow memory, and such a run failed with
// MemoryLimitExceeded under any limit below about a gibibyte.
func TestATooLargeResultIsNotChargedAsMemory(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		o := &Options{Language: LanguageJavaScript, MemoryLimitBytes: 512 << 20, Timeout: 30 * time.Second}
		res := runCode(t, r, `export default () => "Could not convert &{ to primitive".repeat(1.9e6);`, o)
		requireStatus(t, res, StatusError)
		assert.Equal(t, "RangeError", res.Error.Name, "%v", res.Error)
		assert.Contains(t, res.Error.Message, "too large to transfer")
	})
}
