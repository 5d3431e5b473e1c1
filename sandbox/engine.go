package sandbox

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

// engineJob is one run as the engine sees it: a compiled bundle and
// canonical values (host functions as *funcRef).
type engineJob struct {
	code     *compiled
	entry    string
	args     []any
	globals  map[string]any
	imports  map[string]map[string]any
	report   bool
	maxStack int
}

// engineHost is what the engine needs from its environment. call must not
// block; done may be called from any goroutine, at most once.
type engineHost interface {
	call(id int, args []any, done func(v any, err *Error))
	report(v any)
	log(e LogEntry)
}

// outcome is how a run ended.
type outcome struct {
	status Status
	value  any
	err    *Error
}

// engine runs one job in a fresh goja realm. Only interrupt may be called
// from other goroutines.
type engine struct {
	rt   *goja.Runtime
	job  *engineJob
	host engineHost

	mu       sync.Mutex
	queue    []func() error
	wake     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
	stopWith *outcome
	closed   bool

	settled bool

	// idle, when set, is called instead of blocking when the loop has
	// nothing to do; it must make progress (deliver a completion or an
	// interrupt) or fail.
	idle func() error

	pendingCalls int // bridged calls not yet completed

	reportCount int
	outBytes    int
	logCount    int

	// captured intrinsics
	objectProto, mapProto, setProto, abProto *goja.Object
	typedProtos                              map[*goja.Object]string
	typedCtors                               map[string]*goja.Object
	mapForEach, setForEach                   goja.Callable
	errorCtor, dateCtor, mapCtor, setCtor    *goja.Object
	haveIntr                                 bool
}

const (
	maxPendingCalls  = 1000
	maxTransferBytes = 64 << 20 // a result or one call's arguments
	tooLargeMsg      = "Value too large to transfer (limit 64 MiB)"
	maxReports       = 10000
	maxLogs          = 1000
	maxOutputBytes   = 16 << 20
	defaultMaxStack  = 10000
)

var (
	protosOnce sync.Once
	protosProg *goja.Program
)

// dynamicProtos evaluates to functions whose prototypes are
// AsyncFunction.prototype and GeneratorFunction.prototype.
func dynamicProtos() *goja.Program {
	protosOnce.Do(func() {
		protosProg = goja.MustCompile("intrinsics.js", "[async function(){}, function*(){}]", true)
	})
	return protosProg
}

const dynamicCodeMsg = "Dynamic code loading is disabled"

// disableDynamicCode replaces every entry point to the Function,
// AsyncFunction and GeneratorFunction constructors and eval with throwers
// of EvalError, before any user code runs. (goja has no async generators.)
func (e *engine) disableDynamicCode() error {
	rt := e.rt
	g := rt.GlobalObject()
	throwEval := func() {
		if ctor, ok := goja.AssertConstructor(g.Get("EvalError")); ok {
			if obj, err := ctor(nil, rt.ToValue(dynamicCodeMsg)); err == nil {
				panic(obj)
			}
		}
		panic(rt.NewTypeError(dynamicCodeMsg))
	}
	thrower := rt.ToValue(func(goja.ConstructorCall) *goja.Object {
		throwEval()
		return nil
	}).(*goja.Object)
	fnProto := thrower.Prototype()
	if err := thrower.DefineDataProperty("name", rt.ToValue("Function"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	if err := thrower.DefineDataProperty("prototype", fnProto, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return err
	}
	protos := []*goja.Object{fnProto}
	v, err := rt.RunProgram(dynamicProtos())
	if err != nil {
		return err
	}
	arr := v.ToObject(rt)
	for _, i := range []string{"0", "1"} {
		protos = append(protos, arr.Get(i).ToObject(rt).Prototype())
	}
	for _, p := range protos {
		if err := p.DefineDataProperty("constructor", thrower, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	if err := g.DefineDataProperty("Function", thrower, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	evalThrower := rt.ToValue(func(goja.FunctionCall) goja.Value {
		throwEval()
		return nil
	}).(*goja.Object)
	_ = evalThrower.DefineDataProperty("name", rt.ToValue("eval"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	return g.DefineDataProperty("eval", evalThrower, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

// program returns the compiled goja program for c, compiling it once.
func (c *compiled) program() (*goja.Program, error) {
	c.progOnce.Do(func() {
		ast, err := goja.Parse(bundleName, c.code, parser.WithDisableSourceMaps)
		if err != nil {
			c.progErr = err
			return
		}
		c.prog, c.progErr = goja.CompileAST(ast, false)
	})
	return c.prog, c.progErr
}

func newEngine(job *engineJob, host engineHost) *engine {
	return &engine{job: job, host: host, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// interrupt ends the run with o (the first call wins). Safe from any goroutine.
func (e *engine) interrupt(o *outcome) {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopWith = o
		rt := e.rt
		e.mu.Unlock()
		if rt != nil {
			rt.Interrupt(o)
		}
		close(e.stopped)
	})
}

// post schedules f on the engine's loop. Safe from any goroutine; dropped
// after the run ended.
func (e *engine) post(f func() error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.queue = append(e.queue, f)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

var errStopped = errors.New("stopped")

// await runs the loop until p settles.
func (e *engine) await(p *goja.Promise) error {
	for p.State() == goja.PromiseStatePending {
		e.mu.Lock()
		q := e.queue
		e.queue = nil
		e.mu.Unlock()
		if len(q) == 0 {
			if e.idle != nil {
				select {
				case <-e.stopped:
					return errStopped
				default:
				}
				if err := e.idle(); err != nil {
					return err
				}
				continue
			}
			select {
			case <-e.wake:
				continue
			case <-e.stopped:
				return errStopped
			}
		}
		for _, f := range q {
			if err := f(); err != nil {
				return err
			}
		}
	}
	return nil
}

// run executes the job and returns its outcome. It never panics.
func (e *engine) run() (out *outcome) {
	defer func() {
		e.mu.Lock()
		e.closed = true
		e.queue = nil
		e.mu.Unlock()
		if r := recover(); r != nil {
			out = &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: fmt.Sprintf("sandbox engine panic: %v", r)}}
		}
		if so := e.stopOutcome(); so != nil {
			out = so
		}
	}()
	rt := goja.New()
	e.mu.Lock()
	e.rt = rt
	stopped := e.stopWith != nil
	e.mu.Unlock()
	if stopped {
		return e.stopWith
	}
	ms := e.job.maxStack
	if ms <= 0 {
		ms = defaultMaxStack
	}
	rt.SetMaxCallStackSize(ms)
	if err := e.setup(); err != nil {
		return e.failure(err)
	}
	prog, err := e.job.code.program()
	if err != nil {
		return &outcome{status: StatusLinkError, err: &Error{Name: "SyntaxError", Message: err.Error()}}
	}
	wrapper, err := rt.RunProgram(prog)
	if err != nil {
		return e.failure(err)
	}
	fn, ok := goja.AssertFunction(wrapper)
	if !ok {
		return &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: "sandbox: bundle is not a function"}}
	}
	importsObj := rt.NewObject()
	for _, spec := range sortedKeys(e.job.imports) {
		ns := rt.NewObject()
		members := e.job.imports[spec]
		for _, k := range sortedKeys(members) {
			v, err := e.toJS(members[k])
			if err != nil {
				return e.failure(err)
			}
			_ = ns.Set(k, v)
		}
		_ = importsObj.Set(spec, ns)
	}
	pv, err := fn(goja.Undefined(), importsObj)
	if err != nil {
		return e.failure(err)
	}
	p := pv.Export().(*goja.Promise)
	if err := e.await(p); err != nil {
		return e.failure(err)
	}
	if p.State() == goja.PromiseStateRejected {
		return e.rejected(p.Result())
	}
	ns, ok := p.Result().(*goja.Object)
	if !ok {
		return &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: "sandbox: no module namespace"}}
	}
	entry := e.job.entry
	ev := ns.Get(entry)
	var result goja.Value = ev
	if f, ok := goja.AssertFunction(ev); ok {
		args := make([]goja.Value, len(e.job.args))
		for i, a := range e.job.args {
			if args[i], err = e.toJS(a); err != nil {
				return e.failure(err)
			}
		}
		result, err = f(goja.Undefined(), args...)
		if err != nil {
			return e.failure(err)
		}
	} else if len(e.job.args) > 0 {
		return &outcome{status: StatusError, err: &Error{Name: "TypeError", Message: fmt.Sprintf("Export %q is not a function, so it cannot be called with args", entry)}}
	}
	p2, resolveResult, _ := rt.NewPromise()
	if err := resolveResult(result); err != nil {
		return e.failure(err)
	}
	if err := e.await(p2); err != nil {
		return e.failure(err)
	}
	e.settled = true
	if p2.State() == goja.PromiseStateRejected {
		return e.rejected(p2.Result())
	}
	var val any
	var xerr error
	if ex := rt.Try(func() { val, xerr = e.fromJS(p2.Result(), 0, nil) }); ex != nil {
		return e.rejected(ex.Value())
	}
	if xerr != nil {
		return &outcome{status: StatusError, err: serializationError(xerr)}
	}
	if sizeOf(val) > maxTransferBytes {
		return &outcome{status: StatusError, err: &Error{Name: "RangeError", Message: tooLargeMsg}}
	}
	return &outcome{status: StatusSuccess, value: val}
}

func (e *engine) stopOutcome() *outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopWith
}

func serializationError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "SerializationError: ")
	return &Error{Name: "SerializationError", Message: msg}
}

// failure classifies a Go error returned by goja.
func (e *engine) failure(err error) *outcome {
	if so := e.stopOutcome(); so != nil {
		return so
	}
	var so *goja.StackOverflowError
	if errors.As(err, &so) {
		out := &Error{Name: "RangeError", Message: "Maximum call stack size exceeded"}
		for _, f := range so.Stack() {
			p := f.Position()
			if e.mapPos(out, p.Line, p.Column) {
				break
			}
		}
		return &outcome{status: StatusError, err: out}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return e.rejected(ex.Value())
	}
	if errors.Is(err, errStopped) {
		return &outcome{status: StatusTerminated, err: &Error{Name: "Terminated", Message: "Code execution terminated"}}
	}
	return &outcome{status: StatusError, err: &Error{Name: "Error", Message: err.Error()}}
}

var bundlePosRE = regexp.MustCompile(regexp.QuoteMeta(bundleName) + `:(\d+):(\d+)(\(\d+\))?`)

// mapPos fills position fields of out from a bundle position; false when the
// position does not map to user source.
func (e *engine) mapPos(out *Error, line, col int) bool {
	c := e.job.code
	src, l, cl, ok := c.smap.lookup(line, col)
	if !ok || src >= len(c.sources) {
		return false
	}
	out.Filename, out.Line, out.Column = c.sources[src], l, cl
	return true
}

// rejected turns a thrown or rejected JS value into an outcome.
func (e *engine) rejected(v goja.Value) *outcome {
	if so := e.stopOutcome(); so != nil {
		return so
	}
	out := &Error{Name: "Error"}
	rt := e.rt
	if ex := rt.Try(func() {
		obj, ok := v.(*goja.Object)
		if ok && obj.ClassName() == "Error" {
			if n := obj.Get("name"); n != nil && !goja.IsUndefined(n) {
				out.Name = n.String()
			}
			if m := obj.Get("message"); m != nil && !goja.IsUndefined(m) {
				out.Message = m.String()
			}
			if s := obj.Get("stack"); s != nil && !goja.IsUndefined(s) {
				out.Stack = s.String()
			}
		} else if v == nil {
			out.Message = "undefined"
		} else {
			out.Message = v.String()
		}
	}); ex != nil {
		out.Message = "uncaught exception"
	}
	if out.Stack != "" {
		mapped := false
		out.Stack = bundlePosRE.ReplaceAllStringFunc(out.Stack, func(m string) string {
			sm := bundlePosRE.FindStringSubmatch(m)
			l, _ := strconv.Atoi(sm[1])
			c, _ := strconv.Atoi(sm[2])
			var tmp Error
			if !e.mapPos(&tmp, l, c) {
				return m
			}
			if !mapped {
				mapped = true
				out.Filename, out.Line, out.Column = tmp.Filename, tmp.Line, tmp.Column
			}
			return fmt.Sprintf("%s:%d:%d", tmp.Filename, tmp.Line, tmp.Column)
		})
	}
	if out.Line > 0 {
		out.Message = fmt.Sprintf("Line %d of %s: %s", out.Line, out.Filename, out.Message)
	}
	return &outcome{status: classify(out), err: out}
}

var memoryRE = regexp.MustCompile(`(?i)out of memory|heap|allocation failed|memory limit`)

// classify picks the status for a thrown error as the reference does.
func classify(err *Error) Status {
	switch {
	case err.Name == "SyntaxError":
		return StatusLinkError
	case strings.Contains(err.Message, "does not provide an export named") || strings.Contains(err.Message, "Cannot find module"):
		return StatusLinkError
	case memoryRE.MatchString(err.Message):
		return StatusMemory
	}
	return StatusError
}

func (e *engine) newError(name, msg string) goja.Value {
	if e.errorCtor == nil {
		// Captured on first use: a realm that never needs it does not pay
		// for instantiating Error.
		if o, ok := e.rt.GlobalObject().Get("Error").(*goja.Object); ok {
			e.errorCtor = o
		} else {
			return e.rt.ToValue(name + ": " + msg)
		}
	}
	obj, err := e.rt.New(e.errorCtor, e.rt.ToValue(msg))
	if err != nil {
		return e.rt.ToValue(msg)
	}
	if name != "Error" {
		_ = obj.DefineDataProperty("name", e.rt.ToValue(name), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	return obj
}

func (e *engine) throw(name, msg string) {
	panic(e.newError(name, msg))
}

var isolatedGlobals = []string{"process", "global", "window", "self", "document", "require", "Deno", "Bun",
	"fetch", "Request", "Response", "URL", "URLSearchParams", "WebSocket", "WebAssembly", "crypto",
	"setTimeout", "setInterval", "setImmediate", "performance", "atob", "btoa", "TextEncoder",
	"TextDecoder", "Atomics", "SharedArrayBuffer",
	"GoError", // goja's non-standard wrapper for Go errors
}

// intrinsics captures the built-in constructors and prototypes the value
// conversions need. It runs on first use so that a run that never converts
// such values does not pay for instantiating them. Code that replaced a
// global constructor before that point only changes how its own values
// convert.
func (e *engine) intrinsics() {
	if e.haveIntr {
		return
	}
	e.haveIntr = true
	rt := e.rt
	g := rt.GlobalObject()
	get := func(o *goja.Object, k string) *goja.Object {
		v := o.Get(k)
		if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
			return rt.NewObject()
		}
		return v.ToObject(rt)
	}
	e.dateCtor = get(g, "Date")
	e.mapCtor = get(g, "Map")
	e.mapProto = get(e.mapCtor, "prototype")
	e.setCtor = get(g, "Set")
	e.setProto = get(e.setCtor, "prototype")
	e.abProto = get(get(g, "ArrayBuffer"), "prototype")
	e.mapForEach, _ = goja.AssertFunction(e.mapProto.Get("forEach"))
	e.setForEach, _ = goja.AssertFunction(e.setProto.Get("forEach"))
	e.typedProtos = map[*goja.Object]string{}
	e.typedCtors = map[string]*goja.Object{}
	for name := range typedArraySizes {
		v := g.Get(name)
		if v == nil || goja.IsUndefined(v) {
			continue
		}
		c := v.ToObject(rt)
		e.typedCtors[name] = c
		e.typedProtos[get(c, "prototype")] = name
	}
}

var (
	presentOnce     sync.Once
	presentIsolated []string
)

// presentIsolatedGlobals lists the names of isolatedGlobals that a fresh
// goja realm defines; deleting only those keeps set-up cheap.
func presentIsolatedGlobals() []string {
	presentOnce.Do(func() {
		g := goja.New().GlobalObject()
		for _, n := range isolatedGlobals {
			if v := g.Get(n); v != nil && !goja.IsUndefined(v) {
				presentIsolated = append(presentIsolated, n)
			}
		}
	})
	return presentIsolated
}

func (e *engine) setup() error {
	rt := e.rt
	g := rt.GlobalObject()
	e.objectProto = g.Prototype()
	for _, name := range presentIsolatedGlobals() {
		_ = g.Delete(name)
	}
	if err := e.disableDynamicCode(); err != nil {
		return err
	}
	console := rt.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug", "trace"} {
		level := level
		_ = console.Set(level, func(call goja.FunctionCall) goja.Value {
			e.consoleLog(level, call.Arguments)
			return goja.Undefined()
		})
	}
	_ = g.DefineDataProperty("console", console, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	if e.job.report {
		_ = g.DefineDataProperty("report", rt.ToValue(func(call goja.FunctionCall) goja.Value {
			e.doReport(call.Argument(0))
			return goja.Undefined()
		}), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	for _, k := range sortedKeys(e.job.globals) {
		v, err := e.toJS(e.job.globals[k])
		if err != nil {
			return err
		}
		_ = g.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
	}
	return nil
}

func (e *engine) consoleLog(level string, args []goja.Value) {
	if e.settled || e.logCount >= maxLogs || e.outBytes >= maxOutputBytes {
		return
	}
	e.logCount++
	out := make([]any, len(args))
	size := 0
	for i, a := range args {
		v, err := e.fromJS(a, 0, nil)
		if err != nil {
			v = a.String()
		}
		out[i] = v
		size += sizeOf(v)
	}
	if e.outBytes+size > maxOutputBytes {
		e.outBytes = maxOutputBytes // the budget is spent: drop this and later entries
		return
	}
	e.outBytes += size
	e.host.log(LogEntry{Level: level, Args: out, Timestamp: time.Now()})
}

func (e *engine) doReport(a goja.Value) {
	if e.settled {
		return
	}
	if e.reportCount >= maxReports || e.outBytes >= maxOutputBytes {
		e.throw("RangeError", fmt.Sprintf("Report limit exceeded (%d reports or %d bytes per run)", maxReports, maxOutputBytes))
	}
	v, err := e.fromJS(a, 0, nil)
	if err != nil {
		e.throw("SerializationError", strings.TrimPrefix(err.Error(), "SerializationError: "))
	}
	size := sizeOf(v)
	if e.outBytes+size > maxOutputBytes {
		e.throw("RangeError", fmt.Sprintf("Report limit exceeded (%d reports or %d bytes per run)", maxReports, maxOutputBytes))
	}
	e.reportCount++
	e.outBytes += size
	e.host.report(v)
}

// sizeOf estimates the bytes a canonical value occupies.
func sizeOf(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 16
	case []any:
		n := 16
		for _, e := range x {
			n += sizeOf(e)
		}
		return n
	case map[string]any:
		n := 16
		for k, e := range x {
			n += len(k) + sizeOf(e)
		}
		return n
	case Map:
		n := 16
		for _, e := range x {
			n += sizeOf(e.Key) + sizeOf(e.Value)
		}
		return n
	case Set:
		return sizeOf([]any(x))
	case []byte:
		return len(x) + 16
	case ArrayBuffer:
		return len(x) + 16
	case TypedArray:
		return len(x.Data) + 16
	}
	return 16
}

// bridge makes the JS function for host function id.
func (e *engine) bridge(id int) goja.Value {
	rt := e.rt
	return rt.ToValue(func(call goja.FunctionCall) goja.Value {
		p, resolve, reject := rt.NewPromise()
		if e.settled {
			_ = reject(e.newError("BridgeUnavailable", "Bridge is unavailable: the run has finished"))
			return rt.ToValue(p)
		}
		args := make([]any, len(call.Arguments))
		for i, a := range call.Arguments {
			v, err := e.fromJS(a, 0, nil)
			if err != nil {
				se := serializationError(err)
				_ = reject(e.newError(se.Name, se.Message))
				return rt.ToValue(p)
			}
			args[i] = v
		}
		if sizeOf(args) > maxTransferBytes {
			_ = reject(e.newError("RangeError", tooLargeMsg))
			return rt.ToValue(p)
		}
		if e.pendingCalls >= maxPendingCalls {
			_ = reject(e.newError("RangeError", fmt.Sprintf("Too many pending host calls (%d): await some before making more", maxPendingCalls)))
			return rt.ToValue(p)
		}
		e.pendingCalls++
		var once sync.Once
		e.host.call(id, args, func(v any, herr *Error) {
			once.Do(func() {
				e.post(func() error {
					e.pendingCalls--
					if herr != nil {
						return reject(e.newError(herr.Name, herr.Message))
					}
					jv, err := e.toJS(v)
					if err != nil {
						return reject(e.newError("SerializationError", err.Error()))
					}
					return resolve(jv)
				})
			})
		})
		return rt.ToValue(p)
	})
}

// toJS builds a fresh JS value from a canonical value.
func (e *engine) toJS(v any) (goja.Value, error) {
	rt := e.rt
	switch x := v.(type) {
	case nil:
		return goja.Null(), nil
	case UndefinedValue:
		return goja.Undefined(), nil
	case bool:
		return rt.ToValue(x), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 && !(x == 0 && math.Signbit(x)) {
			return rt.ToValue(int64(x)), nil
		}
		return rt.ToValue(x), nil
	case string:
		return rt.ToValue(x), nil
	case *big.Int:
		return rt.ToValue(new(big.Int).Set(x)), nil
	case []any:
		items := make([]any, len(x))
		for i, el := range x {
			jv, err := e.toJS(el)
			if err != nil {
				return nil, err
			}
			items[i] = jv
		}
		return rt.NewArray(items...), nil
	case map[string]any:
		obj := rt.NewObject()
		for _, k := range sortedKeys(x) {
			jv, err := e.toJS(x[k])
			if err != nil {
				return nil, err
			}
			if err := obj.Set(k, jv); err != nil {
				return nil, err
			}
		}
		return obj, nil
	case time.Time:
		e.intrinsics()
		return rt.New(e.dateCtor, rt.ToValue(x.UnixMilli()))
	case Map:
		e.intrinsics()
		m, err := rt.New(e.mapCtor)
		if err != nil {
			return nil, err
		}
		set, _ := goja.AssertFunction(e.mapProto.Get("set"))
		for _, en := range x {
			k, err := e.toJS(en.Key)
			if err != nil {
				return nil, err
			}
			val, err := e.toJS(en.Value)
			if err != nil {
				return nil, err
			}
			if _, err := set(m, k, val); err != nil {
				return nil, err
			}
		}
		return m, nil
	case Set:
		e.intrinsics()
		s, err := rt.New(e.setCtor)
		if err != nil {
			return nil, err
		}
		add, _ := goja.AssertFunction(e.setProto.Get("add"))
		for _, en := range x {
			k, err := e.toJS(en)
			if err != nil {
				return nil, err
			}
			if _, err := add(s, k); err != nil {
				return nil, err
			}
		}
		return s, nil
	case ArrayBuffer:
		return rt.ToValue(rt.NewArrayBuffer(append([]byte{}, x...))), nil
	case []byte:
		e.intrinsics()
		return rt.New(e.typedCtors["Uint8Array"], rt.ToValue(rt.NewArrayBuffer(append([]byte{}, x...))))
	case TypedArray:
		e.intrinsics()
		c := e.typedCtors[x.Type]
		if c == nil {
			return nil, notTransferable("typed array " + x.Type)
		}
		return rt.New(c, rt.ToValue(rt.NewArrayBuffer(append([]byte{}, x.Data...))))
	case *funcRef:
		return e.bridge(x.id), nil
	}
	return nil, notTransferable(fmt.Sprintf("%T", v))
}

// fromJS copies a JS value out as a canonical value. It may run user code
// (getters), so outside JS it must be called inside Runtime.Try.
func (e *engine) fromJS(v goja.Value, depth int, seen map[*goja.Object]bool) (any, error) {
	if v == nil || goja.IsUndefined(v) {
		return Undefined, nil
	}
	if goja.IsNull(v) {
		return nil, nil
	}
	if _, ok := v.(*goja.Symbol); ok {
		return nil, notTransferable("symbol")
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		switch x := v.Export().(type) {
		case bool, string:
			return x, nil
		case int64:
			return float64(x), nil
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, notTransferable("non-finite number")
			}
			return x, nil
		case *big.Int:
			return new(big.Int).Set(x), nil
		}
		return nil, notTransferable(v.ExportType().String())
	}
	if depth > maxDepth {
		return nil, notTransferable("nesting too deep")
	}
	if seen == nil {
		seen = map[*goja.Object]bool{}
	}
	if seen[obj] {
		return nil, notTransferable("cyclic value")
	}
	seen[obj] = true
	defer delete(seen, obj)
	proto := obj.Prototype()
	cls := obj.ClassName()
	if cls != "Array" && !(cls == "Object" && (proto == nil || proto == e.objectProto)) {
		e.intrinsics()
	}
	switch {
	case cls == "Array":
		n := int(obj.Get("length").ToInteger())
		out := make([]any, n)
		for i := 0; i < n; i++ {
			x, err := e.fromJS(obj.Get(strconv.Itoa(i)), depth+1, seen)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case cls == "Object" && (proto == nil || proto == e.objectProto):
		out := map[string]any{}
		for _, k := range obj.Keys() {
			x, err := e.fromJS(obj.Get(k), depth+1, seen)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case cls == "Date":
		t, ok := obj.Export().(time.Time)
		if !ok {
			return nil, notTransferable("invalid Date")
		}
		ms := obj.ToNumber().ToFloat()
		if math.IsNaN(ms) {
			return nil, notTransferable("invalid Date")
		}
		return t.UTC(), nil
	case proto == e.mapProto && e.mapForEach != nil:
		var out Map
		var ierr error
		_, err := e.mapForEach(obj, e.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			if ierr != nil {
				return goja.Undefined()
			}
			k, err := e.fromJS(c.Argument(1), depth+1, seen)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			val, err := e.fromJS(c.Argument(0), depth+1, seen)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			out = append(out, MapEntry{k, val})
			return goja.Undefined()
		}))
		if err == nil {
			err = ierr
		}
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = Map{}
		}
		return out, nil
	case proto == e.setProto && e.setForEach != nil:
		var out Set
		var ierr error
		_, err := e.setForEach(obj, e.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			if ierr != nil {
				return goja.Undefined()
			}
			x, err := e.fromJS(c.Argument(0), depth+1, seen)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			out = append(out, x)
			return goja.Undefined()
		}))
		if err == nil {
			err = ierr
		}
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = Set{}
		}
		return out, nil
	}
	if name, ok := e.typedProtos[proto]; ok {
		var b []byte
		if err := e.rt.ExportTo(obj, &b); err != nil {
			return nil, notTransferable(name)
		}
		if name == "Uint8Array" {
			return append([]byte{}, b...), nil
		}
		return TypedArray{Type: name, Data: append([]byte{}, b...)}, nil
	}
	if proto == e.abProto {
		if ab, ok := obj.Export().(goja.ArrayBuffer); ok {
			return ArrayBuffer(append([]byte{}, ab.Bytes()...)), nil
		}
	}
	if cls == "Function" || cls == "AsyncFunction" || cls == "GeneratorFunction" {
		return nil, notTransferable("function")
	}
	return nil, notTransferable(cls + " instance")
}
