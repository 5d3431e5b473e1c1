package toolrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// promptHandler is the handler of a prompt offered (or resolved) as a tool:
// a call runs it as a one-shot sub-prompt in the same thread. cfg shapes
// the result and names the init properties; nil means the defaults.
func (rt *Runtime) promptHandler(ts *turnState, name string, p *Prompt, cfg *SubpromptConfig) *handler {
	spec := ToolSpec{Name: name, Description: p.ToolDescription}
	if s := p.compiled(); s != nil {
		spec.Parameters = s.JSON()
	}
	return &handler{name: name, kind: kindPrompt, spec: spec, args: p.args(), variables: p.Variables,
		run: func(ctx context.Context, c call) (Result, error) { return rt.runPromptTool(ctx, ts, c, p, cfg) }}
}

// runPromptTool runs a prompt as a one-shot sub-prompt in the same thread:
// exactly one model request, whose calls run and are stored one level
// deeper, hanging from the caller's result message; the sub-prompt's model
// does not see their results. A failed model request is an error result
// for the caller.
//
// Its error is non-nil when the sub-prompt's batch must stop the caller's
// run too: a tool aborted (ErrAbort), the store failed, or ctx ended. The
// caller's error result is stored first, as for any aborting call.
func (rt *Runtime) runPromptTool(ctx context.Context, ts *turnState, c call, p *Prompt, cfg *SubpromptConfig) (Result, error) {
	var argMap map[string]any
	if fail := p.args().Decode(c.args, &argMap); fail != nil {
		return argumentsResult(fail, "Prompt tool"), nil
	}
	model, ok := rt.reg.Model(p.Model)
	if !ok {
		return Errorf("prompt %s: model %q is not registered", p.Name, p.Model), nil
	}
	if c.nest+1 > rt.ex.maxNest {
		return nestingResult(p.Name, c.nest+1, rt.ex.maxNest), nil
	}
	if ts.total.Load() >= int64(ts.ceiling) {
		// Sub-prompt requests count against the run's ceiling like any other.
		return Result{Status: StatusError, ErrorCode: "max_total_steps",
			Error: fmt.Sprintf("Prompt tool %q was not run: this run reached its limit of %d model requests.", p.Name, ts.ceiling)}, nil
	}
	stamp := c.b.sc.stamp
	sub := &turnState{rt: rt, th: ts.th, agent: ts.agent, side: &Side{Prompt: p.Name}, sideKey: ts.sideKey,
		prompt: p, model: model, exec: &Execution{Side: ts.sideKey}, total: ts.total, ceiling: ts.ceiling, parent: ts,
		turnStart: ts.turnStart, parentID: c.resultID, depth: stamp.Depth + 1, nest: c.nest + 1}
	defer sub.rows.release() // its one request has ended when this returns
	cb, tools, err := rt.prepare(ctx, sub)
	if err != nil {
		return Result{}, err
	}
	req := &Request{Model: model.ID, ThreadID: ts.th.ID, System: interpolate(p.Text, argMap), ToolChoice: p.ToolChoice, ParallelToolCalls: p.ParallelToolCalls}
	if req.Tools = tools.specs(); req.Tools == nil {
		req.ToolChoice = ""
	}
	if p.IncludeChat {
		// A sub-prompt sees the thread's top-level history (windowed as its
		// prompt says), not the prompt-local messages of the caller's turn.
		if req.Messages, err = rt.history(ctx, sub); err != nil {
			return Result{}, err
		}
	}
	if init := rt.initMessage(ctx, ts.th.ID, cfg, argMap); init != nil {
		// Into an array of its own: the history's room past its end is the
		// turn's pooled view's, or the history filter's slice.
		req.Messages = append(slices.Clip(req.Messages), *init)
	}

	ts.total.Add(1)
	out, calls, err := rt.stream(ctx, sub, cb, tools, req)
	if err != nil {
		return Result{Status: StatusError, Error: "Sub-prompt model request failed: " + err.Error()}, nil
	}
	am := &Message{Role: RoleAssistant, Content: out, ToolCalls: calls, Prompt: p.Name, Depth: sub.depth, ParentID: sub.parentID, Side: ts.sideKey}
	if err := rt.store.AppendMessages(ctx, ts.th.ID, am); err != nil {
		return Result{}, &StoreError{Op: "append sub-prompt response", Err: err}
	}
	var outcomes []Outcome
	if len(calls) > 0 {
		if outcomes, err = rt.ex.runBatch(ctx, cb, calls, true); err != nil {
			if ctx.Err() != nil {
				rt.stopped(ctx, sub, cb, calls) // the sub-prompt's calls get their results too
			}
			res := shapeSubprompt(out, calls, outcomes, cfg)
			if !res.IsError() {
				res = Result{Status: StatusError, Error: "Sub-prompt stopped: " + rt.ex.redactor(cb).String(err.Error())}
			}
			return res, err
		}
	}
	return shapeSubprompt(out, calls, outcomes, cfg), nil
}

// initMessage builds the init user message of a sub-prompt or a handoff:
// the InitUserMessageProperty argument as its text (strings verbatim, other
// values as JSON) and the files the InitAttachmentsProperty argument names
// (one path or a list; only existing /attachments/ paths of the thread),
// or nil when the config names neither or the arguments hold neither.
func (rt *Runtime) initMessage(ctx context.Context, threadID string, cfg *SubpromptConfig, args map[string]any) *Message {
	if cfg == nil || (cfg.InitUserMessageProperty == "" && cfg.InitAttachmentsProperty == "") {
		return nil
	}
	m := &Message{Role: RoleUser}
	has := false
	if v, ok := args[cfg.InitUserMessageProperty]; ok && cfg.InitUserMessageProperty != "" {
		m.Content, has = textOf(v), true
	}
	if cfg.InitAttachmentsProperty != "" {
		for _, r := range rt.refsForPaths(ctx, threadID, attachmentPaths(args[cfg.InitAttachmentsProperty])) {
			info, err := rt.store.StatFile(ctx, threadID, r.Path)
			if err != nil {
				continue // only files of the thread are attached
			}
			r.ID, r.Type, r.MimeType, r.Size = newRecordID("att"), "file", info.MimeType, info.Size
			m.Attachments = append(m.Attachments, r)
			has = true
		}
	}
	if !has {
		return nil
	}
	return m
}

// shapeSubprompt builds the caller's result from a sub-prompt run: its
// model's text (when IncludeTextResponse), then a "Tool Executions:" block
// of its calls and their results (IncludeToolCalls); a run with failed
// calls is an error result listing them (IncludeErrors). A run with nothing
// to say gives "Prompt executed successfully".
func shapeSubprompt(text string, calls []ToolCall, outcomes []Outcome, cfg *SubpromptConfig) Result {
	var failed, succeeded []Outcome
	for _, o := range outcomes {
		if o.Result.IsError() {
			failed = append(failed, o)
		} else {
			succeeded = append(succeeded, o)
		}
	}
	var refs []AttachmentRef
	for _, o := range outcomes {
		refs = append(refs, o.Message.Attachments...)
	}
	var parts []string
	if len(failed) > 0 {
		if cfg.includeErrors() {
			var sb strings.Builder
			fmt.Fprintf(&sb, "Sub-prompt failed with %d error(s):", len(failed))
			for _, o := range failed {
				fmt.Fprintf(&sb, "\n  %s: %s", o.Call.Name, o.Message.Content)
			}
			parts = append(parts, sb.String())
		}
		if cfg.includeCalls() && len(succeeded) > 0 {
			names := make([]string, len(succeeded))
			for i, o := range succeeded {
				names[i] = o.Call.Name
			}
			parts = append(parts, "Other tools run: "+strings.Join(names, ", "))
		}
		msg := strings.Join(parts, "\n\n")
		if msg == "" {
			msg = "Sub-prompt failed"
		}
		return Result{Status: StatusError, Error: msg, Refs: refs}
	}
	if cfg.includeText() && strings.TrimSpace(text) != "" {
		parts = append(parts, strings.TrimSpace(text))
	}
	if cfg.includeCalls() && len(outcomes) > 0 {
		var sb strings.Builder
		sb.WriteString("Tool Executions:")
		for _, o := range outcomes {
			fmt.Fprintf(&sb, "\nTool Call: %s(%s)\nTool Response: %s", o.Call.Name, o.Call.Arguments, o.Message.Content)
		}
		parts = append(parts, sb.String())
	}
	if len(parts) == 0 {
		return Result{Status: StatusSuccess, Result: "Prompt executed successfully", Refs: refs}
	}
	return Result{Status: StatusSuccess, Result: strings.Join(parts, "\n\n"), Refs: refs}
}
