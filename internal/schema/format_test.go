package schema

import (
	"encoding/json"
	"testing"
)

// A schema of draft-07 (or earlier) asserts "format", which the fast path
// reads as an annotation: it let a bad email through wherever the schema
// had a fast path. Such a schema now has none, and the verdict is the
// validator's on every route; under draft 2020-12 format stays an
// annotation, on the fast path.
func TestFormatAssertedByAnOlderDraftIsChecked(t *testing.T) {
	for _, c := range []struct {
		doc      string
		asserted bool
	}{
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"e":{"type":"string","format":"email"}}}`, true},
		{`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"l":{"type":"array","items":{"type":"string","format":"email"}}}}`, true},
		{`{"$schema":"http://json-schema.org/draft-06/schema#","type":"object","properties":{"l":{"type":"array"}},"additionalProperties":{"type":"string","format":"email"}}`, true},
		{`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"e":{"type":"string","format":"email"}}}`, false},
		{`{"type":"object","properties":{"e":{"type":"string","format":"email"}}}`, false},
	} {
		s := compileTest(t, c.doc)
		if c.asserted != (s.fast == nil) {
			t.Errorf("%.60s…: fast path %v, want one only when format is not asserted", c.doc, s.fast != nil)
		}
		a := NewArgs(s, nil)
		in := `{"e":"nope","l":["nope"],"x":"nope"}`
		var raw json.RawMessage
		if refused := a.Decode(in, &raw) != nil; refused != c.asserted {
			t.Errorf("%.60s…: raw route refused=%v, want %v", c.doc, refused, c.asserted)
		}
		var m map[string]any
		if refused := a.Decode(in, &m) != nil; refused != c.asserted {
			t.Errorf("%.60s…: generic route refused=%v, want %v", c.doc, refused, c.asserted)
		}
		if f := a.Decode(`{"e":"a@example.com","l":["a@example.com"],"x":"a@example.com"}`, &raw); f != nil {
			t.Errorf("%.60s…: a good email refused: %s", c.doc, f.Message("Tool"))
		}
	}
}
