package toolrun

import (
	"context"
	"slices"
	"strings"
)

// offerTools works out the tools a turn offers its model (reference I1–I3,
// G8, G10, H1) and records them on b, the batch that runs the response's
// calls, for the allowed-tools gate. Optional entries are resolved through
// b's env chain.
func (rt *Runtime) offerTools(ctx context.Context, ts *turnState, b *batch) error {
	if err := rt.offerEntries(ctx, ts, b); err != nil {
		return err
	}
	b.offered = make(map[string]bool, len(ts.offered))
	for name := range ts.offered {
		b.offered[name] = true
	}
	return nil
}

func (rt *Runtime) offerEntries(ctx context.Context, ts *turnState, b *batch) error {
	ts.offered = map[string]offer{}
	ts.specs = nil
	if ts.model.Capabilities.NoToolCalls {
		return nil
	}
	var providerTools []ToolSpec
	if l, ok := ts.model.Provider.(ProviderToolLister); ok {
		providerTools = l.ProviderTools(ts.model.ID)
	}
	findProvider := func(name string) (ToolSpec, bool) {
		for _, t := range providerTools {
			if t.Name == name {
				return t, true
			}
		}
		return ToolSpec{}, false
	}
	for _, wrapped := range ts.prompt.Tools {
		entry, flags := unwrapEntry(wrapped)
		if !rt.flagsOn(b, flags) {
			continue
		}
		name := entry.promptToolName()
		cfg, _ := entry.(*SubpromptConfig)
		if pname, ok := strings.CutPrefix(name, ProviderPrefix); ok {
			spec, found := findProvider(pname)
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
				ts.add(pname, offer{kind: offerProvider}, spec)
			}
			continue
		}
		e := rt.reg.lookup(name, "")
		switch {
		case e != nil && e.tool != nil:
			info := e.tool.info()
			ts.add(e.name, offer{kind: offerFunc}, ToolSpec{Name: e.name, Description: info.Description, Parameters: info.Parameters})
		case e != nil && isPrompt(e.def):
			p := e.def.(*Prompt)
			spec := ToolSpec{Name: e.name, Description: p.ToolDescription}
			if p.compiled != nil {
				spec.Parameters = p.compiled.JSON()
			}
			ts.add(e.name, offer{kind: offerPrompt, config: cfg}, spec)
		case e != nil && isAgent(e.def):
			a := e.def.(*Agent)
			if !a.ExposeAsTool {
				rt.log.WarnContext(ctx, "toolrun: agent in a prompt's tools is not exposed as a tool", "prompt", ts.prompt.Name, "agent", a.Name)
				continue
			}
			ts.add(e.name, offer{kind: offerAgent, config: cfg}, rt.agentSpec(a))
		default:
			if _, ok := findProvider(name); ok {
				rt.log.WarnContext(ctx, "toolrun: bare name matches no tool, prompt or agent but names a provider tool; use the prefixed form", "prompt", ts.prompt.Name, "name", name, "use", ProviderPrefix+name)
			} else {
				rt.log.WarnContext(ctx, "toolrun: prompt tool not found", "prompt", ts.prompt.Name, "name", name)
			}
		}
	}
	return rt.offerLifecycle(ctx, ts, b)
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

func (ts *turnState) add(name string, o offer, spec ToolSpec) {
	if _, dup := ts.offered[name]; dup {
		return
	}
	ts.offered[name] = o
	ts.specs = append(ts.specs, spec)
}

func isPrompt(d Definition) bool { _, ok := d.(*Prompt); return ok }
func isAgent(d Definition) bool  { _, ok := d.(*Agent); return ok }

// agentSpec describes an agent offered as a tool (reference G10).
func (rt *Runtime) agentSpec(a *Agent) ToolSpec {
	spec := ToolSpec{Name: a.Name, Description: a.ToolDescription}
	if spec.Description == "" {
		spec.Description = "Hand off the conversation to the " + a.Name + " agent."
	}
	if p, ok := rt.reg.Prompt(a.SideA.Prompt); ok && p.compiled != nil {
		spec.Parameters = p.compiled.JSON()
	}
	return spec
}

// buildRequest assembles the next model request of a turn (reference O1,
// A5, E10, with CONTRACT's queued-results rule).
func (rt *Runtime) buildRequest(ctx context.Context, ts *turnState, turnStart int64) (*Request, error) {
	args := ts.th.Arguments
	req := &Request{
		Model:             ts.model.ID,
		ThreadID:          ts.th.ID,
		System:            interpolate(ts.prompt.Text, args),
		ToolChoice:        ts.prompt.ToolChoice,
		ParallelToolCalls: ts.prompt.ParallelToolCalls,
	}
	if len(ts.specs) > 0 {
		req.Tools = append([]ToolSpec(nil), ts.specs...)
	} else {
		req.ToolChoice = ""
	}
	p, err := rt.store.ListMessages(ctx, ts.th.ID, MessageQuery{IncludeSilent: true})
	if err != nil {
		return nil, &StoreError{Op: "list messages", Err: err}
	}
	msgs := p.Messages
	if !ts.prompt.IncludeChat {
		// Only messages injected during this turn (prompt-local context).
		var local []Message
		for _, m := range msgs {
			if m.Seq > turnStart && (m.Role == RoleSystem || m.Role == RoleUser) {
				local = append(local, m)
			}
		}
		msgs = local
	}
	req.Messages = perspective(msgs, ts.sideKey, ts.prompt.IncludePastTools)
	return req, nil
}

func sideOf(m *Message) string { return m.Side }

// perspective turns stored rows into what the acting side sees: its own
// turns as assistant, the other side's as user; only its own tool calls and
// results; tool calls paired with results, missing ones synthesised,
// orphans dropped, queued results shown as a synthetic call block.
func perspective(rows []Message, side string, pastTools bool) []Message {
	results := map[string]*Message{}
	called := map[string]bool{}
	for i := range rows {
		m := &rows[i]
		if m.Role == RoleTool && m.ToolCallID != "" {
			results[m.ToolCallID] = m
		}
		if m.Role == RoleAssistant {
			for _, c := range m.ToolCalls {
				called[c.ID] = true
			}
		}
	}
	out := make([]Message, 0, len(rows))
	var queued []Message    // a run of queued results waiting for their synthetic call block
	var queuedArgs []string // their calls' (redacted) arguments
	flushQueued := func() {
		if len(queued) == 0 {
			return
		}
		calls := make([]ToolCall, len(queued))
		for i, q := range queued {
			calls[i] = ToolCall{ID: q.ToolCallID, Name: q.Name, Arguments: queuedArgs[i]}
		}
		out = append(out, Message{Role: RoleAssistant, ToolCalls: calls})
		out = append(out, queued...)
		queued, queuedArgs = nil, nil
	}
	for i := range rows {
		m := rows[i]
		own := sideOf(&m) == side || sideOf(&m) == ""
		switch m.Role {
		case RoleTool:
			if !pastTools || !own {
				continue
			}
			if m.Queued && !called[m.ToolCallID] {
				queued = append(queued, toModel(m))
				queuedArgs = append(queuedArgs, m.Arguments)
			}
			// Results of model calls are emitted after their call; orphans are dropped.
			continue
		case RoleAssistant:
			flushQueued()
			if !own {
				if strings.TrimSpace(m.Content) != "" {
					out = append(out, Message{Role: RoleUser, Content: m.Content, Attachments: m.Attachments})
				}
				continue
			}
			am := toModel(m)
			if !pastTools {
				am.ToolCalls = nil
				if strings.TrimSpace(am.Content) == "" {
					continue
				}
				out = append(out, am)
				continue
			}
			out = append(out, am)
			for _, c := range m.ToolCalls {
				if r := results[c.ID]; r != nil {
					out = append(out, toModel(*r))
				} else {
					out = append(out, Message{Role: RoleTool, ToolCallID: c.ID, Name: c.Name, ToolStatus: StatusError,
						Content: strings.Replace(missingText, "%q", `"`+c.Name+`"`, 1)})
				}
			}
		case RoleUser:
			flushQueued()
			if sideOf(&m) == side && side == "b" {
				// Side B's own messages are its assistant turns.
				out = append(out, Message{Role: RoleAssistant, Content: m.Content, Attachments: m.Attachments})
				continue
			}
			out = append(out, toModel(m))
		default:
			flushQueued()
			out = append(out, toModel(m))
		}
	}
	flushQueued()
	return out
}

// toModel keeps the fields a provider needs.
func toModel(m Message) Message {
	return Message{ID: m.ID, Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID,
		Name: m.Name, ToolStatus: m.ToolStatus, Attachments: m.Attachments}
}
