package argdecode

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestIntegralReadsIntegersWrittenWithFractionOrExponent(t *testing.T) {
	for _, c := range []struct {
		tok string
		neg bool
		mag uint64
		ok  bool
	}{
		{"1.0", false, 1, true}, {"1e2", false, 100, true}, {"150e-1", false, 15, true}, {"-0.0", true, 0, true},
		{"-2.500e1", true, 25, true}, {"0.000e5", false, 0, true}, {"0e999999999999", false, 0, true},
		{"18446744073709551615.0", false, 1<<64 - 1, true}, {"1.8446744073709551615E19", false, 1<<64 - 1, true},
		{"1.5", false, 0, false}, {"1e-5", false, 0, false}, {"18446744073709551616.0", false, 0, false},
		{"1e20", false, 0, false}, {"1e999999999999", false, 0, false}, {"5.0000000000000001", false, 0, false},
	} {
		neg, mag, ok := integral(c.tok)
		if neg != c.neg || mag != c.mag || ok != c.ok {
			t.Errorf("integral(%s) = %v, %d, %v; want %v, %d, %v", c.tok, neg, mag, ok, c.neg, c.mag, c.ok)
		}
	}
	for _, c := range []struct {
		tok, want string
		unsigned  bool
	}{
		{"-0", "0", true}, {"-1.0", "", true}, {"9.223372036854775807e18", "9223372036854775807", false},
		{"9.223372036854775808e18", "", false}, {"-9.223372036854775808e18", "-9223372036854775808", false},
		{"9.223372036854775808e18", "9223372036854775808", true},
	} {
		if got, ok := integerText(c.tok, c.unsigned); got != c.want || ok != (c.want != "") {
			t.Errorf("integerText(%s, %v) = %q, %v; want %q", c.tok, c.unsigned, got, ok, c.want)
		}
	}
}

type Shared struct {
	Count int `json:"count"`
}

type inner struct {
	Level uint8 `json:"level"`
}

type integers struct {
	N      int              `json:"n"`
	I8     int8             `json:"i8"`
	U      uint             `json:"u"`
	P      **int            `json:"p"`
	List   []int64          `json:"list"`
	Arr    [2]int           `json:"arr"`
	Map    map[string]int32 `json:"map"`
	In     inner            `json:"in"`
	Folded int              `json:"folded"`
	F      float64          `json:"f"`
	Num    json.Number      `json:"num"`
	Raw    json.RawMessage  `json:"raw"`
	Any    any              `json:"any"`
	FNum   []json.Number    `json:"fnum"`
	Shared
	*Inner2
}

type Inner2 struct {
	Deep int `json:"deep"`
}

// Unmarshal takes 1.0, 1e2, -0.0 … wherever encoding/json stores an
// integer, and leaves every other number's text as it came.
func TestUnmarshalTakesIntegralNumbersForIntegers(t *testing.T) {
	text := `{"n":1.0,"i8":-1.28e2,"u":-0.0,"p":5e0,"list":[1,2.0,3e1],"arr":[1e0,2.00],"map":{"a":1.0e1},
		"in":{"level":2.55e2},"FOLDED":7.0,"f":1.0,"num":1.0,"raw":[1.0],"any":1.0,"fnum":[2.0],"count":4.0,"deep":6.0}`
	var got integers
	if err := Unmarshal([]byte(text), &got); err != nil {
		t.Fatal(err)
	}
	if got.N != 1 || got.I8 != -128 || got.U != 0 || **got.P != 5 || !reflect.DeepEqual(got.List, []int64{1, 2, 30}) ||
		got.Arr != [2]int{1, 2} || got.Map["a"] != 10 || got.In.Level != 255 || got.Folded != 7 || got.Count != 4 || got.Deep != 6 {
		t.Errorf("integers: %+v", got)
	}
	if got.F != 1 || got.Num != "1.0" || string(got.Raw) != "[1.0]" || got.Any != 1.0 || got.FNum[0] != "2.0" {
		t.Errorf("other numbers changed: f %v num %q raw %s any %v fnum %v", got.F, got.Num, got.Raw, got.Any, got.FNum)
	}
	// What encoding/json would refuse for other reasons it still refuses.
	for _, in := range []string{`{"n":1.5}`, `{"i8":1.28e2}`, `{"u":-1.0}`, `{"n":1e19}`, `{"n":"1"}`} {
		var v integers
		if err := Unmarshal([]byte(in), &v); err == nil {
			t.Errorf("%s: accepted: %+v", in, v)
		}
	}
	// A name two fields claim is not followed: the first error stands.
	// (encoding/json drops both fields, so the value goes nowhere.)
	clash := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[json.Number](), Tag: `json:"x"`},
		{Name: "B", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
		{Name: "C", Type: reflect.TypeFor[int](), Tag: `json:"c"`},
	})
	if fields := structTargets(clash); fields[0].typ != nil || fields[1].typ != nil || fields[2].typ == nil {
		t.Errorf("clash: %+v", fields)
	}
	c := reflect.New(clash)
	if err := Unmarshal([]byte(`{"x":1.0,"c":2.0}`), c.Interface()); err != nil || c.Elem().Field(2).Int() != 2 {
		t.Errorf("clash: %+v, %v", c.Elem(), err)
	}
	type quoted struct {
		N int `json:"n,string"`
	}
	var q quoted
	if err := Unmarshal([]byte(`{"n":1.0}`), &q); err == nil || !strings.Contains(err.Error(), "json:") {
		t.Errorf(",string: %v", err)
	}
}

// Decode takes integral numbers for integer fields on its own, as the
// general route does, instead of leaving them to it.
func TestDecodeTakesIntegralNumbers(t *testing.T) {
	type args struct {
		N int   `json:"n"`
		U uint8 `json:"u"`
	}
	p := Compile(reflect.TypeFor[args](), map[string]any{})
	if p == nil {
		t.Fatal("no plan")
	}
	var a args
	if !p.Decode(`{"n":-1.0e2,"u":-0}`, reflect.ValueOf(&a).Elem()) || a.N != -100 || a.U != 0 {
		t.Errorf("Decode: %+v", a)
	}
	for _, in := range []string{`{"n":1.5}`, `{"u":2.56e2}`, `{"u":-1.0}`, `{"n":1e19}`} {
		var b args
		if p.Decode(in, reflect.ValueOf(&b).Elem()) {
			t.Errorf("%s: Decode gave %+v", in, b)
		}
	}
}

// FuzzUnmarshal: Unmarshal never panics, gives json.Unmarshal's value
// wherever json.Unmarshal succeeds, and takes only numbers for integers.
func FuzzUnmarshal(f *testing.F) {
	f.Add(`{"n":1.0,"list":[2e0],"map":{"a":3.00},"count":-0.0e7}`)
	f.Add(`{"n":1.5,"fnum":[1.0],"raw":1e2}`)
	f.Add(`{"n":1e999999999,"u":-0}`)
	f.Fuzz(func(t *testing.T, in string) {
		var got, want integers
		err := Unmarshal([]byte(in), &got)
		werr := json.Unmarshal([]byte(in), &want)
		if werr == nil && (err != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q: Unmarshal %+v, %v; json.Unmarshal %+v", in, got, err, want)
		}
		if err == nil && werr != nil && !json.Valid([]byte(in)) {
			t.Fatalf("%q: Unmarshal accepted invalid JSON", in)
		}
	})
}
