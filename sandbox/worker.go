package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
		os.Exit(serveWorker(os.Stdin, os.Stdout))
	}
}

type workerServer struct {
	out io.Writer
	wmu sync.Mutex

	mu    sync.Mutex
	id    uint64
	eng   *engine
	calls map[uint64]func(any, *Error)
	next  uint64

	cache map[string]*compiled
}

func (s *workerServer) send(f *frame) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = writeFrame(s.out, f)
}

// serveWorker serves the worker protocol until in is closed; it returns the
// process exit code.
func serveWorker(in io.Reader, out io.Writer) int {
	debug.SetMaxStack(256 << 20)
	// The engine keeps one P busy while JavaScript runs; a second P lets the
	// frame reader see a terminate frame at once instead of at the
	// runtime's next 10 ms poll.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	s := &workerServer{out: out, cache: map[string]*compiled{}}
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		f, err := readFrame(br)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			return 3
		}
		switch f.T {
		case frRun:
			s.startRun(f)
		case frRet:
			s.mu.Lock()
			done := s.calls[f.C]
			delete(s.calls, f.C)
			ok := f.ID == s.id
			s.mu.Unlock()
			if done != nil && ok {
				done(f.V, f.Err)
			}
		case frTerm:
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
	}
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
	s.send(&frame{T: frCall, ID: h.id, C: c, Fn: fn, Args: args})
}

func (h *workerHost) report(v any) { h.s.send(&frame{T: frReport, ID: h.id, V: v}) }

func (h *workerHost) log(e LogEntry) {
	h.s.send(&frame{T: frLog, ID: h.id, Lvl: e.Level, Args: e.Args, TS: e.Timestamp.UnixNano()})
}

func (s *workerServer) startRun(f *frame) {
	spec := f.Run
	fail := func(err error) {
		s.send(&frame{T: frDone, ID: f.ID, St: StatusError, Err: &Error{Name: "InternalError", Message: err.Error()}})
	}
	if spec == nil {
		fail(errors.New("sandbox worker: run frame without spec"))
		return
	}
	c := s.cache[spec.Hash]
	if c == nil {
		sm, err := parseSourceMap(spec.Map)
		if err != nil {
			fail(err)
			return
		}
		sm.lineOffset = 1
		c = &compiled{hash: spec.Hash, code: spec.Code, exports: spec.Exports, smap: sm, sources: spec.Sources}
		if len(s.cache) >= 64 {
			clear(s.cache)
		}
		s.cache[spec.Hash] = c
	}
	job := &engineJob{code: c, entry: spec.Entry, args: spec.Args, globals: spec.Globals, imports: spec.Imports, report: spec.Report, maxStack: spec.MaxStack}
	eng := newEngine(job, &workerHost{s: s, id: f.ID})
	s.mu.Lock()
	s.id, s.eng, s.calls = f.ID, eng, map[uint64]func(any, *Error){}
	s.mu.Unlock()
	go func() {
		stop := applyLimits(eng, spec.Memory, func(o *outcome) {
			// The code is stuck in a builtin that keeps allocating: report
			// and let the process go, the parent starts a fresh one.
			s.send(&frame{T: frDone, ID: f.ID, St: o.status, Err: o.err})
			os.Exit(4)
		})
		o := eng.run()
		stop()
		s.mu.Lock()
		s.eng, s.calls = nil, nil
		s.mu.Unlock()
		done := &frame{T: frDone, ID: f.ID, St: o.status, Err: o.err}
		if o.status == StatusSuccess {
			done.V = o.value
		}
		s.send(done)
	}()
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

// applyLimits caps the worker's memory for one run: a Go memory limit, an
// RLIMIT_DATA backstop (on unix) and a watchdog that interrupts the engine
// when the live heap passes the limit. The returned func lifts them.
// stuck is called when the engine does not return within a grace period
// after the watchdog interrupted it.
func applyLimits(eng *engine, limit int64, stuck func(*outcome)) (stop func()) {
	if limit <= 0 {
		limit = 256 << 20
	}
	base := heapObjects()
	if base > 64<<20 {
		runtime.GC()
		base = heapObjects()
	}
	prevML := debug.SetMemoryLimit(base + limit + 32<<20)
	restoreData := setDataLimit(limit)
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
				if heapObjects()-base <= limit {
					continue
				}
				runtime.GC()
				if heapObjects()-base > limit {
					o := &outcome{status: StatusMemory, err: memoryError(limit)}
					eng.interrupt(o)
					select {
					case <-quit:
					case <-time.After(memoryGrace):
						stuck(o)
					}
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
