package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// dispatch handles the names that shadow function tools (reference G1):
// the lifecycle tools, then provider tools offered in the turn.
func (ts *turnState) dispatch(ctx context.Context, b *batch, name, args string, level int) (Result, bool, error) {
	if isReserved(name) {
		// A blocking child's session runs inside this call: its calls nest
		// one level deeper.
		return ts.rt.lifecycle(withNesting(ctx, level+1), ts, b, name, args), true, nil
	}
	if o, ok := ts.offered[name]; ok && o.kind == offerProvider {
		return Result{Status: StatusError, Error: fmt.Sprintf("Tool %q is a provider-executed tool and should be handled by the LLM provider, not executed locally.", name)}, true, nil
	}
	return Result{}, false, nil
}

// dispatchDefinition runs a name that is not a function tool: a prompt, a
// relationship name (refused), or an agent (a handoff).
// level is the nesting level the call runs at (0 for a call of a top-level
// batch); nested calls come from InvokeTool.
func (ts *turnState) dispatchDefinition(ctx context.Context, b *batch, e *entry, name, args string, level int, nested bool) (Result, bool, error) {
	if e != nil {
		if p, ok := e.def.(*Prompt); ok {
			var cfg *SubpromptConfig
			if o, ok := ts.offered[e.name]; ok {
				cfg = o.config
			}
			res, err := ts.rt.runPromptTool(ctx, ts, b, p, cfg, args, level)
			return res, true, err
		}
	}
	if rel := ts.relationship(b, name, true); rel != nil {
		return notDirectlyCallable(name), true, nil
	}
	if e != nil {
		if a, ok := e.def.(*Agent); ok {
			_, listed := ts.offered[e.name]
			if !a.ExposeAsTool && !listed && !nested {
				return Result{}, false, nil
			}
			var cfg *SubpromptConfig
			if o, ok := ts.offered[e.name]; ok {
				cfg = o.config
			}
			var m map[string]any
			_ = json.Unmarshal([]byte(args), &m) // handoffs parse leniently (reference B8)
			root := ts.rootTurn()
			root.mu.Lock()
			root.handoff = &handoff{agent: e.name, args: m, config: cfg}
			root.mu.Unlock()
			return Text("Handoff complete"), true, nil
		}
	}
	return Result{}, false, nil
}

// notDirectlyCallable is the result of a call of a subagent relationship's
// name, which the model reaches through the lifecycle tools.
func notDirectlyCallable(name string) Result {
	return Result{Status: StatusError, Error: fmt.Sprintf("Tool %q is not directly callable. Use subagent_create with agent=%q to start it, or subagent_message to message an existing instance.", name, name)}
}

// rootTurn is the top-level turn a sub-prompt belongs to.
func (ts *turnState) rootTurn() *turnState {
	for ts.parent != nil {
		ts = ts.parent
	}
	return ts
}

// relationship finds a relationship by name on the acting side, and on the
// sibling side when sibling is set.
func (ts *turnState) relationship(b *batch, name string, sibling bool) *SubagentRelationship {
	root := ts.rootTurn()
	for i := range root.side.Subagents {
		if r := &root.side.Subagents[i]; r.name() == name && ts.rt.ex.flagOn(b, r.Optional) {
			return r
		}
	}
	if sibling && root.agent != nil {
		other := &root.agent.SideB
		if root.sideKey == "b" {
			other = &root.agent.SideA
		}
		for i := range other.Subagents {
			if r := &other.Subagents[i]; r.name() == name && ts.rt.ex.flagOn(b, r.Optional) {
				return r
			}
		}
	}
	return nil
}

// runPromptTool runs a prompt as a one-shot sub-prompt in the same thread
// (reference G2–G6, with CONTRACT's rule that a failed model request is an
// error result).
//
// Its error is non-nil when the sub-prompt's batch must stop the caller's
// run too: a tool aborted (ErrAbort), the store failed, or ctx ended. The
// caller's error result is stored first, as for any aborting call.
func (rt *Runtime) runPromptTool(ctx context.Context, ts *turnState, b *batch, p *Prompt, cfg *SubpromptConfig, args string, level int) (Result, error) {
	res := rt.promptTool(ctx, ts, b, p, cfg, args, level)
	return res.Result, res.err
}

// promptOutcome is a prompt tool's result and the error that stops the run.
type promptOutcome struct {
	Result
	err error
}

func (rt *Runtime) promptTool(ctx context.Context, ts *turnState, b *batch, p *Prompt, cfg *SubpromptConfig, args string, level int) promptOutcome {
	text := strings.TrimSpace(args)
	if text == "" {
		text = "{}"
	}
	var argMap map[string]any
	if err := json.Unmarshal([]byte(text), &argMap); err != nil {
		return promptOutcome{Result: Result{Status: StatusError, Error: "Prompt tool arguments are not valid JSON: " + err.Error()}}
	}
	if p.compiled != nil {
		v, _ := decodeGeneric(text)
		if issues := p.compiled.Validate(v); len(issues) > 0 {
			parts := make([]string, len(issues))
			for i, is := range issues {
				path := is.Path
				if path == "root" {
					path = ""
				}
				parts[i] = "[" + path + "] " + is.Message
			}
			return promptOutcome{Result: Result{Status: StatusError, Error: "Prompt tool argument validation failed: " + strings.Join(parts, "; ")}}
		}
		if patch, _ := p.compiled.DefaultsPatch(v); patch != nil {
			for k, x := range patch {
				if _, ok := argMap[k]; !ok {
					argMap[k] = x
				}
			}
		}
	}
	if missing := rt.ex.missingVariables(b, p.Variables); len(missing) > 0 {
		return promptOutcome{Result: missingVariablesResult(missing)}
	}
	model, ok := rt.reg.Model(p.Model)
	if !ok {
		return promptOutcome{Result: Errorf("prompt %s: model %q is not registered", p.Name, p.Model)}
	}
	if level+1 > rt.ex.maxNest {
		return promptOutcome{Result: nestingResult(p.Name, level+1, rt.ex.maxNest)}
	}
	if ts.total.Load() >= int64(ts.ceiling) {
		// Sub-prompt requests count against the run's ceiling like any other.
		return promptOutcome{Result: Result{Status: StatusError, ErrorCode: "max_total_steps",
			Error: fmt.Sprintf("Prompt tool %q was not run: this run reached its limit of %d model requests.", p.Name, ts.ceiling)}}
	}
	sub := &turnState{rt: rt, th: ts.th, agent: ts.agent, side: &Side{Prompt: p.Name}, sideKey: ts.sideKey,
		prompt: p, model: model, total: ts.total, ceiling: ts.ceiling, parent: ts}
	parentID := b.msgID
	cb, err := rt.ex.newBatch(ctx, ts.th.ID, false)
	if err != nil {
		return promptOutcome{Result: Errorf("%v", err)}
	}
	rt.bindBatch(cb, sub, &Execution{Side: ts.sideKey})
	cb.depth, cb.parentID, cb.nest = b.depth+1, parentID, level+1
	if err := rt.offerTools(ctx, sub, cb); err != nil {
		return promptOutcome{Result: Errorf("%v", err)}
	}
	req := &Request{Model: model.ID, ThreadID: ts.th.ID, System: interpolate(p.Text, argMap), ToolChoice: p.ToolChoice, ParallelToolCalls: p.ParallelToolCalls}
	if len(sub.specs) > 0 {
		req.Tools = sub.specs
	} else {
		req.ToolChoice = ""
	}
	if p.IncludeChat {
		rows, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true})
		if err != nil {
			return promptOutcome{Result: Errorf("loading history: %v", err)}
		}
		req.Messages = perspective(rows.Messages, ts.sideKey, p.IncludePastTools)
	}
	if init := rt.initMessage(ctx, ts.th.ID, cfg, argMap); init != nil {
		req.Messages = append(req.Messages, *init)
	}

	ts.total.Add(1)
	out, calls, err := rt.stream(ctx, sub, cb, req)
	if err != nil {
		return promptOutcome{Result: Result{Status: StatusError, Error: "Sub-prompt model request failed: " + err.Error()}}
	}
	am := &Message{Role: RoleAssistant, Content: out, ToolCalls: calls, Prompt: p.Name, Depth: cb.depth, ParentID: parentID,
		Side: ts.sideKey}
	if err := rt.store.AppendMessages(ctx, ts.th.ID, am); err != nil {
		return promptOutcome{Result: Result{Status: StatusError, Error: "storing the sub-prompt response: " + err.Error()}}
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
			return promptOutcome{Result: res, err: err}
		}
	}
	return promptOutcome{Result: shapeSubprompt(out, calls, outcomes, cfg)}
}

func decodeGeneric(text string) (any, error) {
	var v any
	err := json.Unmarshal([]byte(text), &v)
	return v, err
}

// initMessage builds the sub-prompt's init user message (reference G3).
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
			r.ID, r.Type, r.MimeType, r.Size = newID("att"), "file", info.MimeType, info.Size
			m.Attachments = append(m.Attachments, r)
			has = true
		}
	}
	if !has {
		return nil
	}
	return m
}

// attachmentPaths reads one path or an array of paths, keeping only those
// under /attachments/ (reference M4).
func attachmentPaths(v any) []string {
	var in []any
	switch x := v.(type) {
	case string:
		in = []any{x}
	case []any:
		in = x
	}
	var out []string
	for _, p := range in {
		if s, ok := p.(string); ok && strings.HasPrefix(s, "/attachments/") {
			out = append(out, CleanPath(s))
		}
	}
	return out
}

// shapeSubprompt builds the caller's result from a sub-prompt run
// (reference G6).
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
