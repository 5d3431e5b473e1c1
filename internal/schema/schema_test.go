package schema

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var diffSchemas = []string{
	`{"type":"object","properties":{"q":{"type":"string","minLength":1,"maxLength":5,"pattern":"^[a-z]+$"},"n":{"type":"integer","minimum":1,"maximum":10},"e":{"enum":["a","b",1]},"t":{"type":"array","items":{"type":"number","exclusiveMinimum":0},"minItems":1,"maxItems":3},"o":{"type":"object","properties":{"x":{"type":["string","null"]}},"additionalProperties":false},"m":{"type":"object","additionalProperties":{"type":"boolean"}},"c":{"const":{"k":[1,2]}}},"required":["q"],"additionalProperties":false}`,
	`{"type":"object","properties":{"f":{"type":"number","exclusiveMaximum":5},"s":{"type":"string","format":"email"}}}`,
	// Number keywords without "type": the fast path meets json.Number there.
	`{"type":"object","properties":{"limit":{"description":"1 to 10","minimum":1,"maximum":10},"e":{"enum":[1,2.5,"x"]},"c":{"const":5},"big":{"maximum":9223372036854775807},"x":{"exclusiveMinimum":0.1}}}`,
}

// hardNumbers are inputs whose numbers float64 cannot settle against the
// schema of diffSchemas they are for (it rounds them onto a bound, an enum
// value or an integer, or an exponent hides what they are): the fast path
// must leave them to the validator when it reads them exactly.
var hardNumbers = []struct {
	schema int
	in     string
}{
	{0, `{"q":"a","n":5.0000000000000001}`}, {0, `{"q":"a","n":9.9999999999999999}`}, {0, `{"q":"a","n":1e-400}`},
	{0, `{"q":"a","n":1e1}`}, {0, `{"q":"a","e":1.0000000000000000001}`}, {0, `{"q":"a","t":[1e-400]}`},
	{1, `{"f":4.9999999999999999}`}, {2, `{"limit":10.0000000000000001}`}, {2, `{"limit":0.99999999999999999}`},
	{2, `{"e":2.50000000000000001}`}, {2, `{"c":5.0000000000000001}`}, {2, `{"c":5e0}`},
	{2, `{"big":9223372036854775807}`}, {2, `{"big":9223372036854775808}`}, {2, `{"x":0.1000000000000000055511151231257827}`},
}

func isHard(in string) bool {
	return slices.ContainsFunc(hardNumbers, func(h struct {
		schema int
		in     string
	}) bool {
		return h.in == in
	})
}

func compileTest(t testing.TB, doc string) *Schema {
	s, err := Compile("t", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFastPathIsBuiltForGeneratedKeywords(t *testing.T) {
	for _, d := range diffSchemas {
		if compileTest(t, d).fast == nil {
			t.Errorf("no fast path for %s", d)
		}
	}
	if compileTest(t, `{"type":"object","anyOf":[{"required":["a"]}]}`).fast != nil {
		t.Error("anyOf must disable the fast path")
	}
}

func TestFastPathAgreesWithTheValidator(t *testing.T) {
	inputs := []string{
		`{"q":"abc"}`, `{"q":""}`, `{"q":"ABC"}`, `{"q":"abcdef"}`, `{}`, `{"q":"a","zz":1}`,
		`{"q":"a","n":0}`, `{"q":"a","n":10}`, `{"q":"a","n":2.5}`, `{"q":"a","n":11}`,
		`{"q":"a","e":"a"}`, `{"q":"a","e":1.0}`, `{"q":"a","e":"c"}`,
		`{"q":"a","t":[]}`, `{"q":"a","t":[1,2]}`, `{"q":"a","t":[0]}`, `{"q":"a","t":[1,2,3,4]}`,
		`{"q":"a","o":{"x":null}}`, `{"q":"a","o":{"x":1}}`, `{"q":"a","o":{"y":"s"}}`,
		`{"q":"a","m":{"k":true}}`, `{"q":"a","m":{"k":"no"}}`,
		`{"q":"a","c":{"k":[1,2]}}`, `{"q":"a","c":{"k":[2,1]}}`, `null`, `[]`, `"x"`,
		`{"f":4.9}`, `{"f":5}`, `{"s":"not-an-email"}`, `{"q":"héé"}`,
		`{"q":"a","n":10.0}`, `{"q":"a","n":2.5e0}`, `{"f":5.0}`, `{"f":-1e300}`,
		`{"limit":1000000}`, `{"limit":10}`, `{"limit":10.0}`, `{"limit":1}`, `{"limit":0.5}`, `{"limit":-3}`,
		`{"e":2.5}`, `{"e":2.50}`, `{"e":1.0}`, `{"e":3}`, `{"e":"x"}`, `{"e":true}`,
		`{"c":5}`, `{"c":5.0}`, `{"c":6}`, `{"c":"5"}`, `{"big":1}`, `{"big":1e19}`, `{"big":-1e300}`,
		`{"x":0.1}`, `{"x":0.10000000000001}`, `{"x":0.09999999999999}`, `{"x":1e-400}`,
	}
	for _, d := range diffSchemas {
		s := compileTest(t, d)
		for _, in := range append(inputs, hardNumberInputs()...) {
			// Both decodings the fast path meets: float64 (Decode) and
			// json.Number (decodeExact, as Args validates).
			for _, dec := range []func([]byte) (any, error){Decode, decodeExact} {
				v, err := dec([]byte(in))
				if err != nil {
					t.Fatal(err)
				}
				fast := s.fast.valid(v)
				full := s.compiled.Validate(v) == nil
				if fast && !full {
					t.Errorf("schema %.40s… input %s (%T numbers): the fast path accepted what the validator refuses", d, in, v)
				}
				if fast != full && !isHard(in) {
					t.Errorf("schema %.40s… input %s: fast=%v validator=%v", d, in, fast, full)
				}
			}
		}
	}
}

// The numbers of hardNumbers, read exactly, are left to the validator
// (else the test above would not be testing anything), and the validator
// decides them both ways.
func TestFastPathLeavesUnsettledNumbersToTheValidator(t *testing.T) {
	verdicts := map[bool]int{}
	for _, h := range hardNumbers {
		s := compileTest(t, diffSchemas[h.schema])
		v, _ := decodeExact([]byte(h.in))
		if s.fast.valid(v) {
			t.Errorf("%s: the fast path answered", h.in)
		}
		verdicts[s.compiled.Validate(v) == nil]++
	}
	if verdicts[true] == 0 || verdicts[false] == 0 {
		t.Errorf("validator verdicts %v: want both", verdicts)
	}
}

// The route of prompt tools and handoffs (a generic object) checks number
// keywords on a property without "type" too.
func TestGenericArgsCheckTypelessNumberKeywords(t *testing.T) {
	a := NewArgs(compileTest(t, diffSchemas[2]), nil)
	for in, want := range map[string]string{
		`{"limit":1000000}`:             "[limit] maximum: got 1×10⁰⁶, want 10",
		`{"limit":0}`:                   "[limit] minimum: got 0, want 1",
		`{"limit":10.0000000000000001}`: "[limit] maximum: got 10, want 10",
		`{"e":2}`:                       "[e] value must be one of 1, 2.5, 'x'",
		`{"c":5.0000000000000001}`:      "[c] value must be 5",
		`{"big":9223372036854775808}`:   "[big] maximum: got 9.223372036854776×10¹⁸, want 9.223372036854776×10¹⁸",
	} {
		var m map[string]any
		f := a.Decode(in, &m)
		if f == nil || FormatIssues(f.Issues) != want {
			t.Errorf("%s: %v, want %s", in, f, want)
		}
	}
	var m map[string]any
	if f := a.Decode(`{"limit":10,"e":2.5,"c":5.0,"big":9223372036854775807}`, &m); f != nil {
		t.Errorf("valid arguments refused: %s", f.Message("Tool"))
	}
}

// FuzzFastPath checks the safety property of the fast path on arbitrary
// input: it never accepts what the validator rejects.
func FuzzFastPath(f *testing.F) {
	f.Add(`{"q":"abc","n":3,"t":[1],"e":"b"}`)
	f.Add(`{"q":"a","o":{"x":"y"},"m":{"a":false}}`)
	f.Add(`{"limit":10.0000000000000001,"e":2.50,"c":5.0,"big":9223372036854775808}`)
	for _, h := range hardNumbers {
		f.Add(h.in)
	}
	schemas := []*Schema{compileTest(f, diffSchemas[0]), compileTest(f, diffSchemas[2])}
	f.Fuzz(func(t *testing.T, in string) {
		for _, dec := range []func([]byte) (any, error){Decode, decodeExact} {
			v, err := dec([]byte(in))
			if err != nil {
				return
			}
			if _, msg := longNumber(v); msg != "" {
				continue // refused by its size before either looks
			}
			for _, s := range schemas {
				if s.fast.valid(v) && s.compiled.Validate(v) != nil {
					t.Fatalf("fast path accepted %s (%T numbers), which the validator rejects", in, v)
				}
			}
		}
	})
}

type rec struct {
	Next *rec `json:"next"`
}

func TestForTypeRefusesRecursionAndStripsKeys(t *testing.T) {
	if _, err := ForType(reflect.TypeFor[rec]()); err == nil || !strings.Contains(err.Error(), "schema.rec -> schema.rec") {
		t.Fatalf("want a recursion error naming the cycle, got %v", err)
	}
	doc, err := ForType(reflect.TypeFor[struct {
		A string `json:"a" jsonschema:"default=x"`
	}]())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc)
	for _, k := range []string{"$schema", "$id", "$ref", "$defs"} {
		if strings.Contains(string(b), k) {
			t.Errorf("%s in %s", k, b)
		}
	}
}

func TestDefaultsPatch(t *testing.T) {
	s := compileTest(t, `{"type":"object","properties":{"a":{"type":"integer","default":3},"o":{"type":"object","properties":{"b":{"default":"x"},"c":{}}},"arr":{"type":"array","items":{"type":"object","properties":{"d":{"default":1}}}}}}`)
	v, _ := Decode([]byte(`{"o":{"c":1}}`))
	p, full := s.DefaultsPatch(v)
	if full {
		t.Fatal("no array defaults needed")
	}
	got, _ := json.Marshal(p)
	if string(got) != `{"a":3,"o":{"b":"x"}}` {
		t.Fatalf("patch %s", got)
	}
	v, _ = Decode([]byte(`{"a":1,"o":{"b":"y"},"arr":[{}]}`))
	if _, full = s.DefaultsPatch(v); !full {
		t.Fatal("array item defaults need the full re-encode")
	}
	if !s.ApplyDefaults(v) {
		t.Fatal("ApplyDefaults changed nothing")
	}
	got, _ = json.Marshal(v)
	if string(got) != `{"a":1,"arr":[{"d":1}],"o":{"b":"y"}}` {
		t.Fatalf("applied %s", got)
	}
}

var scanSchemas = append([]string{
	`{"type":"object","properties":{"query":{"type":"string"},"format":{"type":"string","enum":["json","text"]},"limit":{"type":"integer","default":10,"minimum":1},"filter":{"type":"object","properties":{"category":{"type":"string"},"min":{"type":"number","default":0}},"required":["category"],"additionalProperties":false},"tags":{"type":"array","items":{"type":"string"}}},"required":["query","format","filter"],"additionalProperties":false}`,
	`{"type":"object","properties":{"arr":{"type":"array","items":{"type":"object","properties":{"d":{"default":1}}}}}}`,
}, diffSchemas...)

var scanInputs = append([]string{
	`{"query":"q","format":"json","filter":{"category":"c"}}`,
	`{"query":"q","format":"json","filter":{"category":"c","min":2},"limit":3,"tags":["a","b"]}`,
	`{"query":"q","format":"xml","filter":{"category":"c"}}`,
	`{"query":"q","format":"json","filter":{}}`,
	`{"query":"q","format":"json","filter":{"category":"c","x":1}}`,
	`{"query":1,"format":"json","filter":{"category":"c"}}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":0}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":2.5}`,
	`{"query":"q\n","format":"te\u0078t","filter":{"category":"c"}}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"tags":[1]}`,
	`{"query":"q","format":"json","filter":[],"limit":1}`,
	`{"arr":[{}]}`, `{"arr":[{"d":2}]}`, `{}`, `[]`, `null`, `"s"`, `1`,
	` { "q" : "abc" , "n" : 10 } `, `{"q":"abc","t":[1,2,3]}`, `{"q":"abc","c":{"k":[1,2]}}`,
	`{"q":"é","e":1}`, `{"q":"abc","m":{"a":true,"b":"x"}}`, `{"q":"abc","o":{"x":null}}`, `{"f":5}`,
	`{"q":"abc","n":5.0}`, `{"q":"abc","n":5.5}`, `{"q":"abc","e":1.0}`, `{"q":"abc","c":{"k":[1.0,2]}}`,
	`{"limit":10}`, `{"limit":10.5}`, `{"limit":0.5}`, `{"e":2.50}`, `{"c":5.0}`, `{"big":1e19}`, `{"x":0.1}`,
}, hardNumberInputs()...)

func hardNumberInputs() []string {
	var out []string
	for _, h := range hardNumbers {
		out = append(out, h.in)
	}
	return out
}

// checkScan compares Scan with the full path on one input: when Scan
// answers, its verdict and its defaults patch must be the full path's.
func checkScan(t *testing.T, s *Schema, in string) {
	t.Helper()
	if !json.Valid([]byte(in)) {
		return
	}
	ok, patch, supported := s.Scan(in)
	if cok, missing, csup := s.Check(in); cok != ok || csup != supported || missing != (patch != nil) {
		t.Fatalf("input %s: Check says ok=%v missing=%v supported=%v, Scan ok=%v patch=%v supported=%v", in, cok, missing, csup, ok, patch, supported)
	}
	if !supported {
		return
	}
	// The verdict of reference is the validator's on the exact numbers, as
	// Args validates: float64 would round 5.0000000000000001 onto 5.
	exact, err := decodeExact([]byte(in))
	if err != nil {
		return
	}
	if _, msg := longNumber(exact); msg != "" {
		t.Fatalf("input %s: Scan answered for a number refused by its size", in)
	}
	full := s.compiled.Validate(exact) == nil
	if ok != full {
		t.Fatalf("input %s: Scan says %v, the validator %v", in, ok, full)
	}
	if !ok {
		return
	}
	v, _ := Decode([]byte(in))
	// Applying Scan's patch must give what ApplyDefaults gives.
	merged, _ := Decode([]byte(in))
	mergeInto(merged, patch)
	s.ApplyDefaults(v)
	a, _ := json.Marshal(merged)
	b, _ := json.Marshal(v)
	if string(a) != string(b) {
		t.Fatalf("input %s: with Scan's patch %s, with ApplyDefaults %s", in, a, b)
	}
}

func mergeInto(dst any, patch map[string]any) {
	m, ok := dst.(map[string]any)
	if !ok {
		return
	}
	for k, p := range patch {
		if sub, ok := p.(map[string]any); ok {
			if cur, ok := m[k].(map[string]any); ok {
				mergeInto(cur, sub)
				continue
			}
		}
		m[k] = p
	}
}

// The scan leaves to the full path each number float64 cannot settle, and
// answers for the common forms of numbers.
func TestScanLeavesUnsettledNumbersToTheFullPath(t *testing.T) {
	for _, h := range hardNumbers {
		if _, _, supported := compileTest(t, diffSchemas[h.schema]).Scan(h.in); supported {
			t.Errorf("%s: the scan answered", h.in)
		}
	}
	s := compileTest(t, diffSchemas[0])
	for _, in := range []string{`{"q":"a","n":5}`, `{"q":"a","n":5.0}`, `{"q":"a","n":-0}`, `{"q":"a","n":10.5}`,
		`{"q":"a","e":1}`, `{"q":"a","e":1.0}`, `{"q":"a","t":[0.5,1e-3,2.5E+2]}`, `{"q":"a","n":99999999999999999999}`} {
		if _, _, supported := s.Scan(in); !supported {
			t.Errorf("%s: the scan left a plain number to the full path", in)
		}
	}
}

func TestScanAgreesWithTheFullPath(t *testing.T) {
	answered := 0
	for _, d := range scanSchemas {
		s := compileTest(t, d)
		for _, in := range scanInputs {
			checkScan(t, s, in)
			if _, _, sup := s.Scan(in); sup && json.Valid([]byte(in)) {
				answered++
			}
		}
	}
	if answered < 40 {
		t.Fatalf("Scan answered only %d inputs: the fast path is not being used", answered)
	}
}

// FuzzScan: on arbitrary JSON, Scan never disagrees with the full path.
func FuzzScan(f *testing.F) {
	for _, in := range scanInputs {
		f.Add(in)
	}
	schemas := make([]*Schema, len(scanSchemas))
	for i, d := range scanSchemas {
		schemas[i] = compileTest(f, d)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, s := range schemas {
			checkScan(t, s, in)
		}
	})
}

// FuzzScanNeverPanics feeds arbitrary bytes (not only valid JSON).
func FuzzScanNeverPanics(f *testing.F) {
	for _, in := range scanInputs {
		f.Add(in)
	}
	f.Add(`{"q":"a"`)
	f.Add(`{"q" "a"}`)
	f.Add(`{"q":tru}`)
	s := compileTest(f, scanSchemas[0])
	f.Fuzz(func(t *testing.T, in string) {
		ok, _, supported := s.Scan(in)
		if supported && ok && !json.Valid([]byte(in)) {
			// Allowed (the decoder reports the syntax error), but the
			// verdict must then come from a full decode failing.
			var v any
			if json.Unmarshal([]byte(in), &v) == nil {
				t.Fatalf("inconsistent: %q", in)
			}
		}
	})
}

// TestMissingPropertiesAreReportedAtTheirOwnPath: the model must see which
// field to add, at the top level and inside nested objects.
func TestMissingPropertiesAreReportedAtTheirOwnPath(t *testing.T) {
	s, err := Compile("t", `{"type":"object","properties":{
		"query":{"type":"string"},"page":{"type":"integer"},
		"filter":{"type":"object","properties":{"tag":{"type":"string"},"since":{"type":"string"}},"required":["tag","since"]}},
		"required":["query","page","filter"]}`)
	if err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string][]Issue{
		`{}`:                                 {{"filter", MissingMessage}, {"page", MissingMessage}, {"query", MissingMessage}},
		`{"query":"q","page":1,"filter":{}}`: {{"filter.since", MissingMessage}, {"filter.tag", MissingMessage}},
		`{"query":"q","page":1,"filter":{"tag":"a"}}`: {{"filter.since", MissingMessage}},
	} {
		v, err := Decode([]byte(args))
		if err != nil {
			t.Fatal(err)
		}
		got := s.Validate(v)
		if len(got) != len(want) {
			t.Fatalf("%s: issues %v, want %v", args, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: issue %d = %v, want %v", args, i, got[i], want[i])
			}
		}
	}
}

func TestLongNumberIsFoundWithItsPath(t *testing.T) {
	long := json.Number("1" + strings.Repeat("0", MaxNumberLen))
	want := "a number of 1001 characters; numbers may have at most 1000"
	for _, c := range []struct {
		v    any
		path string
	}{
		{long, "root"},
		{map[string]any{"a": map[string]any{"b": []any{json.Number("1"), long}}}, "a.b.1"},
	} {
		if p, msg := longNumber(c.v); p != c.path || msg != want {
			t.Errorf("longNumber = %q, %q; want %q, %q", p, msg, c.path, want)
		}
	}
	if _, msg := longNumber(map[string]any{"a": json.Number(strings.Repeat("9", MaxNumberLen))}); msg != "" {
		t.Errorf("a number of exactly MaxNumberLen characters was refused: %s", msg)
	}
}
