package sandbox

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
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

// The worker protocol: length-prefixed (4-byte big-endian) JSON frames over
// the worker's stdin (parent to worker) and stdout (worker to parent).
//
//	parent -> worker: run {id, run}; ret {id, c, v | err}; term {id, err}
//	worker -> parent: call {id, c, fn, args}; report {id, v}; log {id, lvl, args, ts};
//	                  done {id, st, v | err}
//
// Values use the tagged encoding of toWire/fromWire. A worker runs one run
// at a time.
type frame struct {
	T    string   `json:"t"`
	ID   uint64   `json:"id,omitempty"`
	C    uint64   `json:"c,omitempty"`
	Fn   int      `json:"fn,omitempty"`
	Args []any    `json:"args,omitempty"`
	V    any      `json:"v,omitempty"`
	Err  *Error   `json:"err,omitempty"`
	Lvl  string   `json:"lvl,omitempty"`
	TS   int64    `json:"ts,omitempty"`
	St   Status   `json:"st,omitempty"`
	Run  *runSpec `json:"run,omitempty"`
}

type runSpec struct {
	Hash     string                    `json:"hash"`
	Code     string                    `json:"code"`
	Map      json.RawMessage           `json:"map"`
	Sources  []string                  `json:"sources"`
	Exports  []string                  `json:"exports"`
	Entry    string                    `json:"entry"`
	Args     []any                     `json:"args,omitempty"`
	Globals  map[string]any            `json:"globals,omitempty"`
	Imports  map[string]map[string]any `json:"imports,omitempty"`
	Report   bool                      `json:"report,omitempty"`
	MaxStack int                       `json:"maxStack,omitempty"`
	Memory   int64                     `json:"memory"`
}

const maxFrame = 1 << 30

func writeFrame(w io.Writer, f *frame) error {
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(data))
	binary.BigEndian.PutUint32(buf, uint32(len(data)))
	copy(buf[4:], data)
	_, err = w.Write(buf)
	return err
}

func readFrame(r *bufio.Reader) (*frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("sandbox: frame too large (%d bytes)", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	f := &frame{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, err
	}
	return f, nil
}

func wireList(vs []any) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = toWire(v)
	}
	return out
}

func wireMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = toWire(v)
	}
	return out
}

func fromWireMap(m map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		d, err := fromWire(v)
		if err != nil {
			return nil, err
		}
		out[k] = d
	}
	return out, nil
}

// ---- worker side ----

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
		case "run":
			s.startRun(f)
		case "ret":
			s.mu.Lock()
			done := s.calls[f.C]
			delete(s.calls, f.C)
			ok := f.ID == s.id
			s.mu.Unlock()
			if done != nil && ok {
				if f.Err != nil {
					done(nil, f.Err)
				} else if v, err := fromWire(f.V); err != nil {
					done(nil, &Error{Name: "SerializationError", Message: err.Error()})
				} else {
					done(v, nil)
				}
			}
		case "term":
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
	s.send(&frame{T: "call", ID: h.id, C: c, Fn: fn, Args: wireList(args)})
}

func (h *workerHost) report(v any) { h.s.send(&frame{T: "report", ID: h.id, V: toWire(v)}) }

func (h *workerHost) log(e LogEntry) {
	h.s.send(&frame{T: "log", ID: h.id, Lvl: e.Level, Args: wireList(e.Args), TS: e.Timestamp.UnixNano()})
}

func (s *workerServer) startRun(f *frame) {
	spec := f.Run
	fail := func(err error) {
		s.send(&frame{T: "done", ID: f.ID, St: StatusError, Err: &Error{Name: "InternalError", Message: err.Error()}})
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
	args, err := fromWireList(spec.Args)
	if err != nil {
		fail(err)
		return
	}
	globals, err := fromWireMap(spec.Globals)
	if err != nil {
		fail(err)
		return
	}
	imports := make(map[string]map[string]any, len(spec.Imports))
	for k, ns := range spec.Imports {
		if imports[k], err = fromWireMap(ns); err != nil {
			fail(err)
			return
		}
	}
	job := &engineJob{code: c, entry: spec.Entry, args: args, globals: globals, imports: imports, report: spec.Report, maxStack: spec.MaxStack}
	eng := newEngine(job, &workerHost{s: s, id: f.ID})
	s.mu.Lock()
	s.id, s.eng, s.calls = f.ID, eng, map[uint64]func(any, *Error){}
	s.mu.Unlock()
	go func() {
		stop := applyLimits(eng, spec.Memory, func(o *outcome) {
			// The code is stuck in a builtin that keeps allocating: report
			// and let the process go, the parent starts a fresh one.
			s.send(&frame{T: "done", ID: f.ID, St: o.status, Err: o.err})
			os.Exit(4)
		})
		o := eng.run()
		stop()
		s.mu.Lock()
		s.eng, s.calls = nil, nil
		s.mu.Unlock()
		done := &frame{T: "done", ID: f.ID, St: o.status, Err: o.err}
		if o.status == StatusSuccess {
			done.V = toWire(o.value)
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
