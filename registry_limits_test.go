package toolrun_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// A negative limit would be read as "no limit" (every limit reads 0 so):
// a computed or mistyped -1 would silently lift the bound its author set.
// Register refuses it, naming the definition and the field.
func TestRegisterRefusesNegativeLimits(t *testing.T) {
	prompt := &toolrun.Prompt{Name: "p", Model: "m"}
	child := &toolrun.Agent{Name: "c", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}}
	for _, tc := range []struct {
		field, name string
		def         toolrun.Definition
	}{
		{"History.Messages", "w", &toolrun.Prompt{Name: "w", Model: "m", IncludeChat: true, History: toolrun.Window{Messages: -1}}},
		{"History.Tokens", "w", &toolrun.Prompt{Name: "w", Model: "m", IncludeChat: true, History: toolrun.Window{Tokens: -5}}},
		{"SideA.MaxSteps", "a", &toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p", MaxSteps: -1}, SideB: toolrun.Side{Human: true}}},
		{"SideB.MaxSteps", "a", &toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Prompt: "p", MaxSteps: -1}}},
		{"MaxSessionTurns", "a", &toolrun.Agent{Name: "a", MaxSessionTurns: -1, SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}}},
		{`SideA.Subagents[1] (helper).MaxInstances`, "a", &toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p", Subagents: []toolrun.SubagentRelationship{
			{Agent: "c"}, {Agent: "c", As: "helper", MaxInstances: -1}}}, SideB: toolrun.Side{Human: true}}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			reg := toolrun.NewRegistry(nil)
			require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New()}, prompt, child))
			err := reg.Register(tc.def)
			var re *toolrun.RegistrationError
			require.ErrorAs(t, err, &re, "a negative %s was accepted", tc.field)
			assert.Equal(t, tc.name, re.Name)
			assert.Contains(t, re.Reason, tc.field+" is -")
			assert.Contains(t, re.Reason, "cannot be negative")
			_, isAgent := reg.Agent(tc.name)
			_, isPrompt := reg.Prompt(tc.name)
			assert.False(t, isAgent || isPrompt, "the refused definition is not registered")
		})
	}

	// Zero (no limit) and positive limits still register.
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New()}, prompt, child,
		&toolrun.Prompt{Name: "w", Model: "m", IncludeChat: true, History: toolrun.Window{Messages: 0, Tokens: 10}},
		&toolrun.Agent{Name: "a", MaxSessionTurns: 3, SideA: toolrun.Side{Prompt: "w", MaxSteps: 0, Subagents: []toolrun.SubagentRelationship{
			{Agent: "c", MaxInstances: 2}}}, SideB: toolrun.Side{Human: true}}))
	require.NoError(t, reg.Check())
}
