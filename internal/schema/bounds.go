package schema

import (
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// addTypeBounds adds to doc, the schema reflected from t, the range of every
// sized Go number type: minimum and maximum of int8 … uint64, int and
// float32. A value the Go type cannot hold is then refused by validation,
// in the words the model reads, instead of failing later in the decoder
// with a message naming Go types. A tighter bound the author declared is
// kept.
func addTypeBounds(t reflect.Type, doc map[string]any) {
	walkBounds(t, doc, 0)
}

func walkBounds(t reflect.Type, doc map[string]any, depth int) {
	if doc == nil || depth > 64 {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if lo, hi, ok := numberRange(t); ok {
		tightenBounds(doc, lo, hi)
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if items, ok := doc["items"].(map[string]any); ok {
			walkBounds(t.Elem(), items, depth+1)
		}
	case reflect.Map:
		if ap, ok := doc["additionalProperties"].(map[string]any); ok {
			walkBounds(t.Elem(), ap, depth+1)
		}
	case reflect.Struct:
		props, _ := doc["properties"].(map[string]any)
		walkFields(t, props, depth)
	}
}

// walkFields visits the fields of struct type t that have properties.
func walkFields(t reflect.Type, props map[string]any, depth int) {
	if props == nil {
		return
	}
	for name, f := range jsonFields(t) {
		if p, ok := props[name].(map[string]any); ok {
			walkBounds(f.Type, p, depth+1)
		}
	}
}

// jsonFields yields the exported fields of struct type t by their JSON
// names, embedded structs without a name flattened into their parent, as
// the reflector names the properties.
func jsonFields(t reflect.Type) iter.Seq2[string, reflect.StructField] {
	return func(yield func(string, reflect.StructField) bool) {
		eachJSONField(t, 0, yield)
	}
}

func eachJSONField(t reflect.Type, depth int, yield func(string, reflect.StructField) bool) bool {
	if depth > 32 {
		return true
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			if !eachJSONField(ft, depth+1, yield) {
				return false
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if !yield(name, f) {
			return false
		}
	}
	return true
}

// numberRange is the range of a sized number kind. (float64 rounds the
// 64-bit integer bounds up to ±2⁶³ and 2⁶⁴; tightenBounds writes those two
// exactly.)
func numberRange(t reflect.Type) (lo, hi float64, ok bool) {
	switch t.Kind() {
	case reflect.Int8:
		return math.MinInt8, math.MaxInt8, true
	case reflect.Int16:
		return math.MinInt16, math.MaxInt16, true
	case reflect.Int32:
		return math.MinInt32, math.MaxInt32, true
	case reflect.Int, reflect.Int64:
		return math.MinInt64, math.MaxInt64, true
	case reflect.Uint8:
		return 0, math.MaxUint8, true
	case reflect.Uint16:
		return 0, math.MaxUint16, true
	case reflect.Uint32:
		return 0, math.MaxUint32, true
	case reflect.Uint, reflect.Uint64, reflect.Uintptr:
		return 0, math.MaxUint64, true
	case reflect.Float32:
		return -math.MaxFloat32, math.MaxFloat32, true
	}
	return 0, 0, false
}

// tightenBounds sets minimum and maximum to the type's range unless the
// schema already declares a tighter one (inclusive or exclusive).
func tightenBounds(doc map[string]any, lo, hi float64) {
	if typ, _ := doc["type"].(string); typ != "integer" && typ != "number" {
		return
	}
	if !declaredAtLeast(doc, "minimum", "exclusiveMinimum", lo, false) {
		doc["minimum"] = boundValue(lo)
	}
	if !declaredAtLeast(doc, "maximum", "exclusiveMaximum", hi, true) {
		doc["maximum"] = boundValue(hi)
	}
}

// boundValue is v as the schema states it: the 64-bit integer limits, which
// float64 cannot hold, as exact JSON numbers.
func boundValue(v float64) any {
	switch v {
	case math.MaxInt64:
		return json.Number(strconv.FormatInt(math.MaxInt64, 10))
	case math.MinInt64:
		return json.Number(strconv.FormatInt(math.MinInt64, 10))
	case math.MaxUint64:
		return json.Number(strconv.FormatUint(math.MaxUint64, 10))
	}
	return v
}

// declaredAtLeast reports whether doc declares a bound at least as tight as
// v: for minimums one ≥ v, for maximums (upper) one ≤ v.
func declaredAtLeast(doc map[string]any, inclusive, exclusive string, v float64, upper bool) bool {
	for _, k := range []string{inclusive, exclusive} {
		b, ok := asFloat(doc[k])
		if !ok {
			continue
		}
		if upper && b <= v || !upper && b >= v {
			return true
		}
	}
	return false
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// checkTagDefaults finds the fields whose `jsonschema:"default=…"` tag the
// reflector dropped because the value does not parse as the field's type
// (it drops them without a word), and names them.
func checkTagDefaults(t reflect.Type, doc map[string]any, path []string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || len(path) > 32 {
		return nil
	}
	props, _ := doc["properties"].(map[string]any)
	for name, f := range jsonFields(t) {
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		p, _ := props[name].(map[string]any)
		if p == nil {
			continue
		}
		fieldPath := append(path, name)
		if def, ok := tagDefault(f.Tag.Get("jsonschema")); ok {
			if _, kept := p["default"]; !kept {
				typ, _ := p["type"].(string)
				return fmt.Errorf("field %s: default=%s does not parse as %s", strings.Join(fieldPath, "."), def, typ)
			}
		}
		if ft.Kind() == reflect.Struct {
			if err := checkTagDefaults(ft, p, fieldPath); err != nil {
				return err
			}
		}
	}
	return nil
}

// tagDefault returns the value of the first default= entry of a jsonschema tag.
func tagDefault(tag string) (string, bool) {
	for _, part := range strings.Split(tag, ",") {
		if v, ok := strings.CutPrefix(part, "default="); ok {
			return v, true
		}
	}
	return "", false
}
