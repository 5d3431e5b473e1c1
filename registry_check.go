package toolrun

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

func listsTool(specs []ToolSpec, name string) bool {
	for _, s := range specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

func providerOf(m *Model) Provider {
	if m == nil {
		return nil
	}
	return m.Provider
}

func (r *Registry) checkAgent(e *entry, a *Agent, bad func(*entry, string, ...any)) {
	for _, side := range []struct {
		name string
		s    *Side
	}{{"SideA", &a.SideA}, {"SideB", &a.SideB}} {
		s := side.s
		if s.Prompt != "" {
			p, ok := r.Prompt(s.Prompt)
			if !ok {
				bad(e, "%s.Prompt %q: no prompt of that name is registered", side.name, s.Prompt)
			} else if !p.IncludeChat {
				r.log.Warn("toolrun: an agent side's prompt has IncludeChat false: its model is sent only the system prompt and the messages tools inject during the turn, never the user's messages; set IncludeChat: true on the prompt to send the conversation",
					"agent", a.Name, "side", side.name, "prompt", p.Name)
			}
			if ok && len(p.Tools) > 0 && !p.IncludePastTools {
				r.log.Warn("toolrun: an agent side's prompt offers tools and has IncludePastTools false: its requests carry neither its tool calls nor their results, those of the current turn included; set IncludePastTools: true on the prompt when the model must read what its tools return",
					"agent", a.Name, "side", side.name, "prompt", p.Name)
			}
		}
		tools := []struct{ field, name string }{{"StopTool", s.StopTool}}
		for _, b := range []struct {
			field string
			b     *SessionBinding
		}{{"SessionStop", s.SessionStop}, {"SessionFail", s.SessionFail}, {"SessionStatus", s.SessionStatus}} {
			if b.b != nil {
				tools = append(tools, struct{ field, name string }{b.field + ".Name", b.b.Name})
			}
		}
		for _, t := range tools {
			if t.name == "" {
				if t.field != "StopTool" {
					bad(e, "%s.%s is empty", side.name, t.field)
				}
				continue
			}
			if x := r.lookup(t.name, ""); x == nil || x.tool == nil && !isPrompt(x.def) {
				bad(e, "%s.%s %q: no tool of that name is registered", side.name, t.field, t.name)
			}
		}
		for _, rel := range s.Subagents {
			child, ok := r.Agent(rel.Agent)
			switch {
			case !ok:
				bad(e, "%s.Subagents %q: Agent %q is not registered", side.name, rel.name(), rel.Agent)
			case !child.ExposeAsTool:
				bad(e, "%s.Subagents %q: agent %q is not ExposeAsTool, which a subagent must be", side.name, rel.name(), rel.Agent)
			}
		}
	}
}

func (r *Registry) checkPrompt(e *entry, p *Prompt, bad func(*entry, string, ...any)) {
	model, _ := r.Model(p.Model)
	switch {
	case p.Model == "":
		bad(e, "Model is empty: a prompt names the registered model that serves it")
	case model == nil:
		bad(e, "Model %q: no model of that name is registered", p.Model)
	}
	for i, wrapped := range p.Tools {
		entry, _ := unwrapEntry(wrapped)
		name := entry.promptToolName()
		if strings.HasPrefix(name, ProviderPrefix) {
			continue // checked against the model's provider when offered
		}
		field := fmt.Sprintf("Tools[%d] (%q)", i, name)
		if isReserved(name) {
			bad(e, "%s: the subagent lifecycle tools are offered from an agent side's Subagents, not listed in a prompt's Tools", field)
			continue
		}
		target := r.lookup(name, "")
		switch {
		case target == nil:
			if l, ok := providerOf(model).(ProviderToolLister); ok && listsTool(l.ProviderTools(model.ID), name) {
				// A bare name selects only local definitions; the model's
				// provider runs a tool of this name, so the entry is left
				// out, with a warning naming the form to use.
				r.log.Warn("toolrun: bare name matches no tool, prompt or agent but names a provider tool; use the prefixed form",
					"prompt", p.Name, "name", name, "use", ProviderPrefix+name)
			} else {
				bad(e, "%s: no tool, prompt or agent of that name is registered", field)
			}
		case isAgent(target.def) && !target.def.(*Agent).ExposeAsTool:
			bad(e, "%s: agent %q is not ExposeAsTool, so it cannot be offered as a tool", field, name)
		case target.tool == nil && !isPrompt(target.def) && !isAgent(target.def):
			bad(e, "%s: names a %s, not a tool, prompt or agent", field, kindOf(target.def))
		}
	}
}

// Check reports every definition that refers to something not registered:
// a prompt's tools entry (a typo in Use), its Model, an agent side's Prompt,
// StopTool or session tools, a subagent relationship's Agent (which must
// also be ExposeAsTool), a tool's Uses entries. It returns nil when every
// reference resolves, else one *RegistrationError per problem, joined.
//
// Definitions may be registered in any order, so references are checked
// here rather than by Register: call Check once everything is registered
// to fail at start-up. A Runtime checks the registry before it starts a
// thread or a turn (again after later registrations) and refuses to run
// while a reference is dangling, so a typo never goes unnoticed. Check also
// logs, at Warn, definitions that are valid but likely mistakes, such as an
// agent side whose prompt does not include the chat.
func (r *Registry) Check() error {
	r.mu.RLock()
	entries := make([]*entry, 0, len(r.names))
	for _, e := range r.names {
		entries = append(entries, e)
	}
	r.mu.RUnlock()
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var errs []error
	bad := func(e *entry, format string, args ...any) {
		errs = append(errs, &RegistrationError{Name: e.name, Reason: fmt.Sprintf(format, args...)})
	}
	for _, e := range entries {
		switch d := e.def.(type) {
		case *Prompt:
			r.checkPrompt(e, d, bad)
		case *Agent:
			r.checkAgent(e, d, bad)
		}
		if e.tool != nil {
			for _, u := range e.tool.uses {
				if r.lookup(u, e.namespace) == nil {
					bad(e, "Uses entry %q: nothing of that name is registered", u)
				}
			}
		}
	}
	return errors.Join(errs...)
}
