package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/toolrun/toolrun/internal/safefmt"
	"github.com/toolrun/toolrun/internal/schema"
)

// Child registry statuses.
const (
	ChildRunning       = "running"
	ChildIdle          = "idle"
	ChildFailed        = "failed"
	ChildAwaitingHuman = "awaiting_human"
	ChildTerminated    = "terminated"
)

// lifecycleHandlers are the lifecycle tools a top-level turn offers:
// subagent_create when the side has a visible relationship, subagents when
// it has any relationship or child, subagent_message when a child is live.
// Relationships whose Optional flag is off do not count.
func (rt *Runtime) lifecycleHandlers(ctx context.Context, ts *turnState, b *batch) ([]*handler, error) {
	rels := rt.relationships(ts, b)
	children, err := rt.store.Children(ctx, ts.th.ID)
	if err != nil {
		return nil, &StoreError{Op: "list children", Err: err}
	}
	var out []*handler
	var visible []SubagentRelationship
	for _, r := range rels {
		if !r.Hidden {
			visible = append(visible, r)
		}
	}
	if len(visible) > 0 {
		out = append(out, rt.createHandler(ts, b, visible))
	}
	if len(rels) > 0 || len(children) > 0 {
		out = append(out, rt.listHandler(ts))
	}
	for _, c := range children {
		if c.Status != ChildTerminated {
			out = append(out, rt.messageHandler(ts, b))
			break
		}
	}
	return out, nil
}

// lifecycleHandler is the handler of a lifecycle name a running tool
// reached (it bypasses what the turn offered): subagent_create accepts every
// relationship whose flag is on, hidden ones included.
func (rt *Runtime) lifecycleHandler(ctx context.Context, ts *turnState, b *batch, name string) *handler {
	switch name {
	case ToolSubagents:
		return rt.listHandler(ts)
	case ToolSubagentCreate:
		return rt.createHandler(ts, b, rt.relationships(ts, b))
	default:
		return rt.messageHandler(ts, b)
	}
}

// relationships are the root turn's side's relationships whose flag is on.
func (rt *Runtime) relationships(ts *turnState, b *batch) []SubagentRelationship {
	var rels []SubagentRelationship
	for _, r := range ts.root().side.Subagents {
		if rt.ex.flagOn(b, r.Optional) {
			rels = append(rels, r)
		}
	}
	return rels
}

// Schemas of the lifecycle tools whose parameters do not vary.
var (
	listParams    = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	messageParams = json.RawMessage(`{"type":"object","properties":{` +
		`"referenceId":{"type":"string","description":"The subagent's reference"},` +
		`"message":{"type":"string"},` +
		`"attachments":{"type":"array","items":{"type":"string"},"description":"Attachment paths; [] when none"}},` +
		`"required":["referenceId","message","attachments"],"additionalProperties":false}`)
)

// lifecycleArgs returns the compiled argument route of a lifecycle tool's
// parameters, compiling each distinct schema once.
func (rt *Runtime) lifecycleArgs(name string, params json.RawMessage) *schema.Args {
	key := name + "\x00" + string(params)
	if a, ok := rt.base.lifecycleArgsCache.Load(key); ok {
		return a.(*schema.Args)
	}
	s, err := schema.Compile(name, params)
	if err != nil {
		// The parameters are built here from compiled schemas: this cannot
		// happen, short of a bug. The tool then takes any JSON object.
		rt.log.Error("toolrun: a lifecycle tool's schema does not compile", "tool", name, "error", err)
		return noSchemaArgs
	}
	a, _ := rt.base.lifecycleArgsCache.LoadOrStore(key, schema.NewArgs(s, nil))
	return a.(*schema.Args)
}

// lifecycle is the handler of a lifecycle tool: its arguments are
// validated against the schema it publishes, then run by do.
func (rt *Runtime) lifecycle(name, description string, params json.RawMessage, do func(ctx context.Context, m map[string]any) (Result, error)) *handler {
	args := rt.lifecycleArgs(name, params)
	return &handler{name: name, kind: kindLifecycle, args: args,
		spec: ToolSpec{Name: name, Description: description, Parameters: params},
		run: func(ctx context.Context, c call) (Result, error) {
			var m map[string]any
			if fail := args.Decode(c.args, &m); fail != nil {
				return argumentsResult(fail, "Tool"), nil
			}
			if m == nil {
				m = map[string]any{}
			}
			return do(ctx, m)
		}}
}

func (rt *Runtime) listHandler(ts *turnState) *handler {
	return rt.lifecycle(ToolSubagents, "List the subagent instances of this thread with their status.", listParams,
		func(ctx context.Context, _ map[string]any) (Result, error) { return rt.listSubagents(ctx, ts) })
}

func (rt *Runtime) messageHandler(ts *turnState, b *batch) *handler {
	return rt.lifecycle(ToolSubagentMessage, "Send a message to an existing subagent instance; it starts a new session with its history intact.", messageParams,
		func(ctx context.Context, m map[string]any) (Result, error) { return rt.messageSubagent(ctx, ts, b, m) })
}

func (rt *Runtime) createHandler(ts *turnState, b *batch, rels []SubagentRelationship) *handler {
	spec := rt.createSpec(rels)
	return rt.lifecycle(ToolSubagentCreate, spec.Description, spec.Parameters,
		func(ctx context.Context, m map[string]any) (Result, error) { return rt.createSubagent(ctx, ts, b, m) })
}

func (rt *Runtime) createSpec(rels []SubagentRelationship) ToolSpec {
	names := make([]any, len(rels))
	var desc strings.Builder
	desc.WriteString("Create a subagent instance. Available subagents:")
	var argSchemas []any
	for i, r := range rels {
		names[i] = r.name()
		mode := "non-blocking: runs in the background and reports back"
		if r.Blocking {
			mode = "blocking: waits for the subagent's result"
		}
		fmt.Fprintf(&desc, "\n- %s (%s", r.name(), mode)
		if r.MaxInstances > 0 {
			fmt.Fprintf(&desc, "; at most %d instance(s)", r.MaxInstances)
		}
		desc.WriteString(")")
		if r.Description != "" {
			desc.WriteString(": " + r.Description)
		}
		if a, ok := rt.reg.Agent(r.Agent); ok {
			if p, ok := rt.reg.Prompt(a.SideA.Prompt); ok && p.compiled() != nil {
				argSchemas = append(argSchemas, p.compiled().Doc())
				fmt.Fprintf(&desc, " Arguments: %s.", p.compiled().JSON())
			}
		}
	}
	args := map[string]any{"type": "object", "description": "Initial arguments of the subagent"}
	if len(argSchemas) == 1 {
		args = argSchemas[0].(map[string]any)
	} else if len(argSchemas) > 1 {
		args = map[string]any{"anyOf": argSchemas}
	}
	params := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent":       map[string]any{"type": "string", "enum": names, "description": "The subagent relationship to create"},
			"message":     map[string]any{"type": "string", "description": "The first message to the subagent"},
			"attachments": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Attachment paths to copy to the subagent; [] when none"},
			"name":        map[string]any{"type": "string", "description": "A name for this instance"},
			"arguments":   args,
		},
		"required":             []any{"agent", "message", "attachments", "name"},
		"additionalProperties": false,
	}
	b, _ := json.Marshal(params)
	return ToolSpec{Name: ToolSubagentCreate, Description: desc.String(), Parameters: b}
}

func (rt *Runtime) listSubagents(ctx context.Context, ts *turnState) (Result, error) {
	children, err := rt.store.Children(ctx, ts.th.ID)
	if err != nil {
		return Result{}, &StoreError{Op: "list children", Err: err}
	}
	var lines []string
	for _, c := range children {
		if c.Hidden {
			continue
		}
		label := c.Relationship
		if label == "" {
			label = c.Agent
		}
		line := fmt.Sprintf("- %s: %s — %s", c.Reference, label, c.Status)
		if c.Report != "" {
			line += ": " + c.Report
		}
		if c.Description != "" {
			line += " (" + c.Description + ")"
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return Text("No active subagent instances."), nil
	}
	return Text("Active subagent instances:\n" + strings.Join(lines, "\n") + "\nUse subagent_message with a reference to message an instance."), nil
}

func str(m map[string]any, k string) (string, bool) {
	s, ok := m[k].(string)
	return s, ok
}

func (rt *Runtime) createSubagent(ctx context.Context, ts *turnState, b *batch, m map[string]any) (Result, error) {
	relName, _ := str(m, "agent")
	if strings.TrimSpace(relName) == "" {
		return Errorf("subagent_create requires agent."), nil
	}
	initArgs, hasArgs := m["arguments"]
	argMap, isObj := initArgs.(map[string]any)
	if hasArgs && initArgs != nil && !isObj {
		return Errorf("subagent_create arguments must be an object when provided."), nil
	}
	message, _ := str(m, "message")
	if strings.TrimSpace(message) == "" {
		return Errorf("subagent_create requires message."), nil
	}
	attachments, ok := m["attachments"].([]any)
	if !ok {
		return Errorf("subagent_create requires attachments (use [] when none)."), nil
	}
	nameVal, hasName := m["name"]
	instName, isStr := nameVal.(string)
	if hasName && !isStr {
		return Errorf("subagent_create name must be a string when provided."), nil
	}
	if strings.TrimSpace(instName) == "" {
		return Errorf("subagent_create requires name."), nil
	}
	root := ts.root()
	rel := root.relationship(b, relName, false)
	if rel == nil {
		names := make([]string, 0, len(root.side.Subagents))
		for _, r := range root.side.Subagents {
			if rt.ex.flagOn(b, r.Optional) {
				names = append(names, r.name())
			}
		}
		list := "(none)"
		if len(names) > 0 {
			list = strings.Join(names, ", ")
		}
		return Errorf("Subagent %q is not available for this prompt. Use one of: %s.", relName, list), nil
	}
	child, ok := rt.reg.Agent(rel.Agent)
	if !ok || !child.ExposeAsTool {
		return Errorf("Subagent relationship %q is not declared on this agent.", relName), nil
	}
	if level := nestingOf(ctx); rel.Blocking && level > rt.ex.maxNest {
		// A blocking child runs inside this call, so chains of them nest.
		return nestingResult(ToolSubagentCreate, level, rt.ex.maxNest), nil
	}
	// Background children start at nesting level 0, so a chain of them is
	// bounded by the threads' own lineage.
	depth, err := rt.lineageDepth(ctx, ts.th, rt.ex.maxNest)
	if err != nil {
		return Result{}, err
	}
	if depth >= rt.ex.maxNest {
		return Result{Status: StatusError, ErrorCode: "max_nesting", ErrorData: map[string]any{"agent": rel.Agent, "limit": rt.ex.maxNest},
			Error: fmt.Sprintf("Subagent %q was not created: its thread would be %d subagent levels below its root thread, past the limit of %d.", rel.name(), depth+1, rt.ex.maxNest)}, nil
	}
	// The arguments must satisfy the child's side-A prompt's RequiredSchema.
	if p, ok := rt.reg.Prompt(child.SideA.Prompt); ok && p.compiled() != nil {
		var v any = map[string]any{}
		if argMap != nil {
			v = argMap
		}
		if issues := p.compiled().Validate(roundTrip(v)); len(issues) > 0 {
			paths := make([]any, len(issues))
			for i, is := range issues {
				paths[i] = is.Path
			}
			return Result{Status: StatusError, Error: fmt.Sprintf("subagent_create arguments for %q failed validation: %s", rel.Agent, schema.FormatIssues(issues)),
				ErrorCode: "subagent_arguments_required", ErrorData: map[string]any{"agent": rel.Agent, "required": paths}}, nil
		}
	}
	children, err := rt.store.Children(ctx, ts.th.ID)
	if err != nil {
		return Result{}, &StoreError{Op: "list children", Err: err}
	}
	if rel.MaxInstances > 0 {
		var live []string
		for _, c := range children {
			if c.Relationship == rel.name() && c.Status != ChildTerminated {
				live = append(live, c.Reference)
			}
		}
		if len(live) >= rel.MaxInstances {
			if rel.Blocking && rel.MaxInstances == 1 && len(live) == 1 {
				return rt.continueBlocking(ctx, ts, b, rel, live[0], message, attachments)
			}
			return Errorf("Subagent instance limit reached for %q (%d). Use subagent_message with an existing reference instead. Active references: %s.", rel.name(), rel.MaxInstances, strings.Join(live, ", ")), nil
		}
	}
	env, missing, err := rt.childEnv(ctx, ts, b, rel, child)
	if err != nil {
		return Result{}, &StoreError{Op: "list parent env", Err: err}
	}
	if len(missing) > 0 {
		return Result{Status: StatusError,
			Error:     fmt.Sprintf("Subagent %q requires scoped environment variables before it can be created. Provide %s through the relationship's ScopedEnv or the parent thread's env.", rel.name(), strings.Join(missing, ", ")),
			ErrorCode: "subagent_env_required", ErrorData: map[string]any{"required": toAnySlice(missing), "missing": toAnySlice(missing), "agent": rel.Agent}}, nil
	}

	if !rel.Blocking && !rt.bg.tryStart(rt.maxBg) {
		return backgroundLimitResult(rel, rt.maxBg), nil
	}
	th := &Thread{ID: newID("thread"), AgentID: rel.Agent, ParentID: ts.th.ID, Tags: []string{"name:" + tagName(instName)}}
	if len(argMap) > 0 {
		th.Arguments = argMap
	}
	if err := rt.store.CreateThread(ctx, th); err != nil {
		if !rel.Blocking {
			rt.bg.done()
		}
		return Result{}, &StoreError{Op: "create subagent thread", Err: err}
	}
	entry, err := rt.setUpChild(ctx, ts, th, rel, instName, argMap, env, message, attachments)
	if err != nil {
		if !rel.Blocking {
			rt.bg.done()
		}
		rt.abandonChild(ctx, th)
		return Result{}, err
	}
	if rel.Blocking {
		return rt.runBlocking(withBudget(ctx, ts.total), ts, entry)
	}
	rt.runBackground(ctx, ts, entry)
	return Result{Status: StatusSuccess, Result: "The subagent was initiated successfully. Reference: " + th.ID, SubagentID: th.ID}, nil
}

// backgroundLimitResult refuses a background subagent past
// RuntimeOptions.MaxBackground.
func backgroundLimitResult(rel *SubagentRelationship, limit int) Result {
	return Result{Status: StatusError, ErrorCode: "max_background", ErrorData: map[string]any{"agent": rel.Agent, "limit": limit},
		Error: fmt.Sprintf("Subagent %q was not created: %d background subagents are running, the most this runtime runs at once. Wait for one to finish.", rel.name(), limit)}
}

// lineageDepth counts the ancestors of th (its parent, the parent's parent
// …), reading at most limit of them: a count of limit means limit or more.
// A missing ancestor ends the count.
func (rt *Runtime) lineageDepth(ctx context.Context, th *Thread, limit int) (int, error) {
	depth := 0
	for id := th.ParentID; id != "" && depth < limit; depth++ {
		parent, err := rt.store.GetThread(ctx, id)
		if errors.Is(err, ErrNotFound) {
			return depth + 1, nil
		}
		if err != nil {
			return 0, &StoreError{Op: "load ancestor thread " + id, Err: err}
		}
		id = parent.ParentID
	}
	return depth, nil
}

// setUpChild gives a newly created child thread its env, its first
// messages and its entry in the parent's registry.
func (rt *Runtime) setUpChild(ctx context.Context, ts *turnState, th *Thread, rel *SubagentRelationship, instName string,
	argMap map[string]any, env map[string]EnvValue, message string, attachments []any) (ChildEntry, error) {
	root := ts.root()
	for k, v := range env {
		if err := rt.store.SetEnv(ctx, ScopeThread, th.ID, k, v); err != nil {
			return ChildEntry{}, &StoreError{Op: "set subagent env", Err: err}
		}
	}
	var initial []*Message
	if len(argMap) > 0 {
		js, _ := json.MarshalIndent(argMap, "", "  ")
		initial = append(initial, &Message{Role: RoleSystem, Silent: true, Content: "Initial arguments:\n" + string(js)})
	}
	copied := rt.copyAttachments(ctx, ts.th.ID, th.ID, rt.refsForPaths(ctx, ts.th.ID, pathsOf(attachments)))
	for _, ref := range copied {
		initial = append(initial, &Message{Role: RoleUser, Silent: true, Content: "Initial asset attachment path: " + ref.Path, Side: "b"})
	}
	initial = append(initial, &Message{Role: RoleUser, Content: message, Attachments: copied, Side: "b"})
	if err := rt.store.AppendMessages(ctx, th.ID, initial...); err != nil {
		return ChildEntry{}, &StoreError{Op: "append subagent messages", Err: err}
	}
	entry := ChildEntry{ParentID: ts.th.ID, Reference: th.ID, Relationship: rel.name(), Owner: root.sideKey, Agent: rel.Agent,
		Name: instName, Description: rel.Description, Blocking: rel.Blocking, Hidden: rel.Hidden,
		ParentCommunication: rel.ParentCommunication, Status: ChildRunning, InitialArguments: argMap}
	if err := rt.store.PutChild(ctx, entry); err != nil {
		return ChildEntry{}, &StoreError{Op: "put child entry", Err: err}
	}
	return entry, nil
}

// abandonChild terminates a child thread whose set-up failed, so that a
// thread no registry entry points to takes no work. It runs even when ctx
// has ended (that may be why the set-up failed); a failure leaves the
// thread as it was, since the set-up's error is the one to report.
func (rt *Runtime) abandonChild(ctx context.Context, th *Thread) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if cur, err := rt.store.GetThread(ctx, th.ID); err == nil && cur.TerminatedAt.IsZero() {
		cur.TerminatedAt = time.Now().UTC()
		_ = rt.store.UpdateThread(ctx, cur)
	}
}

// roundTrip turns a Go value into the generic JSON form validators expect.
func roundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

var spaceRE = regexp.MustCompile(`\s+`)

func tagName(s string) string {
	s = strings.TrimSpace(spaceRE.ReplaceAllString(s, " "))
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// scopedVars are the scoped variables of an agent: those its side
// prompts and the function tools they list declare with Scoped (one level
// of tools; the tools' own uses are not followed).
func (rt *Runtime) scopedVars(a *Agent) []Variable {
	var out []Variable
	seen := map[string]bool{}
	add := func(vs []Variable) {
		for _, v := range vs {
			if v.Scoped && !seen[v.Name] {
				seen[v.Name] = true
				out = append(out, v)
			}
		}
	}
	for _, s := range []Side{a.SideA, a.SideB} {
		p, ok := rt.reg.Prompt(s.Prompt)
		if !ok {
			continue
		}
		add(p.Variables)
		for _, t := range p.Tools {
			if e := rt.reg.lookup(t.promptToolName(), ""); e != nil && e.tool != nil {
				add(e.tool.variables)
			}
		}
	}
	return out
}

// childEnv computes a new child's thread env: the parent's env minus the
// child's scoped names, plus the relationship's ScopedEnv copies. It also
// returns the required scoped variables nothing provides.
func (rt *Runtime) childEnv(ctx context.Context, ts *turnState, b *batch, rel *SubagentRelationship, child *Agent) (map[string]EnvValue, []string, error) {
	parentEnv, err := rt.store.ListEnv(ctx, ScopeThread, ts.th.ID)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range parentEnv {
		// A type written to the store directly counts as it is read: any
		// type but text is secret.
		v.Type = typeOr(v.Type)
		parentEnv[k] = v
	}
	scoped := rt.scopedVars(child)
	isScoped := map[string]bool{}
	for _, v := range scoped {
		isScoped[v.Name] = true
	}
	env := map[string]EnvValue{}
	for k, v := range parentEnv {
		if !isScoped[k] {
			env[k] = v
		}
	}
	for _, k := range rel.ScopedEnv {
		if v, ok := parentEnv[k]; ok {
			env[k] = v
		}
	}
	var missing []string
	for _, v := range scoped {
		if !v.Required {
			continue
		}
		if _, ok := env[v.Name]; ok {
			continue
		}
		if _, ok := child.Env[v.Name]; ok {
			continue
		}
		if p, ok := rt.reg.Prompt(child.SideA.Prompt); ok {
			if _, ok := p.Env[v.Name]; ok {
				continue
			}
		}
		if _, ok := rt.ex.env[v.Name]; ok {
			continue
		}
		missing = append(missing, v.Name)
	}
	sort.Strings(missing)
	return env, missing, nil
}

// childOutcome runs a child's session and summarises it for the parent.
func (rt *Runtime) childOutcome(ctx context.Context, entry ChildEntry) (text string, failed bool, refs []AttachmentRef, status string) {
	reply, err := rt.resume(ctx, entry.Reference)
	switch {
	case err != nil:
		return err.Error(), true, nil, ChildFailed
	case reply.Failed:
		text, failed, status = reply.Text, true, ChildFailed
	case reply.StopReason == StopHuman:
		text, status = reply.Text, ChildAwaitingHuman
	default:
		text, status = reply.Text, ChildIdle
	}
	if strings.TrimSpace(text) == "" {
		text = "Subagent completed."
	}
	// Attachments of the child's final messages travel back to the parent,
	// under parent-local paths; the text names only those.
	var childRefs []AttachmentRef
	seen := map[string]bool{}
	for _, m := range reply.Messages {
		for _, a := range m.Attachments {
			if !seen[a.Path] {
				seen[a.Path] = true
				childRefs = append(childRefs, a)
			}
		}
	}
	var copied, from []AttachmentRef
	for _, r := range childRefs {
		if c := rt.copyAttachments(ctx, entry.Reference, entry.ParentID, []AttachmentRef{r}); len(c) == 1 {
			copied, from = append(copied, c[0]), append(from, r)
		}
	}
	return localizeText(text, from, copied), failed, copied, status
}

// resume runs the child's next session from the messages already stored.
func (rt *Runtime) resume(ctx context.Context, threadID string) (*Reply, error) {
	return rt.send(ctx, threadID, nil)
}

func (rt *Runtime) settle(ctx context.Context, entry ChildEntry, status string) {
	if cur, err := rt.store.Child(ctx, entry.ParentID, entry.Reference); err == nil && cur.Status == ChildTerminated {
		return
	}
	entry.Status = status
	if err := rt.store.PutChild(ctx, entry); err != nil {
		rt.log.ErrorContext(ctx, "toolrun: updating the child registry", "parent", entry.ParentID, "child", entry.Reference, "error", err)
	}
}

// runBlocking runs the child to the end of its session and returns its
// outcome.
func (rt *Runtime) runBlocking(ctx context.Context, ts *turnState, entry ChildEntry) (Result, error) {
	text, failed, refs, status := rt.childOutcome(ctx, entry)
	rt.settle(ctx, entry, status)
	res := Result{Status: StatusSuccess, Result: text + "\n\nReference: " + entry.Reference, Refs: refs, SubagentID: entry.Reference}
	if failed {
		res = Result{Status: StatusError, Error: text + "\n\nReference: " + entry.Reference, Refs: refs, SubagentID: entry.Reference}
	}
	return res, nil
}

// continueBlocking messages the single live instance of a blocking
// relationship capped at one, and waits for it: create-or-continue.
func (rt *Runtime) continueBlocking(ctx context.Context, ts *turnState, b *batch, rel *SubagentRelationship, ref, message string, attachments []any) (Result, error) {
	entry, err := rt.store.Child(ctx, ts.th.ID, ref)
	if err != nil {
		return Errorf("Subagent reference %q is not active.", ref), nil
	}
	if err := rt.deliver(ctx, ts.th.ID, ref, message, pathsOf(attachments)); err != nil {
		return Errorf("%v", err), nil
	}
	entry.Status = ChildRunning
	_ = rt.store.PutChild(ctx, entry)
	return rt.runBlocking(withBudget(ctx, ts.total), ts, entry)
}

// runBackground runs a non-blocking child; when it finishes, the parent is
// told with a queued message that starts the parent's next turn. The
// caller holds one of the runtime's background slots (rt.bg.tryStart),
// which the child's goroutine gives back. The child's turns and the
// parent's turn its completion starts count their model requests against
// the ceiling of ts's execution.
func (rt *Runtime) runBackground(ctx context.Context, ts *turnState, entry ChildEntry) {
	// Background work runs on a goroutine of its own: it starts again at
	// nesting level 0.
	bctx := withBudget(withNesting(notHolding(context.WithoutCancel(ctx)), 0), ts.total)
	rt = rt.base // the child and the parent's next turn acquire their own threads
	go func() {
		defer rt.bg.done()
		settled := false
		defer func() {
			if p := recover(); p != nil {
				rt.log.ErrorContext(bctx, "toolrun: subagent crashed", "child", entry.Reference, "panic", safefmt.Sprint(p))
				rt.settle(bctx, entry, ChildFailed)
			} else if !settled {
				// Only runtime.Goexit in one of the child's tools unwinds
				// this goroutine without a panic.
				rt.log.ErrorContext(bctx, "toolrun: subagent ended by runtime.Goexit in a tool", "child", entry.Reference)
				rt.settle(bctx, entry, ChildFailed)
			}
		}()
		text, failed, refs, status := rt.childOutcome(bctx, entry)
		settled = true
		rt.settle(bctx, entry, status)
		if entry.ParentCommunication == "explicit" {
			return
		}
		content := fmt.Sprintf("Subagent (reference: %s) has returned the following result:\n\n%s", entry.Reference, text)
		if failed {
			content = fmt.Sprintf("Subagent (reference: %s) has reported a failure:\n\n%s", entry.Reference, text)
		}
		if len(refs) > 0 {
			paths := make([]string, len(refs))
			for i, r := range refs {
				paths[i] = r.Path
			}
			content += "\n\nThe subagent also returned the following attachment(s): " + strings.Join(paths, ", ")
		}
		role := RoleUser
		if entry.Owner == "b" {
			role = RoleAssistant
		}
		msg := &Message{Role: role, Content: content, Silent: true, Attachments: refs, Metadata: map[string]any{"subagent_id": entry.Reference}}
		if _, err := rt.send(bctx, entry.ParentID, msg); err != nil {
			rt.log.ErrorContext(bctx, "toolrun: parent turn after subagent completion", "parent", entry.ParentID, "error", err)
		}
	}()
}

// deliver copies attachments into the child and stores the message.
func (rt *Runtime) deliver(ctx context.Context, parentID, childID, message string, paths []string) error {
	var msgs []*Message
	refs := rt.copyAttachments(ctx, parentID, childID, rt.refsForPaths(ctx, parentID, paths))
	for _, r := range refs {
		msgs = append(msgs, &Message{Role: RoleUser, Silent: true, Content: "Attachment path: " + r.Path, Side: "b"})
	}
	msgs = append(msgs, &Message{Role: RoleUser, Content: message, Attachments: refs, Side: "b"})
	return rt.store.AppendMessages(ctx, childID, msgs...)
}

func (rt *Runtime) messageSubagent(ctx context.Context, ts *turnState, b *batch, m map[string]any) (Result, error) {
	ref, _ := str(m, "referenceId")
	message, _ := str(m, "message")
	if ref == "" || message == "" {
		return Errorf("subagent_message requires referenceId and message."), nil
	}
	attachments, ok := m["attachments"].([]any)
	if !ok {
		return Errorf("subagent_message requires attachments (use [] when none)."), nil
	}
	entry, err := rt.store.Child(ctx, ts.th.ID, ref)
	if err != nil || entry.Status == ChildTerminated {
		return Errorf("Subagent reference %q is not active.", ref), nil
	}
	if th, err := rt.store.GetThread(ctx, ref); err != nil || !th.TerminatedAt.IsZero() {
		entry.Status = ChildTerminated
		_ = rt.store.PutChild(ctx, entry)
		return Errorf("Subagent reference %q is not active.", ref), nil
	}
	if !rt.bg.tryStart(rt.maxBg) {
		return Result{Status: StatusError, ErrorCode: "max_background", ErrorData: map[string]any{"referenceId": ref, "limit": rt.maxBg},
			Error: fmt.Sprintf("Message not sent to subagent %s: %d background subagents are running, the most this runtime runs at once. Wait for one to finish.", ref, rt.maxBg)}, nil
	}
	if err := rt.deliver(ctx, ts.th.ID, ref, message, pathsOf(attachments)); err != nil {
		rt.bg.done()
		return Errorf("%v", err), nil
	}
	entry.Status = ChildRunning
	if err := rt.store.PutChild(ctx, entry); err != nil {
		rt.bg.done()
		return Errorf("%v", err), nil
	}
	rt.runBackground(ctx, ts, entry)
	return Result{Status: StatusSuccess, Result: "Message sent to subagent " + ref + ".", SubagentID: ref}, nil
}

// Terminate closes a thread to new work. Its parent's registry entry
// becomes terminated. Terminating a terminated thread is a no-op. Session
// ends never terminate a child; only Terminate does.
func (rt *Runtime) Terminate(ctx context.Context, threadID string) error {
	th, err := rt.store.GetThread(ctx, threadID)
	if err != nil {
		return &StoreError{Op: "load thread " + threadID, Err: err}
	}
	if !th.TerminatedAt.IsZero() {
		return nil
	}
	th.TerminatedAt = time.Now().UTC()
	if err := rt.store.UpdateThread(ctx, th); err != nil {
		return &StoreError{Op: "terminate thread", Err: err}
	}
	if th.ParentID != "" {
		if e, err := rt.store.Child(ctx, th.ParentID, th.ID); err == nil {
			e.Status = ChildTerminated
			if err := rt.store.PutChild(ctx, e); err != nil {
				return &StoreError{Op: "update child registry", Err: err}
			}
		}
	}
	return nil
}

// propagateEnv carries a thread env write down to every live descendant
// for which the name is not scoped; the descendant's other values stay.
func (rt *Runtime) propagateEnv(ctx context.Context, threadID, name string, v EnvValue, depth int) error {
	if depth > 32 {
		return nil
	}
	children, err := rt.store.Children(ctx, threadID)
	if err != nil {
		return &StoreError{Op: "list children", Err: err}
	}
	for _, c := range children {
		if c.Status == ChildTerminated {
			continue
		}
		if a, ok := rt.reg.Agent(c.Agent); ok {
			scoped := false
			for _, sv := range rt.scopedVars(a) {
				if sv.Name == name {
					scoped = true
				}
			}
			if scoped {
				continue
			}
		}
		if err := rt.store.SetEnv(ctx, ScopeThread, c.Reference, name, v); err != nil {
			return &StoreError{Op: "propagate env to " + c.Reference, Err: err}
		}
		if err := rt.propagateEnv(ctx, c.Reference, name, v, depth+1); err != nil {
			return err
		}
	}
	return nil
}
