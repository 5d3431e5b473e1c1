package jsonvalue

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
	"unsafe"
)

// roundTrip is what Normalize must agree with: v written by encoding/json
// and read back into an any.
func roundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	err = json.Unmarshal(b, &out)
	return out, err
}

// sameTree reports whether got, a normalised tree, is want, a tree
// encoding/json read back: the same structure and texts, and numbers equal
// once a json.Number is read as encoding/json reads it.
func sameTree(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, we := range w {
			ge, ok := g[k]
			if !ok || !sameTree(ge, we) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameTree(g[i], w[i]) {
				return false
			}
		}
		return true
	case float64:
		switch g := got.(type) {
		case float64:
			return g == w && math.Signbit(g) == math.Signbit(w)
		case json.Number:
			f, err := g.Float64()
			return err == nil && f == w
		}
		return false
	}
	return got == want
}

// checkTree fails unless v holds only the types of a normalised tree,
// json.Number only for integers beyond 2^53 or numbers beyond float64, and
// valid UTF-8.
func checkTree(t *testing.T, v any) {
	t.Helper()
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case nil, bool:
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%s: %v in the tree", path, x)
			}
		case json.Number:
			if _, err := x.Float64(); err == nil && !strings.ContainsAny(string(x), ".eE") {
				if n, err := x.Int64(); err == nil && n >= -(1<<53) && n <= 1<<53 {
					t.Errorf("%s: json.Number %s fits a float64", path, x)
				}
			}
		case string:
			if !utf8.ValidString(x) {
				t.Errorf("%s: invalid UTF-8", path)
			}
		case map[string]any:
			for k, e := range x {
				if !utf8.ValidString(k) {
					t.Errorf("%s: invalid UTF-8 in a key", path)
				}
				walk(e, path+"."+k)
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			t.Errorf("%s: %T in the tree", path, v)
		}
	}
	walk(v, "$")
}

type inner struct {
	A int `json:"a"`
}

type Embedded struct {
	E1 string
	E2 string `json:"e2"`
}

type EmbeddedPtr struct{ P1 int }

type embeddedLower struct{ Promoted string }

type valueMarshaler struct{ N int }

func (v valueMarshaler) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"n": %d, "big": 12345678901234567890, "s": "a\u00e9"}`, v.N), nil
}

type ptrMarshaler struct{ N int }

func (p *ptrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"ptr"`), nil }

type textKey struct{ A, B string }

func (k textKey) MarshalText() ([]byte, error) { return []byte(k.A + "-" + k.B), nil }

type textIntKey int

func (k textIntKey) MarshalText() ([]byte, error) { return fmt.Appendf(nil, "#%d", int(k)), nil }

type ptrText struct{ S string }

func (p *ptrText) MarshalText() ([]byte, error) { return []byte("text:" + p.S), nil }

type customZero struct{ V int }

func (z customZero) IsZero() bool { return z.V < 0 }

type everything struct {
	Name     string      `json:"name"`
	Skip     string      `json:"-"`
	Dash     string      `json:"-,"` //lint:ignore SA5008 the field named "-" is what is tested
	Empty    string      `json:",omitempty"`
	Zero     time.Time   `json:"zero,omitzero"`
	Custom   customZero  `json:"custom,omitzero"`
	Custom2  customZero  `json:"custom2,omitzero"`
	Count    int         `json:"count,string"`
	Ptr      *int        `json:"ptr,string"`
	Float    float64     `json:"float,string"`
	Str      string      `json:"str,string"`
	Bool     bool        `json:"bool,string"`
	NumQ     json.Number `json:"numq,string"`
	Inner    *inner      `json:"inner,omitempty"`
	NilInner *inner      `json:"nil_inner,omitempty"`
	private  int
	Embedded
	*EmbeddedPtr
	embeddedLower
	Bytes   []byte
	Arr     [3]byte
	Any     any
	M       map[int]string
	U       map[uint8]bool
	TK      map[textKey]int
	Num     json.Number
	Raw     json.RawMessage
	T       time.Time
	Dur     time.Duration
	VM      valueMarshaler
	PM      ptrMarshaler
	PMs     []ptrMarshaler
	PMm     map[string]ptrMarshaler
	PT      ptrText
	F32     float32
	Big     int64
	UBig    uint64
	Invalid string `json:"inv\u00e9"`
	BadUTF8 string
	Iface   fmt.Stringer
	EmptyS  []int
	NilS    []int
	NilM    map[string]int
	unexp   string
}

type A struct {
	X int
	Y int
}

type B struct {
	X int
	Z int `json:"y"`
}

type conflict struct {
	A
	B
}

type shadow struct {
	A
	X string
}

type W1 struct{ A }
type W2 struct{ A }

// twice embeds A twice at the same depth: its fields are dropped.
type twice struct {
	W1
	W2
}

type taggedEmbed struct {
	A `json:"a"`
	B
}

type tagWins struct {
	A
	B2
}

type B2 struct {
	X int `json:"X"`
}

func differentialValues() map[string]any {
	n := 7
	return map[string]any{
		"everything": &everything{
			Name: "n", Skip: "s", Dash: "d", Custom: customZero{-1}, Custom2: customZero{1},
			Count: 3, Ptr: &n, Float: 1.5, Str: `q"<`, Bool: true, NumQ: "12",
			Inner: &inner{1}, Embedded: Embedded{"e1", "e2"}, EmbeddedPtr: &EmbeddedPtr{5},
			embeddedLower: embeddedLower{"p"}, Bytes: []byte("bytes\x00\xff"), Arr: [3]byte{1, 2, 3},
			Any: []any{1, "x", map[string]any{"k": nil}}, M: map[int]string{-3: "m"},
			U: map[uint8]bool{255: true}, TK: map[textKey]int{{"a", "b"}: 1},
			Num: "12345678901234567890", Raw: json.RawMessage(` {"r": [1, 2.5, "x"]} `),
			T: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC), Dur: time.Second,
			VM: valueMarshaler{4}, PM: ptrMarshaler{1}, PMs: []ptrMarshaler{{1}},
			PMm: map[string]ptrMarshaler{"k": {1}}, PT: ptrText{"x"},
			F32: 0.1, Big: 1<<62 + 1, UBig: math.MaxUint64, Invalid: "i", BadUTF8: "a\xffb\xe2\x80",
			Iface: time.Second, EmptyS: []int{}, private: 1, unexp: "u",
		},
		"everything by value": everything{PM: ptrMarshaler{1}, PT: ptrText{"x"}, PMs: []ptrMarshaler{{2}}},
		"conflict":            conflict{A{1, 2}, B{3, 4}},
		"shadow":              shadow{A{1, 2}, "x"},
		"twice":               twice{W1{A{1, 2}}, W2{A{3, 4}}},
		"tagged embed":        taggedEmbed{A{1, 2}, B{3, 4}},
		"tag wins":            tagWins{A{1, 2}, B2{3}},
		"numbers": []any{
			int8(-8), int16(16), int32(-32), int64(math.MinInt64), uint(1), uint8(8), uint16(16), uint32(32),
			uintptr(9), float32(-1.25), float32(3.4e38), math.MaxFloat64, math.SmallestNonzeroFloat64,
			1e21, 1e-7, math.Copysign(0, -1), 1 << 53, 1<<53 + 1, -(1 << 53) - 1, int64(math.MaxInt64),
			json.Number("-0"), json.Number("1.0"), json.Number("1E+2"), json.Number("9007199254740993"),
			json.Number(""),
		},
		"maps": map[string]any{
			"ints":          map[int64]float64{math.MinInt64: 1},
			"text keys":     map[textKey]string{{"x", "y"}: "v"},
			"int text keys": map[textIntKey]string{7: "v"},
			"bad utf8":      map[string]int{"\xff": 1, "\xfe": 2, "ok": 3},
			"nested":        map[string]map[string][]int{"a": {"b": {1, 2}}},
			"ptr text":      map[string]*ptrText{"k": {"v"}, "nil": nil},
		},
		"slices": []any{[]string{"a"}, []*int{&n, nil}, [][]byte{[]byte("x"), nil}, [0]int{}, []any{}},
		"raw":    []json.RawMessage{json.RawMessage(`{"a":1e300, "b": [true, null], "c": "\ud800"}`), nil},
		"interfaces": []any{
			any(nil), (*int)(nil), error(nil), fmt.Stringer(nil), &n, ptrOf(ptrOf(any("deep"))),
		},
		"strings": []string{"", "\u2028<>&", "😀", "\x00", "\xed\xa0\x80"},
	}
}

func ptrOf[T any](v T) *T { return &v }

// TestNormalizeAgreesWithEncodingJSON is the differential test: for each
// value encoding/json can encode, Normalize gives the tree it reads back.
func TestNormalizeAgreesWithEncodingJSON(t *testing.T) {
	for name, v := range differentialValues() {
		t.Run(name, func(t *testing.T) {
			got, err := Normalize("value", v, nil)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			checkTree(t, got)
			want, err := roundTrip(v)
			if err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if !sameTree(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("Normalize =\n%s\nencoding/json reads back\n%s", g, w)
			}
		})
	}
}

func TestNumbers(t *testing.T) {
	tests := []struct {
		in   any
		want any
	}{
		{int64(1 << 53), float64(1 << 53)},
		{int64(-(1 << 53)), float64(-(1 << 53))},
		{int64(1<<53 + 1), json.Number("9007199254740993")},
		{int64(math.MaxInt64), json.Number("9223372036854775807")},
		{int64(math.MinInt64), json.Number("-9223372036854775808")},
		{uint64(math.MaxUint64), json.Number("18446744073709551615")},
		{uint64(1 << 53), float64(1 << 53)},
		{float32(0.1), 0.1},
		{float32(16777217), float64(16777216)},
		{json.Number("12345678901234567890"), json.Number("12345678901234567890")},
		{json.Number("1e400"), json.Number("1e400")},
		{json.Number("-1e400"), json.Number("-1e400")},
		{json.Number("1.5"), 1.5},
		{json.Number("1e-400"), 0.0},
		{json.Number(""), 0.0},
		{json.Number("9007199254740992"), float64(1 << 53)},
		{json.Number("-9007199254740993"), json.Number("-9007199254740993")},
		{json.Number("99999999999999999999999"), json.Number("99999999999999999999999")},
		{json.RawMessage(`[1e400, 12345678901234567890, 1.25]`), []any{json.Number("1e400"), json.Number("12345678901234567890"), 1.25}},
	}
	for _, tt := range tests {
		got, err := Normalize("n", tt.in, nil)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Normalize(%T %v) = %T %v, %v; want %T %v", tt.in, tt.in, got, got, err, tt.want, tt.want)
		}
	}
	got, _ := Normalize("n", json.Number("-0"), nil)
	if f, ok := got.(float64); !ok || f != 0 || !math.Signbit(f) {
		t.Errorf("json.Number(-0) = %v, want -0", got)
	}
}

func TestStringsBecomeValidUTF8(t *testing.T) {
	got, err := Normalize("s", map[string]any{"k\xff": "a\xffb\xe2\x80c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"k\ufffd": "a\ufffdb\ufffd\ufffdc"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %q, want %q", got, want)
	}
	// Two keys that become one: the one whose original sorts last wins, as
	// with encoding/json.
	got, _ = Normalize("s", map[string]any{"\xff": 1, "\xfe": 2, "\ufffd": 3}, nil)
	if want := map[string]any{"\ufffd": 1.0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %v, want %v", got, want)
	}
}

func TestResultSharesNothingWithTheInput(t *testing.T) {
	inner := []any{"x"}
	in := map[string]any{"m": map[string]any{"a": 1.0}, "s": inner, "raw": json.RawMessage(`[1]`)}
	got, err := Normalize("v", in, nil)
	if err != nil {
		t.Fatal(err)
	}
	in["m"].(map[string]any)["a"] = 2.0
	inner[0] = "changed"
	in["new"] = true
	want := map[string]any{"m": map[string]any{"a": 1.0}, "s": []any{"x"}, "raw": []any{1.0}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after changing the input the result is %v", got)
	}
}

func TestNormalizedTreeIsItsOwnNormalForm(t *testing.T) {
	for name, v := range differentialValues() {
		once, err := Normalize("v", v, nil)
		if err != nil {
			t.Fatal(err)
		}
		twice, err := Normalize("v", once, nil)
		if err != nil || !reflect.DeepEqual(once, twice) {
			t.Errorf("%s: normalising again changed the tree (%v)", name, err)
		}
	}
}

type failingMarshaler struct{}

var errMarshal = errors.New("cannot marshal this")

func (failingMarshaler) MarshalJSON() ([]byte, error) { return nil, errMarshal }

type panickingMarshaler struct{}

func (panickingMarshaler) MarshalJSON() ([]byte, error) { panic("boom") }

type rawMarshaler string

func (r rawMarshaler) MarshalJSON() ([]byte, error) { return []byte(r), nil }

type failingText struct{}

func (failingText) MarshalText() ([]byte, error) { return nil, errMarshal }

type panickingText struct{}

func (panickingText) MarshalText() ([]byte, error) { panic(panickingText{}) }

type panickingZero struct{}

func (panickingZero) IsZero() bool { panic("zero") }

type cyclicNode struct {
	Name string
	Next *cyclicNode
}

type holder struct {
	Items []any `json:"items"`
}

func TestErrors(t *testing.T) {
	selfMap := map[string]any{"ok": 1}
	selfMap["a"] = map[string]any{"b": []any{1, selfMap}}
	selfSlice := []any{"x", nil}
	selfSlice[1] = selfSlice
	node := &cyclicNode{Name: "a"}
	node.Next = &cyclicNode{Name: "b", Next: node}
	var loop any
	loop = &loop
	viaStruct := &holder{}
	viaStruct.Items = []any{map[string]any{"back": viaStruct}}
	typedMap := map[string]map[string]any{"x": {}}
	typedMap["x"]["y"] = typedMap

	tests := []struct {
		name   string
		v      any
		lim    *Limits
		kind   error
		path   string
		detail string
	}{
		{"a map that contains itself", selfMap, nil, ErrCycle, "error_data.a.b[1]",
			"cycle: the value refers back to error_data, which contains it"},
		{"a slice that contains itself", selfSlice, nil, ErrCycle, "error_data[1]",
			"cycle: the value refers back to error_data, which contains it"},
		{"a pointer cycle through structs", node, nil, ErrCycle, "error_data.Next.Next",
			"cycle: the value refers back to error_data, which contains it"},
		{"an interface holding a pointer to itself", loop, nil, ErrCycle, "error_data",
			"cycle: the value refers back to error_data, which contains it"},
		{"a cycle through a struct, a slice and a map", viaStruct, nil, ErrCycle, "error_data.items[0].back",
			"cycle: the value refers back to error_data, which contains it"},
		{"a typed map cycle", typedMap, nil, ErrCycle, "error_data.x.y",
			"cycle: the value refers back to error_data, which contains it"},
		{"NaN", map[string]any{"score": math.NaN()}, nil, ErrNumber, "error_data.score", "NaN is not a JSON number"},
		{"+Inf", []any{math.Inf(1)}, nil, ErrNumber, "error_data[0]", "+Inf is not a JSON number"},
		{"float32 -Inf", struct{ F float32 }{float32(math.Inf(-1))}, nil, ErrNumber, "error_data.F", "-Inf is not a JSON number"},
		{"an invalid json.Number", map[string]any{"n": json.Number("12abc")}, nil, ErrNumber, "error_data.n",
			`json.Number "12abc" is not a JSON number`},
		{"a func", map[string]any{"cb": func() {}}, nil, ErrUnsupported, "error_data.cb", "func() cannot be encoded as JSON"},
		{"a chan", []any{make(chan int)}, nil, ErrUnsupported, "error_data[0]", "chan int cannot be encoded as JSON"},
		{"a complex number", map[string]any{"z": 1 + 2i}, nil, ErrUnsupported, "error_data.z", "complex128 cannot be encoded as JSON"},
		{"an unsafe pointer", map[string]any{"p": unsafe.Pointer(&selfSlice)}, nil, ErrUnsupported, "error_data.p",
			"unsafe.Pointer cannot be encoded as JSON"},
		{"float keys", map[string]any{"m": map[float64]string{1.5: "x"}}, nil, ErrKey, "error_data.m",
			"map key type float64 cannot be encoded as JSON (object keys are strings; use string, integer or encoding.TextMarshaler keys)"},
		{"struct keys", map[struct{ A int }]int{{1}: 1}, nil, ErrKey, "error_data",
			"map key type struct { A int } cannot be encoded as JSON (object keys are strings; use string, integer or encoding.TextMarshaler keys)"},
		{"MarshalJSON fails", map[string]any{"v": failingMarshaler{}}, nil, ErrMarshaler, "error_data.v",
			"(jsonvalue.failingMarshaler).MarshalJSON: cannot marshal this"},
		{"MarshalJSON panics", []any{panickingMarshaler{}}, nil, ErrMarshaler, "error_data[0]",
			"(jsonvalue.panickingMarshaler).MarshalJSON panicked: boom"},
		{"MarshalJSON writes invalid JSON", map[string]any{"v": rawMarshaler(`{"a":`)}, nil, ErrMarshaler, "error_data.v",
			"(jsonvalue.rawMarshaler).MarshalJSON returned invalid JSON: unexpected EOF"},
		{"MarshalJSON writes two values", map[string]any{"v": rawMarshaler(`1 2`)}, nil, ErrMarshaler, "error_data.v",
			"(jsonvalue.rawMarshaler).MarshalJSON returned invalid JSON: invalid data after the value"},
		{"MarshalJSON writes nothing", map[string]any{"v": rawMarshaler(``)}, nil, ErrMarshaler, "error_data.v",
			"(jsonvalue.rawMarshaler).MarshalJSON returned invalid JSON: unexpected EOF"},
		{"MarshalJSON writes NaN-like text", map[string]any{"v": rawMarshaler(`NaN`)}, nil, ErrMarshaler, "error_data.v",
			"(jsonvalue.rawMarshaler).MarshalJSON returned invalid JSON: invalid character 'N' looking for beginning of value"},
		{"MarshalText fails", struct{ T failingText }{}, nil, ErrMarshaler, "error_data.T",
			"(jsonvalue.failingText).MarshalText: cannot marshal this"},
		{"MarshalText panics with a value that panics when formatted", []any{panickingText{}}, nil, ErrMarshaler, "error_data[0]",
			""},
		{"a map key's MarshalText fails", map[string]any{"m": map[failingText]int{{}: 1}}, nil, ErrMarshaler, "error_data.m",
			"a key: (jsonvalue.failingText).MarshalText: cannot marshal this"},
		{"IsZero panics", struct {
			Z panickingZero `json:"z,omitzero"`
		}{}, nil, ErrMarshaler, "error_data.z", "(jsonvalue.panickingZero).IsZero panicked: zero"},
		{"too deep", nest(65), nil, ErrTooDeep, "error_data" + strings.Repeat("[0]", 64),
			"objects and arrays nested more than 64 deep"},
		{"too deep for a lower limit", nest(4), &Limits{MaxDepth: 3}, ErrTooDeep, "error_data[0][0][0]",
			"objects and arrays nested more than 3 deep"},
		{"too many values", []any{1, 2, 3, 4}, &Limits{MaxNodes: 4}, ErrTooLarge, "error_data[3]", "more than 4 values"},
		{"too many bytes", map[string]any{"ab": "cdef"}, &Limits{MaxBytes: 5}, ErrTooLarge, "error_data.ab",
			"more than 5 bytes of strings and keys"},
		{"a long key in the path", map[string]any{strings.Repeat("k", 100): math.NaN()}, nil, ErrNumber,
			`error_data["` + strings.Repeat("k", 64) + `…"]`, "NaN is not a JSON number"},
		{"a key with odd characters in the path", map[string]any{"a b": map[string]any{"": []any{math.NaN()}}}, nil, ErrNumber,
			`error_data["a b"][""][0]`, "NaN is not a JSON number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize("error_data", tt.v, tt.lim)
			if err == nil {
				t.Fatalf("Normalize = %v, want an error", got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v is not %v", err, tt.kind)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error", err)
			}
			if e.Path != tt.path {
				t.Errorf("Path = %q, want %q", e.Path, tt.path)
			}
			if tt.detail != "" && e.Detail != tt.detail {
				t.Errorf("Detail = %q, want %q", e.Detail, tt.detail)
			}
			if want := e.Path + ": " + e.Detail; err.Error() != want {
				t.Errorf("Error() = %q, want %q", err.Error(), want)
			}
		})
	}
}

func TestMarshalerErrorIsWrapped(t *testing.T) {
	_, err := Normalize("v", failingMarshaler{}, nil)
	if !errors.Is(err, errMarshal) || !errors.Is(err, ErrMarshaler) {
		t.Fatalf("error %v does not match both the method's error and ErrMarshaler", err)
	}
}

func TestRootName(t *testing.T) {
	_, err := Normalize("", []any{math.NaN()}, nil)
	if err == nil || err.Error() != "value[0]: NaN is not a JSON number" {
		t.Fatalf("error = %v", err)
	}
}

// nest returns n arrays nested in each other around 1.
func nest(n int) any {
	var v any = 1
	for range n {
		v = []any{v}
	}
	return v
}

func TestDepthLimitIsExact(t *testing.T) {
	if _, err := Normalize("v", nest(DefaultMaxDepth), nil); err != nil {
		t.Fatalf("%d levels: %v", DefaultMaxDepth, err)
	}
	if _, err := Normalize("v", nest(DefaultMaxDepth+1), nil); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("%d levels: %v, want ErrTooDeep", DefaultMaxDepth+1, err)
	}
	if _, err := Normalize("v", nest(HardMaxDepth), &Limits{MaxDepth: -1}); err != nil {
		t.Fatalf("%d levels with no limit: %v", HardMaxDepth, err)
	}
	if _, err := Normalize("v", nest(HardMaxDepth+1), &Limits{MaxDepth: 1 << 30}); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("%d levels: %v, want ErrTooDeep at the hard limit", HardMaxDepth+1, err)
	}
}

// TestHostileInputs must end, quickly, without overflowing the stack.
func TestHostileInputs(t *testing.T) {
	const million = 1000000

	deepSlice := nest(million)

	deepMap := map[string]any{}
	m := deepMap
	for range million {
		next := map[string]any{}
		m["k"] = next
		m = next
	}

	var deepPtr any = 1
	for range million {
		x := deepPtr
		deepPtr = &x
	}

	deepStruct := &cyclicNode{}
	n := deepStruct
	for range million {
		n.Next = &cyclicNode{}
		n = n.Next
	}

	// A tree that shares subtrees: 2^40 values once expanded.
	var shared any = "leaf"
	for range 40 {
		shared = []any{shared, shared}
	}

	// A map in which every value is the map.
	fan := map[string]any{}
	for i := range 10 {
		fan[fmt.Sprint(i)] = fan
	}

	tests := []struct {
		name string
		v    any
		lim  *Limits
		kind error
	}{
		{"10^6 nested slices", deepSlice, nil, ErrTooDeep},
		{"10^6 nested slices, no depth limit", deepSlice, &Limits{MaxDepth: -1}, ErrTooDeep},
		{"10^6 nested maps", deepMap, nil, ErrTooDeep},
		{"10^6 pointers to pointers", deepPtr, nil, ErrTooDeep},
		{"10^6 linked structs", deepStruct, &Limits{MaxDepth: -1}, ErrTooDeep},
		{"2^40 shared values", shared, nil, ErrTooLarge},
		{"2^40 shared values, no node limit", shared, &Limits{MaxNodes: -1, MaxBytes: 1 << 10}, ErrTooLarge},
		{"a map of itself", fan, nil, ErrCycle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize("v", tt.v, tt.lim)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("error = %v, want %v", err, tt.kind)
			}
			if len(err.Error()) > 200000 {
				t.Fatalf("error text is %d bytes", len(err.Error()))
			}
		})
	}
}

func TestAddressableMarshalersAsEncodingJSON(t *testing.T) {
	// A pointer-receiver MarshalJSON is used on addressable values only:
	// through a pointer or in a slice, not in a map or at the top.
	tests := []struct {
		v    any
		want any
	}{
		{ptrMarshaler{1}, map[string]any{"N": 1.0}},
		{&ptrMarshaler{1}, "ptr"},
		{[]ptrMarshaler{{1}}, []any{"ptr"}},
		{map[string]ptrMarshaler{"k": {1}}, map[string]any{"k": map[string]any{"N": 1.0}}},
		{&struct{ P ptrMarshaler }{}, map[string]any{"P": "ptr"}},
		{struct{ P ptrMarshaler }{}, map[string]any{"P": map[string]any{"N": 0.0}}},
		{&[1]ptrText{{"a"}}, []any{"text:a"}},
	}
	for _, tt := range tests {
		got, err := Normalize("v", tt.v, nil)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Normalize(%#v) = %#v, %v; want %#v", tt.v, got, err, tt.want)
		}
		want, _ := roundTrip(tt.v)
		if !reflect.DeepEqual(want, tt.want) {
			t.Errorf("encoding/json gives %#v for %#v; the test is wrong", want, tt.v)
		}
	}
}

type lowerMarshaler struct{ A int }

func (lowerMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"called"`), nil }

type lowerMarshaler2 struct{ B int }

func (lowerMarshaler2) MarshalJSON() ([]byte, error) { return []byte(`"called2"`), nil }

type lowerKeys struct{ M map[textKey]int }

type ptrZero struct{ V int }

func (z *ptrZero) IsZero() bool { return z.V == 1 }

type valZero struct{ V int }

func (z valZero) IsZero() bool { return z.V == 1 }

// TestUnexportedEmbeddedStructs covers values reflection marks read-only:
// a tagged unexported embedded struct is a field whose methods reflection
// does not call. encoding/json panics on some of these; Normalize encodes
// them by their kind.
func TestUnexportedEmbeddedStructs(t *testing.T) {
	type withMarshaler struct {
		lowerMarshaler `json:"x"`
	}
	// Two promoted MarshalJSON methods cancel out: the struct has none, and
	// its fields are read-only values with one each.
	type withTwo struct {
		lowerMarshaler  `json:"x"`
		lowerMarshaler2 `json:"y"`
	}
	type withKeys struct {
		lowerKeys `json:"in"`
	}
	type withPtrZero struct {
		ptrZero `json:"z,omitzero"`
	}
	type withValZero struct {
		valZero `json:"z,omitzero"`
	}
	tests := []struct {
		v    any
		want any
	}{
		{withMarshaler{}, "called"}, // the promoted method
		{withTwo{}, map[string]any{"x": map[string]any{"A": 0.0}, "y": map[string]any{"B": 0.0}}},
		{withKeys{lowerKeys{map[textKey]int{{"a", "b"}: 1}}}, map[string]any{"in": map[string]any{"M": map[string]any{"a-b": 1.0}}}},
		{&withPtrZero{ptrZero{0}}, map[string]any{}},
		{&withPtrZero{ptrZero{2}}, map[string]any{"z": map[string]any{"V": 2.0}}},
		{withPtrZero{ptrZero{0}}, map[string]any{}}, // read-only: the zero value test
		{withPtrZero{ptrZero{1}}, map[string]any{"z": map[string]any{"V": 1.0}}},
		{withValZero{valZero{1}}, map[string]any{"z": map[string]any{"V": 1.0}}},
	}
	for _, tt := range tests {
		got, err := Normalize("v", tt.v, nil)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Normalize(%#v) = %#v, %v; want %#v", tt.v, got, err, tt.want)
		}
	}
}

func TestFlatMapCostsOnlyTheCopy(t *testing.T) {
	m := map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil, "e": "y", "f": 2.0}
	copyAllocs := testing.AllocsPerRun(100, func() {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		sink = out
	})
	got := testing.AllocsPerRun(100, func() {
		if _, err := Normalize("v", m, nil); err != nil {
			t.Fatal(err)
		}
	})
	if got > copyAllocs {
		t.Errorf("Normalize of a flat map allocates %v times, copying it %v", got, copyAllocs)
	}
}

var sink any

func TestConcurrentNormalize(t *testing.T) {
	v := differentialValues()
	done := make(chan error)
	for range 4 {
		go func() {
			var err error
			for range 20 {
				if _, err = Normalize("v", v, nil); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
