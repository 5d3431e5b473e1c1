package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// Argument text that goes on after its value is refused with an error that
// says so and where; the error had no message at all ("not valid JSON: ").
func TestTrailingDataIsNamed(t *testing.T) {
	a := NewArgs(compileTest(t, `{"type":"object","properties":{"a":{"type":"integer"}}}`), nil)
	for in, want := range map[string]string{
		`{"a":1} {"a":2}`: `unexpected data after the arguments at offset 8: "{"`,
		"{\"a\":1}\n\t x": `unexpected data after the arguments at offset 10: "x"`,
		"{\"a\":1}\xff":   `unexpected data after the arguments at offset 7: "\xff"`,
		`{"a":1}]`:        `unexpected data after the arguments at offset 7: "]"`,
	} {
		for _, dst := range []any{new(json.RawMessage), new(map[string]any)} {
			f := a.Decode(in, dst)
			if f == nil || f.Syntax == nil {
				t.Fatalf("%q into %T: %v, want a syntax failure", in, dst, f)
			}
			if _, isRaw := dst.(*json.RawMessage); isRaw && !strings.Contains(f.Message("Tool"), want) {
				t.Errorf("%q: %q, want it to contain %q", in, f.Message("Tool"), want)
			}
		}
	}
	if v, err := decodeExact([]byte("{\"a\":1} \n")); err != nil || v == nil {
		t.Errorf("trailing white space: %v", err)
	}
}
