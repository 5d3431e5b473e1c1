package toolrun_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// schemaRawTool is a RawFunc over schema that records whether it ran.
func schemaRawTool(schema string, ran *bool) *toolrun.RawFunc {
	return &toolrun.RawFunc{Name: "t", Schema: json.RawMessage(schema),
		Execute: func(ctx context.Context, s toolrun.ThreadState, args json.RawMessage) (toolrun.Result, error) {
			*ran = true
			return toolrun.Text("ran with " + string(args)), nil
		}}
}

// A number written with a large exponent is a few characters but a
// million digits for the validator's exact arithmetic (about 25 ms each,
// which ctx cannot interrupt): it is refused by its size, like a number of
// more than 1,000 characters, on the raw and the typed route.
func TestNumberWithAHugeExponentIsRefusedByItsSize(t *testing.T) {
	many := `{"n":1,"x":[` + strings.Repeat("1e999999,", 199) + `1e999999]}`
	for _, in := range []string{`{"n":1e999999}`, `{"n":1E-999999}`, many} {
		var ran bool
		tool := schemaRawTool(`{"type":"object","properties":{"n":{"type":"integer"},"x":{"type":"array","uniqueItems":true}}}`, &ran)
		r := toolruntest.Call(t, tool, toolruntest.NewState(t, nil), in)
		assert.False(t, ran, "%.40s: a number of a million digits reached the tool", in)
		assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)
		assert.Contains(t, r.Error, "digits when written out; numbers may have at most 1000", in)
	}
	type args struct {
		N float64 `json:"n"`
	}
	typed := &toolrun.Func[args]{Name: "typed", Execute: func(ctx context.Context, s toolrun.ThreadState, a args) (toolrun.Result, error) {
		return toolrun.Text("ran"), nil
	}}
	st := toolruntest.NewState(t, nil)
	r := toolruntest.Call(t, typed, st, `{"n":1e-999999}`)
	assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)
	assert.Contains(t, r.Error, "[n] a number of 1000000 digits when written out")
	// An exponent within the limit is an ordinary number.
	r = toolruntest.Call(t, typed, st, `{"n":2.5e10}`)
	assert.Equal(t, toolrun.StatusSuccess, r.Status, r.Error)
}

// Number keywords on a property without "type" are checked: the fast path
// met the exact numbers the validator reads (json.Number) with a float64
// check only, and let every value through.
func TestTypelessNumberKeywordsAreChecked(t *testing.T) {
	schema := `{"type":"object","properties":{"limit":{"description":"1 to 10","minimum":1,"maximum":10},"mode":{"enum":[1,2]},"v":{"const":3}}}`
	for _, in := range []string{`{"limit":1000000}`, `{"limit":0.5}`, `{"mode":3}`, `{"v":4}`} {
		var ran bool
		r := toolruntest.Call(t, schemaRawTool(schema, &ran), toolruntest.NewState(t, nil), in)
		assert.False(t, ran, "%s passed: %s", in, r.Content)
		assert.Equal(t, "invalid_arguments", r.ErrorCode, in)
	}
	var ran bool
	r := toolruntest.Call(t, schemaRawTool(schema, &ran), toolruntest.NewState(t, nil), `{"limit":10,"mode":2.0,"v":3}`)
	assert.True(t, ran, r.Error)
}

// The fast scan compares numbers as float64: a decimal with more digits
// than float64 keeps rounds onto a bound, an enum value or an integer, and
// passed where the exact validator refuses it. Such a number is now left
// to the validator; plain numbers still pass.
func TestNumbersRoundingOntoABoundAreRefused(t *testing.T) {
	for _, c := range []struct{ schema, in string }{
		{`{"type":"object","properties":{"n":{"type":"integer","maximum":5}}}`, `{"n":5.0000000000000001}`},
		{`{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1e-400}`},
		{`{"type":"object","properties":{"n":{"enum":[1]}}}`, `{"n":1.0000000000000000001}`},
		{`{"type":"object","properties":{"n":{"type":"number","minimum":5}}}`, `{"n":4.9999999999999999}`},
		{`{"type":"object","properties":{"n":{"const":3}}}`, `{"n":3.0000000000000001}`},
	} {
		var ran bool
		r := toolruntest.Call(t, schemaRawTool(c.schema, &ran), toolruntest.NewState(t, nil), c.in)
		assert.False(t, ran, "%s passed %s: %s", c.in, c.schema, r.Content)
		assert.Equal(t, "invalid_arguments", r.ErrorCode, c.in)
	}
	var ran bool
	r := toolruntest.Call(t, schemaRawTool(`{"type":"object","properties":{"n":{"type":"integer","maximum":5},"e":{"enum":[1]}}}`, &ran),
		toolruntest.NewState(t, nil), `{"n":5.0,"e":1.0}`)
	assert.True(t, ran, r.Error)

	type args struct {
		N int `json:"n" jsonschema:"maximum=5"`
	}
	typed := &toolrun.Func[args]{Name: "typed", Execute: func(ctx context.Context, s toolrun.ThreadState, a args) (toolrun.Result, error) {
		return toolrun.Text("ran"), nil
	}}
	r = toolruntest.Call(t, typed, toolruntest.NewState(t, nil), `{"n":5.0000000000000001}`)
	assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)
}

// Data after the arguments object is refused with an error that names it
// and where it starts; the error said only "not valid JSON: ".
func TestTrailingDataAfterTheArgumentsIsNamed(t *testing.T) {
	type args struct {
		A int `json:"a"`
	}
	tool := &toolrun.Func[args]{Name: "t", Execute: func(ctx context.Context, s toolrun.ThreadState, a args) (toolrun.Result, error) {
		return toolrun.Text("ran"), nil
	}}
	r := toolruntest.Call(t, tool, toolruntest.NewState(t, nil), `{"a":1} {"a":2}`)
	assert.Equal(t, toolrun.StatusError, r.Status)
	assert.Contains(t, r.Error, `Tool arguments are not valid JSON: unexpected data after the arguments at offset 8: "{"`)
	var ran bool
	r = toolruntest.Call(t, schemaRawTool(`{"type":"object"}`, &ran), toolruntest.NewState(t, nil), `{"a":1}}`)
	assert.False(t, ran)
	assert.Contains(t, r.Error, `unexpected data after the arguments at offset 7: "}"`)
}

// 1.0 and 1e2 are integers for JSON Schema, so validation lets them
// through for an int field, and models write 5.0: a typed tool now gets
// the integer, on the plan's route and on the general one (an embedded
// struct has no plan). A number no Go field of its type holds is refused as
// a validation issue, not in encoding/json's words.
func TestIntegralNumbersDecodeIntoIntFields(t *testing.T) {
	type args struct {
		N int   `json:"n"`
		U uint8 `json:"u"`
	}
	var got args
	tool := &toolrun.Func[args]{Name: "t", Execute: func(ctx context.Context, s toolrun.ThreadState, a args) (toolrun.Result, error) {
		got = a
		return toolrun.Text("ran"), nil
	}}
	st := toolruntest.NewState(t, nil)
	for in, want := range map[string]args{`{"n":1.0,"u":0}`: {N: 1}, `{"n":1e2,"u":2.55e2}`: {N: 100, U: 255}, `{"n":-5.000,"u":-0}`: {N: -5}} {
		got = args{}
		r := toolruntest.Call(t, tool, st, in)
		assert.Equal(t, toolrun.StatusSuccess, r.Status, "%s: %s", in, r.Error)
		assert.Equal(t, want, got, in)
	}
	r := toolruntest.Call(t, tool, st, `{"n":1.5,"u":0}`)
	assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)

	type Common struct {
		Limit int `json:"limit"`
	}
	type embedded struct {
		Common
		Q string `json:"q"`
	}
	var limit int
	etool := &toolrun.Func[embedded]{Name: "e", Execute: func(ctx context.Context, s toolrun.ThreadState, a embedded) (toolrun.Result, error) {
		limit = a.Limit
		return toolrun.Text("ran"), nil
	}}
	r = toolruntest.Call(t, etool, st, `{"q":"x","limit":3.0}`)
	assert.Equal(t, toolrun.StatusSuccess, r.Status, r.Error)
	assert.Equal(t, 3, limit)

	type floats struct {
		X float64 `json:"x"`
	}
	ftool := &toolrun.Func[floats]{Name: "f", Execute: func(ctx context.Context, s toolrun.ThreadState, a floats) (toolrun.Result, error) {
		return toolrun.Text("ran"), nil
	}}
	r = toolruntest.Call(t, ftool, st, `{"x":1e400}`)
	assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)
	assert.Equal(t, "Tool argument validation failed: [x] got 1e400, want a number from -1.7976931348623157e+308 to 1.7976931348623157e+308", r.Error)
	assert.NotContains(t, r.Error, "Go struct field")
}

// A json.Number field takes a number, its text kept as the model wrote it;
// it was advertised as {"type":"string"}, so 12.50 was refused.
func TestJSONNumberFieldTakesANumber(t *testing.T) {
	type args struct {
		Amount json.Number `json:"amount"`
	}
	tool := &toolrun.Func[args]{Name: "t", Execute: func(ctx context.Context, s toolrun.ThreadState, a args) (toolrun.Result, error) {
		return toolrun.Text("got " + a.Amount.String()), nil
	}}
	st := toolruntest.NewState(t, nil)
	r := toolruntest.Call(t, tool, st, `{"amount":12.50}`)
	assert.Equal(t, toolrun.StatusSuccess, r.Status, r.Error)
	assert.Equal(t, "got 12.50", r.Content)
	doc, err := tool.InputSchema()
	if assert.NoError(t, err) {
		assert.Equal(t, map[string]any{"type": "number"}, doc["properties"].(map[string]any)["amount"])
	}
}

// A draft-07 schema asserts "format", and the validator refused a bad
// email only when the schema had no fast path; the fast path, which reads
// format as an annotation, let it through. Such a schema now goes to the
// validator on every route.
func TestDraft07FormatIsAssertedOnEveryRoute(t *testing.T) {
	schema := `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"to":{"type":"string","format":"email"}},"required":["to"]}`
	var ran bool
	r := toolruntest.Call(t, schemaRawTool(schema, &ran), toolruntest.NewState(t, nil), `{"to":"not-an-email"}`)
	assert.False(t, ran, r.Content)
	assert.Equal(t, "invalid_arguments", r.ErrorCode, r.Error)
	assert.Contains(t, r.Error, "[to]")
	r = toolruntest.Call(t, schemaRawTool(schema, &ran), toolruntest.NewState(t, nil), `{"to":"a@example.com"}`)
	assert.True(t, ran, r.Error)
}
