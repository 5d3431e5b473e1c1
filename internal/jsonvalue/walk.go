package jsonvalue

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/toolrun/toolrun/internal/safefmt"
)

// walker builds a tree from a value, recursively, keeping count of what
// it has built and of the containers on the current path.
type walker struct {
	maxDepth, maxNodes, maxBytes int
	nodes, bytes                 int

	// The maps, slices and pointers on the current path, outermost first:
	// the first len(shallow) in shallow, the rest in deep. A value that
	// contains itself meets one of them again.
	shallow [48]ident
	n       int
	deep    map[ident]int
}

// ident is a map, slice or pointer on the path, and level is the number of
// path elements that lead to it.
type ident struct {
	t     reflect.Type
	p     unsafe.Pointer
	n     int // the length of a slice
	level int
}

var (
	mapAnyType   = reflect.TypeFor[map[string]any]()
	sliceAnyType = reflect.TypeFor[[]any]()
	numberType   = reflect.TypeFor[json.Number]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

// enter puts a container on the path, or fails when it is already there.
// The caller must call leave when enter succeeds.
func (w *walker) enter(t reflect.Type, p unsafe.Pointer, n, level int) *failure {
	id := ident{t: t, p: p, n: n}
	for i := 0; i < min(w.n, len(w.shallow)); i++ {
		if s := &w.shallow[i]; s.p == id.p && s.n == id.n && s.t == id.t {
			return w.cycle(s.level)
		}
	}
	if w.n >= len(w.shallow) {
		if lv, ok := w.deep[id]; ok {
			return w.cycle(lv)
		}
		if w.deep == nil {
			w.deep = map[ident]int{}
		}
		w.deep[id] = level
	} else {
		id.level = level
		w.shallow[w.n] = id
	}
	w.n++
	return nil
}

func (w *walker) cycle(level int) *failure {
	f := fail(ErrCycle, "")
	f.backTo = level
	return f
}

func (w *walker) leave(t reflect.Type, p unsafe.Pointer, n int) {
	w.n--
	if w.n >= len(w.shallow) {
		delete(w.deep, ident{t: t, p: p, n: n})
	}
}

// node counts one value of the tree and the bytes of its text.
func (w *walker) node(textLen int) *failure {
	w.nodes++
	w.bytes += textLen
	if w.maxNodes >= 0 && w.nodes > w.maxNodes {
		return fail(ErrTooLarge, "more than "+strconv.Itoa(w.maxNodes)+" values")
	}
	if w.maxBytes >= 0 && w.bytes > w.maxBytes {
		return fail(ErrTooLarge, "more than "+strconv.Itoa(w.maxBytes)+" bytes of strings and keys")
	}
	return nil
}

// container checks the nesting of an object or array at depth and counts it.
func (w *walker) container(depth int) *failure {
	if depth >= w.maxDepth {
		return fail(ErrTooDeep, "objects and arrays nested more than "+strconv.Itoa(w.maxDepth)+" deep")
	}
	return w.node(0)
}

func (w *walker) str(s string) (any, *failure) {
	if !utf8.ValidString(s) {
		s = FixUTF8(s)
	}
	if f := w.node(len(s)); f != nil {
		return nil, f
	}
	return s, nil
}

// any normalises v, found depth objects and arrays deep after hops pointers
// and interfaces in a row. The common types of a tree skip reflection.
func (w *walker) any(v any, depth, hops int) (any, *failure) {
	switch x := v.(type) {
	case nil:
		return nil, w.node(0)
	case string:
		if !utf8.ValidString(x) {
			return w.str(x)
		}
		return v, w.node(len(x))
	case bool:
		return v, w.node(0)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, badFloat(x, 64)
		}
		return v, w.node(0)
	case json.Number:
		return w.number(string(x), false)
	case int:
		return intValue(int64(x)), w.node(0)
	case int64:
		return intValue(x), w.node(0)
	case map[string]any:
		if x == nil {
			return nil, w.node(0)
		}
		if f := w.container(depth); f != nil {
			return nil, f
		}
		p := reflect.ValueOf(x).UnsafePointer()
		if f := w.enter(mapAnyType, p, -1, depth); f != nil {
			return nil, f
		}
		out := make(map[string]any, len(x))
		var keys keySet
		for k, e := range x {
			nk, f := w.key(k)
			if f != nil {
				return nil, f.atKey(k)
			}
			ne, f := w.any(e, depth+1, 0)
			if f != nil {
				return nil, f.atKey(k)
			}
			keys.put(out, nk, k, ne)
		}
		w.leave(mapAnyType, p, -1)
		return out, nil
	case []any:
		if x == nil {
			return nil, w.node(0)
		}
		if f := w.container(depth); f != nil {
			return nil, f
		}
		out := make([]any, len(x))
		if len(x) == 0 {
			return out, nil
		}
		p := unsafe.Pointer(unsafe.SliceData(x))
		if f := w.enter(sliceAnyType, p, len(x), depth); f != nil {
			return nil, f
		}
		for i, e := range x {
			ne, f := w.any(e, depth+1, 0)
			if f != nil {
				return nil, f.atIndex(i)
			}
			out[i] = ne
		}
		w.leave(sliceAnyType, p, len(x))
		return out, nil
	case json.RawMessage:
		if x == nil {
			return nil, w.node(0)
		}
		return w.decode(x, rawType, depth)
	}
	return w.value(reflect.ValueOf(v), depth, hops, false)
}

// value normalises v by encoding/json's rules. quoted is the ",string"
// option of the struct field v belongs to.
func (w *walker) value(v reflect.Value, depth, hops int, quoted bool) (any, *failure) {
	if !v.IsValid() {
		return nil, w.node(0)
	}
	t := v.Type()
	ti := infoFor(t)
	// Reflection does not call the methods of a value it marks read-only,
	// an unexported embedded struct with a json tag; encoding/json panics
	// there, Normalize encodes the value by its kind.
	switch callable := v.CanInterface(); {
	case !callable:
	case ti.addrJSON && v.CanAddr():
		a := v.Addr()
		return w.marshalJSON(a, a.Type(), depth)
	case ti.json:
		return w.marshalJSON(v, t, depth)
	case ti.addrText && v.CanAddr():
		a := v.Addr()
		return w.marshalText(a, a.Type())
	case ti.text:
		return w.marshalText(v, t)
	}
	switch t.Kind() {
	case reflect.Bool:
		if quoted {
			return w.str(strconv.FormatBool(v.Bool()))
		}
		return v.Bool(), w.node(0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if quoted {
			return w.str(strconv.FormatInt(v.Int(), 10))
		}
		return intValue(v.Int()), w.node(0)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if quoted {
			return w.str(strconv.FormatUint(v.Uint(), 10))
		}
		return uintValue(v.Uint()), w.node(0)
	case reflect.Float32, reflect.Float64:
		return w.float(v.Float(), t.Bits(), quoted)
	case reflect.String:
		if t == numberType {
			return w.number(v.String(), quoted)
		}
		if quoted {
			b, _ := json.Marshal(v.String())
			return w.str(string(b))
		}
		return w.str(v.String())
	case reflect.Interface:
		if v.IsNil() {
			return nil, w.node(0)
		}
		if hops >= MaxIndirections {
			return nil, tooManyHops()
		}
		e := v.Elem()
		if e.CanInterface() {
			return w.any(e.Interface(), depth, hops+1)
		}
		return w.value(e, depth, hops+1, false)
	case reflect.Pointer:
		if v.IsNil() {
			return nil, w.node(0)
		}
		if hops >= MaxIndirections {
			return nil, tooManyHops()
		}
		p := v.UnsafePointer()
		if f := w.enter(t, p, 0, depth); f != nil {
			return nil, f
		}
		out, f := w.value(v.Elem(), depth, hops+1, quoted)
		w.leave(t, p, 0)
		return out, f
	case reflect.Struct:
		return w.object(v, ti, depth)
	case reflect.Map:
		return w.mapValue(v, depth)
	case reflect.Slice:
		if v.IsNil() {
			return nil, w.node(0)
		}
		if ti.bytes {
			return w.str(base64.StdEncoding.EncodeToString(v.Bytes()))
		}
		if v.Len() == 0 {
			if f := w.container(depth); f != nil {
				return nil, f
			}
			return []any{}, nil
		}
		p := v.UnsafePointer()
		if f := w.enter(t, p, v.Len(), depth); f != nil {
			return nil, f
		}
		out, f := w.array(v, depth)
		w.leave(t, p, v.Len())
		return out, f
	case reflect.Array:
		return w.array(v, depth)
	}
	return nil, fail(ErrUnsupported, t.String()+" cannot be encoded as JSON")
}

func tooManyHops() *failure {
	return fail(ErrTooDeep, "more than "+strconv.Itoa(MaxIndirections)+" pointers and interfaces in a row")
}

func (w *walker) array(v reflect.Value, depth int) (any, *failure) {
	if f := w.container(depth); f != nil {
		return nil, f
	}
	out := make([]any, v.Len())
	for i := range out {
		e, f := w.value(v.Index(i), depth+1, 0, false)
		if f != nil {
			return nil, f.atIndex(i)
		}
		out[i] = e
	}
	return out, nil
}

func (w *walker) object(v reflect.Value, ti *typeInfo, depth int) (any, *failure) {
	if f := w.container(depth); f != nil {
		return nil, f
	}
	out := make(map[string]any, len(ti.fields))
fields:
	for i := range ti.fields {
		fd := &ti.fields[i]
		fv := v
		for _, x := range fd.index {
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue fields
				}
				fv = fv.Elem()
			}
			fv = fv.Field(x)
		}
		if fd.omitEmpty && isEmpty(fv) {
			continue
		}
		if fd.omitZero {
			zero, f := isZero(fv, fd)
			if f != nil {
				return nil, f.atKey(fd.name)
			}
			if zero {
				continue
			}
		}
		if _, f := w.key(fd.name); f != nil {
			return nil, f.atKey(fd.name)
		}
		e, f := w.value(fv, depth+1, 0, fd.quoted)
		if f != nil {
			return nil, f.atKey(fd.name)
		}
		out[fd.name] = e
	}
	return out, nil
}

func (w *walker) mapValue(v reflect.Value, depth int) (any, *failure) {
	if v.IsNil() {
		return nil, w.node(0)
	}
	t := v.Type()
	kt := t.Key()
	// As encoding/json: string keys as they are, then MarshalText, then
	// integers in decimal.
	keyText := kt.Kind() != reflect.String && kt.Implements(textMarshalerType)
	switch kt.Kind() {
	case reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		if !keyText {
			return nil, fail(ErrKey, "map key type "+kt.String()+" cannot be encoded as JSON (object keys are strings; use string, integer or encoding.TextMarshaler keys)")
		}
	}
	if f := w.container(depth); f != nil {
		return nil, f
	}
	p := v.UnsafePointer()
	if f := w.enter(t, p, -1, depth); f != nil {
		return nil, f
	}
	out := make(map[string]any, v.Len())
	var keys keySet
	iter := v.MapRange()
	for iter.Next() {
		k := iter.Key()
		var ks string
		switch {
		case kt.Kind() == reflect.String:
			ks = k.String()
		case keyText:
			var f *failure
			if ks, f = textOf(k, k.Type()); f != nil {
				f.detail = "a key: " + f.detail
				return nil, f
			}
		case k.CanInt():
			ks = strconv.FormatInt(k.Int(), 10)
		default:
			ks = strconv.FormatUint(k.Uint(), 10)
		}
		nk, f := w.key(ks)
		if f != nil {
			return nil, f.atKey(ks)
		}
		e, f := w.value(iter.Value(), depth+1, 0, false)
		if f != nil {
			return nil, f.atKey(ks)
		}
		keys.put(out, nk, ks, e)
	}
	w.leave(t, p, -1)
	return out, nil
}

// key checks an object key and returns it as valid UTF-8.
func (w *walker) key(k string) (string, *failure) {
	if !utf8.ValidString(k) {
		k = FixUTF8(k)
	}
	w.bytes += len(k)
	if w.maxBytes >= 0 && w.bytes > w.maxBytes {
		return "", fail(ErrTooLarge, "more than "+strconv.Itoa(w.maxBytes)+" bytes of strings and keys")
	}
	return k, nil
}

// keySet decides between keys that are one after their invalid UTF-8 is
// replaced: as when encoding/json writes both and reads them back, the key
// whose original text sorts last wins.
type keySet struct {
	orig map[string]string // original text of keys that were changed
}

func (s *keySet) put(out map[string]any, key, orig string, v any) {
	if key == orig && s.orig == nil {
		out[key] = v
		return
	}
	if _, ok := out[key]; ok {
		prev := key
		if o, ok := s.orig[key]; ok {
			prev = o
		}
		if orig < prev {
			return
		}
	}
	out[key] = v
	if key != orig {
		if s.orig == nil {
			s.orig = map[string]string{}
		}
		s.orig[key] = orig
	} else {
		delete(s.orig, key)
	}
}

func (w *walker) float(x float64, bits int, quoted bool) (any, *failure) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, badFloat(x, bits)
	}
	if quoted {
		var b []byte
		if bits == 32 {
			b, _ = json.Marshal(float32(x))
		} else {
			b, _ = json.Marshal(x)
		}
		return w.str(string(b))
	}
	if bits == 32 {
		// The float64 nearest the shortest decimal text of the float32, as
		// reading encoding/json's output back gives.
		x, _ = strconv.ParseFloat(strconv.FormatFloat(x, 'g', -1, 32), 64)
	}
	return x, w.node(0)
}

func badFloat(x float64, bits int) *failure {
	return fail(ErrNumber, strconv.FormatFloat(x, 'g', -1, bits)+" is not a JSON number")
}

// number normalises the text of a json.Number.
func (w *walker) number(s string, quoted bool) (any, *failure) {
	if s == "" {
		s = "0" // encoding/json writes the zero Number as 0
	}
	if !isNumber(s) {
		return nil, fail(ErrNumber, "json.Number "+strconv.Quote(s)+" is not a JSON number")
	}
	if quoted {
		return w.str(s)
	}
	return numberValue(s), w.node(0)
}

// marshalJSON normalises what v's MarshalJSON method returns.
func (w *walker) marshalJSON(v reflect.Value, t reflect.Type, depth int) (any, *failure) {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return nil, w.node(0)
	}
	m, ok := reflect.TypeAssert[json.Marshaler](v)
	if !ok {
		return nil, w.node(0)
	}
	b, f := callMarshalJSON(m, t)
	if f != nil {
		return nil, f
	}
	return w.decode(b, t, depth)
}

// decode normalises JSON text that the MarshalJSON method of t returned.
func (w *walker) decode(b []byte, t reflect.Type, depth int) (any, *failure) {
	if v, ok := scalar(b); ok {
		return w.any(v, depth, 0)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var x any
	err := dec.Decode(&x)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = fmt.Errorf("invalid data after the value")
		}
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		f := fail(ErrMarshaler, method(t, "MarshalJSON")+" returned invalid JSON: "+err.Error())
		f.err = err
		return nil, f
	}
	return w.any(x, depth, 0)
}

// scalar reads b without a decoder when it is a literal that needs no
// unescaping: a string without escapes, a number, true, false or null.
// Most MarshalJSON methods (time.Time's, for one) write one of these.
func scalar(b []byte) (any, bool) {
	switch s := string(b); {
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		s = s[1 : len(s)-1]
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				return nil, false
			}
		}
		return s, true
	case s == "true":
		return true, true
	case s == "false":
		return false, true
	case s == "null":
		return nil, true
	case isNumber(s):
		return json.Number(s), true
	}
	return nil, false
}

func (w *walker) marshalText(v reflect.Value, t reflect.Type) (any, *failure) {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return nil, w.node(0)
	}
	s, f := textOf(v, t)
	if f != nil {
		return nil, f
	}
	return w.str(s)
}

// textOf calls v's MarshalText method.
func textOf(v reflect.Value, t reflect.Type) (string, *failure) {
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "", nil // encoding/json writes a nil key as ""
	}
	m, ok := reflect.TypeAssert[encoding.TextMarshaler](v)
	if !ok {
		return "", nil
	}
	b, f := callMarshalText(m, t)
	return string(b), f
}

func method(t reflect.Type, name string) string { return "(" + t.String() + ")." + name }

func callMarshalJSON(m json.Marshaler, t reflect.Type) (b []byte, f *failure) {
	defer func() {
		if p := recover(); p != nil {
			f = fail(ErrMarshaler, method(t, "MarshalJSON")+" panicked: "+safefmt.Sprint(p))
		}
	}()
	b, err := m.MarshalJSON()
	if err != nil {
		f = fail(ErrMarshaler, method(t, "MarshalJSON")+": "+safefmt.Error(err))
		f.err = err
	}
	return b, f
}

func callMarshalText(m encoding.TextMarshaler, t reflect.Type) (b []byte, f *failure) {
	defer func() {
		if p := recover(); p != nil {
			f = fail(ErrMarshaler, method(t, "MarshalText")+" panicked: "+safefmt.Sprint(p))
		}
	}()
	b, err := m.MarshalText()
	if err != nil {
		f = fail(ErrMarshaler, method(t, "MarshalText")+": "+safefmt.Error(err))
		f.err = err
	}
	return b, f
}

// FixUTF8JSON returns the JSON text b with each byte that is not part of
// valid UTF-8 replaced by U+FFFD (b itself when there is none). In valid
// JSON such bytes can only be inside strings, where U+FFFD keeps it valid.
func FixUTF8JSON(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return []byte(FixUTF8(string(b)))
}

// FixUTF8 returns s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as encoding/json does when it writes s: a run of n
// such bytes becomes n replacement characters, not one, as with
// strings.ToValidUTF8.
func FixUTF8(s string) string {
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
