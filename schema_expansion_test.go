package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

// refLadder returns a schema of definitions d0 … dn in which each d_i is an
// object whose two properties both $ref d_{i-1}: n+1 subschemas to
// validate, 2^n copies of d0 in the form sent to a model provider, which
// inlines every $ref.
func refLadder(n int) string {
	defs := []string{`"d0":{"type":"string"}`}
	for i := 1; i <= n; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i-1, i-1))
	}
	return fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":"#/$defs/d%d"}},"$defs":{%s}}`, n, strings.Join(defs, ","))
}

func ladderExecute(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
	return toolrun.Text("ok"), nil
}

// A schema whose provider form would pass the rewrite's bounds is refused
// when registered, naming the definition, the bound and the shared
// definition, instead of failing the first model request that offers it;
// the registry is left unchanged.
func TestRegisterRefusesSchemasTooLargeForProviders(t *testing.T) {
	for name, d := range map[string]toolrun.Definition{
		"ladder_tool":   &toolrun.RawFunc{Name: "ladder_tool", Schema: refLadder(14), Execute: ladderExecute},
		"ladder_prompt": &toolrun.Prompt{Name: "ladder_prompt", Model: "m", RequiredSchema: refLadder(14)},
	} {
		reg := toolrun.NewRegistry(nil)
		err := reg.Register(d)
		var re *toolrun.RegistrationError
		require.True(t, errors.As(err, &re), "%v", err)
		assert.Equal(t, name, re.Name)
		assert.Contains(t, re.Reason, "more than 10000 subschemas")
		assert.Contains(t, re.Reason, `$ref "#/$defs/d0" is inlined`)
		assert.NotContains(t, re.Reason, "schemadialect")
		assert.Empty(t, reg.Names())
	}

	// Shared definitions within the bounds register.
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.RawFunc{Name: "small_ladder", Schema: refLadder(8), Execute: ladderExecute},
		&toolrun.Prompt{Name: "small_prompt", Model: "m", RequiredSchema: refLadder(8)},
	))
}
