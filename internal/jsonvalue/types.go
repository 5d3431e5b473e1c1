package jsonvalue

import (
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/toolrun/toolrun/internal/safefmt"
)

// typeInfo is what Normalize needs to know about a type, worked out once.
type typeInfo struct {
	json, text         bool // the type has a MarshalJSON, MarshalText method
	addrJSON, addrText bool // only its pointer type has it
	bytes              bool // a []byte encoded as base64
	fields             []field
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	isZeroerType      = reflect.TypeFor[isZeroer]()
)

type isZeroer interface{ IsZero() bool }

var infoCache sync.Map // reflect.Type → *typeInfo

func infoFor(t reflect.Type) *typeInfo {
	if ti, ok := infoCache.Load(t); ok {
		return ti.(*typeInfo)
	}
	ti := &typeInfo{}
	notPtr := t.Kind() != reflect.Pointer
	switch {
	case notPtr && reflect.PointerTo(t).Implements(marshalerType) && !t.Implements(marshalerType):
		ti.addrJSON = true
		// A value that is not addressable is encoded as if it had no
		// MarshalJSON method, and encoding/json then looks for a MarshalText
		// method of the value only.
		ti.text = t.Implements(textMarshalerType)
	case t.Implements(marshalerType):
		ti.json = true
	case notPtr && reflect.PointerTo(t).Implements(textMarshalerType) && !t.Implements(textMarshalerType):
		ti.addrText = true
	case t.Implements(textMarshalerType):
		ti.text = true
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
		p := reflect.PointerTo(t.Elem())
		ti.bytes = !p.Implements(marshalerType) && !p.Implements(textMarshalerType)
	}
	if t.Kind() == reflect.Struct {
		ti.fields = structFields(t)
	}
	actual, _ := infoCache.LoadOrStore(t, ti)
	return actual.(*typeInfo)
}

// field is a struct field as encoding/json sees it.
type field struct {
	name      string
	index     []int // the path of field indexes through embedded structs
	typ       reflect.Type
	tagged    bool // the name comes from a tag
	omitEmpty bool
	omitZero  bool
	quoted    bool // the ",string" option, on a bool, number or string
}

// structFields returns the fields of struct type t that encoding/json
// encodes, in the order it writes them.
//
// The rules are encoding/json's: exported fields, and the fields of
// embedded structs (exported or not, directly or through a pointer), unless
// tagged "-". An embedded struct without a tag name is not a field itself:
// its fields are promoted. When several fields end up with one name, the
// shallowest wins; among equally shallow ones a tagged field wins; if that
// still leaves more than one, or one embedded struct type appears twice at
// the same depth, the name is dropped.
func structFields(t reflect.Type) []field {
	type embedded struct {
		typ   reflect.Type
		index []int
	}
	var fields []field
	visited := map[reflect.Type]bool{}
	level := []embedded{{typ: t}}
	count := map[reflect.Type]int{} // times each type of level was found at this depth
	for len(level) > 0 {
		var next []embedded
		nextCount := map[reflect.Type]int{}
		for _, em := range level {
			if visited[em.typ] {
				continue
			}
			visited[em.typ] = true
			for i := 0; i < em.typ.NumField(); i++ {
				sf := em.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validName(name) {
					name = ""
				}
				index := append(slices.Clip(em.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					nextCount[ft]++
					if nextCount[ft] == 1 {
						next = append(next, embedded{typ: ft, index: index})
					}
					continue
				}
				f := field{
					name:      name,
					index:     index,
					typ:       sf.Type,
					tagged:    name != "",
					omitEmpty: hasOption(opts, "omitempty"),
					omitZero:  hasOption(opts, "omitzero"),
				}
				if f.name == "" {
					f.name = sf.Name
				}
				if hasOption(opts, "string") {
					switch ft.Kind() {
					case reflect.Bool,
						reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
						reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
						reflect.Float32, reflect.Float64, reflect.String:
						f.quoted = true
					}
				}
				fields = append(fields, f)
				if count[em.typ] > 1 {
					// The embedded type was found twice at this depth: a second
					// copy makes every name it brings ambiguous.
					fields = append(fields, f)
				}
			}
		}
		level, count = next, nextCount
	}

	slices.SortFunc(fields, func(a, b field) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return slices.Compare(a.index, b.index)
	})
	out := fields[:0]
	for i := 0; i < len(fields); {
		j := i + 1
		for j < len(fields) && fields[j].name == fields[i].name {
			j++
		}
		// fields[i] is the shallowest and, among those, tagged first.
		if j-i == 1 || len(fields[i].index) != len(fields[i+1].index) || fields[i].tagged != fields[i+1].tagged {
			out = append(out, fields[i])
		}
		i = j
	}
	slices.SortFunc(out, func(a, b field) int { return slices.Compare(a.index, b.index) })
	return out
}

// validName reports whether a tag name is one encoding/json accepts:
// letters, digits and punctuation other than quotes and backslashes.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}

// isEmpty is the omitempty test: false, 0, a nil pointer or interface, and
// an empty array, slice, map or string.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64,
		reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// isZero is the omitzero test: the field type's IsZero method if it has
// one (nil pointers and interfaces being zero), else the zero value.
func isZero(v reflect.Value, fd *field) (zero bool, f *failure) {
	t := fd.typ
	defer func() {
		if p := recover(); p != nil {
			zero, f = false, fail(ErrMarshaler, method(t, "IsZero")+" panicked: "+safefmt.Sprint(p))
		}
	}()
	if !v.CanInterface() {
		// Reflection does not call methods of a read-only value (an
		// unexported embedded struct with a json tag; encoding/json panics).
		return v.IsZero(), nil
	}
	callIsZero := func(v reflect.Value) bool {
		z, ok := reflect.TypeAssert[isZeroer](v)
		return ok && z.IsZero()
	}
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		if v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() {
			return true, nil
		}
		return callIsZero(v.Elem()), nil
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		if v.IsNil() {
			return true, nil
		}
		return callIsZero(v), nil
	case t.Implements(isZeroerType):
		return callIsZero(v), nil
	case reflect.PointerTo(t).Implements(isZeroerType):
		if !v.CanAddr() {
			c := reflect.New(t).Elem()
			c.Set(v)
			v = c
		}
		return callIsZero(v.Addr()), nil
	}
	return v.IsZero(), nil
}

// maxExact is 2^53: every integer up to it in magnitude is a float64.
const maxExact = 1 << 53

// intValue returns n as a float64 when that holds it exactly, else as a
// json.Number.
func intValue(n int64) any {
	if -maxExact <= n && n <= maxExact {
		return float64(n)
	}
	return json.Number(strconv.FormatInt(n, 10))
}

func uintValue(n uint64) any {
	if n <= maxExact {
		return float64(n)
	}
	return json.Number(strconv.FormatUint(n, 10))
}

// numberValue returns the valid JSON number s as a float64, or as a
// json.Number when it is an integer above 2^53 in magnitude or beyond the
// range of float64.
func numberValue(s string) any {
	if !strings.ContainsAny(s, ".eE") && len(s) > 15 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < -maxExact || n > maxExact {
			return json.Number(s)
		}
		return float64(n)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return json.Number(s)
	}
	return f
}

// isNumber reports whether s is a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(s string) bool {
	i := 0
	digits := func() int {
		start := i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		return i - start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}
