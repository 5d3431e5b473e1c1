package schemadialect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refLadder returns a schema of definitions d0 … dn in which each d_i is an
// object whose two properties both $ref d_{i-1}: n+1 subschemas to
// validate, 2^n copies of d0 once inlined.
func refLadder(n int) string {
	defs := []string{`"d0":{"type":"string"}`}
	for i := 1; i <= n; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i-1, i-1))
	}
	return fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":"#/$defs/d%d"}},"$defs":{%s}}`, n, strings.Join(defs, ","))
}

// A ladder of shared $refs past the budget is refused, naming the bound and
// the definition copied most often, in every dialect; one within it is
// inlined in full.
func TestRewriteSharedRefsAreBounded(t *testing.T) {
	for name, d := range dialects {
		t.Run(name, func(t *testing.T) {
			// 2^14 copies of d0: 4 MB of JSON from 1.3 KB before the bound.
			out, notes, err := Rewrite([]byte(refLadder(14)), d)
			require.Error(t, err, "rewritten to %d bytes", len(out))
			assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
			assert.Contains(t, err.Error(), "more than 10000 subschemas")
			assert.Contains(t, err.Error(), `$ref "#/$defs/d0" is inlined`)
			assert.Nil(t, out)
			assert.Nil(t, notes)

			out, _, err = Rewrite([]byte(refLadder(10)), d)
			require.NoError(t, err)
			assert.Equal(t, 1<<10, strings.Count(string(out), `"string"`), "every use of d0 is inlined")
			assert.NotContains(t, string(out), "$ref")
		})
	}
}

// A large definition used a few times stays under the subschema count but
// not under the byte bound.
func TestRewriteOutputIsBoundedInBytes(t *testing.T) {
	big := strings.Repeat("x", 200_000)
	var props []string
	for i := range 8 {
		props = append(props, fmt.Sprintf(`"p%d":{"$ref":"#/$defs/big"}`, i))
	}
	in := fmt.Sprintf(`{"type":"object","properties":{%s},"$defs":{"big":{"type":"string","description":%q}}}`, strings.Join(props, ","), big)
	out, _, err := Rewrite([]byte(in), OpenAI)
	require.Error(t, err, "rewritten to %d bytes", len(out))
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	assert.Contains(t, err.Error(), "longer than 1048576 bytes")
	assert.Contains(t, err.Error(), `$ref "#/$defs/big" is inlined 8 times`)

	// Five copies fit.
	in = strings.Replace(in, `"p5":{"$ref":"#/$defs/big"},"p6":{"$ref":"#/$defs/big"},"p7":{"$ref":"#/$defs/big"}`, `"p5":{}`, 1)
	out, _, err = Rewrite([]byte(in), OpenAI)
	require.NoError(t, err)
	assert.Equal(t, 5, strings.Count(string(out), big))
}

const expansionChildEnv = "SCHEMADIALECT_EXPANSION_CHILD"

// A ladder of 40 levels (2.8 KB) stood for 2^40 copies: the rewrite ran
// until the host's memory was gone. It runs in a child process, so that a
// regression fails this test instead of killing the test binary.
func TestRewriteSharedRefLadderCannotExhaustMemory(t *testing.T) {
	if os.Getenv(expansionChildEnv) != "" {
		for name, d := range dialects {
			_, _, err := Rewrite([]byte(refLadder(40)), d)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: want ErrTooLarge, got %v", name, err)
			}
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRewriteSharedRefLadderCannotExhaustMemory$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), expansionChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child process failed: the rewrite was not bounded\n%s", out)
	require.Contains(t, string(out), "--- PASS: TestRewriteSharedRefLadderCannotExhaustMemory", string(out))
}
