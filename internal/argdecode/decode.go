package argdecode

import (
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting; deeper text takes the general route.
const maxDepth = 256

// Decode decodes text into dst, which must be a settable value of the
// plan's type holding its zero value. It reports false when it cannot give
// exactly what encoding/json would; dst is then in an unspecified state
// and the caller must reset it before decoding by the general route.
// Decode never panics on any text.
//
// Strings without escapes, and json.Number values, share text's memory.
func (p *Plan) Decode(text string, dst reflect.Value) bool {
	if dst.Type() != p.typ || !dst.CanSet() {
		return false
	}
	d := decoder{s: text}
	if !d.value(p.root, dst) {
		return false
	}
	d.ws()
	return d.i == len(d.s)
}

type decoder struct {
	s     string
	i     int
	depth int
}

func (d *decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// literal consumes lit.
func (d *decoder) literal(lit string) bool {
	if len(d.s)-d.i < len(lit) || d.s[d.i:d.i+len(lit)] != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// value decodes the next value into v by n.
func (d *decoder) value(n *node, v reflect.Value) bool {
	d.ws()
	if d.i >= len(d.s) {
		return false
	}
	c := d.s[d.i]
	if c == 'n' {
		if !d.literal("null") {
			return false
		}
		switch n.kind {
		case kSlice, kMap, kPtr, kAny:
			v.SetZero()
		case kDelegate:
			return false // the type's own method decides what null means
		}
		return true // null leaves other kinds unchanged, as encoding/json does
	}
	switch n.kind {
	case kString:
		s, ok := d.str()
		if !ok {
			return false
		}
		v.SetString(s)
	case kBool:
		switch {
		case d.literal("true"):
			v.SetBool(true)
		case d.literal("false"):
			v.SetBool(false)
		default:
			return false
		}
	case kInt, kUint, kFloat:
		tok, ok := d.number()
		return ok && setNumber(n, v, tok)
	case kNumber:
		if d.s[d.i] == '"' {
			return false // a string holding a number: the general route checks it
		}
		tok, ok := d.number()
		if !ok {
			return false
		}
		v.SetString(tok)
	case kPtr:
		if v.IsNil() {
			v.Set(reflect.New(n.elem.typ))
		}
		return d.value(n.elem, v.Elem())
	case kStruct:
		return d.object(n, v)
	case kSlice:
		return d.array(n, v)
	case kMap:
		return d.mapValue(n, v)
	case kAny:
		x, ok := d.anyValue()
		if !ok {
			return false
		}
		v.Set(reflect.ValueOf(&x).Elem())
	case kDelegate:
		start := d.i
		if !d.skip() {
			return false
		}
		if json.Unmarshal([]byte(d.s[start:d.i]), v.Addr().Interface()) != nil {
			return false
		}
	default:
		return false
	}
	return true
}

// setNumber stores the number tok in v as Unmarshal does, or reports
// false where it would fail (a fraction for an integer, a sign for an
// unsigned one, a value out of range). An integer may be written with a
// fraction or exponent (1.0, 1e2), as JSON Schema allows.
func setNumber(n *node, v reflect.Value, tok string) bool {
	switch n.kind {
	case kInt:
		x, err := strconv.ParseInt(tok, 10, 64)
		if err != nil {
			neg, mag, ok := integral(tok)
			if !ok || !neg && mag > math.MaxInt64 || neg && mag > 1<<63 {
				return false
			}
			x = int64(mag) // 2⁶³ wraps to the int64 minimum, which is its negation
			if neg {
				x = -x
			}
		}
		if v.OverflowInt(x) {
			return false
		}
		v.SetInt(x)
	case kUint:
		x, err := strconv.ParseUint(tok, 10, 64)
		if err != nil {
			neg, mag, ok := integral(tok)
			if !ok || neg && mag != 0 {
				return false
			}
			x = mag
		}
		if v.OverflowUint(x) {
			return false
		}
		v.SetUint(x)
	default:
		x, err := strconv.ParseFloat(tok, n.bits)
		if err != nil || v.OverflowFloat(x) {
			return false
		}
		v.SetFloat(x)
	}
	return true
}

func (d *decoder) enter() bool {
	d.depth++
	return d.depth <= maxDepth
}

// object decodes a JSON object into the struct v and applies the defaults
// of the fields it lacked.
func (d *decoder) object(n *node, v reflect.Value) bool {
	var present uint64
	ok := d.members(func(key string) bool {
		j := lookup(n.fields, key)
		if j < 0 || present&(1<<j) != 0 {
			return false // unknown keys match fields loosely, duplicates merge: the general route
		}
		present |= 1 << j
		f := &n.fields[j]
		return d.value(f.node, v.Field(f.index))
	})
	if !ok {
		return false
	}
	for j := range n.fields {
		f := &n.fields[j]
		if !f.hasDef || present&(1<<j) != 0 {
			continue
		}
		fv := v.Field(f.index)
		if f.defRaw == nil {
			fv.Set(f.def)
		} else if json.Unmarshal(f.defRaw, fv.Addr().Interface()) != nil {
			return false
		}
	}
	return true
}

func lookup(fields []field, key string) int {
	for j := range fields {
		if fields[j].name == key {
			return j
		}
	}
	return -1
}

// members walks the JSON object at d.i, calling member with each key
// once the decoder stands before the key's value; member consumes the
// value. It reports false on a syntax error or when member does.
func (d *decoder) members(member func(key string) bool) bool {
	if d.s[d.i] != '{' || !d.enter() {
		return false
	}
	d.i++
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		d.depth--
		return true
	}
	for {
		d.ws()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return false
		}
		key, ok := d.str()
		if !ok || !d.colon() || !member(key) {
			return false
		}
		more, ok := d.next('}')
		if !ok {
			return false
		}
		if !more {
			d.depth--
			return true
		}
	}
}

// elements walks the JSON array at d.i like members, calling elem with
// each element's index.
func (d *decoder) elements(elem func(i int) bool) bool {
	if d.s[d.i] != '[' || !d.enter() {
		return false
	}
	d.i++
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		d.depth--
		return true
	}
	for i := 0; ; i++ {
		if !elem(i) {
			return false
		}
		more, ok := d.next(']')
		if !ok {
			return false
		}
		if !more {
			d.depth--
			return true
		}
	}
}

func (d *decoder) colon() bool {
	d.ws()
	if d.i >= len(d.s) || d.s[d.i] != ':' {
		return false
	}
	d.i++
	return true
}

// next consumes the ',' or closing byte after a member or element and
// reports whether another follows.
func (d *decoder) next(closing byte) (more, ok bool) {
	d.ws()
	if d.i >= len(d.s) {
		return false, false
	}
	switch d.s[d.i] {
	case ',':
		d.i++
		return true, true
	case closing:
		d.i++
		return false, true
	}
	return false, false
}

// array decodes a JSON array into the slice v, which is nil.
func (d *decoder) array(n *node, v reflect.Value) bool {
	ok := d.elements(func(i int) bool {
		if i == v.Cap() {
			v.Grow(max(i, 4))
		}
		v.SetLen(i + 1)
		return d.value(n.elem, v.Index(i))
	})
	if ok && v.IsNil() {
		v.Set(n.empty) // encoding/json gives [] as an empty, non-nil slice
	}
	return ok
}

// mapValue decodes a JSON object into the map v.
func (d *decoder) mapValue(n *node, v reflect.Value) bool {
	if v.IsNil() {
		v.Set(reflect.MakeMap(n.typ))
	}
	return d.members(func(key string) bool {
		e := reflect.New(n.elem.typ).Elem()
		if !d.value(n.elem, e) {
			return false
		}
		kv := reflect.ValueOf(key)
		if n.named {
			kv = kv.Convert(n.typ.Key())
		}
		v.SetMapIndex(kv, e)
		return true
	})
}

// anyValue decodes the next value as encoding/json decodes into an empty
// interface.
func (d *decoder) anyValue() (any, bool) {
	d.ws()
	if d.i >= len(d.s) {
		return nil, false
	}
	switch c := d.s[d.i]; {
	case c == '{':
		m := map[string]any{}
		ok := d.members(func(key string) bool {
			x, ok := d.anyValue()
			m[key] = x
			return ok
		})
		return m, ok
	case c == '[':
		a := make([]any, 0)
		ok := d.elements(func(int) bool {
			x, ok := d.anyValue()
			a = append(a, x)
			return ok
		})
		return a, ok
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		tok, ok := d.number()
		if !ok {
			return nil, false
		}
		f, err := strconv.ParseFloat(tok, 64)
		return f, err == nil
	}
}

// skip consumes one value, checking its syntax.
func (d *decoder) skip() bool {
	_, ok := d.anyValue()
	return ok
}

// number consumes a number with JSON's grammar and returns its text.
func (d *decoder) number() (string, bool) {
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == '-' {
		d.i++
	}
	switch {
	case d.i < len(d.s) && d.s[d.i] == '0':
		d.i++
	case d.i < len(d.s) && d.s[d.i] >= '1' && d.s[d.i] <= '9':
		d.digits()
	default:
		return "", false
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if !d.digits() {
			return "", false
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return "", false
		}
	}
	return d.s[start:d.i], true
}

func (d *decoder) digits() bool {
	start := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// str consumes a string and returns its value: a substring of the text
// when it has no escapes and is valid UTF-8.
func (d *decoder) str() (string, bool) {
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return "", false
	}
	start := d.i + 1
	plain := true
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			raw := d.s[start:j]
			d.i = j + 1
			if plain && utf8.ValidString(raw) {
				return raw, true
			}
			return unquote(raw)
		case c == '\\':
			plain = false
			j++ // the escaped byte is never the closing quote
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// unquote decodes the contents of a JSON string with escapes or invalid
// UTF-8 the way encoding/json does: a lone or broken surrogate escape and
// every invalid byte become U+FFFD.
func unquote(s string) (string, bool) {
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return "", false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				b = append(b, s[i+1])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s, i)
				if r < 0 {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2 := hex4(s, i); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
							b = utf8.AppendRune(b, dec)
							i += 6
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b = utf8.AppendRune(b, r)
			i += size
		}
	}
	return string(b), true
}

// hex4 reads the escape \uXXXX at s[i:], or returns -1.
func hex4(s string, i int) rune {
	if len(s)-i < 6 || s[i] != '\\' || s[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range []byte(s[i+2 : i+6]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
