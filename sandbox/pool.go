package sandbox

import (
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
	maxFrame int // longest frame accepted from a worker
}

func newWorkerPool(opts *RunnerOptions, maxWorkers int) *workerPool {
	return &workerPool{opts: opts, live: map[*workerProc]struct{}{}, slots: make(chan struct{}, maxWorkers),
		maxFrame: maxFrameFromWorker(opts.MaxSourceBytes)}
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

// refill starts a worker in the background when none is idle or starting
// and fewer than PoolSize are alive, so that the next run does not wait
// for a process start. Workers return to the pool after their run, so the
// pool settles at PoolSize workers without churn. (Starting one whenever
// none was idle made a pool of one start a process per run and stop it
// when the busy one came back.) Runs beyond PoolSize at once start their
// workers as they come.
func (p *workerPool) refill() {
	p.mu.Lock()
	need := 0
	if len(p.idle)+p.spawning == 0 && len(p.live)+p.spawning < p.opts.PoolSize {
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
	pool   *workerPool
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *os.File     // the worker's frames; closed by exited
	out    *frameWriter // frames to stdin
	ctrl   *os.File     // control pipe (fd 3 in the worker); nil on Windows
	cmu    sync.Mutex   // serialises writes to ctrl
	tail   tailBuffer
	dead   atomic.Bool
	runs   int // guarded by being owned by one run at a time

	ready   chan struct{} // closed by the reader on the worker's ready frame
	gone    chan struct{} // closed by exited once the process is reaped
	waitErr error         // what reaping it said; read after gone is closed
	// otherWire is the protocol version of a worker that said it was ready
	// in another one than wireVersion, which was killed for it; 0: none.
	otherWire atomic.Uint64

	// oomKills is how many processes the kernel's out-of-memory killer had
	// killed when the worker started (oomKillCount); -1: not known.
	oomKills int64

	mu    sync.Mutex
	cur   *workerRun
	holds map[string]bool // bundles the worker has been sent or has compiled
}

// Phases of a run on a worker.
const (
	phaseStarting int32 = iota
	phaseCompiling
	phaseCompileKilled // terminated while compiling: the worker is being killed
	phaseRunning
)

type workerRun struct {
	id      uint64
	run     *Run
	funcs   []*funcRef
	memory  int64
	killed  atomic.Pointer[outcome]
	release func() // frees the run's slot; safe to call more than once
	phase   atomic.Int32

	compiled chan *frame   // the compiled frame, while compiling
	cache    *compileCache // where a compile's outcome goes
	key      string

	// What the worker has sent for this run, checked against the limits
	// the engine keeps (a worker that exceeds them is not trusted).
	mu           sync.Mutex
	spec         *runSpec    // the run frame, resent with bundle on need
	bundle       *bundleSpec // the bundle for a resend
	needs        int
	pendingCalls int
	pendingBytes int64
	reports      int
	logs         int
	outBytes     int64
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
	if p.opts.SpinWait > 0 {
		cmd.Env = append(cmd.Env, spinEnv+"="+p.opts.SpinWait.String())
	}
	cmd.SysProcAttr = workerSysProcAttr()
	// A process the worker started may keep its stderr open after it is
	// gone; reaping it must not wait for that process.
	cmd.WaitDelay = time.Second
	w := &workerProc{pool: p, cmd: cmd, holds: map[string]bool{}, ready: make(chan struct{}), gone: make(chan struct{}),
		oomKills: oomKillCount()}
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
	// The host's end of stdout is an *os.File of its own (StdoutPipe
	// gives an io.ReadCloser), so that its descriptor can be polled (see
	// newSpinReader); exited closes it.
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		_ = stdin.Close()
		return nil, err
	}
	cmd.Stdout = stdoutW
	err = cmd.Start()
	_ = stdoutW.Close()
	if ctrlR != nil {
		_ = ctrlR.Close()
	}
	if err != nil {
		_ = stdout.Close()
		if w.ctrl != nil {
			_ = w.ctrl.Close()
		}
		return nil, fmt.Errorf("sandbox: starting worker %q: %w", argv[0], err)
	}
	w.stdout = stdout
	w.stdin = stdin
	w.out = &frameWriter{w: stdin}
	p.mu.Lock()
	p.live[w] = struct{}{}
	p.mu.Unlock()
	go w.readLoop(newFrameReader(newSpinReader(stdout, p.opts.SpinWait, w.running), p.maxFrame, maxTransferBytes))
	if err := w.awaitReady(argv[0]); err != nil {
		return nil, err
	}
	p.opts.Logger.Debug("sandbox: worker started", "pid", cmd.Process.Pid)
	return w, nil
}

// awaitReady waits for the ready frame of a worker just started. A worker
// that exits first fails with WorkerCrashed; one that has not sent it
// within RunnerOptions.WorkerStartTimeout is killed and fails with
// WorkerUnavailable. Either way exited reaps the process: the host's end
// of its stdout is closed here too, so the reader ends even when a process
// the worker started holds the other end.
func (w *workerProc) awaitReady(name string) error {
	d := w.pool.opts.WorkerStartTimeout
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.ready:
		return nil
	case <-w.gone:
		select {
		case <-w.ready:
			// It was ready before it exited (the reader closes ready
			// first): the run that gets it sees it dead and goes on.
			return nil
		default:
		}
		if v := w.otherWire.Load(); v != 0 {
			return &Error{Name: "WorkerUnavailable", Message: fmt.Sprintf(
				"sandbox worker %q speaks version %d of the worker protocol, and this host version %d: it is a worker binary of another toolrun release (build the worker from the same module version as the host); it was killed",
				name, v-1, wireVersion)}
		}
		msg := fmt.Sprintf("sandbox worker %q exited before it was ready", name)
		if w.waitErr != nil {
			msg += ": " + w.waitErr.Error()
		}
		if l := lastLine(w.tail.String()); l != "" {
			msg += " (" + l + ")"
		}
		return &Error{Name: "WorkerCrashed", Message: msg}
	case <-t.C:
	}
	pid := w.cmd.Process.Pid
	w.pool.opts.Logger.Warn("sandbox: worker did not say it was ready in time; killing it", "pid", pid, "timeout", d)
	w.kill()
	return &Error{Name: "WorkerUnavailable", Message: fmt.Sprintf(
		"sandbox worker %q (pid %d) started but did not say it was ready within %s (RunnerOptions.WorkerStartTimeout); it was killed", name, pid, d)}
}

// markReady records the worker's ready frame; false when it had sent one
// already. Only the goroutine reading the worker's frames calls it.
func (w *workerProc) markReady() bool {
	select {
	case <-w.ready:
		return false
	default:
		close(w.ready)
		return true
	}
}

func (w *workerProc) send(f *frame) error { return w.out.send(f) }

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
			// Lingering, or gone with a wrapper's child keeping its
			// stdout open: either way the pipes close here.
			w.kill()
		}
	}()
}

// kill kills the worker's process and closes the pipes of its frames,
// both ways, so that the goroutine reading them ends and reaps it at once,
// and a write blocked on a full pipe returns: a wrapper's child (a jail, a
// shell) that keeps the pipes open would otherwise hold the worker, its
// run's slot and those goroutines until the child ends too. Reaping waits
// for its stderr no longer than cmd.WaitDelay.
func (w *workerProc) kill() {
	_ = w.cmd.Process.Kill()
	_ = w.stdout.Close()
	_ = w.stdin.Close()
}

// running reports whether a run is executing on the worker: its frames
// (bridged calls, reports, the result) are what the host expects next.
func (w *workerProc) running() bool {
	w.mu.Lock()
	wr := w.cur
	w.mu.Unlock()
	return wr != nil && wr.phase.Load() == phaseRunning
}

func (w *workerProc) current(id uint64) *workerRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur != nil && w.cur.id == id {
		return w.cur
	}
	return nil
}

func (w *workerProc) holdsBundle(hash string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holds[hash]
}

func (w *workerProc) setHolds(hash string, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ok && len(w.holds) >= 1024 {
		clear(w.holds) // the worker's own cache is smaller; need frames fill the gaps
	}
	if ok {
		w.holds[hash] = true
	} else {
		delete(w.holds, hash)
	}
}

// violation ends the worker's current run with a protocol error and kills
// the worker: it sent something an honest worker never sends.
func (w *workerProc) violation(msg string) {
	w.mu.Lock()
	wr := w.cur
	w.mu.Unlock()
	if wr != nil {
		wr.killed.CompareAndSwap(nil, &outcome{status: StatusError, err: &Error{Name: "WorkerProtocolError", Message: "sandbox: the worker broke the protocol: " + msg}})
	}
	w.pool.opts.Logger.Warn("sandbox: worker broke the protocol; killing it", "err", msg)
	w.kill()
}

// handoffDelay is how long a bridged call may run on the goroutine reading
// the worker's frames before another goroutine takes over the reading
// (checked every handoffDelay, so it happens within twice that).
const handoffDelay = time.Millisecond

// readLoop reads the worker's frames. One goroutine reads at a time. A
// bridged call that arrives alone is served by the reader itself, so its
// result goes back without a goroutine hand-off; if it runs longer than
// handoffDelay (1–2 ms), a new goroutine takes over reading, so calls
// still run concurrently (a call waiting for another call is served). Calls that
// arrive together (a batch the code made in one turn) each get a
// goroutine. Results are queued and written together before the reader
// waits for more. A frame over its limit or malformed ends the worker.
func (w *workerProc) readLoop(fr *frameReader) {
	for {
		if !fr.buffered() {
			_ = w.out.flush() // results queued while serving, before waiting
		}
		f, err := fr.next()
		if err != nil {
			if errors.Is(err, errFrameTooLarge) || errors.Is(err, errFrameBudget) || errors.Is(err, errBadFrame) {
				w.violation(err.Error())
			}
			break
		}
		if f.T == frReady {
			if f.ID != wireVersion {
				// A worker binary of another toolrun: what it would make
				// of the frames that follow is anyone's guess.
				w.otherWire.Store(f.ID + 1)
				w.kill()
				break
			}
			if !w.markReady() {
				w.violation("a second ready frame")
				break
			}
			continue
		}
		wr := w.current(f.ID)
		if wr == nil {
			continue
		}
		if f.T == frCall {
			if msg := wr.admitCall(f); msg != "" {
				w.violation(msg)
				break
			}
			if fr.buffered() {
				go w.serveCall(wr, f, false)
				continue
			}
			if !w.serveInline(fr, wr, f) {
				return
			}
			continue
		}
		if msg := w.dispatch(wr, f); msg != "" {
			w.violation(msg)
			break
		}
	}
	w.exited()
}

// admitCall counts a bridged call against the run's limits; it returns
// what was exceeded, or "".
func (wr *workerRun) admitCall(f *frame) string {
	cost := valuesCost(f.Args)
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.phase.Load() != phaseRunning {
		return "a host call outside a run"
	}
	if wr.pendingCalls >= maxPendingCalls || wr.pendingBytes+cost > maxPendingCallBytes || cost > maxTransferBytes {
		return "too many or too large pending host calls"
	}
	wr.pendingCalls++
	wr.pendingBytes += cost
	return ""
}

// serveInline serves a call on the reading goroutine; when the call runs
// longer than handoffDelay another goroutine takes over reading. It
// reports whether this goroutine still holds the reading role.
func (w *workerProc) serveInline(fr *frameReader, wr *workerRun, f *frame) bool {
	s := &inlineServe{w: w, fr: fr, since: time.Now()}
	inline.add(s)
	w.serveCall(wr, f, true)
	inline.remove(s)
	if s.handed.CompareAndSwap(false, true) {
		return true
	}
	_ = w.out.flush()
	return false
}

// inlineServe is a bridged call being served on a reading goroutine.
type inlineServe struct {
	w      *workerProc
	fr     *frameReader
	since  time.Time
	handed atomic.Bool // the reading role has passed to another goroutine
}

// inlineServes watches the calls served on reading goroutines and hands
// reading over to a new goroutine for those that run longer than
// handoffDelay. One watcher goroutine ticks while there are such calls
// (and a while after), so a call costs two map operations instead of a
// timer, whose arming woke the runtime's poller on every call. It is safe
// for concurrent use.
type inlineServes struct {
	mu       sync.Mutex
	set      map[*inlineServe]struct{}
	watching bool
}

var inline = inlineServes{set: map[*inlineServe]struct{}{}}

func (is *inlineServes) add(s *inlineServe) {
	is.mu.Lock()
	is.set[s] = struct{}{}
	start := !is.watching
	is.watching = true
	is.mu.Unlock()
	if start {
		go is.watch()
	}
}

func (is *inlineServes) remove(s *inlineServe) {
	is.mu.Lock()
	delete(is.set, s)
	is.mu.Unlock()
}

// watch ticks every handoffDelay until nothing was served inline for 100
// ticks.
func (is *inlineServes) watch() {
	idle := 0
	for {
		time.Sleep(handoffDelay)
		now := time.Now()
		is.mu.Lock()
		if len(is.set) == 0 {
			if idle++; idle >= 100 {
				is.watching = false
				is.mu.Unlock()
				return
			}
		} else {
			idle = 0
		}
		var long []*inlineServe
		for s := range is.set {
			if now.Sub(s.since) >= handoffDelay {
				long = append(long, s)
				delete(is.set, s)
			}
		}
		is.mu.Unlock()
		for _, s := range long {
			if s.handed.CompareAndSwap(false, true) {
				go s.w.readLoop(s.fr)
			}
		}
	}
}

// serveCall runs a bridged host function and sends its result (only
// queues it when queueOnly: the reader flushes).
func (w *workerProc) serveCall(wr *workerRun, f *frame, queueOnly bool) {
	var fn HostFunc
	if f.Fn >= 0 && f.Fn < len(wr.funcs) {
		fn = wr.funcs[f.Fn].fn
	}
	cost := valuesCost(f.Args)
	callHost(wr.run, fn, f.Args, func(v any, herr *Error) {
		wr.mu.Lock()
		wr.pendingCalls--
		wr.pendingBytes -= cost
		wr.mu.Unlock()
		if w.current(wr.id) == nil {
			return
		}
		ret := &frame{T: frRet, ID: wr.id, C: f.C, Err: herr, V: v}
		if queueOnly {
			w.out.queue(ret)
		} else {
			_ = w.send(ret)
		}
	})
}

// exited handles the end of the worker process.
func (w *workerProc) exited() {
	waitErr := w.cmd.Wait()
	_ = w.stdout.Close()
	w.dead.Store(true)
	if w.ctrl != nil {
		_ = w.ctrl.Close()
	}
	w.pool.mu.Lock()
	delete(w.pool.live, w)
	w.pool.mu.Unlock()
	w.waitErr = waitErr
	close(w.gone)
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
	compiling := wr.phase.Load() == phaseCompiling
	// A SIGKILL not sent by the runner is the out-of-memory killer's,
	// unless the kernel says it has killed nothing since the worker started.
	oomKilled := isKilled(waitErr) && !w.notOOMKilled()
	switch {
	case looksLikeMemoryFailure(tail) || oomKilled:
		e := memoryError(wr.memory)
		if compiling {
			e.Message += " while compiling"
		}
		wr.run.settle(&outcome{status: StatusMemory, err: e})
	case isKilled(waitErr):
		// Killed from outside, and not for memory: the run is not to blame.
		during := "running"
		if compiling {
			during = "compiling"
		}
		msg := fmt.Sprintf("sandbox worker was killed (SIGKILL) while %s, by a process other than the runner; "+
			"the system's out-of-memory killer has killed no process since the worker started", during)
		wr.run.settle(&outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: msg}})
	case compiling && looksLikeStackOverflow(tail):
		// Deterministic for the source: cache it like any link error.
		lerr := &Error{Name: "RangeError", Message: "Maximum call stack size exceeded while compiling: the source is nested too deeply"}
		if wr.cache != nil {
			wr.cache.put(wr.key, nil, lerr)
		}
		e := *lerr
		wr.run.settle(&outcome{status: StatusLinkError, err: &e})
	case looksLikeStackOverflow(tail):
		wr.run.settle(&outcome{status: StatusError, err: &Error{Name: "RangeError", Message: "Maximum call stack size exceeded"}})
	default:
		msg := "sandbox worker exited unexpectedly"
		if compiling {
			msg += " while compiling"
		}
		if waitErr != nil {
			msg += ": " + waitErr.Error()
		}
		if l := lastLine(tail); l != "" {
			msg += " (" + l + ")"
		}
		wr.run.settle(&outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: msg}})
	}
}

func looksLikeStackOverflow(tail string) bool {
	return strings.Contains(tail, "stack exceeds") || strings.Contains(tail, "fatal error: stack overflow")
}

// looksLikeMemoryFailure reports whether a worker's dying words point at
// memory exhaustion. A Go runtime that fails to map memory under
// RLIMIT_DATA says "out of memory" or "cannot allocate memory" when the
// failing mapping is a heap allocation, but may instead fault (SIGSEGV) in
// its allocator or collector when it is a small metadata mapping; both are
// reported as StatusMemory. So is a fault at a pc outside Go code ("unknown
// pc"): the worker runs no foreign code, and such faults were seen only
// when the runtime could not map memory. (A race-enabled worker's
// ThreadSanitizer says "failed to allocate ... (errno: 12)".)
func looksLikeMemoryFailure(stderr string) bool {
	if strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.Contains(stderr, "failed to allocate") || strings.Contains(stderr, "errno: 12") ||
		strings.Contains(stderr, "unknown pc") {
		return true
	}
	if !strings.Contains(stderr, "SIGSEGV") {
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

// oomKillCount returns how many processes the kernel's out-of-memory
// killer has killed since the machine booted, or -1 when it cannot say:
// oomKills, or the stand-in a test stored in oomKillStandIn.
func oomKillCount() int64 {
	if f := oomKillStandIn.Load(); f != nil {
		return (*f)()
	}
	return oomKills()
}

var oomKillStandIn atomic.Pointer[func() int64]

// notOOMKilled reports whether the kernel says its out-of-memory killer
// has killed no process since w started, so it did not kill w.
func (w *workerProc) notOOMKilled() bool {
	if w.oomKills < 0 {
		return false
	}
	n := oomKillCount()
	return n >= 0 && n == w.oomKills
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
			return strings.TrimSpace(cutText(l, 512))
		}
	}
	return ""
}

var logLevels = map[string]bool{"log": true, "info": true, "warn": true, "error": true, "debug": true, "trace": true}

var statuses = map[Status]bool{StatusSuccess: true, StatusError: true, StatusLinkError: true, StatusMemory: true, StatusTerminated: true}

// dispatch handles a frame of the current run other than a call. It
// returns a description of what was wrong when the frame breaks the
// protocol or the run's limits, or "".
func (w *workerProc) dispatch(wr *workerRun, f *frame) string {
	phase := wr.phase.Load()
	switch f.T {
	case frCompiled:
		if phase != phaseCompiling {
			return "a compiled frame outside a compile"
		}
		select {
		case wr.compiled <- f:
		default:
			return "a second compiled frame"
		}
	case frNeed:
		wr.mu.Lock()
		wr.needs++
		spec, b, needs := wr.spec, wr.bundle, wr.needs
		wr.mu.Unlock()
		if phase != phaseRunning || spec == nil || needs > 1 {
			return "an unexpected need frame"
		}
		again := *spec
		again.Bundle = b
		w.setHolds(spec.Hash, true)
		go func() { _ = w.send(&frame{T: frRun, ID: wr.id, Run: &again}) }()
	case frReport:
		cost := valueCost(f.V)
		wr.mu.Lock()
		wr.reports++
		wr.outBytes += cost
		bad := phase != phaseRunning || wr.reports > maxReports || wr.outBytes > maxOutputBytes
		wr.mu.Unlock()
		if bad {
			return "reports over the run's limits"
		}
		wr.run.addReport(f.V)
	case frLog:
		cost := valuesCost(f.Args)
		wr.mu.Lock()
		wr.logs++
		wr.outBytes += cost
		bad := phase != phaseRunning || wr.logs > maxLogs || wr.outBytes > maxOutputBytes || !logLevels[f.Lvl]
		wr.mu.Unlock()
		if bad {
			return "logs over the run's limits"
		}
		wr.run.addLog(LogEntry{Level: f.Lvl, Args: f.Args, Timestamp: time.Unix(0, f.TS)})
	case frDone:
		if phase != phaseRunning || !statuses[f.St] {
			return "an unexpected done frame"
		}
		o := &outcome{status: f.St, err: f.Err}
		if f.St == StatusSuccess {
			o.value = f.V
		} else if o.err == nil {
			o.err = &Error{Name: "Error", Message: "sandbox: the run failed without an error"}
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
			return ""
		}
		w.pool.put(w)
	default:
		return fmt.Sprintf("a frame of type %d from the worker", f.T)
	}
	return ""
}

// trySlot takes a slot if one is free at once.
func (p *workerPool) trySlot() bool {
	select {
	case p.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// testHookGotWorker, when set by a test, is called with each worker begin
// gets, before the run is made the worker's.
var testHookGotWorker func(*workerProc)

// begin waits for a slot (unless haveSlot) and a worker for run and makes
// the run the worker's current one. ok is false when the run settled
// meanwhile or no worker could be had (the run is then settled).
func (p *workerPool) begin(run *Run, pr *prepared, cache *compileCache, haveSlot bool) (*workerProc, *workerRun, bool) {
	if !haveSlot {
		select {
		case p.slots <- struct{}{}:
		case <-run.done:
			return nil, nil, false
		}
	}
	release := sync.OnceFunc(func() { <-p.slots })
	if run.isSettled() {
		release()
		return nil, nil, false
	}
	wr := &workerRun{id: p.runID.Add(1), run: run, funcs: pr.funcs, memory: pr.memory, release: release, cache: cache, key: pr.key}
	for tries := 0; ; tries++ {
		w, err := p.get()
		if err != nil {
			release()
			var e *Error // a worker that started but failed to get ready says how
			if !errors.As(err, &e) {
				e = &Error{Name: "WorkerUnavailable", Message: err.Error()}
			}
			run.settle(&outcome{status: StatusError, err: e})
			return nil, nil, false
		}
		if testHookGotWorker != nil {
			testHookGotWorker(w)
		}
		w.tail.reset() // what the worker prints from now on is about this run
		// A worker can die after get saw it alive: exited sets dead before
		// it looks for the worker's run, so either it finds this one, or
		// the run sees dead here and goes to another worker. Without this
		// the run was a dead worker's, which nothing would settle.
		w.mu.Lock()
		w.cur = wr
		dead := w.dead.Load()
		if dead {
			w.cur = nil
		}
		w.mu.Unlock()
		if !dead {
			return w, wr, true
		}
		if tries == 2 {
			release()
			msg := "sandbox worker exited before it could take the run"
			if l := lastLine(w.tail.String()); l != "" {
				msg += " (" + l + ")"
			}
			run.settle(&outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: msg}})
			return nil, nil, false
		}
	}
}

// finish ends w's part in wr when w is healthy and idle again: the slot is
// freed and w goes back to the pool.
func (w *workerProc) finish(wr *workerRun) {
	w.mu.Lock()
	if w.cur == wr {
		w.cur = nil
	}
	w.mu.Unlock()
	wr.release()
	w.pool.put(w)
}

// compile has w compile pr's source for wr, under the run's memory limit,
// caching the outcome. It returns true when the bundle is ready and bound
// to pr; otherwise the run has settled (link error, termination, the
// worker's death) and w is no longer the run's.
func (w *workerProc) compile(wr *workerRun, pr *prepared, cache *compileCache) bool {
	run := wr.run
	wr.compiled = make(chan *frame, 1)
	wr.phase.Store(phaseCompiling)
	// esbuild cannot be interrupted: terminating a compile kills the
	// worker (and exited settles the run). The phase decides between a
	// termination and the compile's end: whichever moves it first wins;
	// a termination that comes later settles the run before it starts.
	run.setTerminator(func(o *outcome) {
		if wr.phase.CompareAndSwap(phaseCompiling, phaseCompileKilled) {
			wr.killed.CompareAndSwap(nil, o)
			w.kill()
			return
		}
		run.settle(o)
	})
	if run.isSettled() {
		// Terminated before the compile was sent; the worker is clean.
		if wr.phase.CompareAndSwap(phaseCompiling, phaseStarting) {
			w.finish(wr)
		}
		return false
	}
	cache.builds.Add(1)
	if err := w.send(&frame{T: frCompile, ID: wr.id, Comp: pr.req.spec(pr.key, pr.memory)}); err != nil {
		wr.killed.CompareAndSwap(nil, &outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: "sandbox: sending source to worker: " + err.Error()}})
		w.kill()
		return false
	}
	var f *frame
	select {
	case f = <-wr.compiled:
	case <-run.done:
		return false // the worker is being killed; exited settles and cleans up
	}
	if !wr.phase.CompareAndSwap(phaseCompiling, phaseStarting) {
		return false // terminated meanwhile: as above
	}
	run.setTerminator(run.settle)
	if f.Err != nil {
		cache.put(pr.key, nil, f.Err)
		e := *f.Err
		w.finish(wr)
		run.settle(&outcome{status: StatusLinkError, err: &e})
		return false
	}
	if f.Bund == nil {
		w.violation("a compiled frame without a bundle")
		return false
	}
	c := compiledFromSpec(pr.key, f.Bund)
	cache.put(pr.key, c, nil)
	w.setHolds(pr.key, true)
	if lerr := pr.bind(c); lerr != nil {
		w.finish(wr)
		run.settle(&outcome{status: StatusLinkError, err: lerr})
		return false
	}
	return true
}

// compileOnly compiles pr's source on one of the pool's workers (used by
// in-process runners, whose runs execute in the host). It returns true
// when pr is ready to run; otherwise the run has settled.
func (p *workerPool) compileOnly(run *Run, pr *prepared, cache *compileCache) bool {
	w, wr, ok := p.begin(run, pr, cache, false)
	if !ok {
		return false
	}
	if !w.compile(wr, pr, cache) {
		return false
	}
	w.finish(wr)
	return true
}

// start runs pr on a pooled worker, compiling it there first when its
// bundle is not cached; it returns at once.
func (p *workerPool) start(run *Run, pr *prepared, cache *compileCache) {
	// While it waits for a slot, a terminated run settles at once.
	run.setTerminator(run.settle)
	// A slot free now is taken now, so runs started one after another get
	// free slots in that order.
	haveSlot := p.trySlot()
	go func() {
		w, wr, ok := p.begin(run, pr, cache, haveSlot)
		if !ok {
			return
		}
		if pr.job.code == nil && !w.compile(wr, pr, cache) {
			return
		}
		w.execute(wr, pr)
	}()
}

// execute sends the run to w and arranges for its termination.
func (w *workerProc) execute(wr *workerRun, pr *prepared) {
	run := wr.run
	c := pr.job.code
	spec := &runSpec{Hash: c.hash, Entry: pr.job.entry, Args: pr.job.args, Globals: pr.job.globals, Imports: pr.job.imports,
		Report: pr.job.report, MaxStack: pr.job.maxStack, Memory: pr.memory}
	b := c.spec()
	if !w.holdsBundle(c.hash) {
		spec.Bundle = b
	}
	wr.mu.Lock()
	wr.spec, wr.bundle = spec, b
	wr.mu.Unlock()
	// While the run frame is written, stopping the run settles it at once.
	// A worker that has stopped reading its stdin would hold that write,
	// and with it the run's slot and the process, for ever: a write still
	// going TerminateGrace after the stop kills the worker.
	grace := w.pool.opts.TerminateGrace
	var sending atomic.Bool
	run.setTerminator(func(o *outcome) {
		run.settle(o)
		time.AfterFunc(grace, func() {
			if sending.Load() && wr.killed.CompareAndSwap(nil, o) {
				w.kill()
			}
		})
	})
	if run.isSettled() {
		// Stopped before it began: the worker never sees it.
		w.finish(wr)
		return
	}
	wr.phase.Store(phaseRunning)
	sending.Store(true)
	err := w.send(&frame{T: frRun, ID: wr.id, Run: spec})
	sending.Store(false)
	if err != nil {
		wr.killed.CompareAndSwap(nil, &outcome{status: StatusError, err: &Error{Name: "WorkerCrashed", Message: "sandbox: sending run to worker: " + err.Error()}})
		w.kill()
		return
	}
	w.setHolds(c.hash, true)
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
