package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const maxRunsPerWorker = 1000

// workerPool keeps warm worker processes. It is safe for concurrent use.
type workerPool struct {
	opts *RunnerOptions

	mu       sync.Mutex
	idle     []*workerProc
	spawning int
	closed   bool
	live     map[*workerProc]struct{} // every running worker process
	slots    chan struct{}            // one per run executing on a worker
	runID    atomic.Uint64
}

func newWorkerPool(opts *RunnerOptions) *workerPool {
	return &workerPool{opts: opts, live: map[*workerProc]struct{}{}, slots: make(chan struct{}, opts.MaxWorkers)}
}

func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, w := range idle {
		w.stop()
	}
}

// get returns an idle worker or starts one, and tops the pool up.
func (p *workerPool) get() (*workerProc, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("sandbox: runner is closed")
		}
		var w *workerProc
		if n := len(p.idle); n > 0 {
			w = p.idle[n-1]
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
		p.refill()
		if w == nil {
			return p.spawn()
		}
		if !w.dead.Load() {
			return w, nil
		}
	}
}

// refill starts a worker in the background when none is idle or starting,
// so that the next run does not wait for a process start. Workers return
// to the pool after their run, so the pool settles at PoolSize idle workers
// without churn.
func (p *workerPool) refill() {
	p.mu.Lock()
	need := 0
	if len(p.idle)+p.spawning == 0 {
		need = 1
	}
	if p.closed || need <= 0 {
		p.mu.Unlock()
		return
	}
	p.spawning += need
	p.mu.Unlock()
	for i := 0; i < need; i++ {
		go func() {
			w, err := p.spawn()
			p.mu.Lock()
			p.spawning--
			p.mu.Unlock()
			if err != nil {
				p.opts.Logger.Warn("sandbox: starting worker failed", "err", err)
				return
			}
			p.put(w)
		}()
	}
}

func (p *workerPool) put(w *workerProc) {
	p.mu.Lock()
	if p.closed || w.dead.Load() || len(p.idle) >= p.opts.PoolSize || w.runs >= maxRunsPerWorker {
		p.mu.Unlock()
		w.stop()
		return
	}
	p.idle = append(p.idle, w)
	p.mu.Unlock()
}

// workerProc is the parent's side of one worker process.
type workerProc struct {
	pool  *workerPool
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ctrl  *os.File   // control pipe (fd 3 in the worker); nil on Windows
	wmu   sync.Mutex // serialises writes to stdin
	cmu   sync.Mutex // serialises writes to ctrl
	tail  tailBuffer
	dead  atomic.Bool
	runs  int // guarded by being owned by one run at a time

	mu  sync.Mutex
	cur *workerRun
}

type workerRun struct {
	id      uint64
	run     *Run
	funcs   []*funcRef
	memory  int64
	killed  atomic.Pointer[outcome]
	release func() // frees the run's slot; safe to call more than once
}

func (p *workerPool) spawn() (*workerProc, error) {
	argv := p.opts.WorkerCommand
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: locating own executable: %w", err)
		}
		argv = []string{exe}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	cmd.SysProcAttr = workerSysProcAttr()
	w := &workerProc{pool: p, cmd: cmd}
	var ctrlR *os.File
	if runtime.GOOS != "windows" {
		r, wr, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		ctrlR, w.ctrl = r, wr
		cmd.ExtraFiles = []*os.File{ctrlR} // fd 3 in the worker
		cmd.Env = append(cmd.Env, ctrlEnv+"=3")
	}
	cmd.Stderr = &w.tail
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	err = cmd.Start()
	if ctrlR != nil {
		_ = ctrlR.Close()
	}
	if err != nil {
		if w.ctrl != nil {
			_ = w.ctrl.Close()
		}
		return nil, fmt.Errorf("sandbox: starting worker %q: %w", argv[0], err)
	}
	w.stdin = stdin
	p.mu.Lock()
	p.live[w] = struct{}{}
	p.mu.Unlock()
	p.opts.Logger.Debug("sandbox: worker started", "pid", cmd.Process.Pid)
	go w.readLoop(bufio.NewReaderSize(stdout, 64<<10))
	return w, nil
}

func (w *workerProc) send(f *frame) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return writeFrame(w.stdin, f)
}

// sendCtrl writes a frame to the control pipe (falling back to stdin).
func (w *workerProc) sendCtrl(f *frame) error {
	if w.ctrl == nil {
		return nil
	}
	w.cmu.Lock()
	defer w.cmu.Unlock()
	return writeFrame(w.ctrl, f)
}

// stop closes the worker's stdin so it exits, and kills it if it lingers.
func (w *workerProc) stop() {
	_ = w.stdin.Close()
	if w.ctrl != nil {
		_ = w.ctrl.Close()
	}
	go func() {
		time.Sleep(2 * time.Second)
		if !w.dead.Load() {
			_ = w.cmd.Process.Kill()
		}
	}()
}

func (w *workerProc) kill() { _ = w.cmd.Process.Kill() }

func (w *workerProc) current(id uint64) *workerRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != nil && w.cur.id == id {
		return w.cur
	}
	return nil
}

// readLoop reads the worker's frames. One goroutine reads at a time: on a
// bridged call the reader hands the reading role to a new goroutine and
// serves the call itself, so the result goes back without waiting for
// another goroutine to be scheduled, and calls still run concurrently.
func (w *workerProc) readLoop(r *bufio.Reader) {
	for {
		f, err := readFrame(r)
		if err != nil {
			break
		}
		wr := w.current(f.ID)
		if wr == nil {
			continue
		}
		if f.T == frCall {
			go w.readLoop(r)
			w.serveCall(wr, f)
			return
		}
		w.dispatch(wr, f)
	}
	w.exited()
}

// serveCall runs a bridged host function and sends its result.
func (w *workerProc) serveCall(wr *workerRun, f *frame) {
	var fn HostFunc
	if f.Fn >= 0 && f.Fn < len(wr.funcs) {
		fn = wr.funcs[f.Fn].fn
	}
	v, herr := invokeHost(wr.run, fn, f.Args)
	if w.current(wr.id) != nil {
		_ = w.send(&frame{T: frRet, ID: wr.id, C: f.C, Err: herr, V: v})
	}
}

// exited handles the end of the worker process.
func (w *workerProc) exited() {
	waitErr := w.cmd.Wait()
	w.dead.Store(true)
	if w.ctrl != nil {
		_ = w.ctrl.Close()
	}
	w.pool.mu.Lock()
	delete(w.pool.live, w)
	w.pool.mu.Unlock()
	w.mu.Lock()
	wr := w.cur
	w.cur = nil
	w.mu.Unlock()
	if wr == nil {
		return
	}
	defer wr.release()
	if o := wr.killed.Load(); o != nil {
		wr.run.settle(o)
		return
	}
	tail := w.tail.String()
	w.pool.opts.Logger.Warn("sandbox: worker died", "err", waitErr, "stderr", tail)
	switch {
	case looksLikeMemoryFailure(tail) || isKilled(waitErr):
		wr.run.settle(&outcome{status: StatusMemory, err: memoryError(wr.memory)})
	case strings.Contains(tail, "stack exceeds"):
		wr.run.settle(&outcome{status: StatusError, err: &Error{Name: "RangeError", Message: "Maximum call stack size exceeded"}})
	default:
		msg := "sandbox worker exited unexpectedly"
		if waitErr != nil {
			msg += ": " + waitErr.Error()
		}
		if l := lastLine(tail); l != "" {
			msg += " (" + l + ")"
		}
		wr.run.settle(&outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: msg}})
	}
}

// looksLikeMemoryFailure reports whether a worker's dying words point at
// memory exhaustion. A Go runtime that fails to map memory under
// RLIMIT_DATA says "out of memory" or "cannot allocate memory" when the
// failing mapping is a heap allocation, but may instead fault (SIGSEGV) in
// its allocator or collector when it is a small metadata mapping; both are
// reported as StatusMemory. (A race-enabled worker's ThreadSanitizer says
// "failed to allocate ... (errno: 12)".)
func looksLikeMemoryFailure(stderr string) bool {
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "failed to allocate") || strings.Contains(stderr, "errno: 12") {
		return true
	}
	if !strings.Contains(stderr, "SIGSEGV") && !strings.Contains(stderr, "unknown pc") {
		return false
	}
	for _, f := range []string{"runtime.mallocgc", "runtime.(*mheap)", "runtime.persistentalloc", "runtime.gcDrain",
		"runtime.scanSpan", "runtime.(*spanQueue)", "runtime.gcAssistAlloc", "runtime.(*mcache)", "runtime.sysMap"} {
		if strings.Contains(stderr, f) {
			return true
		}
	}
	return false
}

func isKilled(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.Contains(ee.String(), "signal: killed")
	}
	return false
}

func lastLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "runtime:") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func (w *workerProc) dispatch(wr *workerRun, f *frame) {
	switch f.T {
	case frReport:
		wr.run.addReport(f.V)
	case frLog:
		wr.run.addLog(LogEntry{Level: f.Lvl, Args: f.Args, Timestamp: time.Unix(0, f.TS)})
	case frDone:
		o := &outcome{status: f.St, err: f.Err}
		if f.St == StatusSuccess {
			o.value = f.V
		}
		w.mu.Lock()
		w.cur = nil
		w.mu.Unlock()
		if k := wr.killed.Load(); k != nil {
			o = k
		}
		wr.run.settle(o)
		wr.release()
		w.runs++
		if f.St == StatusMemory || wr.killed.Load() != nil {
			// The worker may hold a large heap or a runaway goroutine: retire it.
			w.stop()
			return
		}
		w.pool.put(w)
	}
}

// start runs p on a pooled worker; it returns at once.
func (p *workerPool) start(run *Run, pr *prepared) {
	// While it waits for a slot, a terminated run settles at once.
	run.setTerminator(run.settle)
	go func() {
		select {
		case p.slots <- struct{}{}:
		case <-run.done:
			return
		}
		release := sync.OnceFunc(func() { <-p.slots })
		if run.isSettled() {
			release()
			return
		}
		w, err := p.get()
		if err != nil {
			release()
			run.settle(&outcome{status: StatusError, err: &Error{Name: "WorkerUnavailable", Message: err.Error()}})
			return
		}
		c := pr.job.code
		wr := &workerRun{id: p.runID.Add(1), run: run, funcs: pr.funcs, memory: pr.memory, release: release}
		spec := &runSpec{Hash: c.hash, Code: c.code, Map: c.rawMap, Sources: c.sources, Exports: c.exports,
			Entry: pr.job.entry, Args: pr.job.args, Globals: pr.job.globals, Imports: pr.job.imports,
			Report: pr.job.report, MaxStack: pr.job.maxStack, Memory: pr.memory}
		w.tail.reset() // what the worker prints from now on is about this run
		w.mu.Lock()
		w.cur = wr
		w.mu.Unlock()
		if err := w.send(&frame{T: frRun, ID: wr.id, Run: spec}); err != nil {
			wr.killed.Store(&outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: "sandbox: sending run to worker: " + err.Error()}})
			w.kill()
			return
		}
		grace := p.opts.TerminateGrace
		stop := func(o *outcome) {
			// Arm the kill first: the writes below may block if the worker
			// stopped reading. The worker is done with the run once it is
			// no longer its current run (done frame or death).
			time.AfterFunc(grace, func() {
				if w.current(wr.id) == nil {
					return
				}
				if wr.killed.CompareAndSwap(nil, o) {
					w.kill()
				}
			})
			// The control pipe interrupts running JavaScript; the copy on
			// stdin wakes an engine waiting for bridged results (stdin may
			// be full of results the code never waited for, so do not wait).
			_ = w.sendCtrl(&frame{T: frTerm, ID: wr.id, Err: o.err})
			go func() { _ = w.send(&frame{T: frTerm, ID: wr.id, Err: o.err}) }()
		}
		run.setTerminator(stop)
		if run.isSettled() {
			// Terminated (by the waiting-room terminator) while starting.
			r, _ := run.Result()
			stop(&outcome{status: StatusTerminated, err: r.Error})
		}
	}()
}

// tailBuffer keeps the first 16 KiB written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The first lines of a Go fatal error name the cause; keep the head.
	if room := 16<<10 - len(t.buf); room > 0 {
		if len(p) > room {
			t.buf = append(t.buf, p[:room]...)
		} else {
			t.buf = append(t.buf, p...)
		}
	}
	return len(p), nil
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
