package toolrun

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/toolrun/toolrun/internal/safefmt"
	"github.com/toolrun/toolrun/internal/schema"
)

// call is one call as its handler runs it, passed by value: it lives on
// the stack of the goroutine running the call.
type call struct {
	e      *Executor
	b      *batch
	id     string // the call's id (ThreadState.CallID)
	args   string // its argument text
	nest   int    // its nesting level: 0 for a call of a top-level batch
	caller *callState
	// resultID is the id its stored result will get, which the rows of a
	// prompt tool's sub-prompt point at. An invocation's result is not
	// stored: its resultID is the invoking call's, so that what it stores
	// hangs from that call's result.
	resultID string
}

// invoke runs a call of h: nesting bound, required variables, then the
// handler. It stores nothing. The error, when not nil, stops the run (see
// handler.run).
func (e *Executor) invoke(ctx context.Context, b *batch, caller *callState, h *handler, id, args, resultID string) (Result, error) {
	level := b.sc.nest
	if caller != nil {
		level = caller.nest + 1
	}
	if level > e.maxNest {
		return nestingResult(h.name, level, e.maxNest), nil
	}
	if h.kind == kindRefused || h.kind == kindProvider {
		return h.refusal, nil
	}
	// A model cannot provide a missing variable, so it hears of one before
	// any complaint about its arguments.
	if missing := e.missingVariables(b, h.variables); len(missing) > 0 {
		return missingVariablesResult(missing), nil
	}
	res, err := h.run(ctx, call{e: e, b: b, id: id, args: args, nest: level, caller: caller, resultID: resultID})
	if err != nil && !res.IsError() {
		// The run stops, and the call's result says why: a handler that
		// returns no error result of its own with the error (a prompt
		// tool's or a subagent tool's store failure) must not leave a
		// success behind it.
		res = abortedResult(ctx, res, err)
	}
	return res, err
}

// abortedResult is the result of a call whose handler stopped the run
// with err but returned res, which is not an error result: an error result
// naming err, or, when err is ctx's own, saying that the call was stopped
// as every call the user stopped says. Its attachments and refs are kept.
func abortedResult(ctx context.Context, res Result, err error) Result {
	text := safefmt.Error(err)
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		text = stoppedText
	}
	return Result{Status: StatusError, Error: text, Attachments: res.Attachments, Refs: res.Refs}
}

func missingVariablesResult(missing []string) Result {
	return Result{
		Status:    StatusError,
		Error:     "Missing required variables: " + joinComma(missing),
		ErrorCode: "missing_variables",
		ErrorData: map[string]any{"missing": toAnySlice(missing)},
	}
}

// argumentsResult is the error result of argument text the route refused.
func argumentsResult(f *schema.Failure, kind string) Result {
	r := Result{Status: StatusError, Error: f.Message(kind)}
	if len(f.Issues) > 0 {
		r.ErrorCode = "invalid_arguments"
	}
	return r
}

// runFunction is the run of a function tool's handler.
func (t *funcTool) runFunction(ctx context.Context, c call) (Result, error) {
	var st *callState
	if c.caller == nil {
		st = c.b.state() // top-level calls run one at a time
	} else {
		st = new(callState)
	}
	st.e, st.b, st.tool, st.nest, st.id, st.resultID = c.e, c.b, t, c.nest, c.id, c.resultID
	return callTool(ctx, t, st, c.args)
}

// callTool calls the tool — its arguments decoded, then Execute — on the
// caller's goroutine, and normalises what it returned. A panic becomes an
// error result with its stack. runtime.Goexit (t.FailNow inside a test
// assertion) cannot be stopped: it passes through, and the batch stores
// the call's error result on its way out (see Executor.execute).
func callTool(ctx context.Context, t *funcTool, st ThreadState, args string) (res Result, abort error) {
	defer func() {
		if p := recover(); p != nil {
			res = Result{Status: StatusError, Error: "tool panicked: " + safefmt.Sprint(p), Stack: string(debug.Stack())}
			abort = nil
		}
	}()
	res, err := t.call(ctx, st, args)
	if err != nil {
		res = Result{Status: StatusError, Error: safefmt.Error(err), Attachments: res.Attachments, Refs: res.Refs}
		var coded interface{ Code() string }
		if errors.As(err, &coded) {
			res.ErrorCode = coded.Code()
		}
		if errors.Is(err, ErrAbort) {
			abort = err
		}
	}
	if res.Status != StatusError {
		res.Status = StatusSuccess
	} else if res.Error == "" {
		res.Error = res.Result
	}
	return res, abort
}

// goexitResult is the result of a call whose tool called runtime.Goexit.
func goexitResult() Result {
	return Result{Status: StatusError, ErrorCode: "tool_goexit", Stack: string(debug.Stack()),
		Error: "tool called runtime.Goexit (as t.FailNow does) before returning a result; the goroutine that ran the call ended"}
}

// nestingKey carries, in the context of a blocking subagent's Send, the
// nesting level its batches start at.
type nestingKey struct{}

func withNesting(ctx context.Context, level int) context.Context {
	return context.WithValue(ctx, nestingKey{}, level)
}

func nestingOf(ctx context.Context) int {
	n, _ := ctx.Value(nestingKey{}).(int)
	return n
}

// nestingResult refuses a call nested past the limit.
func nestingResult(name string, level, limit int) Result {
	return Result{Status: StatusError, ErrorCode: "max_nesting",
		Error: fmt.Sprintf("Tool %q was not run: it would be nested %d levels deep (tools invoking tools, and prompt tools), past the limit of %d.", name, level, limit)}
}

// safeID reports whether a call id is what every store and provider takes:
// 1 to 64 letters, digits, '_', '-', '.' or ':'.
func safeID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// derivedID returns the id that stands for id, which safeID refuses: "call_"
// and 32 hex digits of its SHA-256, the same for the same id.
func derivedID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "call_" + hex.EncodeToString(sum[:16])
}

// cleanName returns a tool name from a model as text every store can hold:
// control characters and invalid UTF-8 become U+FFFD, and it is cut at 256
// bytes. A plain name is returned as it is.
func cleanName(name string) string {
	if plainName(name) {
		return name
	}
	name = strings.ToValidUTF8(name, "\uFFFD")
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '\uFFFD'
		}
		return r
	}, name)
	if len(name) > 256 {
		name = strings.ToValidUTF8(name[:256], "")
	}
	return name
}

// plainName reports whether name is made of what names and qualified names
// are (letters, digits, '_', '-', '/'), 1 to 129 bytes: such a name needs no
// cleaning.
func plainName(name string) bool {
	if len(name) == 0 || len(name) > 129 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

// callDigest identifies a call by its tool and its redacted arguments, so
// that a stored result tells the call it answers from another call with
// the same id.
func callDigest(name, redactedArgs string) string {
	var buf [512]byte
	in := append(append(append(buf[:0], name...), 0), strings.TrimSpace(redactedArgs)...)
	sum := sha256.Sum256(in)
	var out [22]byte
	base64.RawURLEncoding.Encode(out[:], sum[:16])
	return string(out[:])
}

// reissuedID returns a new id for a call whose id is taken, keeping the old
// one as its start (ids stay within what providers accept: letters, digits,
// _ and -).
func reissuedID(old string) string {
	if len(old) > 24 {
		old = old[:24]
	}
	return old + "_" + randomHex(4)
}
