package argdecode

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
)

// Unmarshal is json.Unmarshal, except that a number written with a
// fraction or an exponent whose value is an integer (1.0, 1e2, -0.0)
// decodes into an integer field, as a Plan decodes it. JSON Schema calls
// such a number an integer, so validation lets it through, and models
// write 5.0; encoding/json refuses it for an int. v must point to a zero
// value: when a first decoding fails on such a number, v is reset to zero
// and the text decoded again with those numbers written as integers.
//
// A number is rewritten only where encoding/json certainly stores it in
// an integer: through struct fields matched by name (exactly, or as the
// only field matching without regard to case; fields of embedded structs
// promoted), pointers, slices, arrays and map values, and not through a
// type with its own decoding method or a field with the ",string" option.
// Anywhere else the first error stands.
func Unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number ") {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return err
	}
	r := rewriter{decoder: decoder{s: string(data)}}
	if !r.value(rv.Type().Elem()) || r.out == nil {
		return err
	}
	r.ws()
	if r.i != len(r.s) {
		return err
	}
	r.out = append(r.out, r.s[r.last:]...)
	rv.Elem().SetZero()
	return json.Unmarshal(r.out, v)
}

// rewriter walks JSON text along a Go type and rewrites the integral
// numbers that stand where an integer is stored.
type rewriter struct {
	decoder
	out  []byte // the rewritten text up to last; nil before the first rewrite
	last int
}

func (r *rewriter) value(t reflect.Type) bool {
	t = target(t)
	r.ws()
	if r.i >= len(r.s) {
		return false
	}
	switch c := r.s[r.i]; {
	case c == '{':
		var fields []rewriteField
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Struct {
			fields = structTargets(t)
		} else if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		return r.members(func(key string) bool {
			if fields != nil {
				return r.value(fieldTarget(fields, key))
			}
			return r.value(elem)
		})
	case c == '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		return r.elements(func(int) bool { return r.value(elem) })
	case c == '"':
		_, ok := r.str()
		return ok
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	case c == 'n':
		return r.literal("null")
	}
	start := r.i
	tok, ok := r.number()
	if !ok {
		return false
	}
	if t == nil {
		return true
	}
	var unsigned bool
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		unsigned = true
	default:
		return true
	}
	if repl, ok := integerText(tok, unsigned); ok && repl != tok {
		r.out = append(append(r.out, r.s[r.last:start]...), repl...)
		r.last = r.i
	}
	return true
}

// target is where encoding/json stores a value of type t, pointers
// followed, or nil when that is not certain (a type with its own decoding
// method, an interface).
func target(t reflect.Type) reflect.Type {
	for t != nil {
		if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
			t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
			return nil
		}
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
		case reflect.Interface:
			return nil
		default:
			return t
		}
	}
	return nil
}

type rewriteField struct {
	name string
	typ  reflect.Type // nil: not followed (",string", or a name several fields claim)
}

// structTargets lists the fields of struct type t by their JSON names,
// those of embedded structs promoted as encoding/json promotes them. A name
// that more than one field claims (which encoding/json settles by depth and
// tags) is listed without a type, so nothing under it is rewritten; so are
// all names when t nests embedded structs deeper than 8 or uses a tag name
// the rewriter does not read as encoding/json does.
func structTargets(t reflect.Type) []rewriteField {
	var fields []rewriteField
	if !collectFields(t, 0, &fields) {
		return []rewriteField{}
	}
	for j := range fields {
		for k := range fields {
			if j != k && fields[j].name == fields[k].name {
				fields[j].typ = nil
			}
		}
	}
	if fields == nil {
		fields = []rewriteField{}
	}
	return fields
}

func collectFields(t reflect.Type, depth int, out *[]rewriteField) bool {
	if depth > 8 {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Name() == "" && ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous {
			if !f.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
		} else if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name != "" && !plainName(name) {
			return false
		}
		if name == "" && f.Anonymous && ft.Kind() == reflect.Struct {
			if !collectFields(ft, depth+1, out) {
				return false
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		rf := rewriteField{name: name, typ: f.Type}
		if hasOpt(opts, "string") {
			rf.typ = nil
		}
		*out = append(*out, rf)
	}
	return true
}

// fieldTarget is the type of the field key stands for: the field of that
// name, else the only field whose name matches without regard to case.
func fieldTarget(fields []rewriteField, key string) reflect.Type {
	var folded *rewriteField
	for j := range fields {
		if fields[j].name == key {
			return fields[j].typ
		}
		if strings.EqualFold(fields[j].name, key) {
			if folded != nil {
				return nil
			}
			folded = &fields[j]
		}
	}
	if folded == nil {
		return nil
	}
	return folded.typ
}

// integerText returns the number text tok, valid JSON, as a plain integer
// when its value is one that a 64-bit integer (unsigned: a uint64) holds.
func integerText(tok string, unsigned bool) (string, bool) {
	neg, mag, ok := integral(tok)
	switch {
	case !ok:
		return "", false
	case mag == 0:
		return "0", true
	case unsigned:
		if neg {
			return "", false
		}
		return strconv.FormatUint(mag, 10), true
	case neg && mag <= 1<<63:
		return "-" + strconv.FormatUint(mag, 10), true
	case !neg && mag <= 1<<63-1:
		return strconv.FormatUint(mag, 10), true
	}
	return "", false
}

// integral returns the value of the number text tok, valid JSON, as a sign
// and a magnitude, when it is an integer below 2⁶⁴ in magnitude: 1.0,
// 1e2, 150e-1 and -0.0 are; 1.5 and 1e20 are not. Its work is linear in
// the length of tok, whatever the exponent.
func integral(tok string) (neg bool, mag uint64, ok bool) {
	i := 0
	if i < len(tok) && tok[i] == '-' {
		neg = true
		i++
	}
	start := i
	for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
		i++
	}
	intDigits := tok[start:i]
	var fracDigits string
	if i < len(tok) && tok[i] == '.' {
		i++
		start = i
		for i < len(tok) && tok[i] >= '0' && tok[i] <= '9' {
			i++
		}
		fracDigits = tok[start:i]
	}
	exp := 0
	if i < len(tok) && (tok[i] == 'e' || tok[i] == 'E') {
		i++
		expNeg := false
		if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
			expNeg = tok[i] == '-'
			i++
		}
		for ; i < len(tok); i++ {
			exp = min(exp*10+int(tok[i]-'0'), 1<<20)
		}
		if expNeg {
			exp = -exp
		}
	}
	// The digits are intDigits+fracDigits with the point after
	// len(intDigits)+exp of them; those after the point must be zeros.
	digits := len(intDigits) + len(fracDigits)
	digit := func(k int) byte {
		if k < len(intDigits) {
			return intDigits[k] - '0'
		}
		return fracDigits[k-len(intDigits)] - '0'
	}
	point := len(intDigits) + exp
	for k := max(point, 0); k < digits; k++ {
		if digit(k) != 0 {
			return false, 0, false
		}
	}
	for k := 0; k < point; k++ {
		var d uint64
		if k < digits {
			d = uint64(digit(k))
		} else if mag == 0 {
			break // zeros after a zero stay zero
		}
		if mag > (1<<64-1-d)/10 {
			return false, 0, false
		}
		mag = mag*10 + d
	}
	return neg, mag, true
}
