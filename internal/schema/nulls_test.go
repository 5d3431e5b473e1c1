package schema

import "testing"

func TestStripOptionalNullsRemovesOnlyTheNullsAStrictDialectForced(t *testing.T) {
	s, err := Compile("t", `{"type":"object","additionalProperties":false,"required":["q","keep"],"properties":{
		"q":{"type":"string"},
		"limit":{"type":"integer","default":10},
		"keep":{"type":["string","null"]},
		"maybe":{"type":["integer","null"]},
		"req_null":{"type":"string"},
		"filter":{"type":"object","properties":{"tag":{"type":"string"},"n":{"type":"integer"}},"required":["n"]},
		"list":{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"}}}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		`{"q":"a","limit":null,"keep":null,"maybe":null,"filter":{"tag":null,"n":null},"list":[{"x":null},{"x":1.50}]}`: `{"filter":{"n":null},"keep":null,"list":[{},{"x":1.50}],"maybe":null,"q":"a"}`,
		`{"q":"a<b>","keep":"x","limit":null}`: `{"keep":"x","q":"a<b>"}`,
	} {
		got, changed := s.StripOptionalNulls(in)
		if !changed || got != want {
			t.Errorf("StripOptionalNulls(%s)\n = %s (%v)\nwant %s", in, got, changed, want)
		}
	}
	for _, in := range []string{`{"q":"a","keep":null}`, `{"q":"no nulls here"}`, `not json null`, `{"q":"a"} null`} {
		if got, changed := s.StripOptionalNulls(in); changed || got != in {
			t.Errorf("StripOptionalNulls(%s) = %s, %v; want it unchanged", in, got, changed)
		}
	}
}
