package toolrun

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/toolrun/toolrun/internal/schema"
)

// definitionKind names the kind of a non-tool definition.
func definitionKind(d Definition) string {
	switch d.(type) {
	case *Prompt:
		return "prompt"
	case *Agent:
		return "agent"
	case *Model:
		return "model"
	}
	return "definition"
}

// prepare checks and compiles a non-tool definition before registration.
func (r *Registry) prepare(e *entry) error {
	switch d := e.def.(type) {
	case *Prompt:
		for i, t := range d.Tools {
			if t == nil || t.promptToolName() == "" {
				return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("tools entry %d has no name", i)}
			}
			if _, flags := unwrapEntry(t); slices.Contains(flags, "") {
				return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("tools entry %d (%s): Optional needs an env flag name", i, t.promptToolName())}
			}
		}
		s, err := compileRequiredSchema(e.name, d.RequiredSchema)
		if err != nil {
			return &RegistrationError{Name: e.name, Reason: "RequiredSchema: " + err.Error()}
		}
		d.compiled = s
		d.args = schema.NewArgs(s, nil)
		return nil
	case *Agent:
		for _, side := range []struct {
			name string
			s    *Side
		}{{"SideA", &d.SideA}, {"SideB", &d.SideB}} {
			if side.s.Human == (side.s.Prompt != "") {
				return &RegistrationError{Name: e.name, Reason: side.name + " must be either Human or backed by a Prompt"}
			}
			seen := map[string]bool{}
			for _, rel := range side.s.Subagents {
				n := rel.name()
				if n == "" {
					return &RegistrationError{Name: e.name, Reason: side.name + ": a subagent relationship has no Agent"}
				}
				if isReserved(n) || strings.HasPrefix(n, ProviderPrefix) {
					return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("%s: relationship name %q is reserved", side.name, n)}
				}
				if seen[n] {
					return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("%s: relationship %q declared twice", side.name, n)}
				}
				seen[n] = true
			}
		}
		return nil
	case *Model:
		if d.Provider == nil {
			return &RegistrationError{Name: e.name, Reason: "Provider is nil"}
		}
		return nil
	}
	return &RegistrationError{Name: e.name, Reason: fmt.Sprintf("unsupported definition type %T", e.def)}
}

// Prompt returns the registered prompt.
func (r *Registry) Prompt(name string) (*Prompt, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	p, ok := e.def.(*Prompt)
	return p, ok
}

// Agent returns the registered agent.
func (r *Registry) Agent(name string) (*Agent, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	a, ok := e.def.(*Agent)
	return a, ok
}

// Model returns the registered model.
func (r *Registry) Model(name string) (*Model, bool) {
	e := r.lookup(name, "")
	if e == nil {
		return nil, false
	}
	m, ok := e.def.(*Model)
	return m, ok
}

// variablesOf returns the variables a definition declares.
func variablesOf(d Definition) []Variable {
	switch d := d.(type) {
	case *RawFunc:
		return d.Variables
	case *Prompt:
		return d.Variables
	case interface{ declaredVariables() []Variable }:
		return d.declaredVariables()
	}
	return nil
}

// checkVariables refuses a variable without a name or with a type other
// than text or secret ("" means secret).
func checkVariables(def string, vs []Variable) error {
	for i, v := range vs {
		switch {
		case strings.TrimSpace(v.Name) == "":
			return &RegistrationError{Name: def, Reason: fmt.Sprintf("Variables[%d] has no Name", i)}
		case v.Type != "" && v.Type != VarText && v.Type != VarSecret:
			return &RegistrationError{Name: def, Reason: fmt.Sprintf("variable %s: Type %q is not %q or %q", v.Name, v.Type, VarText, VarSecret)}
		}
	}
	return nil
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

func providerOf(m *Model) Provider {
	if m == nil {
		return nil
	}
	return m.Provider
}

func listsTool(specs []ToolSpec, name string) bool {
	for _, s := range specs {
		if s.Name == name {
			return true
		}
	}
	return false
}
