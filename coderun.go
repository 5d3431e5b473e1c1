package toolrun

import (
	"context"
	"sync"
	"time"
)

// CodeStatus is the outcome of a sandbox run.
type CodeStatus string

// The statuses of a sandbox run.
const (
	CodeStatusSuccess    CodeStatus = "success"
	CodeStatusError      CodeStatus = "error"
	CodeStatusLinkError  CodeStatus = "link_error"
	CodeStatusMemory     CodeStatus = "memory"
	CodeStatusTerminated CodeStatus = "terminated"
)

// CodeOptions configures ThreadState.RunCode. The zero value
// runs the default export of a TypeScript module.
type CodeOptions struct {
	// Execute names the export to run (default "default") and its arguments.
	Execute *CodeExecute
	// Imports maps bare specifiers to namespaces of values and functions.
	// A func(ctx context.Context, args []any) (any, error) becomes an async
	// function inside the sandbox that calls back into Go.
	Imports map[string]map[string]any
	// Globals are values and functions placed on the sandbox's globalThis.
	Globals map[string]any
	// Modules maps relative specifiers ("./util.ts") to module sources.
	Modules map[string]string
	// Language is "typescript" (default) or "javascript".
	Language string
	// Filename names the entry module in errors (default "<runCode>").
	Filename string
	// MemoryLimitBytes caps the run's memory; 0 uses the runner's default.
	MemoryLimitBytes int64
	// Report, when set, defines report(value) in the sandbox and receives
	// every reported value as it happens.
	Report func(value any)
	// Timeout terminates the run after this long; 0 means no timeout.
	Timeout time.Duration
}

// CodeExecute names the export a run calls and its arguments.
type CodeExecute struct {
	Fn   string
	Args []any
}

// CodeError describes why a run failed.
type CodeError struct {
	Name      string `json:"name"`
	Message   string `json:"message"`
	Stack     string `json:"stack,omitempty"`
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
	Filename  string `json:"filename,omitempty"`
	Specifier string `json:"specifier,omitempty"`
}

// Error returns "name: message".
func (e *CodeError) Error() string { return e.Name + ": " + e.Message }

// CodeLog is one captured console call.
type CodeLog struct {
	Level     string    `json:"level"`
	Args      []any     `json:"args"`
	Timestamp time.Time `json:"timestamp"`
}

// CodeResult is the settled outcome of a sandbox run.
type CodeResult struct {
	Status   CodeStatus    `json:"status"`
	Value    any           `json:"result,omitempty"`
	Error    *CodeError    `json:"error,omitempty"`
	Reports  []any         `json:"reports"`
	Logs     []CodeLog     `json:"logs"`
	Duration time.Duration `json:"durationMs"`
}

// CodeRunner runs sandboxed code for ThreadState.RunCode. The sandbox
// package's Runner is one (sandbox.Default()); set ExecutorOptions.CodeRunner
// to it or to another. Without one, every run ends with a link_error.
// Implementations must be safe for concurrent use and must never panic:
// every failure is a settled CodeResult.
type CodeRunner interface {
	RunCode(ctx context.Context, source string, opts *CodeOptions) *CodeRun
}

// CodeRun is the handle of a sandbox run: wait for it, read its reports
// live, ask whether it is running, or terminate it. It is safe for
// concurrent use.
type CodeRun struct {
	done      chan struct{}
	mu        sync.Mutex
	result    CodeResult
	reports   []any
	terminate func(reason string)
}

// NewCodeRun is for CodeRunner implementations: it returns a running handle
// whose Terminate calls terminate, a function that records a live report,
// and the function that settles the handle (only its first call counts).
func NewCodeRun(terminate func(reason string)) (run *CodeRun, report func(any), settle func(CodeResult)) {
	r := &CodeRun{done: make(chan struct{}), terminate: terminate}
	var once sync.Once
	report = func(v any) {
		r.mu.Lock()
		r.reports = append(r.reports, v)
		r.mu.Unlock()
	}
	settle = func(res CodeResult) {
		once.Do(func() {
			r.mu.Lock()
			if res.Reports == nil {
				res.Reports = append([]any{}, r.reports...)
			}
			r.result = res
			r.mu.Unlock()
			close(r.done)
		})
	}
	return r, report, settle
}

// SettledCodeRun returns a handle that is already settled with res.
func SettledCodeRun(res CodeResult) *CodeRun {
	r, _, settle := NewCodeRun(nil)
	settle(res)
	return r
}

// Wait blocks until the run settles or ctx is done, and returns the
// result. When ctx ends first it returns a terminated result without
// stopping the run (call Terminate for that).
func (r *CodeRun) Wait(ctx context.Context) CodeResult {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.result
	case <-ctx.Done():
		return CodeResult{Status: CodeStatusTerminated, Error: &CodeError{Name: "Terminated", Message: ctx.Err().Error()}, Reports: r.Reports()}
	}
}

// Done is closed when the run settles.
func (r *CodeRun) Done() <-chan struct{} { return r.done }

// Running reports whether the run has not settled yet.
func (r *CodeRun) Running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Reports returns the values reported so far.
func (r *CodeRun) Reports() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.reports...)
}

// Terminate stops a running run; it settles with status terminated and
// error message reason ("Code execution terminated" when empty). It is a
// no-op once the run has settled.
func (r *CodeRun) Terminate(reason string) {
	if !r.Running() || r.terminate == nil {
		return
	}
	r.terminate(reason)
}

// noCodeRunner answers every run with a link_error saying that no code
// runner is configured: the runner of an executor given none.
type noCodeRunner struct{}

func (noCodeRunner) RunCode(context.Context, string, *CodeOptions) *CodeRun {
	return SettledCodeRun(CodeResult{Status: CodeStatusLinkError, Error: &CodeError{
		Name:    "MissingCodeRunner",
		Message: "no code runner is configured: set ExecutorOptions.CodeRunner",
	}, Reports: []any{}, Logs: []CodeLog{}})
}
