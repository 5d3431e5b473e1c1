package toolrun

import (
	"fmt"
	"slices"
	"strings"
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
