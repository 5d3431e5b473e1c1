package toolrun_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

func offeredNames(req *toolrun.Request) []string {
	var names []string
	for _, s := range req.Tools {
		names = append(names, s.Name)
	}
	return names
}

// An Optional entry is offered only when its env flag resolves to true, 1
// or yes through the env chain; the allowed-tools gate follows the offer.
func TestOptionalPromptEntryFollowsItsEnvFlag(t *testing.T) {
	for _, tt := range []struct {
		name  string
		env   map[string]toolrun.EnvValue
		offer bool
	}{
		{"unset", nil, false},
		{"yes", map[string]toolrun.EnvValue{"ENABLE_AUDIT": {Value: "YES"}}, true},
		{"one", map[string]toolrun.EnvValue{"ENABLE_AUDIT": {Value: " 1 "}}, true},
		{"true", map[string]toolrun.EnvValue{"ENABLE_AUDIT": {Value: "True", Type: toolrun.VarText}}, true},
		{"zero", map[string]toolrun.EnvValue{"ENABLE_AUDIT": {Value: "0"}}, false},
		{"other", map[string]toolrun.EnvValue{"ENABLE_AUDIT": {Value: "enabled"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := triagePrompt()
			p.Tools = append(p.Tools, toolrun.Optional("ENABLE_AUDIT", toolrun.Use("audit")))
			w := newWorld(t, p, toolrun.Side{})
			th, err := w.rt.NewThread(context.Background(), "agent", &toolrun.ThreadOptions{Env: tt.env})
			require.NoError(t, err)
			w.p.Add(scripted.Calls(scripted.Call("audit", map[string]any{"number": 1})), scripted.Text("ok"))
			reply, err := w.rt.Send(context.Background(), th.ID, "hi")
			require.NoError(t, err)

			names := offeredNames(w.p.Requests()[0])
			assert.Equal(t, tt.offer, slices.Contains(names, "audit"), "offered: %v", names)
			assert.Contains(t, names, "get_issue", "the other entries are offered either way")
			res := toolResults(reply.Messages, "audit")
			require.Len(t, res, 1)
			if tt.offer {
				assert.Equal(t, "audited", res[0].Content)
			} else {
				assert.Contains(t, res[0].Content, `Tool "audit" is not available for this prompt.`)
			}
		})
	}
}

// The flag resolves through the whole chain: a prompt's own env defaults
// turn its optional entry on.
func TestOptionalEntryFlagFromPromptEnv(t *testing.T) {
	p := triagePrompt()
	p.Env = map[string]string{"ENABLE_AUDIT": "yes"}
	p.Tools = append(p.Tools, toolrun.Optional("ENABLE_AUDIT", toolrun.Use("audit")))
	w := newWorld(t, p, toolrun.Side{})
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "hi")
	require.NoError(t, err)
	assert.Contains(t, offeredNames(w.p.Requests()[0]), "audit")
}

func TestOptionalNeedsAFlagName(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(&toolrun.Prompt{Name: "p", Model: "m", Tools: []toolrun.PromptTool{toolrun.Optional("", toolrun.Use("x"))}})
	var rerr *toolrun.RegistrationError
	require.ErrorAs(t, err, &rerr)
	assert.Contains(t, rerr.Error(), "Optional needs an env flag name")
}

// A relationship whose Optional flag is off is neither offered to
// subagent_create nor creatable; with the flag on it is both.
func TestOptionalRelationship(t *testing.T) {
	build := func(t *testing.T, env map[string]toolrun.EnvValue) (*toolrun.Runtime, *scripted.Provider, string) {
		lead, child := scripted.New(), scripted.New()
		reg := toolrun.NewRegistry(nil)
		require.NoError(t, reg.Register(
			&toolrun.Model{Name: "lead_model", Provider: lead},
			&toolrun.Model{Name: "child_model", Provider: child},
			&toolrun.Prompt{Name: "lead_prompt", Model: "lead_model"},
			&toolrun.Prompt{Name: "helper_prompt", Model: "child_model"},
			&toolrun.Agent{Name: "helper", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "helper_prompt"}, SideB: toolrun.Side{Human: true}},
			&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lead_prompt", Subagents: []toolrun.SubagentRelationship{
				{Agent: "helper", Blocking: true, Optional: "ENABLE_HELPER"},
			}}, SideB: toolrun.Side{Human: true}},
		))
		child.Add(scripted.Text("helped"))
		rt := toolrun.NewRuntime(reg, nil)
		th, err := rt.NewThread(context.Background(), "lead", &toolrun.ThreadOptions{Env: env})
		require.NoError(t, err)
		return rt, lead, th.ID
	}
	create := scripted.Call("subagent_create", map[string]any{"agent": "helper", "message": "m", "attachments": []any{}, "name": "h"})

	t.Run("off", func(t *testing.T) {
		rt, lead, id := build(t, nil)
		lead.Add(scripted.Calls(create), scripted.Text("done"))
		reply, err := rt.Send(context.Background(), id, "go")
		require.NoError(t, err)
		names := offeredNames(lead.Requests()[0])
		assert.NotContains(t, names, "subagent_create")
		assert.NotContains(t, names, "subagents")
		res := toolResults(reply.Messages, "subagent_create")
		require.Len(t, res, 1)
		assert.Equal(t, toolrun.StatusError, res[0].ToolStatus)
	})
	t.Run("on", func(t *testing.T) {
		rt, lead, id := build(t, map[string]toolrun.EnvValue{"ENABLE_HELPER": {Value: "true"}})
		lead.Add(scripted.Calls(create), scripted.Text("done"))
		reply, err := rt.Send(context.Background(), id, "go")
		require.NoError(t, err)
		req := lead.Requests()[0]
		assert.Contains(t, offeredNames(req), "subagent_create")
		for _, s := range req.Tools {
			if s.Name == "subagent_create" {
				var params struct {
					Properties struct {
						Agent struct {
							Enum []string `json:"enum"`
						} `json:"agent"`
					} `json:"properties"`
				}
				require.NoError(t, json.Unmarshal(s.Parameters, &params))
				assert.Equal(t, []string{"helper"}, params.Properties.Agent.Enum)
			}
		}
		res := toolResults(reply.Messages, "subagent_create")
		require.Len(t, res, 1)
		assert.Equal(t, toolrun.StatusSuccess, res[0].ToolStatus, res[0].Content)
		assert.Contains(t, res[0].Content, "helped")
	})
}
