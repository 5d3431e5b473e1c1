package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// ---- worker side ----

// init turns the process into a worker when WorkerEnv is "1": it serves the
// protocol and exits before main (or a test binary's TestMain) runs.
func init() {
	if os.Getenv(WorkerEnv) == "1" {
		var ctrl io.Reader
		if os.Getenv(ctrlEnv) == "3" {
			ctrl = os.NewFile(3, "toolrun-sandbox-ctrl")
		}
		// The goroutine running init is locked to the main thread, so each
		// time it yields or waits its thread hands over to another and back;
		// the protocol is served on a goroutine of its own.
		code := make(chan int)
		go func() { code <- serveWorker(os.Stdin, os.Stdout, ctrl, spinWaitFromEnv()) }()
		os.Exit(<-code)
	}
}

type workerServer struct {
	out *frameWriter
	in  *frameReader // read only by the goroutine running serveWorker

	mu    sync.Mutex
	id    uint64
	eng   *engine
	calls map[uint64]func(any, *Error)
	next  uint64

	cache *compileCache // bundles with their goja programs
}

func (s *workerServer) send(f *frame) { _ = s.out.send(f) }

// Frames a run sends to the host while it runs (calls, reports, logs) are
// queued and written together: when the engine has nothing to do and
// waits, when maxQueued bytes are queued, and by the memory watchdog when
// the oldest has waited maxQueueAge (code that computes without pause).
const (
	maxQueued   = 64 << 10
	maxQueueAge = time.Millisecond
)

func (s *workerServer) queue(f *frame) {
	if _, n := s.out.queue(f); n >= maxQueued {
		_ = s.out.flush()
	}
}

// ctrlEnv names the environment variable telling a worker that file
// descriptor 3 is its control pipe (terminate frames, read while
// JavaScript runs).
const ctrlEnv = "TOOLRUN_SANDBOX_CTRL_FD"

// readHostFrame reads a frame from the host, which is trusted: the limits
// only catch corruption.
func readHostFrame(r *bufio.Reader) (*frame, error) {
	return readFrame(r, maxFrameToWorker, math.MaxInt64)
}

func newHostFrameReader(r io.Reader) *frameReader {
	return newFrameReader(r, maxFrameToWorker, math.MaxInt64)
}

// serveWorker serves the worker protocol until in is closed; it returns the
// process exit code. Once set up (a realm made ahead) it sends a ready
// frame, before it reads anything. The engine runs on this goroutine and reads its
// bridged calls' results from in itself while it waits, so a result wakes
// it without a goroutine hand-off; terminate frames arrive on ctrl (and on
// in, to wake a waiting engine). While the engine waits for the results of
// bridged calls, it polls in for up to spin before it sleeps (when spin is
// positive).
func serveWorker(in *os.File, out io.Writer, ctrl io.Reader, spin time.Duration) int {
	debug.SetMaxStack(runMaxStack)
	// The engine keeps one P busy while JavaScript runs; a second P lets the
	// control reader interrupt it at once.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	// Realms are made ahead one at a time, between runs, outside their
	// memory limits (see oneRealmAhead).
	oneRealmAhead.Store(true)
	makeRealmAhead()
	s := &workerServer{out: &frameWriter{w: out}, cache: newCompileCache(256, DefaultCacheBytes, true)}
	s.in = newHostFrameReader(newSpinReader(in, spin, s.awaitingResults))
	if ctrl != nil {
		go s.serveCtrl(bufio.NewReader(ctrl))
	}
	// The host hands this worker out only once it has said it is ready.
	s.send(&frame{T: frReady, ID: wireVersion})
	for {
		f, err := s.in.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			return 3
		}
		// ret and term frames between runs belong to finished runs.
		switch f.T {
		case frCompile:
			s.compile(f)
		case frRun:
			if err := s.run(f); err != nil {
				return 3
			}
		}
	}
}

// serveCtrl interrupts the current run on a terminate frame.
func (s *workerServer) serveCtrl(r *bufio.Reader) {
	for {
		f, err := readHostFrame(r)
		if err != nil {
			return
		}
		if f.T == frTerm {
			s.terminate(f)
		}
	}
}

func (s *workerServer) terminate(f *frame) {
	s.mu.Lock()
	eng := s.eng
	ok := f.ID == s.id
	s.mu.Unlock()
	if eng != nil && ok {
		e := f.Err
		if e == nil {
			e = &Error{Name: "Terminated", Message: "Code execution terminated"}
		}
		eng.interrupt(&outcome{status: StatusTerminated, err: e})
	}
}

var errProtocol = errors.New("sandbox worker: protocol error")

// awaitingResults reports whether the current run has bridged calls the
// host has not answered yet: their results are the frames expected next.
func (s *workerServer) awaitingResults() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls) > 0
}

// pump reads and handles one frame for the running run; the engine calls
// it when it has nothing to do.
func (s *workerServer) pump(id uint64) error {
	if err := s.out.flush(); err != nil {
		return err
	}
	f, err := s.in.next()
	if err != nil {
		return err
	}
	switch f.T {
	case frRet:
		s.mu.Lock()
		done := s.calls[f.C]
		delete(s.calls, f.C)
		ok := f.ID == id
		s.mu.Unlock()
		if done != nil && ok {
			done(f.V, f.Err)
		}
	case frTerm:
		s.terminate(f)
	case frRun, frCompile:
		return errProtocol
	}
	return nil
}

type workerHost struct {
	s  *workerServer
	id uint64
}

func (h *workerHost) call(fn int, args []any, done func(any, *Error)) {
	s := h.s
	s.mu.Lock()
	s.next++
	c := s.next
	s.calls[c] = done
	s.mu.Unlock()
	s.queue(&frame{T: frCall, ID: h.id, C: c, Fn: fn, Args: args})
}

func (h *workerHost) report(v any) { h.s.queue(&frame{T: frReport, ID: h.id, V: v}) }

func (h *workerHost) log(e LogEntry) {
	h.s.queue(&frame{T: frLog, ID: h.id, Lvl: e.Level, Args: e.Args, TS: e.Timestamp.UnixNano()})
}

// compile compiles a source under the run's memory limit and a small stack
// limit, checks that goja can parse and compile the bundle, keeps the
// bundle with its program and sends it to the host. A source that needs
// more stack or memory kills the worker, which the host reports.
func (s *workerServer) compile(f *frame) {
	spec := f.Comp
	if spec == nil {
		s.send(&frame{T: frCompiled, ID: f.ID, Err: &Error{Name: "InternalError", Message: "sandbox worker: compile frame without request"}})
		return
	}
	stop := applyLimits(spec.Memory, func(<-chan struct{}) {
		// esbuild cannot be interrupted: give up the process, the parent
		// reports the run as out of memory and starts a fresh worker.
		fmt.Fprintln(os.Stderr, "sandbox worker: out of memory while compiling")
		os.Exit(4)
	}, nil)
	prev := debug.SetMaxStack(compileMaxStack)
	c, lerr := compile(requestFromSpec(spec))
	if lerr == nil {
		c.hash = spec.Hash
		lerr = c.checkProgram()
	}
	debug.SetMaxStack(prev)
	stop()
	if lerr != nil {
		s.send(&frame{T: frCompiled, ID: f.ID, Err: lerr})
		return
	}
	s.cache.put(spec.Hash, c, nil)
	s.send(&frame{T: frCompiled, ID: f.ID, Bund: c.spec()})
}

// run executes one run on the calling goroutine. A non-nil error means
// the protocol broke and the worker must exit.
func (s *workerServer) run(f *frame) error {
	spec := f.Run
	fail := func(err error) {
		s.send(&frame{T: frDone, ID: f.ID, St: StatusError, Err: &Error{Name: "InternalError", Message: err.Error()}})
	}
	if spec == nil {
		fail(errors.New("sandbox worker: run frame without spec"))
		return nil
	}
	var c *compiled
	if ent, ok := s.cache.get(spec.Hash); ok && ent.c != nil {
		c = ent.c
	} else if spec.Bundle != nil {
		c = compiledFromSpec(spec.Hash, spec.Bundle)
		s.cache.put(spec.Hash, c, nil)
	} else {
		// The host expected the bundle here; it sends the run again with it.
		s.send(&frame{T: frNeed, ID: f.ID})
		return nil
	}
	job := &engineJob{code: c, entry: spec.Entry, args: spec.Args, globals: spec.Globals, imports: spec.Imports, report: spec.Report, maxStack: spec.MaxStack}
	eng := newEngine(job, &workerHost{s: s, id: f.ID})
	var perr error
	eng.idle = func() error {
		if err := s.pump(f.ID); err != nil {
			perr = err
			return err
		}
		return nil
	}
	s.mu.Lock()
	s.id, s.eng, s.calls = f.ID, eng, map[uint64]func(any, *Error){}
	s.mu.Unlock()
	stop := applyLimits(spec.Memory, func(returned <-chan struct{}) {
		o := &outcome{status: StatusMemory, err: memoryError(spec.Memory)}
		eng.interrupt(o)
		select {
		case <-returned:
		case <-time.After(memoryGrace):
			// The code is stuck in a builtin that keeps allocating: report
			// and let the process go, the parent starts a fresh one.
			s.send(&frame{T: frDone, ID: f.ID, St: o.status, Err: o.err})
			os.Exit(4)
		}
	}, func() { s.out.flushIfOlder(maxQueueAge) })
	o := eng.run()
	stop()
	s.mu.Lock()
	s.eng, s.calls = nil, nil
	s.mu.Unlock()
	if perr != nil {
		return perr
	}
	done := &frame{T: frDone, ID: f.ID, St: o.status, Err: capError(o.err)}
	if o.status == StatusSuccess {
		done.V = o.value
	}
	s.send(done)
	makeRealmAhead() // while the host reads the result
	return nil
}

var heapSamples = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}

func heapObjects() int64 {
	s := make([]metrics.Sample, 1)
	s[0].Name = heapSamples[0].Name
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// applyLimits caps the worker's memory for one run or compile: a Go
// memory limit, an RLIMIT_DATA backstop (on Linux, without the race
// detector) and a watchdog that calls exceeded once when the live heap
// passes the limit, with a channel closed once the returned func, which
// lifts the limits, is called.
func applyLimits(limit int64, exceeded func(lifted <-chan struct{}), tick func()) (stop func()) {
	if limit <= 0 {
		limit = 256 << 20
	}
	base := heapObjects()
	if base > 64<<20 {
		runtime.GC()
		base = heapObjects()
	}
	prevML := debug.SetMemoryLimit(base + limit + 32<<20)
	// Under the race detector (a worker re-executed from a test binary
	// built with -race), RLIMIT_DATA would count the detector's shadow
	// memory and stop an honest run far below its limit: the backstop is
	// left off, and the Go memory limit and the watchdog hold the run.
	restoreData := func() {}
	if !raceDetector {
		restoreData = setDataLimit(limit)
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if tick != nil {
					tick()
				}
				if heapObjects()-base <= limit {
					continue
				}
				runtime.GC()
				if heapObjects()-base > limit {
					exceeded(quit)
					return
				}
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		restoreData()
		debug.SetMemoryLimit(prevML)
	}
}

// memoryGrace is how long a run over its memory limit may take to return
// after being interrupted before its worker gives up.
const memoryGrace = 500 * time.Millisecond

func memoryError(limit int64) *Error {
	return &Error{Name: "MemoryLimitExceeded", Message: fmt.Sprintf("Memory limit exceeded: the run used more than its limit of %d bytes", limit)}
}
