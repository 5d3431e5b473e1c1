package toolrun_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

const shareSchemaQ = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`

// promptWorld registers sub (a prompt tool with RequiredSchema shareSchemaQ)
// with an agent whose prompt offers it, on a scripted model.
func promptWorld(t *testing.T, sub *toolrun.Prompt, responses ...*scripted.Response) (*toolrun.Registry, *scripted.Provider) {
	t.Helper()
	p := scripted.New(responses...)
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		sub,
		&toolrun.Prompt{Name: "outer", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("sub")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "outer"}, SideB: toolrun.Side{Human: true}},
	))
	return reg, p
}

func offered(t *testing.T, req *toolrun.Request, name string) toolrun.ToolSpec {
	t.Helper()
	for _, s := range req.Tools {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("%s is not offered", name)
	return toolrun.ToolSpec{}
}

// One *Prompt registered in two registries at once (per-tenant registries
// sharing definitions) is read, never written, by the second: run with
// -race.
func TestPromptSharedByRegistriesRace(t *testing.T) {
	p := &toolrun.Prompt{Name: "p", Model: "m", ToolDescription: "p", RequiredSchema: shareSchemaQ}
	regs := []*toolrun.Registry{toolrun.NewRegistry(nil), toolrun.NewRegistry(nil)}
	var wg sync.WaitGroup
	errs := make([]error, len(regs))
	for i, reg := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = reg.Register(p)
		}()
	}
	wg.Wait()
	for i, reg := range regs {
		require.NoError(t, errs[i])
		got, ok := reg.Prompt("p")
		require.True(t, ok)
		assert.Same(t, p, got)
	}
}

// A turn calls a prompt tool (reading its compiled RequiredSchema) while
// another goroutine registers the same prompt in a second registry and, by
// mistake, again in the first: run with -race.
func TestPromptRegisteredWhileATurnUsesItRace(t *testing.T) {
	sub := &toolrun.Prompt{Name: "sub", ToolDescription: "sub", Model: "m", RequiredSchema: shareSchemaQ}
	reg, _ := promptWorld(t, sub,
		scripted.Calls(scripted.Call("sub", map[string]any{"q": "x"})),
		scripted.Text("sub answer"),
		scripted.Text("done"),
	)
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)

	done := make(chan [2]error)
	go func() {
		again := reg.Register(sub)
		other := toolrun.NewRegistry(nil).Register(sub)
		done <- [2]error{again, other}
	}()
	reply, err := rt.Send(context.Background(), th.ID, "go")
	got := <-done
	require.NoError(t, err)
	assert.Equal(t, "done", reply.Text)
	var re *toolrun.RegistrationError
	assert.True(t, errors.As(got[0], &re), "registering sub twice in one registry is refused: %v", got[0])
	assert.NoError(t, got[1])
}

// A refused Register changes nothing: registering a prompt again under a
// name already taken, here after its RequiredSchema was changed, leaves the
// live prompt offered and validated with the schema it was registered with.
func TestRefusedPromptRegistrationLeavesItsSchemaUnchanged(t *testing.T) {
	sub := &toolrun.Prompt{Name: "sub", ToolDescription: "sub", Model: "m", RequiredSchema: shareSchemaQ}
	reg, prov := promptWorld(t, sub,
		scripted.Calls(scripted.Call("sub", map[string]any{"q": "x"})),
		scripted.Text("sub answer"),
		scripted.Text("done"),
	)
	sub.RequiredSchema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	var re *toolrun.RegistrationError
	require.True(t, errors.As(reg.Register(sub), &re))
	assert.Contains(t, re.Reason, "already registered")

	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	reply, err := rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	assert.Equal(t, "done", reply.Text)

	// The call {"q":"x"}, valid only under the schema sub was registered
	// with, ran the sub-prompt: three model requests (outer, the
	// sub-prompt, outer again), not two.
	reqs := prov.Requests()
	require.Len(t, reqs, 3)
	assert.JSONEq(t, shareSchemaQ, string(offered(t, reqs[0], "sub").Parameters))
}

// A copy of a registered prompt is a prompt of its own: registered under
// another name with another RequiredSchema, it is offered with that one.
func TestCopyOfARegisteredPromptCompilesItsOwnSchema(t *testing.T) {
	sub := &toolrun.Prompt{Name: "sub", ToolDescription: "sub", Model: "m", RequiredSchema: shareSchemaQ}
	reg, prov := promptWorld(t, sub, scripted.Text("done"))
	other := `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	cp := new(toolrun.Prompt)
	*cp = *sub // a template copy, as a caller may make one
	cp.Name, cp.RequiredSchema = "sub2", other
	require.NoError(t, reg.Register(cp,
		&toolrun.Prompt{Name: "outer2", Model: "m", Tools: []toolrun.PromptTool{toolrun.Use("sub"), toolrun.Use("sub2")}},
		&toolrun.Agent{Name: "a2", SideA: toolrun.Side{Prompt: "outer2"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a2", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	req := prov.LastRequest()
	assert.JSONEq(t, shareSchemaQ, string(offered(t, req, "sub").Parameters))
	assert.JSONEq(t, other, string(offered(t, req, "sub2").Parameters))
}
