package sandbox

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"

	"github.com/toolrun/toolrun/internal/safefmt"
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

	pendingCalls int   // bridged calls not yet completed
	pendingBytes int64 // cost of their arguments

	reportCount int
	outBytes    int64
	logCount    int

	// captured intrinsics
	objectProto, mapProto, setProto, abProto *goja.Object
	typedProtos                              map[*goja.Object]string
	typedCtors                               map[string]*goja.Object
	mapForEach, setForEach                   goja.Callable
	mapSet, setAdd                           goja.Callable
	errorCtor, dateCtor, mapCtor, setCtor    *goja.Object
	haveIntr                                 bool
}

const defaultMaxStack = 10000

var (
	protosOnce     sync.Once
	asyncProtoProg *goja.Program
	genProtoProg   *goja.Program
)

// protoPrograms returns programs that evaluate to an async function and to
// a generator function, whose prototypes are AsyncFunction.prototype and
// GeneratorFunction.prototype.
func protoPrograms() (async, gen *goja.Program) {
	protosOnce.Do(func() {
		asyncProtoProg = goja.MustCompile("intrinsics.js", "(async function(){})", true)
		genProtoProg = goja.MustCompile("intrinsics.js", "(function*(){})", true)
	})
	return asyncProtoProg, genProtoProg
}

// lockDown locks the entry points to AsyncFunction and GeneratorFunction
// that the bundle can reach, with the realm's thrower (the realm locked
// Function and eval when it was made). wrapper is the bundle's function,
// not yet called.
//
// AsyncFunction and GeneratorFunction are reachable only from async and
// generator function objects, which only code with that syntax creates
// (no builtin returns one), so a bundle without it does not need them
// locked (see compiled.features); creating them costs more than the rest
// of a realm. An async wrapper is itself an async function and gives
// AsyncFunction.prototype. (goja has no async generators.)
func (e *engine) lockDown(rl *realm, wrapper *goja.Object) error {
	rt := rl.rt
	var protos []*goja.Object
	f := e.job.code.features()
	asyncProg, genProg := protoPrograms()
	if f.asyncWrapper {
		protos = append(protos, wrapper.Prototype())
	} else if f.mayAsync {
		v, err := rt.RunProgram(asyncProg)
		if err != nil {
			return err
		}
		protos = append(protos, v.ToObject(rt).Prototype())
	}
	if f.mayGenerator {
		v, err := rt.RunProgram(genProg)
		if err != nil {
			return err
		}
		protos = append(protos, v.ToObject(rt).Prototype())
	}
	for _, p := range protos {
		if err := p.DefineDataProperty("constructor", rl.thrower, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return nil
}

// program returns the compiled goja program for c, compiling it once (or
// every time, once dropProgram was called).
func (c *compiled) program() (*goja.Program, error) {
	if c.dropProg.Load() {
		return c.parseProgram()
	}
	c.progOnce.Do(func() { c.prog, c.progErr = c.parseProgram() })
	return c.prog, c.progErr
}

// dropProgram releases c's program and makes later runs parse the code
// again. It must not be called while a run may be calling program.
func (c *compiled) dropProgram() {
	c.dropProg.Store(true)
	c.prog = nil
}

// parseProgram parses and compiles the bundle; the first time, it also
// records from the syntax tree whether the bundle has generator functions.
func (c *compiled) parseProgram() (*goja.Program, error) {
	tree, err := goja.Parse(bundleName, c.code, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, err
	}
	c.genOnce.Do(func() {
		// A generator needs a '*' (a punctuator has no escaped form).
		c.hasGen = strings.Contains(c.code, "*") && hasGenerator(reflect.ValueOf(tree))
	})
	return goja.CompileAST(tree, false)
}

var astPkg = reflect.TypeOf(ast.Program{}).PkgPath()

// hasGenerator reports whether the syntax tree under v holds a generator
// function (a function literal with Generator set: declarations,
// expressions and methods all are). It walks every field of every node of
// goja's ast package by reflection, so no kind of node is left out.
func hasGenerator(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return false
		}
		if v.Kind() == reflect.Pointer {
			if fl, ok := v.Interface().(*ast.FunctionLiteral); ok && fl.Generator {
				return true
			}
		}
		return hasGenerator(v.Elem())
	case reflect.Struct:
		if v.Type().PkgPath() != astPkg {
			return false // positions, files, source maps: not syntax
		}
		for i := 0; i < v.NumField(); i++ {
			if hasGenerator(v.Field(i)) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if hasGenerator(v.Index(i)) {
				return true
			}
		}
	}
	return false
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
			out = &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: "sandbox engine panic: " + safefmt.Sprint(r)}}
		}
		if so := e.stopOutcome(); so != nil {
			out = so
		}
	}()
	if so := e.stopOutcome(); so != nil {
		return so // stopped before it began: no realm is taken for it
	}
	rl, err := takeRealm()
	if err != nil {
		return e.failure(err)
	}
	rl.eng = e
	rt := rl.rt
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
	prog, err := e.job.code.program()
	if err != nil {
		return &outcome{status: StatusLinkError, err: capError(&Error{Name: "SyntaxError", Message: safefmt.Error(err)})}
	}
	// The program only evaluates the bundle's function; the code runs
	// when it is called, after setup.
	wrapper, err := rt.RunProgram(prog)
	if err != nil {
		return e.failure(err)
	}
	fn, ok := goja.AssertFunction(wrapper)
	if !ok {
		return &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: "sandbox: bundle is not a function"}}
	}
	if err := e.setup(rl, wrapper.(*goja.Object)); err != nil {
		return e.failure(err)
	}
	var importsObj goja.Value = goja.Undefined() // unused by a bundle without imports
	if len(e.job.imports) > 0 {
		importsObj = rt.NewObject()
	}
	for _, spec := range sortedKeys(e.job.imports) {
		ns := rt.NewObject()
		members := e.job.imports[spec]
		for _, k := range sortedKeys(members) {
			v, err := e.toJS(members[k])
			if err != nil {
				return e.failure(err)
			}
			// Own data properties, as for any Go map: setting "__proto__"
			// would set the namespace's prototype instead.
			_ = ns.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		}
		_ = importsObj.(*goja.Object).DefineDataProperty(spec, ns, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
	}
	nv, err := fn(goja.Undefined(), importsObj)
	if err != nil {
		return e.failure(err)
	}
	if p, ok := asPromise(nv); ok {
		// An async wrapper (the bundle awaits at top level).
		if err := e.await(p); err != nil {
			return e.failure(err)
		}
		if p.State() == goja.PromiseStateRejected {
			return e.rejected(p.Result())
		}
		nv = p.Result()
	}
	ns, ok := nv.(*goja.Object)
	if !ok {
		return &outcome{status: StatusError, err: &Error{Name: "InternalError", Message: "sandbox: no module namespace"}}
	}
	// The code has run: reading its export and making the args can run
	// its getters and the constructors it replaced.
	entry := e.job.entry
	var ev goja.Value
	var args []goja.Value
	var cerr error
	ex, err := e.try(func() {
		ev = ns.Get(entry)
		if _, ok := goja.AssertFunction(ev); !ok {
			return
		}
		args = make([]goja.Value, len(e.job.args))
		for i, a := range e.job.args {
			if args[i], cerr = e.toJS(a); cerr != nil {
				return
			}
		}
	})
	switch {
	case err != nil:
		return e.failure(err)
	case ex != nil:
		return e.rejected(ex.Value())
	case cerr != nil:
		return e.failure(cerr)
	}
	var result goja.Value = ev
	if f, ok := goja.AssertFunction(ev); ok {
		result, err = f(goja.Undefined(), args...)
		if err != nil {
			return e.failure(err)
		}
	} else if len(e.job.args) > 0 {
		return &outcome{status: StatusError, err: &Error{Name: "TypeError", Message: fmt.Sprintf("Export %q is not a function, so it cannot be called with args", entry)}}
	}
	// The result is awaited: a promise directly, another object through a
	// promise resolved with it (it may be a thenable); a primitive is the
	// value itself.
	if obj, ok := result.(*goja.Object); ok {
		p, isPromise := asPromise(obj)
		if !isPromise {
			var resolve func(any) error
			p, resolve, _ = rt.NewPromise()
			if err := resolve(result); err != nil {
				return e.failure(err)
			}
		}
		if err := e.await(p); err != nil {
			return e.failure(err)
		}
		if p.State() == goja.PromiseStateRejected {
			e.settled = true
			return e.rejected(p.Result())
		}
		result = p.Result()
	}
	e.settled = true
	var val any
	var xerr error
	ex, err = e.try(func() { val, _, xerr = e.export(result, maxTransferBytes) })
	if err != nil {
		return e.failure(err)
	}
	if ex != nil {
		return e.rejected(ex.Value())
	}
	if errors.Is(xerr, errTooLarge) {
		return &outcome{status: StatusError, err: &Error{Name: "RangeError", Message: tooLargeMsg}}
	}
	if xerr != nil {
		return &outcome{status: StatusError, err: serializationError(xerr)}
	}
	return &outcome{status: StatusSuccess, value: val}
}

// try runs f, which may run user code, from Go: what the code throws comes
// back as ex, and a stack overflow, which goja does not let Runtime.Try
// catch, as err. Other panics (an interrupt) go on up.
func (e *engine) try(f func()) (ex *goja.Exception, err error) {
	defer func() {
		if r := recover(); r != nil {
			so, ok := r.(*goja.StackOverflowError)
			if !ok {
				panic(r)
			}
			err = so
		}
	}()
	return e.rt.Try(f), nil
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
	// A thrown value is taken as it is, before errors.As or errors.Is look
	// inside: goja's Exception unwraps by asking whether its value is a
	// GoError, which runs a thrown Proxy's traps outside any Try.
	if ex, ok := err.(*goja.Exception); ok {
		return e.rejected(ex.Value())
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
	return &outcome{status: StatusError, err: capError(&Error{Name: "Error", Message: safefmt.Error(err)})}
}

var bundlePosRE = regexp.MustCompile(regexp.QuoteMeta(bundleName) + `:(\d+):(\d+)(\(\d+\))?`)

// mapPos fills position fields of out from a bundle position; false when the
// position does not map to user source.
func (e *engine) mapPos(out *Error, line, col int) bool {
	c := e.job.code
	src, l, cl, ok := c.sourceMap().lookup(line, col)
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
	ex, err := e.try(func() {
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
	})
	if err != nil {
		return e.failure(err)
	}
	if ex != nil {
		out.Message = "uncaught exception"
	}
	out.Name, out.Message, out.Stack = withoutGoValues(out.Name), withoutGoValues(out.Message), withoutGoValues(out.Stack)
	// The texts are the code's to choose: cut them before working on them,
	// and again after mapping positions, which may lengthen the stack.
	capError(out)
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
	return &outcome{status: classify(out), err: capError(out)}
}

// goValueMark starts the text goja writes into the TypeError it throws when
// an object has no usable valueOf or toString (a null-prototype object in a
// string, say): "Could not convert &{Object 0x… …} (*goja.baseObject) to
// primitive", the object's Go value with host memory addresses.
const (
	goValueMark = "Could not convert &{"
	goValueEnd  = " to primitive"
	// primitiveText is what such a text becomes: the standard wording.
	primitiveText = "Cannot convert object to primitive value"
)

// withoutGoValues returns s with each of goja's texts of a Go value
// replaced by the standard wording. Code can catch such an error and pass
// its text on (return it, log it, report it, throw it again inside its own
// message), so every text leaving the sandbox goes through here: the run's
// error, exported strings and keys, and logged texts. A dump can hold the
// end marker itself (a string property " to primitive"), so each ends at
// the last end marker before the next dump; one cut before its end loses
// everything up to the next dump. (Code that means to pass the text on
// can always change it first: this keeps honest code from leaking it.)
func withoutGoValues(s string) string {
	i := strings.Index(s, goValueMark)
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i >= 0 {
		b.WriteString(s[:i])
		b.WriteString(primitiveText)
		rest := s[i+len(goValueMark):]
		next := strings.Index(rest, goValueMark)
		seg := rest
		if next >= 0 {
			seg = rest[:next]
		}
		j := strings.LastIndex(seg, goValueEnd)
		if j < 0 {
			s = rest[len(seg):]
		} else {
			s = rest[j+len(goValueEnd):]
		}
		i = strings.Index(s, goValueMark)
	}
	b.WriteString(s)
	return b.String()
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

// promiseType is what a goja promise exports as.
var promiseType = reflect.TypeFor[*goja.Promise]()

// mapType and setType are what goja's Map and Set objects export as (an
// object that only inherits from their prototypes exports as a Go map).
var (
	mapType = reflect.TypeFor[[][2]any]()
	setType = reflect.TypeFor[[]any]()
)

// typedArrayTypes are what goja's typed arrays export as, by constructor
// name, and arrayBufferType what an ArrayBuffer exports as; any other
// object, whatever its prototype, exports as something else.
var (
	typedArrayTypes = map[string]reflect.Type{
		"Int8Array": reflect.TypeFor[[]int8](), "Uint8Array": reflect.TypeFor[[]byte](), "Uint8ClampedArray": reflect.TypeFor[[]byte](),
		"Int16Array": reflect.TypeFor[[]int16](), "Uint16Array": reflect.TypeFor[[]uint16](),
		"Int32Array": reflect.TypeFor[[]int32](), "Uint32Array": reflect.TypeFor[[]uint32](), "Float32Array": reflect.TypeFor[[]float32](),
		"Float64Array": reflect.TypeFor[[]float64](), "BigInt64Array": reflect.TypeFor[[]int64](), "BigUint64Array": reflect.TypeFor[[]uint64](),
	}
	arrayBufferType = reflect.TypeFor[goja.ArrayBuffer]()
)

// asPromise returns v's promise when v is one. It asks the type the object
// exports as first: exporting any other object would convert all of it to
// Go values, running its getters, only to be thrown away.
func asPromise(v goja.Value) (*goja.Promise, bool) {
	o, ok := v.(*goja.Object)
	if !ok || o.ExportType() != promiseType {
		return nil, false
	}
	p, ok := o.Export().(*goja.Promise)
	return p, ok
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

// intrinsics captures the built-in constructors, prototypes and methods
// the value conversions need. It runs on first use so that a run that
// never converts such values does not pay for instantiating them (taking
// them before the code runs would add 20–70 µs to every run with imports).
// Code that replaced a constructor or Map.prototype.set before that point
// only changes how values it receives are made: it runs its own code, and
// a method it removed makes the conversion fail with a TypeError.
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
	e.mapSet, _ = goja.AssertFunction(e.mapProto.Get("set"))
	e.setAdd, _ = goja.AssertFunction(e.setProto.Get("add"))
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

// setup finishes the realm for this job before the bundle's function is
// called: the constructors the bundle can reach locked, report and the
// globals option defined. (The realm was made with the host's globals
// removed, Function and eval locked and console defined.)
func (e *engine) setup(rl *realm, wrapper *goja.Object) error {
	rt := rl.rt
	g := rt.GlobalObject()
	e.objectProto = g.Prototype()
	if err := e.lockDown(rl, wrapper); err != nil {
		return err
	}
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

var consoleLevels = []string{"log", "info", "warn", "error", "debug", "trace"}

func (e *engine) newConsole() *goja.Object {
	console := e.rt.NewObject()
	for _, level := range consoleLevels {
		_ = console.Set(level, func(call goja.FunctionCall) goja.Value {
			e.consoleLog(level, call.Arguments)
			return goja.Undefined()
		})
	}
	return console
}

func (e *engine) consoleLog(level string, args []goja.Value) {
	if e.settled || e.logCount >= maxLogs || e.outBytes >= maxOutputBytes {
		return
	}
	e.logCount++
	out := make([]any, len(args))
	budget := maxOutputBytes - e.outBytes
	size := int64(costSlice)
	for i, a := range args {
		v, n, err := e.export(a, budget-size)
		if err != nil && !errors.Is(err, errTooLarge) {
			// Not transferable: logged as its text.
			s := e.logText(a)
			v, n = s, valueCost(s)
		}
		out[i] = v
		size += n
		if err != nil && errors.Is(err, errTooLarge) || size > budget {
			e.outBytes = maxOutputBytes // the budget is spent: drop this and later entries
			return
		}
	}
	// Getters run by the export may have logged or reported meanwhile.
	if e.outBytes+size > maxOutputBytes {
		e.outBytes = maxOutputBytes
		return
	}
	e.outBytes += size
	e.host.log(LogEntry{Level: level, Args: out, Timestamp: time.Now()})
}

// logText is the text a log argument that is not transferable is logged
// as: String(a), or "[object <class>]" when that throws (an object without
// a usable toString, or one that throws), so that logging never throws.
func (e *engine) logText(a goja.Value) string {
	var s string
	ex := e.rt.Try(func() { s = a.String() })
	if o, ok := a.(*goja.Object); ok && ex != nil {
		return "[object " + o.ClassName() + "]"
	}
	return withoutGoValues(s)
}

func (e *engine) doReport(a goja.Value) {
	if e.settled {
		return
	}
	limitMsg := fmt.Sprintf("Report limit exceeded (%d reports or %d bytes per run)", maxReports, maxOutputBytes)
	if e.reportCount >= maxReports || e.outBytes >= maxOutputBytes {
		e.throw("RangeError", limitMsg)
	}
	v, size, err := e.export(a, maxOutputBytes-e.outBytes)
	if errors.Is(err, errTooLarge) {
		e.throw("RangeError", limitMsg)
	}
	if err != nil {
		e.throw("SerializationError", strings.TrimPrefix(err.Error(), "SerializationError: "))
	}
	// Getters run by the export may have reported or logged meanwhile.
	if e.reportCount >= maxReports || e.outBytes+size > maxOutputBytes {
		e.throw("RangeError", limitMsg)
	}
	e.reportCount++
	e.outBytes += size
	e.host.report(v)
}

// The messages of bridged calls refused by the pending-call limits.
var (
	tooManyCallsMsg    = fmt.Sprintf("Too many pending host calls (%d): await some before making more", maxPendingCalls)
	tooMuchCallDataMsg = fmt.Sprintf("Too much data in pending host calls (limit %d MiB): await some before making more", maxPendingCallBytes>>20)
)

// bridge makes the JS function for host function id.
func (e *engine) bridge(id int) goja.Value {
	rt := e.rt
	return rt.ToValue(func(call goja.FunctionCall) goja.Value {
		p, resolve, reject := rt.NewPromise()
		if e.settled {
			_ = reject(e.newError("BridgeUnavailable", "Bridge is unavailable: the run has finished"))
			return rt.ToValue(p)
		}
		if e.pendingCalls >= maxPendingCalls {
			_ = reject(e.newError("RangeError", tooManyCallsMsg))
			return rt.ToValue(p)
		}
		// A call's arguments may cost maxTransferBytes, and those of all
		// pending calls together maxPendingCallBytes.
		budget := int64(maxTransferBytes)
		pendingLimited := false
		if room := maxPendingCallBytes - e.pendingBytes; room < budget {
			budget, pendingLimited = room, true
		}
		args := make([]any, len(call.Arguments))
		cost := int64(costSlice)
		for i, a := range call.Arguments {
			v, n, err := e.export(a, budget-cost)
			if errors.Is(err, errTooLarge) {
				if pendingLimited {
					_ = reject(e.newError("RangeError", tooMuchCallDataMsg))
				} else {
					_ = reject(e.newError("RangeError", tooLargeMsg))
				}
				return rt.ToValue(p)
			}
			if err != nil {
				se := serializationError(err)
				_ = reject(e.newError(se.Name, se.Message))
				return rt.ToValue(p)
			}
			args[i] = v
			cost += n
		}
		// Getters run by the export may have made calls meanwhile.
		if e.pendingCalls >= maxPendingCalls {
			_ = reject(e.newError("RangeError", tooManyCallsMsg))
			return rt.ToValue(p)
		}
		if e.pendingBytes+cost > maxPendingCallBytes {
			_ = reject(e.newError("RangeError", tooMuchCallDataMsg))
			return rt.ToValue(p)
		}
		e.pendingCalls++
		e.pendingBytes += cost
		var once sync.Once
		e.host.call(id, args, func(v any, herr *Error) {
			once.Do(func() {
				e.post(func() error {
					e.pendingCalls--
					e.pendingBytes -= cost
					// Making the answer can run the code's getters and the
					// constructors it replaced: what they throw rejects the
					// call.
					var answer goja.Value
					ok := false
					ex, err := e.try(func() {
						if herr != nil {
							answer = e.newError(herr.Name, herr.Message)
							return
						}
						jv, cerr := e.toJS(v)
						if cerr != nil {
							answer = e.newError("SerializationError", cerr.Error())
							return
						}
						answer, ok = jv, true
					})
					switch {
					case err != nil:
						return err
					case ex != nil:
						return reject(ex.Value())
					case ok:
						return resolve(answer)
					}
					return reject(answer)
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
		// Each key is defined as an own data property: setting it would
		// call setters on Object.prototype, "__proto__" among them.
		obj := rt.NewObject()
		for _, k := range sortedKeys(x) {
			jv, err := e.toJS(x[k])
			if err != nil {
				return nil, err
			}
			if err := obj.DefineDataProperty(k, jv, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
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
		set := e.mapSet
		if set == nil {
			return nil, errors.New("TypeError: Map.prototype.set is not a function")
		}
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
		add := e.setAdd
		if add == nil {
			return nil, errors.New("TypeError: Set.prototype.add is not a function")
		}
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
		return e.typedArray("Uint8Array", x)
	case TypedArray:
		return e.typedArray(x.Type, x.Data)
	case *funcRef:
		return e.bridge(x.id), nil
	}
	return nil, notTransferable(fmt.Sprintf("%T", v))
}

// typedArray makes a typed array of the named type holding a copy of data.
// A type the code removed from the globals before the first conversion is
// not transferable.
func (e *engine) typedArray(name string, data []byte) (goja.Value, error) {
	e.intrinsics()
	c := e.typedCtors[name]
	if c == nil {
		return nil, notTransferable("typed array " + name)
	}
	rt := e.rt
	return rt.New(c, rt.ToValue(rt.NewArrayBuffer(append([]byte{}, data...))))
}

var errTooLarge = errors.New("value too large")

// exporter copies JS values out as canonical values, charging each the
// cost valueCost gives it against a budget and failing with errTooLarge
// before going over it, so that copying out never builds more than the
// budget allows.
type exporter struct {
	e      *engine
	budget int64
	seen   map[*goja.Object]bool
}

func (x *exporter) charge(n int64) error {
	if n > x.budget {
		return errTooLarge
	}
	x.budget -= n
	return nil
}

// export copies v out within budget and returns the copy and its cost. It
// may run user code (getters), so outside JS it must be called inside
// Runtime.Try.
func (e *engine) export(v goja.Value, budget int64) (any, int64, error) {
	if budget < 0 {
		budget = 0
	}
	x := &exporter{e: e, budget: budget}
	out, err := x.value(v, 0)
	if err != nil {
		return nil, 0, err
	}
	return out, budget - x.budget, nil
}

// rethrow propagates an error that a builtin called from Go returned
// because the code it ran threw (or overflowed the stack, or was
// interrupted) as it came, so that it ends the run or reaches the code as
// the same value would from a plain object's getter. An error of another
// kind is returned.
func rethrow(err error) error {
	var ex *goja.Exception
	var so *goja.StackOverflowError
	var ie *goja.InterruptedError
	switch {
	case errors.As(err, &ex):
		panic(ex)
	case errors.As(err, &so):
		panic(so)
	case errors.As(err, &ie):
		panic(ie)
	}
	return err
}

func (x *exporter) value(v goja.Value, depth int) (any, error) {
	e := x.e
	if v == nil || goja.IsUndefined(v) {
		return Undefined, x.charge(costScalar)
	}
	if goja.IsNull(v) {
		return nil, x.charge(costScalar)
	}
	if _, ok := v.(*goja.Symbol); ok {
		return nil, notTransferable("symbol")
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		switch val := v.Export().(type) {
		case bool:
			return val, x.charge(costScalar)
		case string:
			val = withoutGoValues(val)
			return val, x.charge(costString + int64(len(val)))
		case int64:
			return float64(val), x.charge(costScalar)
		case float64:
			if math.IsNaN(val) || math.IsInf(val, 0) {
				return nil, notTransferable("non-finite number")
			}
			return val, x.charge(costScalar)
		case *big.Int:
			if err := x.charge(costBigInt + int64((val.BitLen()+7)/8)); err != nil {
				return nil, err
			}
			return new(big.Int).Set(val), nil
		}
		return nil, notTransferable(v.ExportType().String())
	}
	if depth > maxDepth {
		return nil, notTransferable("nesting too deep")
	}
	if x.seen == nil {
		x.seen = map[*goja.Object]bool{}
	}
	if x.seen[obj] {
		return nil, notTransferable("cyclic value")
	}
	x.seen[obj] = true
	defer delete(x.seen, obj)
	proto := obj.Prototype()
	cls := obj.ClassName()
	if cls != "Array" && !(cls == "Object" && (proto == nil || proto == e.objectProto)) {
		e.intrinsics()
	}
	switch {
	case cls == "Array":
		n := obj.Get("length").ToInteger()
		if n < 0 || n*costScalar > x.budget {
			return nil, errTooLarge
		}
		if err := x.charge(costSlice); err != nil {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			el, err := x.value(obj.Get(strconv.Itoa(i)), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = el
		}
		return out, nil
	case cls == "Object" && (proto == nil || proto == e.objectProto):
		if err := x.charge(costObject); err != nil {
			return nil, err
		}
		keys := obj.Keys()
		if int64(len(keys))*(costMember+costScalar) > x.budget {
			return nil, errTooLarge
		}
		out := make(map[string]any, len(keys))
		for _, k := range keys {
			kk := withoutGoValues(k)
			if err := x.charge(costMember + int64(len(kk))); err != nil {
				return nil, err
			}
			v := obj.Get(k)
			if strings.ContainsRune(k, utf8.RuneError) {
				// goja gives a key holding a lone surrogate with U+FFFD in
				// its place, which names no property, or another one.
				if _, dup := out[kk]; dup || v == nil {
					return nil, notTransferable("object key that is not valid Unicode (a lone surrogate)")
				}
			}
			el, err := x.value(v, depth+1)
			if err != nil {
				return nil, err
			}
			out[kk] = el
		}
		return out, nil
	case cls == "Date":
		// An invalid Date exports as nil. Its time value is read without
		// converting it to a number, which would call the code's valueOf.
		t, ok := obj.Export().(time.Time)
		if !ok {
			return nil, notTransferable("invalid Date")
		}
		return t.UTC(), x.charge(costDate)
	case proto == e.mapProto && e.mapForEach != nil && obj.ExportType() == mapType:
		if err := x.charge(costSlice); err != nil {
			return nil, err
		}
		var out Map
		var ierr error
		_, err := e.mapForEach(obj, e.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			if ierr != nil {
				return goja.Undefined()
			}
			k, err := x.value(c.Argument(1), depth+1)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			val, err := x.value(c.Argument(0), depth+1)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			out = append(out, MapEntry{k, val})
			return goja.Undefined()
		}))
		if err := rethrow(err); err != nil {
			return nil, err
		}
		if ierr != nil {
			return nil, ierr
		}
		if out == nil {
			out = Map{}
		}
		return out, nil
	// An array exports as a Go slice too: a Set's class is "Object", an
	// array's (given Set.prototype) "Array".
	case proto == e.setProto && e.setForEach != nil && cls == "Object" && obj.ExportType() == setType:
		if err := x.charge(costSlice); err != nil {
			return nil, err
		}
		var out Set
		var ierr error
		_, err := e.setForEach(obj, e.rt.ToValue(func(c goja.FunctionCall) goja.Value {
			if ierr != nil {
				return goja.Undefined()
			}
			el, err := x.value(c.Argument(0), depth+1)
			if err != nil {
				ierr = err
				return goja.Undefined()
			}
			out = append(out, el)
			return goja.Undefined()
		}))
		if err := rethrow(err); err != nil {
			return nil, err
		}
		if ierr != nil {
			return nil, ierr
		}
		if out == nil {
			out = Set{}
		}
		return out, nil
	}
	if name, ok := e.typedProtos[proto]; ok {
		// Only a typed array of the prototype's kind exports as its slice
		// type; exporting anything else to bytes would run its iterator.
		var b []byte
		if obj.ExportType() != typedArrayTypes[name] {
			return nil, notTransferable(name)
		}
		if err := e.rt.ExportTo(obj, &b); err != nil {
			return nil, notTransferable(name)
		}
		if name == "Uint8Array" {
			if err := x.charge(costBytes + int64(len(b))); err != nil {
				return nil, err
			}
			return append([]byte{}, b...), nil
		}
		if err := x.charge(costTyped + int64(len(name)) + int64(len(b))); err != nil {
			return nil, err
		}
		return TypedArray{Type: name, Data: append([]byte{}, b...)}, nil
	}
	if proto == e.abProto && obj.ExportType() == arrayBufferType {
		if ab, ok := obj.Export().(goja.ArrayBuffer); ok {
			if err := x.charge(costBytes + int64(len(ab.Bytes()))); err != nil {
				return nil, err
			}
			return ArrayBuffer(append([]byte{}, ab.Bytes()...)), nil
		}
	}
	if cls == "Function" || cls == "AsyncFunction" || cls == "GeneratorFunction" {
		return nil, notTransferable("function")
	}
	return nil, notTransferable(cls + " instance")
}
