package schema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type boundsInner struct {
	U uint16 `json:"u"`
}

type boundsEmbedded struct {
	E int8 `json:"e"`
}

type boundsArgs struct {
	boundsEmbedded
	Small  int8             `json:"small" jsonschema:"minimum=-5"`
	Tight  uint8            `json:"tight" jsonschema:"maximum=10"`
	Map    map[string]int32 `json:"map,omitempty"`
	List   []uint32         `json:"list,omitempty"`
	Ptr    *boundsInner     `json:"ptr,omitempty"`
	Float  float32          `json:"float"`
	Int    int              `json:"int"`
	Wide   uint64           `json:"wide"`
	Double float64          `json:"double"`
}

// TestSizedNumberTypesAdvertiseTheirRange: a value the Go type cannot hold
// must be refused by validation, so the schema states the type's range.
func TestSizedNumberTypesAdvertiseTheirRange(t *testing.T) {
	doc, err := ForType(reflect.TypeFor[boundsArgs]())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(doc)
	text := string(raw)
	for _, want := range []string{
		`"e":{"maximum":127,"minimum":-128,"type":"integer"}`,
		`"small":{"maximum":127,"minimum":-5,"type":"integer"}`, // the author's tighter minimum kept
		`"tight":{"maximum":10,"minimum":0,"type":"integer"}`,
		`"map":{"additionalProperties":{"maximum":2147483647,"minimum":-2147483648,"type":"integer"}`,
		`"items":{"maximum":4294967295,"minimum":0,"type":"integer"}`,
		`"u":{"maximum":65535,"minimum":0,"type":"integer"}`,
		`"int":{"maximum":9223372036854775807,"minimum":-9223372036854775808,"type":"integer"}`,
		`"wide":{"maximum":18446744073709551615,"minimum":0,"type":"integer"}`,
		`"double":{"type":"number"}`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("schema lacks %s\nschema: %s", want, text)
		}
	}
	s, err := Compile("bounds", doc)
	if err != nil {
		t.Fatal(err)
	}
	base := `"e":1,"small":1,"tight":1,"float":1,"int":1,"wide":1,"double":1`
	for _, c := range []struct {
		args, path string
	}{
		{`{` + base + `,"map":{"k":3000000000}}`, "map.k"},
		{`{` + base + `,"list":[-1]}`, "list.0"},
		{`{` + base + `,"ptr":{"u":70000}}`, "ptr.u"},
		{`{"e":300,"small":1,"tight":1,"float":1,"int":1,"wide":1,"double":1}`, "e"},
		{`{"e":1,"small":1,"tight":11,"float":1,"int":1,"wide":1,"double":1}`, "tight"},
		{`{"e":1,"small":1,"tight":1,"float":1e39,"int":1,"wide":1,"double":1}`, "float"},
		{`{"e":1,"small":1,"tight":1,"float":1,"int":1e20,"wide":1,"double":1}`, "int"},
		// One past the limits, which float64 rounds onto them.
		{`{"e":1,"small":1,"tight":1,"float":1,"int":9223372036854775808,"wide":1,"double":1}`, "int"},
		{`{"e":1,"small":1,"tight":1,"float":1,"int":-9223372036854775809,"wide":1,"double":1}`, "int"},
		{`{"e":1,"small":1,"tight":1,"float":1,"int":1,"wide":18446744073709551616,"double":1}`, "wide"},
	} {
		v, err := decodeExact([]byte(c.args))
		if err != nil {
			t.Fatal(err)
		}
		issues := s.Validate(v)
		if len(issues) != 1 || issues[0].Path != c.path {
			t.Errorf("%s: issues %v, want one at %s", c.args, issues, c.path)
		}
		if ok, _, supported := s.Check(c.args); supported && ok {
			t.Errorf("%s: the fast check accepts it", c.args)
		}
	}
	for _, limits := range []string{
		`{"e":1,"small":1,"tight":1,"float":1,"int":9223372036854775807,"wide":18446744073709551615,"double":1}`,
		`{"e":1,"small":1,"tight":1,"float":1,"int":-9223372036854775808,"wide":0,"double":1}`,
	} {
		if v, _ := decodeExact([]byte(limits)); len(s.Validate(v)) != 0 {
			t.Errorf("%s: the limits themselves must pass", limits)
		}
		if ok, _, supported := s.Check(limits); supported && !ok {
			t.Errorf("%s: the fast check refuses the limits themselves", limits)
		}
	}
	// What models are sent states the limits exactly.
	for _, want := range []string{`"maximum":9223372036854775807`, `"minimum":-9223372036854775808`, `"maximum":18446744073709551615`} {
		if !strings.Contains(string(s.JSON()), want) {
			t.Errorf("the advertised schema lacks %s: %s", want, s.JSON())
		}
	}
}
