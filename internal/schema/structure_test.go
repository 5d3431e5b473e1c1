package schema

import (
	"strings"
	"testing"
)

// verdict validates in on every route the schema has (the validator, and
// Scan when it answers) and fails the test when they disagree.
func verdict(t *testing.T, s *Schema, in string) bool {
	t.Helper()
	v, err := Decode([]byte(in))
	if err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	ok := len(s.Validate(v)) == 0
	if sok, _, answered := s.Scan(in); answered && sok != ok {
		t.Fatalf("%s: Scan says %v, the validator %v", in, sok, ok)
	}
	return ok
}

// TestCountsBeyondAnyValueKeepTheirMeaning: a count too large for a
// machine integer is still larger than every string, array or object a
// call can hold. Before, the validator kept it modulo 2⁶⁴, so minLength
// 1e300 accepted every string.
func TestCountsBeyondAnyValueKeepTheirMeaning(t *testing.T) {
	cases := []struct {
		schema string
		in     string
		ok     bool
	}{
		{`{"type":"object","properties":{"s":{"type":"string","minLength":1e300}}}`, `{"s":"x"}`, false},
		{`{"type":"object","properties":{"s":{"type":"string","minLength":18446744073709551617}}}`, `{"s":"x"}`, false},
		{`{"type":"object","properties":{"s":{"type":"string","maxLength":1e300}}}`, `{"s":"xyz"}`, true},
		{`{"type":"object","properties":{"s":{"type":"string","maxLength":18446744073709551616}}}`, `{"s":"xyz"}`, true},
		{`{"type":"object","properties":{"a":{"type":"array","minItems":1e300}}}`, `{"a":[1,2]}`, false},
		{`{"type":"object","properties":{"a":{"type":"array","maxItems":1e300}}}`, `{"a":[1,2]}`, true},
		{`{"type":"object","minProperties":1e300}`, `{"a":1}`, false},
		{`{"type":"object","maxProperties":1e300}`, `{"a":1}`, true},
		{`{"type":"object","properties":{"a":{"type":"array","contains":{"type":"integer"},"minContains":1e300}}}`, `{"a":[1]}`, false},
		{`{"type":"object","properties":{"a":{"type":"array","contains":{"type":"integer"},"maxContains":1e300}}}`, `{"a":[1]}`, true},
		// In $defs, reached through $ref, and under a property named like a keyword.
		{`{"type":"object","$defs":{"long":{"type":"string","minLength":1e300}},"properties":{"s":{"$ref":"#/$defs/long"}}}`, `{"s":"x"}`, false},
		{`{"type":"object","properties":{"minLength":{"type":"string","minLength":1e300}}}`, `{"minLength":"x"}`, false},
		{`{"type":"object","properties":{"s":{"anyOf":[{"type":"string","minLength":1e300},{"type":"integer"}]}}}`, `{"s":"x"}`, false},
		// A count that fits is kept exactly.
		{`{"type":"object","properties":{"s":{"type":"string","minLength":3}}}`, `{"s":"xy"}`, false},
		{`{"type":"object","properties":{"s":{"type":"string","minLength":3}}}`, `{"s":"xyz"}`, true},
	}
	for _, c := range cases {
		s := compileTest(t, c.schema)
		if got := verdict(t, s, c.in); got != c.ok {
			t.Errorf("%s with %s: valid = %v, want %v", c.schema, c.in, got, c.ok)
		}
	}
}

// TestCountsInDataAreNotTouched: an enum, const or default that holds an
// object with a key named like a count keyword is data, compared as the
// author wrote it; and the advertised document keeps the author's count.
func TestCountsInDataAreNotTouched(t *testing.T) {
	s := compileTest(t, `{"type":"object","properties":{
		"e":{"enum":[{"minLength":1e300}]},
		"c":{"const":{"maxItems":1e300}},
		"s":{"type":"string","minLength":1e300}}}`)
	if !verdict(t, s, `{"e":{"minLength":1e300},"c":{"maxItems":1e300}}`) {
		t.Error("the enum and const values as written were refused")
	}
	if verdict(t, s, `{"e":{"minLength":9007199254740992}}`) {
		t.Error("the enum accepted a value it does not hold")
	}
	if !strings.Contains(string(s.JSON()), `"minLength":1e300`) {
		t.Errorf("advertised document lost the author's count: %s", s.JSON())
	}
}

// TestReferenceCyclesAreRefusedAtCompile: a subschema that applies itself
// to the same value, through $ref and in-place keywords, could never be
// validated; every call would fail. Compile refuses it and names the
// cycle. Recursion that descends into a part of the value is fine.
func TestReferenceCyclesAreRefusedAtCompile(t *testing.T) {
	refused := []struct{ schema, cycle string }{
		{`{"$ref":"#"}`, "# -> #"},
		{`{"$defs":{"x":{"$ref":"#/$defs/x"}},"type":"object","properties":{"a":{"$ref":"#/$defs/x"}}}`, "#/$defs/x -> #/$defs/x"},
		{`{"$defs":{"x":{"$ref":"#/$defs/y"},"y":{"allOf":[{"$ref":"#/$defs/x"}]}},"type":"object","properties":{"a":{"$ref":"#/$defs/x"}}}`, "#/$defs/x -> #/$defs/y -> #/$defs/y/allOf/0 -> #/$defs/x"},
		{`{"type":"object","anyOf":[{"not":{"$ref":"#"}}]}`, "# -> #/anyOf/0 -> #/anyOf/0/not -> #"},
		{`{"type":"object","if":{"$ref":"#"}}`, "# -> #/if -> #"},
		{`{"type":"object","dependentSchemas":{"k":{"$ref":"#"}}}`, "# -> #/dependentSchemas/k -> #"},
	}
	for _, c := range refused {
		_, err := Compile("t", []byte(c.schema))
		if err == nil {
			t.Errorf("%s: compiled", c.schema)
			continue
		}
		if !strings.Contains(err.Error(), "reference cycle") || !strings.Contains(err.Error(), c.cycle) {
			t.Errorf("%s: error %q does not name the cycle %s", c.schema, err, c.cycle)
		}
	}
	recursive := compileTest(t, `{"type":"object","properties":{"a":{"$ref":"#"},"l":{"type":"array","items":{"$ref":"#"}}},"additionalProperties":false}`)
	for in, ok := range map[string]bool{
		`{"a":{"a":{"l":[{},{"a":{}}]}}}`: true,
		`{"a":{"a":{"l":[{},{"b":1}]}}}`:  false,
	} {
		if got := verdict(t, recursive, in); got != ok {
			t.Errorf("recursive schema, %s: valid = %v, want %v", in, got, ok)
		}
	}
}
