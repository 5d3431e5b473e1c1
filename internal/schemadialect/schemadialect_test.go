package schemadialect

import (
	"bytes"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var dialects = map[string]Dialect{
	"openai":              OpenAI,
	"openai-strict":       OpenAIStrict,
	"anthropic":           Anthropic,
	"openai-notypearrays": {NoTypeArrays: true},
}

type golden struct {
	Schema json.RawMessage `json:"schema"`
	Notes  []Note          `json:"notes"`
}

// TestGolden rewrites every schema in testdata/input for every dialect and
// compares with testdata/golden/<dialect>/<name>.json. Run with -update to
// regenerate the golden files.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/input/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for dname, d := range dialects {
		for _, in := range inputs {
			name := strings.TrimSuffix(filepath.Base(in), ".json")
			t.Run(dname+"/"+name, func(t *testing.T) {
				src, err := os.ReadFile(in)
				require.NoError(t, err)
				out, notes, err := Rewrite(src, d)
				require.NoError(t, err)
				require.True(t, json.Valid(out), "output is JSON: %s", out)
				if notes == nil {
					notes = []Note{}
				}
				var pretty bytes.Buffer
				require.NoError(t, json.Indent(&pretty, out, "", "  "))
				g, err := json.MarshalIndent(golden{Schema: pretty.Bytes(), Notes: notes}, "", "  ")
				require.NoError(t, err)
				g = append(g, '\n')
				path := filepath.Join("testdata", "golden", dname, name+".json")
				if *update {
					require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
					require.NoError(t, os.WriteFile(path, g, 0o644))
					return
				}
				want, err := os.ReadFile(path)
				require.NoError(t, err, "missing golden file; run go test -update")
				assert.Equal(t, string(want), string(g))
			})
		}
	}
}

func rewrite(t *testing.T, schema string, d Dialect) (map[string]any, []Note) {
	t.Helper()
	out, notes, err := Rewrite(json.RawMessage(schema), d)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m, notes
}

func TestNoRefsOrSchemaKeysRemain(t *testing.T) {
	for dname, d := range dialects {
		for _, in := range []string{"refs", "recursive", "simple"} {
			src, err := os.ReadFile("testdata/input/" + in + ".json")
			require.NoError(t, err)
			out, _, err := Rewrite(src, d)
			require.NoError(t, err)
			for _, kw := range []string{`"$ref"`, `"$defs"`, `"definitions"`, `"$schema"`, `"$id"`} {
				assert.NotContains(t, string(out), kw, "%s/%s", dname, in)
			}
		}
	}
}

func TestStrictEveryObjectClosedAndRequired(t *testing.T) {
	src, err := os.ReadFile("testdata/input/nested_optional.json")
	require.NoError(t, err)
	out, notes, err := Rewrite(src, OpenAIStrict)
	require.NoError(t, err)
	assert.False(t, Incompatible(notes))
	var walk func(v any)
	objects := 0
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				objects++
				assert.Equal(t, false, x["additionalProperties"], "closed: %v", x)
				req, _ := x["required"].([]any)
				assert.Len(t, req, len(props), "every property required: %v", x)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var m any
	require.NoError(t, json.Unmarshal(out, &m))
	walk(m)
	assert.Equal(t, 3, objects)
	// Optional properties became nullable.
	filter := m.(map[string]any)["properties"].(map[string]any)["filter"].(map[string]any)
	assert.Equal(t, []any{"object", "null"}, filter["type"])
	state := filter["properties"].(map[string]any)["state"].(map[string]any)
	assert.Equal(t, []any{"string", "null"}, state["type"])
	assert.Equal(t, []any{"open", "closed", nil}, state["enum"])
	since := filter["properties"].(map[string]any)["since"].(map[string]any)
	assert.Len(t, since["anyOf"], 3)
}

func TestPropertyOrderKept(t *testing.T) {
	out, _, err := Rewrite(json.RawMessage(`{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"string"},"m":{"type":"string"}}}`), OpenAIStrict)
	require.NoError(t, err)
	s := string(out)
	assert.Less(t, strings.Index(s, `"z"`), strings.Index(s, `"a"`))
	assert.Less(t, strings.Index(s, `"a"`), strings.Index(s, `"m"`))
	assert.Contains(t, s, `"required":["z","a","m"]`)
}

func TestRecursiveRefIsIncompatibleForStrict(t *testing.T) {
	src, err := os.ReadFile("testdata/input/recursive.json")
	require.NoError(t, err)
	_, notes, err := Rewrite(src, OpenAIStrict)
	require.NoError(t, err)
	assert.True(t, Incompatible(notes))
	_, notes, err = Rewrite(src, Anthropic)
	require.NoError(t, err)
	require.Len(t, notes, 1)
	assert.Equal(t, "$ref", notes[0].Keyword)
}

func TestTypeArraysSplit(t *testing.T) {
	m, _ := rewrite(t, `{"type":"object","properties":{"n":{"type":["integer","null"],"minimum":1,"description":"d"}}}`, Dialect{NoTypeArrays: true})
	n := m["properties"].(map[string]any)["n"].(map[string]any)
	assert.Equal(t, "d", n["description"])
	assert.Nil(t, n["type"])
	assert.Equal(t, []any{
		map[string]any{"type": "integer", "minimum": float64(1)},
		map[string]any{"type": "null"},
	}, n["anyOf"])
}

func TestEmptyAndNull(t *testing.T) {
	for _, s := range []string{"", "null", " {} ", "true"} {
		m, notes := rewrite(t, s, OpenAI)
		assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}}, m, "%q", s)
		assert.Empty(t, notes)
	}
	m, _ := rewrite(t, "", OpenAIStrict)
	assert.Equal(t, map[string]any{"type": "object", "properties": map[string]any{}, "required": []any{}, "additionalProperties": false}, m)
}

func TestErrors(t *testing.T) {
	_, _, err := Rewrite(json.RawMessage(`{"type":`), OpenAI)
	assert.ErrorContains(t, err, "not valid JSON")
	_, _, err = Rewrite(json.RawMessage(`[1]`), OpenAI)
	assert.ErrorContains(t, err, "not a JSON object")
	_, _, err = Rewrite(json.RawMessage(`{"type":"string"}`), OpenAI)
	assert.ErrorContains(t, err, "must be an object")
	_, _, err = Rewrite(json.RawMessage(`{} {}`), OpenAI)
	assert.Error(t, err)
}

func TestLogNotes(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewTextHandler(&buf, nil))
	_, notes, err := Rewrite(json.RawMessage(`{"type":"object","properties":{"u":{"type":"string","format":"uri"}}}`), OpenAIStrict)
	require.NoError(t, err)
	LogNotes(l, "openai", "fetch", notes)
	assert.Contains(t, buf.String(), "level=WARN")
	assert.Contains(t, buf.String(), "tool=fetch")
	assert.Contains(t, buf.String(), "keyword=format")
	LogNotes(nil, "openai", "fetch", notes) // no panic
}

func TestNumbersKeptExactly(t *testing.T) {
	out, _, err := Rewrite(json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","maximum":12345678901234567890,"multipleOf":0.01}}}`), OpenAI)
	require.NoError(t, err)
	assert.Contains(t, string(out), "12345678901234567890")
	assert.Contains(t, string(out), "0.01")
}
