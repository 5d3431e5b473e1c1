package sandbox

import (
	"context"
	"sync/atomic"

	"github.com/toolrun/toolrun"
)

var _ toolrun.CodeRunner = (*Runner)(nil)

// RunCode implements toolrun.CodeRunner, so that a Runner runs the code of
// ThreadState.RunCode: set ExecutorOptions.CodeRunner (or
// RuntimeOptions.CodeRunner) to Default() or to a Runner of your own; a nil
// *Runner is Default(). Only programs that do so link the sandbox: the
// toolrun package itself does not import it. Plain Go functions of the signature
// func(context.Context, []any) (any, error) among opts' imports and globals
// become host functions.
func (r *Runner) RunCode(ctx context.Context, source string, opts *toolrun.CodeOptions) *toolrun.CodeRun {
	if r == nil {
		r = Default()
	}
	var so *Options
	if opts != nil {
		so = &Options{
			Imports:          convertImports(opts.Imports),
			Globals:          convertNamespace(opts.Globals),
			Modules:          opts.Modules,
			Language:         opts.Language,
			Filename:         opts.Filename,
			MemoryLimitBytes: opts.MemoryLimitBytes,
			Timeout:          opts.Timeout,
		}
		if opts.Execute != nil {
			so.Execute = &Execute{Fn: opts.Execute.Fn, Args: opts.Execute.Args}
		}
	}
	// The handle exists before the run starts, so reports and a Terminate
	// that arrive at once are never lost.
	var (
		started    atomic.Pointer[Run]
		terminated atomic.Pointer[string]
	)
	run, record, settle := toolrun.NewCodeRun(func(reason string) {
		terminated.Store(&reason)
		if sr := started.Load(); sr != nil {
			sr.Terminate(reason)
		}
	})
	if so != nil && opts.Report != nil {
		user := opts.Report
		so.Report = func(v any) {
			record(v)
			user(v)
		}
	}
	srun := r.Start(ctx, source, so)
	started.Store(srun)
	if reason := terminated.Load(); reason != nil {
		srun.Terminate(*reason)
	}
	go func() {
		res, err := srun.Wait(context.WithoutCancel(ctx))
		if err != nil {
			settle(toolrun.CodeResult{Status: toolrun.CodeStatusError, Error: &toolrun.CodeError{Name: "Error", Message: err.Error()}})
			return
		}
		settle(fromSandbox(res))
	}()
	return run
}

func fromSandbox(res Result) toolrun.CodeResult {
	out := toolrun.CodeResult{Status: toolrun.CodeStatus(res.Status), Value: res.Value, Reports: res.Reports, Duration: res.Duration}
	if out.Reports == nil {
		out.Reports = []any{}
	}
	if res.Error != nil {
		e := res.Error
		out.Error = &toolrun.CodeError{Name: e.Name, Message: e.Message, Stack: e.Stack, Line: e.Line, Column: e.Column, Filename: e.Filename, Specifier: e.Specifier}
	}
	out.Logs = make([]toolrun.CodeLog, len(res.Logs))
	for i, l := range res.Logs {
		out.Logs[i] = toolrun.CodeLog{Level: l.Level, Args: l.Args, Timestamp: l.Timestamp}
	}
	return out
}

func convertImports(m map[string]map[string]any) map[string]map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]map[string]any, len(m))
	for k, ns := range m {
		out[k] = convertNamespace(ns)
	}
	return out
}

// convertNamespace turns plain Go host functions into HostFunc.
func convertNamespace(ns map[string]any) map[string]any {
	if ns == nil {
		return nil
	}
	out := make(map[string]any, len(ns))
	for k, v := range ns {
		if f, ok := v.(func(context.Context, []any) (any, error)); ok {
			v = HostFunc(f)
		}
		out[k] = v
	}
	return out
}
