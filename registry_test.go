package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

func okTool(name string) *toolrun.Func[noArgs] {
	return fn(name, func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text(name), nil })
}

func TestRegistrationRefusesBadNames(t *testing.T) {
	cases := []struct {
		name, want string
	}{
		{"", "toolrun: register: empty name"},
		{"has space", `toolrun: register "has space": invalid name: must match ^[a-zA-Z0-9_-]{1,64}$`},
		{strings.Repeat("a", 65), "invalid name"},
		{"a/b", "invalid name"},
		{"subagents", "reserved name"},
		{"subagent_create", "reserved name"},
		{"subagent_message", "reserved name"},
		{"provider:web_search", `the "provider:" prefix is reserved`},
	}
	for _, c := range cases {
		err := toolrun.NewRegistry(nil).Register(okTool(c.name))
		var re *toolrun.RegistrationError
		require.ErrorAs(t, err, &re, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}

func TestRegistrationRefusesDuplicatesAllOrNothing(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(okTool("a")))
	err := reg.Register(okTool("b"), okTool("a"))
	require.Error(t, err)
	assert.Equal(t, `toolrun: register "a": name already registered (as a tool)`, err.Error())
	_, ok := reg.Tool("b")
	assert.False(t, ok, "nothing of a refused call is registered")
	err = reg.Register(okTool("c"), okTool("c"))
	assert.ErrorContains(t, err, "registered twice in one call")
}

func TestNonSnakeCaseNamesAreAllowedWithAWarning(t *testing.T) {
	var buf bytes.Buffer
	reg := toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	require.NoError(t, reg.Register(okTool("getIssue"), okTool("get_issue")))
	assert.Contains(t, buf.String(), "not snake_case")
	assert.Contains(t, buf.String(), "getIssue")
	assert.NotContains(t, buf.String(), "name=get_issue")
}

type node struct {
	Name     string  `json:"name"`
	Children []*node `json:"children"`
}

type indirect struct {
	A struct {
		B map[string]indirect `json:"b"`
	} `json:"a"`
}

func TestRecursiveArgumentTypesAreRefused(t *testing.T) {
	for _, d := range []toolrun.Definition{
		&toolrun.Func[node]{Name: "tree", Execute: func(context.Context, toolrun.ThreadState, node) (toolrun.Result, error) { return toolrun.Result{}, nil }},
		&toolrun.Func[indirect]{Name: "ind", Execute: func(context.Context, toolrun.ThreadState, indirect) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}},
	} {
		err := toolrun.NewRegistry(nil).Register(d)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is recursive")
		assert.Contains(t, err.Error(), "$ref")
	}
}

func TestNonStructArgumentsAndNilExecuteAreRefused(t *testing.T) {
	err := toolrun.NewRegistry(nil).Register(&toolrun.Func[int]{Name: "n", Execute: func(context.Context, toolrun.ThreadState, int) (toolrun.Result, error) { return toolrun.Result{}, nil }})
	assert.ErrorContains(t, err, "is not a struct")
	err = toolrun.NewRegistry(nil).Register(&toolrun.Func[noArgs]{Name: "x"})
	assert.ErrorContains(t, err, `register "x": Execute is nil`)
	err = toolrun.NewRegistry(nil).Register(&toolrun.RawFunc{Name: "r", Schema: `{"type":"string"}`, Execute: nil})
	assert.ErrorContains(t, err, "Execute is nil")
}

func TestRawSchemaRemoteAndFileRefsAreRefused(t *testing.T) {
	for _, ref := range []string{"https://example.com/s.json", "file:///etc/passwd"} {
		err := toolrun.NewRegistry(nil).Register(&toolrun.RawFunc{Name: "r",
			Schema: `{"type":"object","properties":{"x":{"$ref":"` + ref + `"}}}`,
			Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
				return toolrun.Result{}, nil
			}})
		require.Error(t, err, ref)
		assert.Contains(t, err.Error(), "refused", ref)
	}
	err := toolrun.NewRegistry(nil).Register(&toolrun.RawFunc{Name: "r", Schema: `{"type":"string"}`,
		Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}})
	assert.ErrorContains(t, err, `schema type must be "object"`)
	err = toolrun.NewRegistry(nil).Register(&toolrun.RawFunc{Name: "r", Schema: `{not json`,
		Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}})
	assert.ErrorContains(t, err, "schema is not valid JSON")
}

// TestRawSchemaReferenceCycleIsRefused: a schema that applies itself to
// the same value without end is refused when registered, naming the
// cycle, instead of failing every call later.
func TestRawSchemaReferenceCycleIsRefused(t *testing.T) {
	err := toolrun.NewRegistry(nil).Register(&toolrun.RawFunc{Name: "r",
		Schema: `{"type":"object","$defs":{"x":{"allOf":[{"$ref":"#/$defs/x"}]}},"properties":{"a":{"$ref":"#/$defs/x"}}}`,
		Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}})
	var re *toolrun.RegistrationError
	require.ErrorAs(t, err, &re)
	assert.ErrorContains(t, err, `register "r": schema has a reference cycle that never reaches a value: #/$defs/x -> #/$defs/x/allOf/0 -> #/$defs/x`)
}

func TestGeneratedSchemaIsClosedInlinedAndClean(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(searchTool(nil)))
	info, ok := reg.Tool("search")
	require.True(t, ok)
	s := string(info.Parameters)
	for _, banned := range []string{"$ref", "$defs", "$schema", "$id"} {
		assert.NotContains(t, s, banned)
	}
	assert.Contains(t, s, `"additionalProperties":false`)
	assert.Equal(t, 2, strings.Count(s, `"additionalProperties":false`), "nested objects are closed too: %s", s)
	assert.Contains(t, s, `"enum":["json","text","markdown"]`)
	assert.Contains(t, s, `"default":10`)
	assert.Contains(t, s, `"required":["query","format"]`)
}

func TestPackagesQualifyNamesAndCheckUses(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	validate := okTool("validate_input")
	var invoked toolrun.Result
	process := &toolrun.Func[noArgs]{Name: "process", Uses: []string{"validate_input"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
		invoked = s.InvokeTool(ctx, "validate_input", nil)
		return toolrun.Text("processed"), nil
	}}
	require.NoError(t, reg.RegisterPackage("orders", process, validate))
	_, ok := reg.Tool("orders/process")
	assert.True(t, ok)
	_, ok = reg.Tool("process")
	assert.False(t, ok, "package names are qualified from outside")

	err := reg.RegisterPackage("billing", &toolrun.Func[noArgs]{Name: "charge", Uses: []string{"missing_dep"}, Execute: process.Execute})
	assert.EqualError(t, err, `toolrun: register "billing/charge": uses "missing_dep", which is neither in package "billing" nor a registered qualified name`)
	require.NoError(t, reg.RegisterPackage("billing", &toolrun.Func[noArgs]{Name: "charge", Uses: []string{"orders/validate_input"}, Execute: process.Execute}))
	assert.ErrorContains(t, reg.RegisterPackage("bad ns", okTool("x")), "invalid package namespace")

	ex := toolrun.NewExecutor(reg, nil)
	out := run(t, ex, "t1", call("1", "orders/process", ""))
	assert.Equal(t, "processed", out[0].Message.Content)
	assert.Equal(t, "validate_input", invoked.Result, "a local name resolves inside its package")
}

func TestRegistryLookupIsSafeForConcurrentUse(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			_ = reg.Register(okTool("t" + strings.Repeat("x", i%50) + string(rune('a'+i%26))))
		}
	}()
	for i := 0; i < 200; i++ {
		reg.Tool("ta")
		reg.Names()
	}
	<-done
	assert.NotEmpty(t, reg.Tools())
	assert.False(t, errors.Is(nil, toolrun.ErrAbort))
}

func TestRegisterRefusesTypedNilDefinitions(t *testing.T) {
	for _, d := range []toolrun.Definition{(*toolrun.Func[issueArgs])(nil), (*toolrun.RawFunc)(nil), (*toolrun.Prompt)(nil), (*toolrun.Agent)(nil), (*toolrun.Model)(nil)} {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Register(%T(nil)) panicked: %v", d, p)
				}
			}()
			err = toolrun.NewRegistry(nil).Register(d)
		}()
		var re *toolrun.RegistrationError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "nil definition") {
			t.Errorf("Register(%T(nil)) = %v, want a RegistrationError naming a nil definition", d, err)
		}
	}
}
