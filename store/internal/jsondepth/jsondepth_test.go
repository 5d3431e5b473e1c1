package jsondepth

import (
	"encoding/json"
	"strings"
	"testing"
)

// TooDeep refuses exactly what json.Unmarshal refuses for its depth, in
// arrays and objects, counting no bracket inside a string (escaped quotes
// and backslashes included), and names the member of the outermost object
// that holds the too-deep value.
func TestTooDeep(t *testing.T) {
	arrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	objects := func(n int) string { return strings.Repeat(`{"k":`, n) + "1" + strings.Repeat("}", n) }
	noise := `"` + strings.Repeat(`[{\"\\`, 6000) + `"` // brackets, escaped quotes and backslashes in a string
	for i, c := range []struct {
		doc, member string
	}{
		{arrays(Max), ""},
		{arrays(Max + 1), ""},
		{objects(Max), ""},
		{objects(Max + 1), "k"},
		{`{"s":` + noise + `,"m":` + arrays(Max-1) + `}`, ""},
		{`{"s":` + noise + `,"m":` + arrays(Max) + `}`, "m"},
		{`[` + noise + `,` + arrays(Max) + `]`, ""},
		{`{"a\"b\\":"v\\","m":1,"x":` + arrays(Max) + `,"z":2}`, "x"},
		{`{"a\"b\\" : ` + arrays(Max) + `}`, `a"b\`},
		{`{"k":"` + strings.Repeat("[", 3*Max) + `"}`, ""},
	} {
		var v any
		err := json.Unmarshal([]byte(c.doc), &v)
		if err != nil && !strings.Contains(err.Error(), "exceeded max depth") {
			t.Fatalf("case %d is not valid JSON: %v", i, err)
		}
		member, deep := TooDeep([]byte(c.doc))
		if deep != (err != nil) || member != c.member {
			t.Errorf("case %d: TooDeep = %q, %v; json.Unmarshal: %v, want member %q", i, member, deep, err, c.member)
		}
	}
}
