package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrun/toolrun/internal/safefmt"
)

// Status is how a run ended. It is a plain string value, safe for
// concurrent use.
type Status string

// The statuses of a [Result].
const (
	// StatusSuccess: the entry export was evaluated and its value returned.
	StatusSuccess Status = "success"
	// StatusError: the code threw (or returned a non-transferable value).
	StatusError Status = "error"
	// StatusLinkError: the code never ran: invalid options, a syntax or
	// TypeScript error, an unresolvable module or a missing export.
	StatusLinkError Status = "link_error"
	// StatusMemory: the run exceeded its memory limit.
	StatusMemory Status = "memory"
	// StatusTerminated: the run was stopped by Terminate, its timeout or its
	// context.
	StatusTerminated Status = "terminated"
)

// Languages accepted by [Options.Language].
const (
	LanguageTypeScript = "typescript"
	LanguageJavaScript = "javascript"
)

// Error describes why a run failed. Line and Column (1-based) and Filename
// point into the user's source when known; Message then starts with
// "Line <n> of <filename>: ". An Error is plain data: safe for concurrent
// reads, not for concurrent mutation.
type Error struct {
	Name      string `json:"name"`
	Message   string `json:"message"`
	Stack     string `json:"stack,omitempty"`
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
	Filename  string `json:"filename,omitempty"`
	Specifier string `json:"specifier,omitempty"`
}

// Error returns "Name: Message".
func (e *Error) Error() string { return e.Name + ": " + e.Message }

// ErrorName returns e.Name, so that a *Error returned by a [HostFunc] keeps
// its name inside the sandbox.
func (e *Error) ErrorName() string { return e.Name }

// LogEntry is one console.* call made by sandbox code. Level is the console
// method name ("log", "info", "warn", "error", "debug" or "trace"); Args are
// the arguments as transferable values (others as their string form). It is
// plain data: safe for concurrent reads, not for concurrent mutation.
type LogEntry struct {
	Level     string    `json:"level"`
	Args      []any     `json:"args"`
	Timestamp time.Time `json:"timestamp"`
}

// Result is the outcome of a run. Value is set when Status is
// [StatusSuccess]; Error otherwise. Reports and Logs hold what the code
// reported and logged until it ended. A Result is plain data: safe for
// concurrent reads, not for concurrent mutation (results returned by one
// Run share their slices).
type Result struct {
	Status   Status
	Value    any
	Error    *Error
	Reports  []any
	Logs     []LogEntry
	Duration time.Duration
}

// Execute selects the export to evaluate. It is plain data, read once by
// Start; do not mutate it concurrently with Start.
type Execute struct {
	// Fn is the export name; "" means "default".
	Fn string
	// Args are passed to Fn when it is a function. They must be
	// transferable; passing args to a non-function export is an error.
	Args []any
}

// Options configures one run. The zero value (and nil) runs the source as
// TypeScript and returns its default export. Options values are read by
// Start and not retained; Go values in them are copied into the sandbox.
// Do not mutate Options concurrently with Start; after Start returns they
// may be reused.
type Options struct {
	// Execute selects the export and its args; nil means the default export
	// with no args.
	Execute *Execute
	// Imports maps bare module specifiers ("fs") to namespaces the code can
	// import. Values are transferable values or [HostFunc]s, which become
	// async functions in the sandbox. Relative, absolute and URL specifiers
	// are invalid.
	Imports map[string]map[string]any
	// Globals are added to the sandbox's globalThis, like Imports values.
	Globals map[string]any
	// Modules maps relative specifiers ("./util.ts") to module sources the
	// code can import. Resolution tries the path, then the extensions
	// .ts, .tsx, .js, .mjs, .json and then /index with those extensions.
	Modules map[string]string
	// Language is "typescript" (the default when "") or "javascript".
	Language string
	// Filename names the entry source in errors; "" means "<runCode>".
	Filename string
	// MemoryLimitBytes caps the memory the run may use; 0 means the
	// Runner's default. Negative values are invalid; values over 1<<50
	// (1 PiB) are taken as 1<<50, no limit in practice. Enforced in worker
	// mode.
	MemoryLimitBytes int64
	// Report, when non-nil, defines a global report(value) function; each
	// reported value is passed to Report as it happens (one call at a time,
	// in order) and kept on the [Run]. Report must not block for long.
	Report func(value any)
	// Timeout ends the run with StatusTerminated after this wall-clock time;
	// 0 means the Runner's default (none unless configured). Negative is
	// invalid.
	Timeout time.Duration
	// MaxCallStackSize limits the JS call depth; 0 means 10000. Negative
	// values are invalid; values over math.MaxInt32 are taken as
	// math.MaxInt32, the most a worker can be sent, so that both modes
	// apply the same limit.
	MaxCallStackSize int
}

// Mode selects where runs execute. It is a plain value, safe for concurrent
// use.
type Mode int

const (
	// ModeWorker runs code in pooled child processes with hard memory and
	// time limits. It is the default.
	ModeWorker Mode = iota
	// ModeInProcess runs code in the host process: faster, but limits are
	// best effort (see the package doc). Use it only for trusted code.
	ModeInProcess
)

// WorkerEnv is the environment variable that turns any binary importing this
// package into a sandbox worker: when it is "1" at start-up the package's
// init serves the worker protocol on stdin/stdout and exits.
const WorkerEnv = "TOOLRUN_SANDBOX_WORKER"

// Defaults of [RunnerOptions] fields.
const (
	// DefaultMaxSourceBytes is the default of RunnerOptions.MaxSourceBytes:
	// 4 MiB of entry source and modules together.
	DefaultMaxSourceBytes = 4 << 20
	// DefaultCacheBytes is the default of RunnerOptions.CacheBytes: 64 MiB
	// of compiled bundles.
	DefaultCacheBytes = 64 << 20
	// DefaultWorkerStartTimeout is the default of
	// RunnerOptions.WorkerStartTimeout: 10 seconds (a worker starts in
	// about 10 ms on an idle machine).
	DefaultWorkerStartTimeout = 10 * time.Second
)

// RunnerOptions configures a [Runner]. The zero value (and nil) is worker
// mode with a pool of 2, a 256 MiB memory limit, no timeout, sources up to
// 4 MiB compiled in workers, a 64 MiB bundle cache and 10 seconds for a
// worker to start. New copies it; do not mutate it concurrently with New.
type RunnerOptions struct {
	// Mode is ModeWorker (the zero value) or ModeInProcess.
	Mode Mode
	// PoolSize is the number of idle warm workers kept; 0 means 2.
	PoolSize int
	// MaxWorkers bounds the runs executing at once in worker mode (each
	// needs its own process); further runs wait for a free worker (their
	// timeout, context and Terminate still apply while waiting). 0 means
	// 4 × runtime.NumCPU().
	MaxWorkers int
	// WorkerCommand is the command that starts a worker (program and args);
	// it runs with WorkerEnv=1 in its environment. nil means re-executing
	// the current binary (os.Executable).
	WorkerCommand []string
	// DefaultMemoryLimit applies to runs that set no MemoryLimitBytes;
	// 0 means 256 MiB.
	DefaultMemoryLimit int64
	// DefaultTimeout applies to runs that set no Timeout; 0 means none.
	DefaultTimeout time.Duration
	// TerminateGrace is how long a terminated run may take to stop before
	// its worker is killed; 0 means 300ms.
	TerminateGrace time.Duration
	// WorkerStartTimeout is how long a new worker process (compile-only
	// workers too) may take to say it is ready, counted from its start: a
	// worker that has not said so by then is killed, and a run waiting for
	// it ends with error "WorkerUnavailable" naming the timeout. The
	// worker's start-up includes the init functions of the binary it runs,
	// so a binary that takes long to start needs more, or a helper binary
	// (see WorkerCommand). 0 or negative means DefaultWorkerStartTimeout
	// (10 s).
	WorkerStartTimeout time.Duration
	// CacheSize is the number of compiled bundles kept; 0 means 256.
	CacheSize int
	// CacheBytes bounds the memory the compiled bundles kept may take, as
	// estimated from their texts (and, in ModeInProcess, the goja programs
	// made from them); a bundle estimated larger is not kept. 0 means
	// DefaultCacheBytes (64 MiB).
	CacheBytes int64
	// MaxSourceBytes caps the source text of a run: the entry source plus
	// every module's specifier and text. A run over it ends with
	// StatusLinkError, error "SourceTooLarge", without compiling. 0 means
	// DefaultMaxSourceBytes (4 MiB).
	MaxSourceBytes int
	// CompileInHost compiles sources with esbuild in the host process
	// instead of in a worker process. Use it only for trusted sources: a
	// deeply nested one overflows the compiler's stack, which kills the
	// host. It is implied in ModeInProcess on platforms without child
	// processes (js, wasip1).
	CompileInHost bool
	// Logger receives worker lifecycle events; nil discards them.
	Logger *slog.Logger
	// SpinWait is how long a side that expects an answer shortly polls
	// for it before it sleeps. In worker mode on Linux, the side of a
	// worker's pipes that expects a frame polls the pipe: the worker while
	// its run awaits results of bridged calls, the host while a run
	// executes on the worker. In-process, on every platform, Wait polls
	// for the run's settlement, and the goroutine that finished a run
	// polls for the next one to be started. An answer that comes within it
	// is taken without the wake-up of a sleeping thread, which on a
	// virtual machine can cost more than a trivial run; the price is up to
	// SpinWait of CPU per wait that outlasts it. Polling yields to other
	// goroutines, and a side whose polls keep running out (the CPUs are
	// busy with other work, or runs are far apart) stops polling for a
	// while. 0 means DefaultSpinWait (50µs); a negative value turns
	// polling off.
	SpinWait time.Duration
}

// Runner starts sandboxed runs. It is safe for concurrent use.
type Runner struct {
	opts      RunnerOptions
	cache     *compileCache
	keys      keyMemo     // the keys of recent requests
	pool      *workerPool // workers running code (ModeWorker)
	compilers *workerPool // workers only compiling (ModeInProcess)
	closed    atomic.Bool
	waitSpin  sharedSpinRule // judges Wait's polls for in-process runs
}

// New returns a Runner configured by opts (nil means defaults). Worker
// processes are started lazily.
func New(opts *RunnerOptions) *Runner {
	var o RunnerOptions
	if opts != nil {
		o = *opts
	}
	if o.PoolSize <= 0 {
		o.PoolSize = 2
	}
	if o.MaxWorkers <= 0 {
		o.MaxWorkers = 4 * runtime.NumCPU()
	}
	if o.DefaultMemoryLimit <= 0 {
		o.DefaultMemoryLimit = 256 << 20
	}
	if o.TerminateGrace <= 0 {
		o.TerminateGrace = 300 * time.Millisecond
	}
	if o.WorkerStartTimeout <= 0 {
		o.WorkerStartTimeout = DefaultWorkerStartTimeout
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 256
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MaxSourceBytes <= 0 {
		o.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if o.Mode == ModeInProcess && !childProcesses {
		o.CompileInHost = true
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SpinWait == 0 {
		o.SpinWait = DefaultSpinWait
	}
	r := &Runner{opts: o, cache: newCompileCache(o.CacheSize, o.CacheBytes, o.Mode == ModeInProcess)}
	if o.Mode == ModeWorker {
		r.pool = newWorkerPool(&r.opts, o.MaxWorkers)
	} else if !o.CompileInHost {
		co := r.opts
		co.PoolSize = 1
		r.compilers = newWorkerPool(&co, runtime.NumCPU())
	}
	return r
}

var (
	defaultOnce   sync.Once
	defaultRunner *Runner
)

// Default returns a shared worker-mode Runner with default options,
// created on first use. It is never closed.
func Default() *Runner {
	defaultOnce.Do(func() { defaultRunner = New(nil) })
	return defaultRunner
}

// Close stops the Runner's idle workers and makes later Starts fail with a
// "RunnerClosed" error result. Runs in progress finish normally.
func (r *Runner) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if r.pool != nil {
		r.pool.close()
	}
	if r.compilers != nil {
		r.compilers.close()
	}
	return nil
}

// childProcesses is false on platforms where os/exec cannot start
// processes.
var childProcesses = runtime.GOOS != "js" && runtime.GOOS != "wasip1"

// Run is a started run. Its methods are safe for concurrent use.
type Run struct {
	done     chan struct{}
	mu       sync.Mutex
	settled  bool
	result   Result
	reports  []any
	logs     []LogEntry
	start    time.Time
	onReport func(any)
	repMu    sync.Mutex

	term        func(*outcome)
	pendingTerm *outcome

	ctx      context.Context // for host calls, made on first use; cancelled at settlement
	cancel   context.CancelFunc
	onSettle []func() // stop the run's timer and context watch

	// spin is how long Wait polls for settlement before it blocks, and
	// spinRule judges those polls (in-process runs only).
	spin     time.Duration
	spinRule *sharedSpinRule
}

func newRun(onReport func(any)) *Run {
	return &Run{done: make(chan struct{}), start: time.Now(), onReport: onReport}
}

// hostContext returns the context host functions of the run get; it ends
// when the run settles.
func (r *Run) hostContext() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(context.Background())
		if r.settled {
			r.cancel()
		}
	}
	return r.ctx
}

// Done returns a channel closed when the run has settled.
func (r *Run) Done() <-chan struct{} { return r.done }

// Running reports whether the run has not settled yet.
func (r *Run) Running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Wait waits for the run to settle and returns its result. The error is
// non-nil only when ctx ends first (the run keeps going; use Terminate).
func (r *Run) Wait(ctx context.Context) (Result, error) {
	if r.spin > 0 {
		r.pollSettled(ctx)
	}
	select {
	case <-r.done:
		return r.result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// pollSettled polls for the run's settlement, yielding between polls, for
// up to r.spin or until ctx is done: a run that settles meanwhile does not
// have to wake a parked Wait.
func (r *Run) pollSettled(ctx context.Context) {
	if !r.spinRule.poll() {
		return
	}
	done := ctx.Done()
	start := time.Now()
	for {
		select {
		case <-r.done:
			r.spinRule.count(true)
			return
		case <-done:
			return
		default:
		}
		if time.Since(start) >= r.spin {
			r.spinRule.count(false)
			return
		}
		runtime.Gosched()
	}
}

// Result returns the result of a settled run; ok is false while running.
func (r *Run) Result() (res Result, ok bool) {
	select {
	case <-r.done:
		return r.result, true
	default:
		return Result{}, false
	}
}

// Reports returns a copy of the values reported so far.
func (r *Run) Reports() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.reports...)
}

// Terminate stops the run: it settles with StatusTerminated and an error
// named "Terminated" whose message is reason ("Code execution terminated"
// when empty). Calling it after settlement does nothing.
func (r *Run) Terminate(reason string) {
	if reason == "" {
		reason = "Code execution terminated"
	}
	r.terminate(&outcome{status: StatusTerminated, err: &Error{Name: "Terminated", Message: reason}})
}

func (r *Run) terminate(o *outcome) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return
	}
	t := r.term
	if t == nil {
		if r.pendingTerm == nil {
			r.pendingTerm = o
		}
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	t(o)
}

// setTerminator installs the executor's stop function; a Terminate that
// came earlier is applied now.
func (r *Run) setTerminator(t func(*outcome)) {
	r.mu.Lock()
	r.term = t
	p := r.pendingTerm
	settled := r.settled
	r.mu.Unlock()
	if p != nil && !settled {
		t(p)
	}
}

func (r *Run) isSettled() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.settled
}

func (r *Run) addReport(v any) {
	r.repMu.Lock()
	defer r.repMu.Unlock()
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return
	}
	r.reports = append(r.reports, v)
	r.mu.Unlock()
	if r.onReport != nil {
		func() {
			defer func() { _ = recover() }()
			r.onReport(v)
		}()
	}
}

func (r *Run) addLog(l LogEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.settled {
		r.logs = append(r.logs, l)
	}
}

// settle records the outcome; only the first call counts.
func (r *Run) settle(o *outcome) {
	r.mu.Lock()
	if r.settled {
		r.mu.Unlock()
		return
	}
	r.settled = true
	o = cappedOutcome(o)
	res := Result{Status: o.status, Error: o.err, Duration: time.Since(r.start)}
	if o.status == StatusSuccess {
		res.Value = o.value
	}
	res.Reports = append([]any(nil), r.reports...)
	res.Logs = append([]LogEntry(nil), r.logs...)
	if res.Reports == nil {
		res.Reports = []any{}
	}
	if res.Logs == nil {
		res.Logs = []LogEntry{}
	}
	r.result = res
	cancel, onSettle := r.cancel, r.onSettle
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, f := range onSettle {
		f()
	}
	close(r.done)
}

// whenSettled arranges for f to be called when the run settles (at once
// when it has).
func (r *Run) whenSettled(f func()) {
	r.mu.Lock()
	if !r.settled {
		r.onSettle = append(r.onSettle, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f()
}

// cappedOutcome returns o with its error's texts cut to their limits
// (on a copy: link errors are shared through the cache).
func cappedOutcome(o *outcome) *outcome {
	if o.err == nil {
		return o
	}
	e := *o.err
	return &outcome{status: o.status, value: o.value, err: capError(&e)}
}

func settledRun(o *outcome) *Run {
	r := newRun(nil)
	r.settle(o)
	return r
}

func optionsError(format string, args ...any) *Error {
	return &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf(format, args...)}
}

const maxMemoryLimit = 1 << 50

// prepared is a validated run. job.code is nil until the bundle is known
// (from the cache, or once compiled).
type prepared struct {
	job     *engineJob
	funcs   []*funcRef
	memory  int64
	timeout time.Duration
	req     *compileRequest
	key     string
	fname   string
}

// bind sets the run's bundle, checking that it has the entry export.
func (p *prepared) bind(c *compiled) *Error {
	for _, n := range c.exports {
		if n == p.job.entry {
			p.job.code = c
			return nil
		}
	}
	return capError(&Error{Name: "SyntaxError", Message: fmt.Sprintf("The requested module '%s' does not provide an export named '%s'", p.fname, p.job.entry), Filename: p.fname})
}

func (r *Runner) prepare(source string, opts *Options) (*prepared, *Error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch o.Language {
	case "":
		o.Language = LanguageTypeScript
	case LanguageTypeScript, LanguageJavaScript:
	default:
		return nil, optionsError("language must be %q or %q, got %q", LanguageTypeScript, LanguageJavaScript, o.Language)
	}
	if o.Filename == "" {
		o.Filename = "<runCode>"
	}
	if o.MemoryLimitBytes < 0 {
		return nil, optionsError("memoryLimitBytes must be a positive finite number, got %d", o.MemoryLimitBytes)
	}
	if o.MemoryLimitBytes == 0 {
		o.MemoryLimitBytes = r.opts.DefaultMemoryLimit
	}
	if o.MemoryLimitBytes > maxMemoryLimit {
		o.MemoryLimitBytes = maxMemoryLimit // "no limit" in practice; keeps the arithmetic safe
	}
	if o.Timeout < 0 {
		return nil, optionsError("timeout must not be negative")
	}
	if o.Timeout == 0 {
		o.Timeout = r.opts.DefaultTimeout
	}
	if o.MaxCallStackSize < 0 {
		return nil, optionsError("maxCallStackSize must not be negative")
	}
	if o.MaxCallStackSize > math.MaxInt32 {
		o.MaxCallStackSize = math.MaxInt32 // the most the worker protocol carries
	}
	ex := Execute{Fn: "default"}
	if o.Execute != nil {
		ex = *o.Execute
		if ex.Fn == "" {
			ex.Fn = "default"
		}
	}
	args := make([]any, len(ex.Args))
	for i, a := range ex.Args {
		v, err := normalize(a, nil)
		if err != nil {
			return nil, optionsError("execute.args[%d]: %v", i, err)
		}
		args[i] = v
	}
	var funcs []*funcRef
	var imports map[string]map[string]any
	var members map[string][]string
	if len(o.Imports) > 0 {
		imports = make(map[string]map[string]any, len(o.Imports))
		members = make(map[string][]string, len(o.Imports))
	}
	for _, spec := range sortedKeys(o.Imports) {
		if !isBareSpecifier(spec) {
			return nil, &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf("imports specifier %q must be a bare specifier (not relative, absolute or a URL)", spec), Specifier: spec}
		}
		ns := o.Imports[spec]
		out := make(map[string]any, len(ns))
		for _, k := range sortedKeys(ns) {
			v, err := normalize(ns[k], &funcs)
			if err != nil {
				return nil, &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf("imports[%q].%s: %v", spec, k, err), Specifier: spec}
			}
			out[k] = v
		}
		imports[spec] = out
		members[spec] = sortedKeys(ns)
	}
	var globals map[string]any
	if len(o.Globals) > 0 {
		globals = make(map[string]any, len(o.Globals))
	}
	for _, k := range sortedKeys(o.Globals) {
		if k == "" {
			return nil, optionsError("globals: empty name")
		}
		v, err := normalize(o.Globals[k], &funcs)
		if err != nil {
			return nil, optionsError("globals.%s: %v", k, err)
		}
		globals[k] = v
	}
	for k := range o.Modules {
		if _, ok := normModuleKey(k); !ok {
			return nil, &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf("modules key %q must be a relative specifier inside the module root", k), Specifier: k}
		}
	}
	req := &compileRequest{source: source, filename: o.Filename, lang: o.Language, modules: o.Modules, imports: members}
	if n := req.size(); n > r.opts.MaxSourceBytes {
		return nil, &Error{Name: "SourceTooLarge", Message: fmt.Sprintf("Source too large: the entry source and modules hold %d bytes, over the limit of %d bytes (RunnerOptions.MaxSourceBytes)", n, r.opts.MaxSourceBytes)}
	}
	job := &engineJob{entry: ex.Fn, args: args, globals: globals, imports: imports, report: o.Report != nil, maxStack: o.MaxCallStackSize}
	p := &prepared{job: job, funcs: funcs, memory: o.MemoryLimitBytes, timeout: o.Timeout, req: req, key: r.keys.key(req), fname: o.Filename}
	var c *compiled
	if ent, ok := r.cache.get(p.key); ok {
		if ent.err != nil {
			e := *ent.err
			return nil, &e
		}
		c = ent.c
	} else if r.opts.CompileInHost {
		var lerr *Error
		if c, lerr = compileHere(r.cache, p.key, req); lerr != nil {
			e := *lerr
			return nil, &e
		}
	}
	if c != nil {
		if lerr := p.bind(c); lerr != nil {
			return nil, lerr
		}
	}
	return p, nil
}

// Start validates opts, compiles the source and starts running it. It never
// returns nil and never blocks on the code: invalid options, a source over
// RunnerOptions.MaxSourceBytes and cached compile errors give an
// already-settled Run with StatusLinkError; a source not compiled before
// is compiled in a worker process (see the package doc), and its compile
// errors settle the Run with StatusLinkError when they are known.
// Cancelling ctx terminates the run (with the context's cause as the
// message); a ctx that has ended already gives an already-settled Run with
// StatusTerminated, and nothing of the run is started.
func (r *Runner) Start(ctx context.Context, source string, opts *Options) *Run {
	if r.closed.Load() {
		return settledRun(&outcome{status: StatusError, err: &Error{Name: "RunnerClosed", Message: "sandbox: runner is closed"}})
	}
	p, lerr := r.prepare(source, opts)
	if lerr != nil {
		return settledRun(&outcome{status: StatusLinkError, err: lerr})
	}
	if ctx != nil && ctx.Err() != nil {
		// Cancelled already: nothing is started, no worker or realm taken.
		return settledRun(&outcome{status: StatusTerminated, err: &Error{Name: "Terminated", Message: cancelledMessage(ctx)}})
	}
	var onReport func(any)
	if opts != nil {
		onReport = opts.Report
	}
	run := newRun(onReport)
	if r.opts.Mode == ModeInProcess {
		r.startInProcess(run, p)
	} else {
		r.pool.start(run, p, r.cache)
	}
	if p.timeout > 0 {
		t := time.AfterFunc(p.timeout, func() {
			run.Terminate(fmt.Sprintf("Code execution timed out after %s", p.timeout))
		})
		run.whenSettled(func() { t.Stop() })
	}
	if ctx != nil && ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { run.Terminate(cancelledMessage(ctx)) })
		run.whenSettled(func() { stop() })
	}
	return run
}

// cancelledMessage is the message of a run ended by the end of ctx.
func cancelledMessage(ctx context.Context) string {
	if c := context.Cause(ctx); c != nil {
		return "Code execution terminated: " + c.Error()
	}
	return "Code execution terminated"
}

// StartMap is Start with options given as data, for loaders that receive
// them as a map (keys as in the reference: execute {fn, args}, imports,
// globals, modules, language, filename, memoryLimitBytes, report, timeoutMs,
// maxCallStackSize). An unknown key or a value of the wrong type gives a
// settled StatusLinkError run named "InvalidCodeExecutionOptions".
func (r *Runner) StartMap(ctx context.Context, source string, m map[string]any) *Run {
	o, err := OptionsFromMap(m)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = optionsError("%v", err)
		}
		return settledRun(&outcome{status: StatusLinkError, err: e})
	}
	return r.Start(ctx, source, o)
}

// OptionsFromMap decodes run options given as data (see [Runner.StartMap]).
// The error is an *Error named "InvalidCodeExecutionOptions"; an unknown key
// gives the message "Unknown runCode option: <key>".
//
// memoryLimitBytes and timeoutMs must be positive finite numbers, and
// maxCallStackSize a positive integer. A value larger than its Options
// field can hold is capped, as the field caps it: memoryLimitBytes at 1<<50
// bytes, timeoutMs at the largest time.Duration (about 292 years) and
// maxCallStackSize at math.MaxInt32. A fraction is rounded up to the next
// whole byte or nanosecond, so that a positive value never becomes zero,
// which would mean the default.
func OptionsFromMap(m map[string]any) (*Options, error) {
	o := &Options{}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch k {
		case "execute":
			em, ok := v.(map[string]any)
			if !ok {
				return nil, optionsError("execute must be an object")
			}
			o.Execute = &Execute{}
			for _, ek := range sortedKeys(em) {
				switch ek {
				case "fn":
					s, ok := em[ek].(string)
					if !ok {
						return nil, optionsError("execute.fn must be a string")
					}
					o.Execute.Fn = s
				case "args":
					a, ok := em[ek].([]any)
					if !ok {
						return nil, optionsError("execute.args must be an array")
					}
					o.Execute.Args = a
				default:
					return nil, optionsError("Unknown runCode option: execute.%s", ek)
				}
			}
		case "imports":
			im, ok := v.(map[string]any)
			if !ok {
				return nil, optionsError("imports must be an object")
			}
			o.Imports = map[string]map[string]any{}
			for spec, ns := range im {
				nm, ok := ns.(map[string]any)
				if !ok {
					return nil, &Error{Name: "InvalidCodeExecutionOptions", Message: fmt.Sprintf("imports[%q] must be an object", spec), Specifier: spec}
				}
				o.Imports[spec] = nm
			}
		case "globals":
			g, ok := v.(map[string]any)
			if !ok {
				return nil, optionsError("globals must be an object")
			}
			o.Globals = g
		case "modules":
			mm, ok := v.(map[string]any)
			if !ok {
				if ms, ok2 := v.(map[string]string); ok2 {
					o.Modules = ms
					continue
				}
				return nil, optionsError("modules must be an object of strings")
			}
			o.Modules = map[string]string{}
			for mk, mv := range mm {
				s, ok := mv.(string)
				if !ok {
					return nil, optionsError("modules[%q] must be a string", mk)
				}
				o.Modules[mk] = s
			}
		case "language":
			s, ok := v.(string)
			if !ok || (s != LanguageTypeScript && s != LanguageJavaScript) {
				return nil, optionsError("language must be %q or %q", LanguageTypeScript, LanguageJavaScript)
			}
			o.Language = s
		case "filename":
			s, ok := v.(string)
			if !ok {
				return nil, optionsError("filename must be a string")
			}
			o.Filename = s
		case "memoryLimitBytes":
			f, ok := toFloat(v)
			if !ok || !(f > 0) || math.IsInf(f, 0) {
				return nil, optionsError("memoryLimitBytes must be a positive finite number")
			}
			// Capped before the conversion, which would overflow, and
			// rounded up: a fraction of a byte is a limit, not the default.
			o.MemoryLimitBytes = int64(math.Ceil(min(f, maxMemoryLimit)))
		case "timeoutMs":
			f, ok := toFloat(v)
			if !ok || !(f > 0) || math.IsInf(f, 0) {
				return nil, optionsError("timeoutMs must be a positive finite number")
			}
			if d := f * float64(time.Millisecond); d < float64(math.MaxInt64) {
				// Rounded up: a fraction of a nanosecond is a timeout, not
				// the default.
				o.Timeout = time.Duration(math.Ceil(d))
			} else {
				o.Timeout = math.MaxInt64 // the conversion would overflow
			}
		case "maxCallStackSize":
			f, ok := toFloat(v)
			if !ok || !(f > 0) || f != math.Trunc(f) || math.IsInf(f, 0) {
				return nil, optionsError("maxCallStackSize must be a positive integer")
			}
			o.MaxCallStackSize = int(min(f, math.MaxInt32)) // as prepare caps it
		case "report":
			f, ok := v.(func(any))
			if !ok {
				return nil, optionsError("report must be a func(any)")
			}
			o.Report = f
		default:
			return nil, optionsError("Unknown runCode option: %s", k)
		}
	}
	return o, nil
}

func toFloat(v any) (float64, bool) {
	n, err := normalize(v, nil)
	if err != nil {
		return 0, false
	}
	f, ok := n.(float64)
	return f, ok
}

// hostError converts an error from a HostFunc to what the sandbox sees. It
// calls methods of err, which may panic: call it where panics are
// recovered.
func hostError(err error) *Error {
	var se *Error
	if errors.As(err, &se) {
		return capError(&Error{Name: se.Name, Message: se.Message})
	}
	name := "Error"
	var ne NamedError
	if errors.As(err, &ne) {
		name = ne.ErrorName()
	}
	return capError(&Error{Name: name, Message: safefmt.Error(err)})
}

// invokeHost calls a host function for run r, recovering panics (formatted
// with safefmt: a panic value's String or Error method may panic too).
func invokeHost(r *Run, fn HostFunc, args []any) (res any, herr *Error) {
	if fn == nil {
		return nil, &Error{Name: "BridgeUnavailable", Message: "Bridge is unavailable: unknown host function"}
	}
	if r.isSettled() {
		return nil, &Error{Name: "BridgeUnavailable", Message: "Bridge is unavailable: the run has finished"}
	}
	defer func() {
		if p := recover(); p != nil {
			res, herr = nil, capError(&Error{Name: "Error", Message: "host function panicked: " + safefmt.Sprint(p)})
		}
	}()
	v, err := fn(r.hostContext(), args)
	if err != nil {
		return nil, hostError(err)
	}
	n, err := normalize(v, nil)
	if err != nil {
		return nil, serializationError(err)
	}
	return n, nil
}

// callHost runs fn for run r and passes the outcome to done exactly once,
// also when fn panics or ends its goroutine with runtime.Goexit.
func callHost(r *Run, fn HostFunc, args []any, done func(any, *Error)) {
	returned := false
	defer func() {
		if !returned {
			done(nil, &Error{Name: "Error", Message: "host function ended its goroutine (runtime.Goexit) without returning"})
		}
	}()
	v, herr := invokeHost(r, fn, args)
	returned = true
	done(v, herr)
}

// ---- in-process mode ----

type inProcessHost struct {
	run   *Run
	funcs []*funcRef
}

func (h *inProcessHost) call(id int, args []any, done func(any, *Error)) {
	var fn HostFunc
	if id >= 0 && id < len(h.funcs) {
		fn = h.funcs[id].fn
	}
	go callHost(h.run, fn, args, done)
}

func (h *inProcessHost) report(v any)   { h.run.addReport(v) }
func (h *inProcessHost) log(e LogEntry) { h.run.addLog(e) }

func (r *Runner) startInProcess(run *Run, p *prepared) {
	if r.opts.SpinWait > 0 {
		run.spin, run.spinRule = r.opts.SpinWait, &r.waitSpin
	}
	if p.job.code == nil {
		// Compile in a worker process first; until then a terminated run
		// settles at once.
		run.setTerminator(run.settle)
		go func() {
			if r.compilers.compileOnly(run, p, r.cache) {
				r.runInProcess(run, p)
			}
		}()
		return
	}
	r.runInProcess(run, p)
}

func (r *Runner) runInProcess(run *Run, p *prepared) {
	eng := newEngine(p.job, &inProcessHost{run: run, funcs: p.funcs})
	grace := r.opts.TerminateGrace
	run.setTerminator(func(o *outcome) {
		eng.interrupt(o)
		// A long builtin call cannot be interrupted: settle anyway after the
		// grace period (the goroutine finishes on its own later).
		time.AfterFunc(grace, func() { run.settle(o) })
	})
	if run.isSettled() {
		// Terminated while compiling, before the terminator above was in
		// place: the code must not start.
		return
	}
	goEngine(&engineTask{run: func() { run.settle(eng.run()) }, spin: r.opts.SpinWait})
}

// An engineTask is an in-process run for an engine goroutine, and how long
// the goroutine polls for its next task once it is done (see goEngine).
type engineTask struct {
	run  func()
	spin time.Duration
}

// engineGoroutines hands in-process runs to idle goroutines whose stacks
// have already grown to what goja needs, saving stack copying per run.
var engineGoroutines = make(chan *engineTask)

// Handing a run to a goroutine
//
// Readying a parked goroutine wakes a sleeping thread when a CPU is idle,
// and on a virtual machine that is an exit to the hypervisor, which costs
// as much as a trivial run; a run started and waited for costs two: the
// goroutine that runs it, then the one that waits. So, as with a worker's
// pipes, the goroutines poll for a while first: a goroutine that finished
// a run polls enginePolls.slot for its next one for up to the run's
// SpinWait before it parks, and Start puts a run there while a goroutine
// polls; Wait polls for the settlement before it blocks. Each polling side
// follows a spinRule, so that polls that keep running out stop.
//
// The slot holds one task, owned by whoever takes it out (Swap, or
// CompareAndSwap to nil): Start puts a task in, then looks whether any
// goroutine still polls, and takes the task back if none does and none
// took it. A polling goroutine only looks at the slot; to take a task, or
// when its budget is spent, it leaves the count first and then empties the
// slot, so a task put there while it still counted is taken by it (or by
// another goroutine that counted then). Taking a task while still counted
// would not do: Start may put a second task there meanwhile, see the count
// and leave it, and no goroutine would come for it.
var enginePolls struct {
	slot  atomic.Pointer[engineTask]
	count atomic.Int32 // goroutines polling the slot
	rule  sharedSpinRule
}

// goEngine runs t on an engine goroutine: one that polls for it, an idle
// one, or a new one.
func goEngine(t *engineTask) {
	if enginePolls.count.Load() > 0 && enginePolls.slot.CompareAndSwap(nil, t) {
		if enginePolls.count.Load() > 0 || !enginePolls.slot.CompareAndSwap(t, nil) {
			return // a polling goroutine has it, or will
		}
	}
	select {
	case engineGoroutines <- t:
	default:
		go func() {
			timer := time.NewTimer(time.Minute)
			defer timer.Stop()
			for {
				t.run()
				if next := nextEngineTask(t.spin); next != nil {
					t = next
					continue
				}
				timer.Reset(time.Minute)
				select {
				case t = <-engineGoroutines:
				case <-timer.C:
					return
				}
			}
		}()
	}
}

// nextEngineTask polls the slot for a task, yielding between polls, for up
// to budget (if the rule lets it), and returns the task it took, or nil.
func nextEngineTask(budget time.Duration) *engineTask {
	if budget <= 0 || !enginePolls.rule.poll() {
		return nil
	}
	var t *engineTask
	for start := time.Now(); ; runtime.Gosched() {
		enginePolls.count.Add(1)
		for enginePolls.slot.Load() == nil && time.Since(start) < budget {
			runtime.Gosched()
		}
		// Leave the count before taking: a task put while this goroutine
		// counted is in the slot by now, or was taken by another.
		enginePolls.count.Add(-1)
		if t = enginePolls.slot.Swap(nil); t != nil || time.Since(start) >= budget {
			break
		}
	}
	enginePolls.rule.count(t != nil)
	return t
}
