package toolrun

import (
	"context"
	"sync/atomic"

	"github.com/toolrun/toolrun/sandbox"
)

// SandboxRunner adapts a sandbox.Runner to CodeRunner. The executor uses
// one over sandbox.Default() unless ExecutorOptions.CodeRunner is set: runs
// execute in warm worker processes with a hard memory cap (see the sandbox
// package documentation, including the worker re-exec hook).
type SandboxRunner struct {
	// Runner is the sandbox runner; nil means sandbox.Default().
	Runner *sandbox.Runner
}

// RunCode implements CodeRunner.
func (s SandboxRunner) RunCode(ctx context.Context, source string, opts *CodeOptions) *CodeRun {
	r := s.Runner
	if r == nil {
		r = sandbox.Default()
	}
	var so *sandbox.Options
	if opts != nil {
		so = &sandbox.Options{
			Imports:          convertImports(opts.Imports),
			Globals:          convertNamespace(opts.Globals),
			Modules:          opts.Modules,
			Language:         opts.Language,
			Filename:         opts.Filename,
			MemoryLimitBytes: opts.MemoryLimitBytes,
			Timeout:          opts.Timeout,
		}
		if opts.Execute != nil {
			so.Execute = &sandbox.Execute{Fn: opts.Execute.Fn, Args: opts.Execute.Args}
		}
	}
	// The handle exists before the run starts, so reports and a Terminate
	// that arrive at once are never lost.
	var (
		started    atomic.Pointer[sandbox.Run]
		terminated atomic.Pointer[string]
	)
	run, record, settle := NewCodeRun(func(reason string) {
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
			settle(CodeResult{Status: CodeStatusError, Error: &CodeError{Name: "Error", Message: err.Error()}})
			return
		}
		settle(fromSandbox(res))
	}()
	return run
}

func fromSandbox(res sandbox.Result) CodeResult {
	out := CodeResult{Status: CodeStatus(res.Status), Value: res.Value, Reports: res.Reports, Duration: res.Duration}
	if out.Reports == nil {
		out.Reports = []any{}
	}
	if res.Error != nil {
		e := res.Error
		out.Error = &CodeError{Name: e.Name, Message: e.Message, Stack: e.Stack, Line: e.Line, Column: e.Column, Filename: e.Filename, Specifier: e.Specifier}
	}
	out.Logs = make([]CodeLog, len(res.Logs))
	for i, l := range res.Logs {
		out.Logs[i] = CodeLog{Level: l.Level, Args: l.Args, Timestamp: l.Timestamp}
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

// convertNamespace turns plain Go host functions into sandbox.HostFunc.
func convertNamespace(ns map[string]any) map[string]any {
	if ns == nil {
		return nil
	}
	out := make(map[string]any, len(ns))
	for k, v := range ns {
		if f, ok := v.(func(context.Context, []any) (any, error)); ok {
			v = sandbox.HostFunc(f)
		}
		out[k] = v
	}
	return out
}
