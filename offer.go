package toolrun

import (
	"context"
	"slices"
	"strings"
)

// offer works out the tools a model request of the turn offers and
// returns them as the toolset its calls resolve to: each offered name is
// looked up in the registry once, here, and resolved into its handler.
// Optional entries and relationships are resolved through b's env chain.
//
// What is offered: the prompt's tools entries that exist for the turn — a
// function tool, a prompt (a prompt tool), an agent exposed as a tool (a
// handoff), a provider tool the model lists — and, for a top-level turn of
// a side with relationships, the lifecycle tools.
func (rt *Runtime) offer(ctx context.Context, ts *turnState, b *batch) (*toolset, error) {
	tt := &turnTools{toolset: toolset{gated: true}, rt: rt, ctx: ctx, ts: ts, b: b}
	tt.names = tt
	tools := &tt.toolset
	add := tools.offer
	if ts.model.Capabilities.NoToolCalls {
		return tools, nil
	}
	var providerTools []ToolSpec
	if l, ok := ts.model.Provider.(ProviderToolLister); ok {
		providerTools = l.ProviderTools(ts.model.ID)
	}
	for _, wrapped := range ts.prompt.Tools {
		entry, flags := unwrapEntry(wrapped)
		if !rt.flagsOn(b, flags) {
			continue
		}
		name := entry.promptToolName()
		cfg, _ := entry.(*SubpromptConfig)
		if pname, ok := strings.CutPrefix(name, ProviderPrefix); ok {
			spec, found := findSpec(providerTools, pname)
			switch {
			case !slices.Contains(ts.model.ProviderTools, pname):
				rt.log.WarnContext(ctx, "toolrun: provider tool not offered: the model's ProviderTools does not list it", "prompt", ts.prompt.Name, "model", ts.model.Name, "tool", pname)
			case !found:
				rt.log.WarnContext(ctx, "toolrun: provider tool not offered: the provider does not list it", "prompt", ts.prompt.Name, "provider", ts.model.Provider.Name(), "tool", pname)
			default:
				spec.Name = pname
				spec.ProviderExecuted = true
				if spec.Provider == "" {
					spec.Provider = ts.model.Provider.Name()
				}
				add(providerExecuted(spec))
			}
			continue
		}
		e := rt.reg.lookup(name, "")
		switch {
		case e != nil && e.tool != nil:
			add(ts.bound(e.tool.handler))
		case e != nil && isPrompt(e.def):
			add(rt.promptHandler(ts, e.name, e.def.(*Prompt), cfg))
		case e != nil && isAgent(e.def):
			a := e.def.(*Agent)
			if !a.ExposeAsTool {
				rt.log.WarnContext(ctx, "toolrun: agent in a prompt's tools is not exposed as a tool", "prompt", ts.prompt.Name, "agent", a.Name)
				continue
			}
			add(rt.handoffHandler(ts, e.name, a, cfg))
		default:
			if _, ok := findSpec(providerTools, name); ok {
				rt.log.WarnContext(ctx, "toolrun: bare name matches no tool, prompt or agent but names a provider tool; use the prefixed form", "prompt", ts.prompt.Name, "name", name, "use", ProviderPrefix+name)
			} else {
				rt.log.WarnContext(ctx, "toolrun: prompt tool not found", "prompt", ts.prompt.Name, "name", name)
			}
		}
	}
	if ts.parent != nil {
		return tools, nil // sub-prompts get no lifecycle tools
	}
	lifecycle, err := rt.lifecycleHandlers(ctx, ts, b)
	if err != nil {
		return nil, err
	}
	for _, h := range lifecycle {
		add(h)
	}
	return tools, nil
}

// turnTools is the toolset a model request of a turn offers, with what
// resolving the names it does not offer needs.
type turnTools struct {
	toolset
	rt  *Runtime
	ctx context.Context
	ts  *turnState
	b   *batch
}

func (tt *turnTools) resolve(name, ns string, nested bool) *handler {
	return tt.rt.resolve(tt.ctx, tt.ts, tt.b, &tt.toolset, name, ns, nested)
}

func (tt *turnTools) refuse(name string) *handler {
	if tt.ts.relationship(tt.b, name, true) != nil {
		return notDirectlyCallable(name)
	}
	return notOffered(name)
}

// resolve finds the handler of a name the turn did not offer: a call a
// tool queued or invoked. The order, first match wins: the lifecycle
// tools, a function tool, a prompt, a relationship of the acting side or
// its sibling (not callable by name), an agent exposed as a tool, or
// listed, or reached from a running tool (a handoff).
func (rt *Runtime) resolve(ctx context.Context, ts *turnState, b *batch, tools *toolset, name, ns string, nested bool) *handler {
	if isReserved(name) {
		return rt.lifecycleHandler(ctx, ts, b, name)
	}
	e := rt.reg.lookup(name, ns)
	switch {
	case e != nil && e.tool != nil:
		return ts.bound(e.tool.handler)
	case e != nil && isPrompt(e.def):
		return rt.promptHandler(ts, e.name, e.def.(*Prompt), nil)
	}
	if ts.relationship(b, name, true) != nil {
		return notDirectlyCallable(name)
	}
	if e != nil && isAgent(e.def) {
		if a := e.def.(*Agent); a.ExposeAsTool || nested {
			return rt.handoffHandler(ts, e.name, a, nil)
		}
	}
	return notFound(name)
}

// flagsOn reports whether every env flag is on for the batch.
func (rt *Runtime) flagsOn(b *batch, flags []string) bool {
	for _, f := range flags {
		if !rt.ex.flagOn(b, f) {
			return false
		}
	}
	return true
}

func findSpec(specs []ToolSpec, name string) (ToolSpec, bool) {
	for _, t := range specs {
		if t.Name == name {
			return t, true
		}
	}
	return ToolSpec{}, false
}

// relationship finds a relationship by name on the acting side of the
// turn's root, and on the sibling side when sibling is set. A relationship
// whose Optional flag is off does not exist.
func (ts *turnState) relationship(b *batch, name string, sibling bool) *SubagentRelationship {
	root := ts.root()
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

func isPrompt(d Definition) bool { _, ok := d.(*Prompt); return ok }
func isAgent(d Definition) bool  { _, ok := d.(*Agent); return ok }
