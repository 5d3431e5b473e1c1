package sandbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// notInternal fails t when res ended with an engine panic.
func notInternal(t *testing.T, res Result, what string) {
	t.Helper()
	if res.Error != nil {
		assert.NotEqual(t, "InternalError", res.Error.Name, "%s: %s", what, res.Error.Message)
	}
}

// TestConversionsAfterTheCodeRanCatchWhatItThrows: making a host function's
// answer or error, and the export's args, reads globals and can run the
// code's getters and the constructors it replaced; what they throw (or a
// stack overflow) rejects the call or ends the run with the code's error,
// never with an engine panic, as it did when these ran outside a Try.
func TestConversionsAfterTheCodeRanCatchWhatItThrows(t *testing.T) {
	h := map[string]map[string]any{"h": {
		"date": HostFunc(func(context.Context, []any) (any, error) { return time.UnixMilli(0), nil }),
		"fail": HostFunc(func(context.Context, []any) (any, error) { return nil, errors.New("no") }),
	}}
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, c := range []struct {
			src  string
			args []any
		}{
			{`import {date} from "h"; export default async () => { Object.defineProperty(globalThis, "Date", {get() { throw 1; }}); try { await date(); } catch (e) { return "caught"; } };`, nil},
			{`import {fail} from "h"; export default async () => { Object.defineProperty(globalThis, "Error", {get() { throw 1; }}); try { await fail(); } catch (e) { return "caught"; } };`, nil},
			{`import {date} from "h"; const f = () => f(); export default async () => { globalThis.Date = function () { f(); }; try { await date(); } catch (e) { return "caught"; } };`, nil},
			{`Object.defineProperty(globalThis, "Map", {get() { throw 1; }}); export default (a) => typeof a;`, []any{Map{}}},
		} {
			res := runCode(t, r, c.src, &Options{Language: LanguageJavaScript, Imports: h, Execute: &Execute{Args: c.args}, Timeout: 10 * time.Second})
			notInternal(t, res, c.src)
		}
	})
}

// TestThrownProxiesEndTheRunCleanly: a Proxy thrown synchronously, revoked
// or with a throwing trap, ends the run with an error. goja's Exception
// unwraps by an instanceof check that runs the proxy's traps; errors.As ran
// it outside any Try and the engine panicked.
func TestThrownProxiesEndTheRunCleanly(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, src := range []string{
			`export default () => { const p = Proxy.revocable({}, {}); p.revoke(); throw p.proxy; };`,
			`export default () => { throw new Proxy({}, {getPrototypeOf() { throw new Error("trap"); }}); };`,
			`const p = Proxy.revocable({}, {}); p.revoke(); throw p.proxy; export default 1;`,
		} {
			notInternal(t, runCode(t, r, src, &Options{Language: LanguageJavaScript}), src)
		}
	})
}

// goValueRE matches what a Go value dump shows: addresses, struct syntax,
// goja's type names.
var goValueRE = regexp.MustCompile(`0x[0-9a-f]{6,}|&\{|goja`)

// TestDumpHoldingTheEndMarkerIsCleanedWhole: a string property " to
// primitive" puts the dump's end marker inside the dump; the text is
// cleaned up to the real end.
func TestDumpHoldingTheEndMarkerIsCleanedWhole(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, `export default () => { const o = Object.create(null); o.a = " to primitive"; o.b = {}; return "" + o; };`, nil)
		requireStatus(t, res, StatusError)
		assert.NotRegexp(t, goValueRE, res.Error.Message)
		assert.NotRegexp(t, goValueRE, res.Error.Stack)
	})
}

// TestDumpInNamesAndKeysIsCleaned: goja's text passed on as an object key
// (in the value, a report, a log, a host call's args) or as an error's
// name shows the standard wording too.
func TestDumpInNamesAndKeysIsCleaned(t *testing.T) {
	const catch = `let m; try { "" + Object.create(null); } catch (e) { m = e.message; }`
	bothModes(t, func(t *testing.T, r *Runner) {
		var mu sync.Mutex
		var got []any
		opts := &Options{Language: LanguageJavaScript, Report: func(any) {}, Imports: map[string]map[string]any{"h": {
			"send": HostFunc(func(_ context.Context, a []any) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, a...)
				return nil, nil
			})}}}
		res := runCode(t, r, `import {send} from "h"; export default async () => { `+catch+`
  report({[m]: 1}); console.log({[m]: 1}); await send({[m]: 1}); return {[m]: 1}; };`, opts)
		requireStatus(t, res, StatusSuccess)
		for _, v := range []any{res.Value, res.Reports, res.Logs[0].Args, got} {
			assert.NotRegexp(t, goValueRE, fmt.Sprintf("%#v", v))
		}
		res = runCode(t, r, `export default () => { `+catch+` const e = new Error("x"); e.name = m; throw e; };`, opts)
		assert.NotRegexp(t, goValueRE, res.Error.Name)
	})
}

// TestCleanedTextsAreChargedAsDelivered: cleaning can lengthen a text
// (the markers alone, 33 bytes, become 40), so a string is charged against
// the limits as it is delivered: in-process the result and reports stay
// within them, and in worker mode the host does not take an honest worker
// for one that breaks them.
func TestCleanedTextsAreChargedAsDelivered(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		o := &Options{Language: LanguageJavaScript, MemoryLimitBytes: 1 << 30, Timeout: 30 * time.Second, Report: func(any) {}}
		res := runCode(t, r, `export default () => "Could not convert &{ to primitive".repeat(1.9e6);`, o)
		if res.Status == StatusSuccess {
			assert.LessOrEqual(t, valueCost(res.Value), int64(maxTransferBytes), "result over 64 MiB")
		} else {
			assert.Equal(t, "RangeError", res.Error.Name, "%v", res.Error)
		}
		res = runCode(t, r, `export default () => { try { report("Could not convert &{ to primitive".repeat(450000)); } catch (e) { return e.name; } return "reported"; };`, o)
		requireStatus(t, res, StatusSuccess)
		assert.LessOrEqual(t, valuesCost(res.Reports), int64(maxOutputBytes), "reports over 16 MiB")
	})
}

// TestAnExportNamedProtoIsAnExport: an export named "__proto__" is a
// property of the namespace, not its prototype (the namespace was an
// object literal, where that key sets the prototype), and reading the
// entry runs inside a Try.
func TestAnExportNamedProtoIsAnExport(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		res := runCode(t, r, `const p = new Proxy({}, {get() { throw new Error("trap"); }}); export { p as "__proto__" };`,
			&Options{Language: LanguageJavaScript, Execute: &Execute{Fn: "__proto__"}})
		notInternal(t, res, "__proto__ export")
		res = runCode(t, r, `const v = {answer: 42}; export { v as "__proto__" };`,
			&Options{Language: LanguageJavaScript, Execute: &Execute{Fn: "__proto__"}})
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, map[string]any{"answer": 42.0}, res.Value)
	})
}

// TestLoneSurrogateKeysAreNotTransferable: goja gives an object key
// holding a lone surrogate with U+FFFD in its place, which names no
// property (the value was lost) or another one (two keys collapsed); such
// an object is refused. A key that is U+FFFD itself is delivered.
func TestLoneSurrogateKeysAreNotTransferable(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, src := range []string{
			`export default () => ({"\ud800": "first", "\udc00k": "second"});`,
			`export default () => ({"\ud800": 1, "\ufffd": 3});`,
		} {
			res := runCode(t, r, src, nil)
			requireStatus(t, res, StatusError)
			assert.Equal(t, "SerializationError", res.Error.Name, src)
			assert.Contains(t, res.Error.Message, "lone surrogate", src)
		}
		res := runCode(t, r, `export default () => ({"\ufffd": 3, "a\ufffdb": 4});`, nil)
		requireStatus(t, res, StatusSuccess)
		assert.Equal(t, map[string]any{"\ufffd": 3.0, "a\ufffdb": 4.0}, res.Value)
	})
}
