package schema

import (
	"strings"
	"testing"
)

// A number is bounded by the digits the validator's exact arithmetic would
// build, not only by its characters: 1e999999 is eight characters and a
// million digits.
func TestNumberSizeCountsTheExponent(t *testing.T) {
	for _, c := range []struct {
		text    string
		size    int
		clamped bool
	}{
		{"0", 1, false},
		{"-12.50", 4, false},
		{"1e3", 4, false},
		{"1.5E+300", 302, false},
		{"25e-3", 5, false},
		{"1e999999", 1000000, false},
		{"1e-999999", 1000000, false},
		{"1e00000000000000000000000000000005", 6, false},
		{"1e99999999999999999999", 1 + maxExponent, true},
	} {
		size, clamped := numberSize(c.text)
		if size != c.size || clamped != c.clamped {
			t.Errorf("numberSize(%s) = %d, %v; want %d, %v", c.text, size, clamped, c.size, c.clamped)
		}
	}
	if m := numberTooBig("1e999"); m != "" {
		t.Errorf("1e999 (1,000 digits) was refused: %s", m)
	}
	if m := numberTooBig("1e1000"); m != "a number of 1001 digits when written out; numbers may have at most 1000" {
		t.Errorf("1e1000: %q", m)
	}
	if m := numberTooBig("1e99999999999999999999"); !strings.Contains(m, "more than 1000000000 digits") {
		t.Errorf("a clamped exponent: %q", m)
	}
}

// Every route refuses a number too big to write out, wherever it stands:
// under a typed property, under one without constraints, inside an array
// checked for unique items, and in an enum; the fast scan leaves it to the
// full path, which names the limit.
func TestNumbersTooBigToWriteOutAreRefusedEverywhere(t *testing.T) {
	s := compileTest(t, `{"type":"object","properties":{"n":{"type":"integer"},"u":{"type":"array","uniqueItems":true},"e":{"enum":[1,2]},"x":{}}}`)
	f := compileTest(t, `{"type":"object","properties":{"n":{"type":"integer"},"x":{}}}`)
	if f.fast == nil {
		t.Fatal("no fast path for the second schema")
	}
	for _, in := range []string{
		`{"n":1e999999}`, `{"n":-1E-999999}`, `{"x":1e1001}`, `{"n":1e99999999999999999999999}`,
		`{"u":[1e999999,2e999999,3e999999]}`, `{"e":1e999999}`, `{"x":[` + strings.Repeat("1e999999,", 199) + `1e999999]}`,
	} {
		for _, sch := range []*Schema{s, f} {
			if ok, _, supported := sch.Scan(in); supported && ok {
				t.Errorf("%s: the scan accepted it", in)
			}
			v, err := decodeExact([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			issues := sch.Validate(v)
			if len(issues) == 0 || !strings.Contains(issues[0].Message, "numbers may have at most 1000") {
				t.Errorf("%s: %v, want a refusal naming the limit", in, issues)
			}
		}
	}
	// Exponents that stay within the limit keep their meaning.
	for _, in := range []string{`{"n":1e3}`, `{"n":1e999}`, `{"x":2.5E-300}`} {
		v, _ := decodeExact([]byte(in))
		if issues := f.Validate(v); len(issues) != 0 {
			t.Errorf("%s: %v", in, issues)
		}
	}
}
