package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// Definitions that are wrong fail loudly: local mistakes at Register,
// dangling references at Check, which the runtime runs before it starts a
// thread or a turn.

func TestRegisterRefusesBadVariablesAndDefaults(t *testing.T) {
	type badInt struct {
		Limit int `json:"limit,omitempty" jsonschema:"default=ten"`
	}
	type badEnum struct {
		Units string `json:"units,omitempty" jsonschema:"enum=metric,enum=imperial,default=kelvin"`
	}
	type badItems struct {
		IDs []int `json:"ids,omitempty" jsonschema:"default=x"`
	}
	type badEmbedded struct {
		badInt
		Name string `json:"name"`
	}
	type badNested struct {
		Page struct {
			Limit int `json:"limit,omitempty" jsonschema:"default=ten"`
		} `json:"page"`
	}
	exec := func(context.Context, toolrun.ThreadState, noArgs) (toolrun.Result, error) {
		return toolrun.Text(""), nil
	}
	for _, c := range []struct {
		def  toolrun.Definition
		want []string // parts of the error
	}{
		{&toolrun.Func[noArgs]{Name: "v1", Variables: []toolrun.Variable{{Name: " "}}, Execute: exec}, []string{`"v1"`, "Variables[0] has no Name"}},
		{&toolrun.Func[noArgs]{Name: "v2", Variables: []toolrun.Variable{{Name: "KEY", Type: "Secret"}}, Execute: exec}, []string{`"v2"`, "variable KEY", `Type "Secret"`}},
		{&toolrun.Prompt{Name: "p1", Model: "m", Variables: []toolrun.Variable{{Name: "X", Type: "password"}}}, []string{`"p1"`, "variable X", `"password"`}},
		{&toolrun.Func[badInt]{Name: "d1", Execute: func(context.Context, toolrun.ThreadState, badInt) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
			[]string{`"d1"`, "field limit", "default=ten", "integer"}},
		{&toolrun.Func[badEnum]{Name: "d2", Execute: func(context.Context, toolrun.ThreadState, badEnum) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
			[]string{`"d2"`, "property units", `default "kelvin"`}},
		{&toolrun.Func[badItems]{Name: "d3", Execute: func(context.Context, toolrun.ThreadState, badItems) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
			[]string{`"d3"`, "ids"}},
		{&toolrun.Func[badEmbedded]{Name: "d5", Execute: func(context.Context, toolrun.ThreadState, badEmbedded) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
			[]string{`"d5"`, "field limit", "default=ten"}},
		{&toolrun.Func[badNested]{Name: "d6", Execute: func(context.Context, toolrun.ThreadState, badNested) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
			[]string{`"d6"`, "field page.limit", "default=ten"}},
		{&toolrun.RawFunc{Name: "d4", Schema: `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"default":0}}}`,
			Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
				return toolrun.Text(""), nil
			}},
			[]string{`"d4"`, "property n", "default 0"}},
	} {
		err := toolrun.NewRegistry(nil).Register(c.def)
		var re *toolrun.RegistrationError
		require.ErrorAs(t, err, &re, "%T %v must be refused", c.def, c.def)
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w)
		}
	}
}

func TestCheckNamesEveryDanglingReference(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: scripted.New()},
		fn("search", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text(""), nil }),
		&toolrun.Func[noArgs]{Name: "queuer", Uses: []string{"notify"}, Execute: func(context.Context, toolrun.ThreadState, noArgs) (toolrun.Result, error) {
			return toolrun.Text(""), nil
		}},
		&toolrun.Prompt{Name: "typo", Model: "m", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("search"), toolrun.Use("serch")}},
		&toolrun.Prompt{Name: "no_model", Model: "gpt-9"},
		&toolrun.Agent{Name: "hidden_agent", SideA: toolrun.Side{Prompt: "typo"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "tpyo", StopTool: "finsh", Subagents: []toolrun.SubagentRelationship{{Agent: "ghost"}, {Agent: "hidden_agent"}}},
			SideB: toolrun.Side{Human: true}},
	))
	err := reg.Check()
	require.Error(t, err)
	for _, want := range []string{
		`register "typo": Tools[1] ("serch"): no tool, prompt or agent of that name is registered`,
		`register "no_model": Model "gpt-9": no model of that name is registered`,
		`register "a": SideA.Prompt "tpyo": no prompt of that name is registered`,
		`register "a": SideA.StopTool "finsh": no tool of that name is registered`,
		`register "a": SideA.Subagents "ghost": Agent "ghost" is not registered`,
		`register "a": SideA.Subagents "hidden_agent": agent "hidden_agent" is not ExposeAsTool`,
		`register "queuer": Uses entry "notify": nothing of that name is registered`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	var re *toolrun.RegistrationError
	assert.True(t, errors.As(err, &re))

	// The runtime refuses to start while a reference dangles, and runs
	// once it is fixed.
	rt := toolrun.NewRuntime(reg, nil)
	_, err = rt.NewThread(context.Background(), "hidden_agent", nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"serch"`)
	fixed := toolrun.NewRegistry(nil)
	require.NoError(t, fixed.Register(&toolrun.Model{Name: "m", Provider: scripted.New()},
		&toolrun.Prompt{Name: "p", Model: "m", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("later")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}}))
	rt = toolrun.NewRuntime(fixed, nil)
	_, err = rt.NewThread(context.Background(), "a", nil)
	require.Error(t, err, "the tool is not registered yet")
	require.NoError(t, fixed.Register(fn("later", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text(""), nil })))
	_, err = rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err, "registered since: the runtime checks again")
}

func TestSidePromptWithoutChatIsWarnedAboutWithoutALoggerConfigured(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New()},
		&toolrun.Prompt{Name: "forgetful", Model: "m"},
		&toolrun.Prompt{Name: "as_tool", Model: "m", ToolDescription: "a sub-prompt without chat is normal"},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "forgetful"}, SideB: toolrun.Side{Human: true}}))
	rt := toolrun.NewRuntime(reg, nil)
	_, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	out := buf.String()
	assert.Contains(t, out, "level=WARN")
	assert.Contains(t, out, "prompt=forgetful")
	assert.Contains(t, out, "set IncludeChat: true")
	assert.NotContains(t, out, "as_tool")
}

// A side's prompt that offers tools without IncludePastTools never shows
// the model what its tools returned: Check warns. A prompt that keeps past
// tools, or offers none, is not warned about.
func TestSidePromptWithToolsButNoPastToolsIsWarnedAbout(t *testing.T) {
	var buf bytes.Buffer
	reg := toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New()},
		fn("search", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text(""), nil }),
		&toolrun.Prompt{Name: "blind", Model: "m", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("search")}},
		&toolrun.Prompt{Name: "sighted", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("search")}},
		&toolrun.Prompt{Name: "toolless", Model: "m", IncludeChat: true},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "blind"}, SideB: toolrun.Side{Prompt: "sighted"}},
		&toolrun.Agent{Name: "b", SideA: toolrun.Side{Prompt: "toolless"}, SideB: toolrun.Side{Human: true}}))
	require.NoError(t, reg.Check())
	out := buf.String()
	assert.Contains(t, out, "prompt=blind")
	assert.Contains(t, out, "set IncludePastTools: true")
	assert.NotContains(t, out, "prompt=sighted")
	assert.NotContains(t, out, "prompt=toolless")
}

// TestDefinitionsAreCheckedOnceRegisteredWhileTurnsStart: threads start on
// several goroutines while the missing tool is registered (run with
// -race). Every start refused names the missing tool, and every start
// that begins after Register returned succeeds: a check made before the
// registration is not reused after it.
func TestDefinitionsAreCheckedOnceRegisteredWhileTurnsStart(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(&toolrun.Model{Name: "m", Provider: scripted.New()},
		&toolrun.Prompt{Name: "p", Model: "m", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("later")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}}))
	rt := toolrun.NewRuntime(reg, nil)
	var registered atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				after := registered.Load()
				_, err := rt.NewThread(context.Background(), "a", nil)
				if after {
					assert.NoError(t, err, "a start after the registration")
				} else if err != nil {
					assert.Contains(t, err.Error(), `"later"`)
				}
			}
		})
	}
	require.NoError(t, reg.Register(fn("later", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text(""), nil })))
	registered.Store(true)
	wg.Wait()
	_, err := rt.NewThread(context.Background(), "a", nil)
	assert.NoError(t, err)
}
