package argdecode_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun/internal/argdecode"

	"github.com/toolrun/toolrun/internal/schema"
)

type format string

type filter struct {
	Category string  `json:"category"`
	MinPrice float64 `json:"minPrice,omitempty" jsonschema:"default=2.5"`
	Sort     string  `json:"sort,omitempty" jsonschema:"enum=asc,enum=desc,default=asc"`
}

type search struct {
	Query  string   `json:"query" jsonschema:"description=Search query"`
	Format format   `json:"format" jsonschema:"enum=json,enum=text"`
	Limit  int      `json:"limit,omitempty" jsonschema:"default=10,minimum=1"`
	Filter filter   `json:"filter"`
	Tags   []string `json:"tags,omitempty"`
}

type item struct {
	Category string `json:"category"`
	N        int    `json:"n,omitempty"`
}

type scalars struct {
	I8    int8             `json:"i8,omitempty"`
	U16   uint16           `json:"u16,omitempty"`
	U     uint             `json:"u,omitempty"`
	F32   float32          `json:"f32,omitempty"`
	B     bool             `json:"b,omitempty" jsonschema:"default=true"`
	P     *int             `json:"p,omitempty"`
	PP    **string         `json:"pp,omitempty"`
	PS    *filter          `json:"ps,omitempty"`
	Any   any              `json:"any,omitempty"`
	M     map[string]int   `json:"m,omitempty"`
	MF    map[format]*item `json:"mf,omitempty"`
	When  time.Time        `json:"when,omitempty"`
	PWhen *time.Time       `json:"pwhen,omitempty"`
	Raw   json.RawMessage  `json:"raw,omitempty"`
	Nums  [][]float64      `json:"nums,omitempty"`
	Num   json.Number      `json:"num,omitempty"`
	PNums []*json.Number   `json:"pnums,omitempty"`
	NoTag string
	Skip  string `json:"-"`
	//lint:ignore U1000 an unexported field, which decoding must leave alone
	quiet string
}

type withDefaults struct {
	Name  string            `json:"name,omitempty" jsonschema:"default=anon"`
	Tags  []string          `json:"tags,omitempty" jsonschema:"default=x"`
	Level *int              `json:"level,omitempty" jsonschema:"default=3"`
	Opts  map[string]string `json:"opts,omitempty"`
}

type embedded struct {
	filter
	Q string `json:"q"`
}

type stringOpt struct {
	N int `json:"n,string"`
}

// route builds what the general route builds for text: Unmarshal of the
// text, then json.Unmarshal of the defaults patch the schema check collected.
func route[T any](t *testing.T, s *schema.Schema, text string) (T, bool) {
	t.Helper()
	var v T
	if err := argdecode.Unmarshal([]byte(text), &v); err != nil {
		return v, false
	}
	_, patch, _ := s.Scan(text)
	if patch != nil {
		p, err := json.Marshal(patch)
		if err != nil {
			t.Fatalf("patch %v: %v", patch, err)
		}
		if err := json.Unmarshal(p, &v); err != nil {
			return v, false
		}
	}
	return v, true
}

func compile[T any](t testing.TB) (*argdecode.Plan, *schema.Schema) {
	t.Helper()
	doc, err := schema.ForType(reflect.TypeFor[T]())
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.Compile("t", doc)
	if err != nil {
		t.Fatal(err)
	}
	return argdecode.Compile(reflect.TypeFor[T](), doc), s
}

// agree checks Decode against the general route on one text, as the
// executor uses it: only for text the schema check accepted. It reports
// whether Decode answered.
func agree[T any](t *testing.T, p *argdecode.Plan, s *schema.Schema, text string) bool {
	t.Helper()
	var got T
	ok := p.Decode(text, reflect.ValueOf(&got).Elem())
	if ok && !json.Valid([]byte(text)) {
		t.Fatalf("Decode accepted invalid JSON %q", text)
	}
	if cok, _, sup := s.Check(text); !cok || !sup {
		return ok
	}
	want, wok := route[T](t, s, text)
	if ok && !wok {
		t.Fatalf("%q: Decode gave %+v, the general route fails", text, got)
	}
	if ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nDecode        %#v\ngeneral route %#v", text, got, want)
	}
	return ok
}

var searchInputs = []string{
	`{"query":"golang generics","format":"json","filter":{"category":"books","minPrice":5},"tags":["a","b"]}`,
	`{"query":"q","format":"text","filter":{"category":"c"}}`,
	` { "query" : "q" , "format":"json" , "filter" : { "category" : "c" , "sort":"desc" } , "limit" : 3 , "tags" : [ ] } `,
	`{"query":"line\nbreak \"quoted\" \u00e9 \ud83d\ude00 \ud800 x","format":"json","filter":{"category":"\u0041"}}`,
	`{"query":"é ü 日本","format":"json","filter":{"category":"c"},"tags":null}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":1.0}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":1e2}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":99999999999999999999}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"query":"again"}`,
	`{"query":"q","format":"json","filter":{"category":"c","minPrice":-0.5e-3}}`,
	`{"query":"q","format":"json","filter":{"category":"c","minPrice":01}}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"limit":+1}`,
	`{"query":"bad \q escape","format":"json","filter":{"category":"c"}}`,
	`{"query":"q","format":"json","filter":{"category":"c"}} x`,
	`{"query":"q","format":"json","filter":{"category":"c"},}`,
	`{"query":"q","format":"json","filter":{"category":"c"}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"tags":["a",]}`,
	`{"query":"q","format":"json","filter":{"category":"c"},"tags":["a" "b"]}`,
	"{\"query\":\"\xff\xfe\",\"format\":\"json\",\"filter\":{\"category\":\"c\"}}",
	`{"query":"q","format":"json","filter":{"category":"c"},"tags":["` + strings.Repeat("x", 300) + `"]}`,
}

func TestDecodeMatchesTheGeneralRoute(t *testing.T) {
	p, s := compile[search](t)
	if p == nil {
		t.Fatal("no plan for a plain struct")
	}
	answered := 0
	for _, in := range searchInputs {
		if agree[search](t, p, s, in) {
			answered++
		}
	}
	// The first five and the minPrice one are the common case: Decode must
	// answer them, or the fast route is not in use.
	if answered < 6 {
		t.Fatalf("Decode answered %d inputs, want at least 6", answered)
	}
}

func TestDecodeAppliesDefaults(t *testing.T) {
	p, _ := compile[search](t)
	var got search
	if !p.Decode(`{"query":"q","format":"json","filter":{"category":"c"}}`, reflect.ValueOf(&got).Elem()) {
		t.Fatal("Decode refused plain input")
	}
	want := search{Query: "q", Format: "json", Limit: 10, Filter: filter{Category: "c", MinPrice: 2.5, Sort: "asc"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	// Present keys keep their values, null included.
	got = search{}
	if !p.Decode(`{"query":"q","format":"json","limit":0,"filter":{"category":"c","minPrice":null}}`, reflect.ValueOf(&got).Elem()) {
		t.Fatal("Decode refused plain input")
	}
	if got.Limit != 0 || got.Filter.MinPrice != 0 || got.Filter.Sort != "asc" {
		t.Fatalf("present keys were defaulted: %+v", got)
	}
}

func TestDecodeShareUnescapedStrings(t *testing.T) {
	p, _ := compile[search](t)
	text := `{"query":"shared","format":"json","filter":{"category":"c"}}`
	allocs := testing.AllocsPerRun(100, func() {
		var a search
		if !p.Decode(text, reflect.ValueOf(&a).Elem()) || a.Query != "shared" {
			t.Fatal("Decode failed")
		}
	})
	// The struct itself escapes through reflect; the strings must not be copied.
	if allocs > 1 {
		t.Fatalf("Decode made %v allocations, want at most 1", allocs)
	}
}

var scalarInputs = []string{
	`{"NoTag":"x","i8":-128,"u16":65535,"u":0,"f32":3.25,"b":false}`,
	`{"NoTag":"x","i8":128}`,
	`{"NoTag":"x","u16":-1}`,
	`{"NoTag":"x","f32":1e39}`,
	`{"NoTag":"x","p":5,"pp":"s","ps":{"category":"c"}}`,
	`{"NoTag":"x","p":null,"pp":null,"ps":null}`,
	`{"NoTag":"x","any":{"a":[1,"two",true,null,{"b":{}}],"c":-1.5e3,"a":"dup"}}`,
	`{"NoTag":"x","any":[]}`,
	`{"NoTag":"x","any":null}`,
	`{"NoTag":"x","m":{"a":1,"b":2,"a":3}}`,
	`{"NoTag":"x","m":{"a":null}}`,
	`{"NoTag":"x","mf":{"k":{"category":"c"},"n":null}}`,
	`{"NoTag":"x","when":"2026-11-30T07:00:00Z"}`,
	`{"NoTag":"x","when":"yesterday"}`,
	`{"NoTag":"x","when":null}`,
	`{"NoTag":"x","pwhen":"2026-11-30T07:00:00+01:00"}`,
	`{"NoTag":"x","pwhen":null}`,
	`{"NoTag":"x","pwhen":"never"}`,
	`{"NoTag":"x","raw":{"any":["thing",1]}}`,
	`{"NoTag":"x","nums":[[1,2.5],[],[-0]]}`,
	`{"NoTag":"x","Skip":"no"}`,
	`{"NoTag":"x","quiet":"no"}`,
	`{"notag":"x"}`,
	`{"NoTag":"x","i8":-1.28e2,"u16":6.5535e4,"u":-0.0,"p":5.0,"m":{"a":1e1},"mf":{"k":{"category":"c","n":2.0}}}`,
	`{"NoTag":"x","u16":-1.0}`,
	`{"NoTag":"x","i8":1.5}`,
	`{"NoTag":"x","f32":1.0,"nums":[[1.0]],"any":2.0}`,
	`{"NoTag":"x","num":12.50,"pnums":[1e2,-0.0,null]}`,
	`{"NoTag":"x","num":null}`,
	`{"NoTag":"x","num":"12.50"}`,
}

func TestDecodeScalarsAndContainers(t *testing.T) {
	p, s := compile[scalars](t)
	if p == nil {
		t.Fatal("no plan")
	}
	answered := 0
	for _, in := range scalarInputs {
		if agree[scalars](t, p, s, in) {
			answered++
		}
	}
	if answered < 10 {
		t.Fatalf("Decode answered %d inputs, want at least 10", answered)
	}
}

func TestDecodeNonScalarDefaults(t *testing.T) {
	p, s := compile[withDefaults](t)
	if p == nil {
		t.Fatal("no plan")
	}
	for _, in := range []string{`{}`, `{"name":"n","tags":["t"],"level":1,"opts":{"a":"b"}}`, `{"level":null}`} {
		if !agree[withDefaults](t, p, s, in) {
			t.Fatalf("Decode refused %s", in)
		}
	}
	// Each call gets its own default slice and pointer.
	var a, b withDefaults
	p.Decode(`{}`, reflect.ValueOf(&a).Elem())
	p.Decode(`{}`, reflect.ValueOf(&b).Elem())
	if a.Level == b.Level || &a.Tags[0] == &b.Tags[0] {
		t.Fatal("defaults are shared between calls")
	}
}

func TestCompileRefusesWhatItDoesNotHandle(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"embedded struct": reflect.TypeFor[embedded](),
		"string option":   reflect.TypeFor[stringOpt](),
		"bytes":           reflect.TypeFor[struct{ B []byte }](),
		"array":           reflect.TypeFor[struct{ A [2]int }](),
		"interface":       reflect.TypeFor[struct{ E error }](),
		"int map keys":    reflect.TypeFor[struct{ M map[int]string }](),
		"odd tag name": reflect.TypeFor[struct {
			A string `json:"a b"`
		}](),
		"duplicate names": reflect.StructOf([]reflect.StructField{
			{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
			{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"x"`},
		}),
	} {
		if argdecode.Compile(typ, map[string]any{}) != nil {
			t.Errorf("%s: Compile made a plan", name)
		}
	}
	// A default the plan cannot place (inside array items) refuses the plan.
	doc := map[string]any{"type": "object", "properties": map[string]any{
		"l": map[string]any{"type": "array", "items": map[string]any{"type": "object", "properties": map[string]any{
			"x": map[string]any{"type": "string", "default": "d"}}}}}}
	type elem struct {
		X string `json:"x"`
	}
	if argdecode.Compile(reflect.TypeFor[struct {
		L []elem `json:"l"`
	}](), doc) != nil {
		t.Error("a default inside array items got a plan")
	}
}

func TestDecodeRefusesWrongTarget(t *testing.T) {
	p, _ := compile[search](t)
	var other struct{ Query string }
	if p.Decode(`{}`, reflect.ValueOf(&other).Elem()) {
		t.Fatal("Decode into another type")
	}
	var s search
	if p.Decode(`{}`, reflect.ValueOf(s)) {
		t.Fatal("Decode into an unsettable value")
	}
}

func TestDecodeDepthLimit(t *testing.T) {
	p, _ := compile[scalars](t)
	deep := `{"NoTag":"x","any":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`
	var v scalars
	if p.Decode(deep, reflect.ValueOf(&v).Elem()) {
		t.Fatal("Decode went deeper than its limit")
	}
}

// TestUnquote compares string decoding with encoding/json on escapes,
// surrogates and invalid bytes.
func FuzzDecode(f *testing.F) {
	for _, in := range searchInputs {
		f.Add(in)
	}
	for _, in := range scalarInputs {
		f.Add(in)
	}
	sp, ss := compile[search](f)
	cp, cs := compile[scalars](f)
	dp, ds := compile[withDefaults](f)
	f.Fuzz(func(t *testing.T, in string) {
		agree[search](t, sp, ss, in)
		agree[scalars](t, cp, cs, in)
		agree[withDefaults](t, dp, ds, in)
	})
}
