package sandbox

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// A realm is a goja runtime made ready for a run: the host's globals
// removed, Function and eval replaced by a thrower of EvalError, console
// defined. No code but this set-up has run in it, and it serves one run
// only. Most of a trivial run's cost is this set-up, so realms are made
// ahead of the runs that take them, on a CPU that would otherwise wait (see
// wantRealms; a worker process makes its own, see oneRealmAhead); a run
// that finds none makes its own.
type realm struct {
	rt *goja.Runtime
	// thrower is the function that replaces every entry point to a
	// constructor of functions from source.
	thrower *goja.Object
	// eng is the run the realm serves, set when it is taken; console is
	// made for it on first use.
	eng *engine
}

const dynamicCodeMsg = "Dynamic code loading is disabled"

// newRealm makes a realm.
func newRealm() (*realm, error) {
	rt := goja.New()
	rl := &realm{rt: rt}
	g := rt.GlobalObject()
	for _, name := range presentIsolatedGlobals() {
		_ = g.Delete(name)
	}
	if err := rl.lockFunction(); err != nil {
		return nil, err
	}
	// console is made on first use: most runs never log, and its six
	// functions cost more than the accessor that makes them. The accessor
	// replaces itself with a plain data property on first get or set.
	lazy := rt.ToValue(func(call goja.FunctionCall) goja.Value {
		var v goja.Value
		if len(call.Arguments) > 0 {
			v = call.Arguments[0] // assignment: console = v
		} else {
			v = rl.eng.newConsole()
		}
		_ = g.DefineDataProperty("console", v, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
		return v
	}).(*goja.Object)
	if err := g.DefineAccessorProperty("console", lazy, lazy, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	return rl, nil
}

// lockFunction makes the thrower and puts it in the place of Function,
// Function.prototype.constructor and eval, so that no code can be compiled
// from a string. The constructors of async and generator functions are
// locked per run, where the bundle can reach them (engine.lockDown).
func (rl *realm) lockFunction() error {
	rt := rl.rt
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
	if err := fnProto.DefineDataProperty("constructor", thrower, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := g.DefineDataProperty("Function", thrower, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	// eval is the same thrower: one function object less per realm.
	if err := g.DefineDataProperty("eval", thrower, goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return err
	}
	rl.thrower = thrower
	return nil
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

// readyRealms holds realms made ahead of the runs that will take them: at
// least one for each goroutine that can run at once, so that runs started
// together each find one, and at least eight, about 86 KB, so that runs
// that follow one another keep finding one while the goroutine that makes
// them waits for a CPU: with room for two, a trivial run on two CPUs often
// found none and made its own (in interleaved rounds, a median of 20.8–21.6
// µs a run with room for two, 19.5–20.4 µs with eight).
var readyRealms = make(chan *realm, max(8, runtime.GOMAXPROCS(0)))

// realmMaker is the state of the goroutine that makes realms ahead:
// wanted holds a wish for realms (every run that takes one makes it);
// running says whether the goroutine is there to grant it, and idle how
// long it waits for the next wish before it lets its realms go and ends.
var realmMaker = struct {
	wanted  chan struct{}
	mu      sync.Mutex
	running bool
	idle    time.Duration
}{wanted: make(chan struct{}, 1), idle: time.Minute}

// realmIdle returns realmMaker.idle.
func realmIdle() time.Duration {
	realmMaker.mu.Lock()
	defer realmMaker.mu.Unlock()
	return realmMaker.idle
}

// takeRealm returns a realm made ahead of time if there is one, or makes
// one, and asks for more to be made. A realm is handed over through a
// channel, so no two runs ever share one.
func takeRealm() (*realm, error) {
	if testHookTakeRealm != nil {
		testHookTakeRealm()
	}
	if !oneRealmAhead.Load() {
		defer wantRealms()
	}
	select {
	case rl := <-readyRealms:
		return rl, nil
	default:
		return newRealm()
	}
}

// testHookTakeRealm, when set by a test, is called each time a run takes a
// realm.
var testHookTakeRealm func()

// oneRealmAhead is set in a worker process, which runs one run at a time,
// each under its own memory limit (applyLimits): realms made by a goroutine
// of their own would be made while a run is under its limit, up to one a
// CPU on the first, and charged to it. The worker makes one realm ahead
// itself instead, between runs (makeRealmAhead), and takeRealm asks for
// none.
var oneRealmAhead atomic.Bool

// makeRealmAhead makes a realm for the next run when none is ready, on the
// calling goroutine.
func makeRealmAhead() {
	if len(readyRealms) == 0 {
		addRealm()
	}
}

// addRealm makes a realm and puts it in readyRealms. It reports false when
// the realm could not be made or readyRealms was full (filled by another
// goroutine meanwhile), and the realm is dropped.
func addRealm() bool {
	rl, err := newRealm()
	if err != nil {
		return false
	}
	select {
	case readyRealms <- rl:
		return true
	default:
		return false
	}
}

// wantRealms asks for realms to be made ahead until readyRealms is full,
// starting the goroutine that makes them if it is not running. The
// goroutine runs on a CPU that would otherwise wait while the run that
// asked runs on another; a goroutine that finished a run could make them
// itself, but the next run would wait for it.
func wantRealms() {
	select {
	case realmMaker.wanted <- struct{}{}:
	default:
		return // a wish is pending: the goroutine is there to see it
	}
	realmMaker.mu.Lock()
	if !realmMaker.running {
		realmMaker.running = true
		go makeRealms()
	}
	realmMaker.mu.Unlock()
}

// makeRealms fills readyRealms on each wish, and ends after realmMaker.idle
// without one, letting the realms it made go.
func makeRealms() {
	t := time.NewTimer(realmIdle())
	defer t.Stop()
	for {
		select {
		case <-realmMaker.wanted:
			for len(readyRealms) < cap(readyRealms) && addRealm() {
			}
			t.Reset(realmIdle())
		case <-t.C:
			realmMaker.mu.Lock()
			if len(realmMaker.wanted) > 0 {
				// A wish came as the timer fired: grant it.
				idle := realmMaker.idle
				realmMaker.mu.Unlock()
				t.Reset(idle)
				continue
			}
			realmMaker.running = false
			realmMaker.mu.Unlock()
			for range cap(readyRealms) {
				select {
				case <-readyRealms:
				default:
					return
				}
			}
			return
		}
	}
}
