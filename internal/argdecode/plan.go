// Package argdecode decodes a typed tool's arguments — JSON text that has
// already passed the tool's schema check — straight into the tool's Go
// argument type, applying the schema's defaults on the way.
//
// It exists for speed. The general route is [Unmarshal] of the text and
// then json.Unmarshal of a patch of the missing defaults on top; a Plan does
// both in one pass, without copying strings that have no escapes (they are
// substrings of the argument text) and without building the patch.
//
// A Plan handles a subset of Go types and of what JSON text may hold, and
// must give exactly the value the general route gives. When a type is outside
// the subset, Compile returns nil; when a text is (a syntax error, a number
// that does not fit its field, a duplicate or unknown key, a null for a type
// with its own decoding method …), Decode returns false and the caller takes
// the general route, whose result and error messages are the reference
// ([Unmarshal] is json.Unmarshal that also takes 1.0 or 1e2 for an integer
// field). The differential tests and the fuzz target of this package hold
// Decode to that.
package argdecode

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
)

// Plan decodes validated argument text into values of one Go type.
type Plan struct {
	typ  reflect.Type
	root *node
}

type kind uint8

const (
	kString kind = iota
	kBool
	kInt
	kUint
	kFloat
	kSlice
	kMap
	kPtr
	kStruct
	kNumber   // json.Number: a number's text
	kAny      // interface{}: decoded as encoding/json does (map[string]any, []any, float64 …)
	kDelegate // a type with its own UnmarshalJSON or UnmarshalText: encoding/json decodes it
)

type node struct {
	kind   kind
	typ    reflect.Type
	bits   int           // float size
	elem   *node         // slice element, map value, pointer target
	fields []field       // struct fields, in declaration order
	named  bool          // map key type is a named string type (keys need Convert)
	empty  reflect.Value // an empty, non-nil slice of the slice type
}

type field struct {
	name   string
	index  int
	node   *node
	def    reflect.Value // default of a scalar field, ready to Set
	defRaw []byte        // default of any other field, decoded with encoding/json
	hasDef bool
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Compile builds the plan for t, whose JSON Schema document is doc (the
// document the arguments are validated against; its "default" keywords on
// struct properties are the defaults the plan applies). It returns nil when t
// or doc is outside what a Plan handles.
func Compile(t reflect.Type, doc any) *Plan {
	c := compiler{seen: map[reflect.Type]bool{}}
	root := c.node(t, doc, true)
	if root == nil {
		return nil
	}
	return &Plan{typ: t, root: root}
}

type compiler struct {
	seen map[reflect.Type]bool // types on the current path: recursion is refused
}

// node compiles t at a position whose schema is doc. withDefaults is false
// below maps and slices: the schema check collects defaults only along
// object properties, so the plan does too.
func (c *compiler) node(t reflect.Type, doc any, withDefaults bool) *node {
	if c.seen[t] {
		return nil
	}
	c.seen[t] = true
	defer delete(c.seen, t)

	n := &node{typ: t}
	if t == reflect.TypeFor[json.Number]() {
		n.kind = kNumber // a string holding a number: the general route checks it
		if hasDefaultBelow(doc) {
			return nil
		}
		return n
	}
	if t.Kind() == reflect.Pointer {
		// encoding/json sets a pointer to nil for null and otherwise
		// allocates its target and decodes into that (by the target's own
		// method, if it has one): so does the plan.
		n.kind = kPtr
		if n.elem = c.node(t.Elem(), doc, withDefaults); n.elem == nil {
			return nil
		}
		return n
	}
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		if t.Kind() == reflect.Interface || hasDefaultBelow(doc) {
			return nil
		}
		n.kind = kDelegate
		return n
	}
	switch t.Kind() {
	case reflect.String:
		n.kind = kString
	case reflect.Bool:
		n.kind = kBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n.kind = kInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.kind = kUint
	case reflect.Float32, reflect.Float64:
		n.kind, n.bits = kFloat, t.Bits()
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return nil
		}
		n.kind = kAny
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 || hasDefaultBelow(doc) {
			return nil // []byte is base64 text
		}
		n.kind, n.empty = kSlice, reflect.MakeSlice(t, 0, 0)
		if n.elem = c.node(t.Elem(), sub(doc, "items"), false); n.elem == nil {
			return nil
		}
	case reflect.Map:
		k := t.Key()
		if k.Kind() != reflect.String || reflect.PointerTo(k).Implements(textUnmarshaler) || hasDefaultBelow(doc) {
			return nil
		}
		n.kind, n.named = kMap, k != reflect.TypeFor[string]()
		if n.elem = c.node(t.Elem(), sub(doc, "additionalProperties"), false); n.elem == nil {
			return nil
		}
	case reflect.Struct:
		n.kind = kStruct
		if !c.structFields(n, doc, withDefaults) {
			return nil
		}
	default:
		return nil
	}
	if n.kind != kStruct && n.kind != kPtr && n.kind != kSlice && n.kind != kMap && hasDefaultBelow(doc) {
		return nil
	}
	return n
}

// structFields fills n.fields by encoding/json's rules for the fields it
// supports: exported, not embedded, named by their json tag or Go name.
func (c *compiler) structFields(n *node, doc any, withDefaults bool) bool {
	t := n.typ
	props, _ := sub(doc, "properties").(map[string]any)
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return false // embedded fields follow promotion rules: the general route
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if hasOpt(opts, "string") {
			return false
		}
		if name == "" {
			name = f.Name
		} else if !plainName(name) {
			return false
		}
		if names[name] {
			return false
		}
		names[name] = true
		fd := field{name: name, index: i}
		pdoc := props[name]
		if fd.node = c.node(f.Type, pdoc, withDefaults); fd.node == nil {
			return false
		}
		if d, ok := sub(pdoc, "default"), hasKey(pdoc, "default"); ok && withDefaults {
			raw, err := json.Marshal(d)
			if err != nil {
				return false
			}
			v := reflect.New(f.Type)
			if json.Unmarshal(raw, v.Interface()) != nil {
				return false // the general route reports it
			}
			fd.hasDef = true
			switch fd.node.kind {
			case kString, kBool, kInt, kUint, kFloat, kNumber:
				fd.def = v.Elem()
			default:
				fd.defRaw = raw
			}
		}
		n.fields = append(n.fields, fd)
	}
	if len(n.fields) > 64 {
		return false
	}
	// Every default the schema declares on this object must belong to a field.
	for name := range props {
		if hasKey(props[name], "default") && withDefaults && !names[name] {
			return false
		}
	}
	return true
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

// plainName reports whether a json tag name is one encoding/json accepts
// as written; other names take the general route.
func plainName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func sub(doc any, key string) any {
	m, _ := doc.(map[string]any)
	return m[key]
}

func hasKey(doc any, key string) bool {
	m, _ := doc.(map[string]any)
	_, ok := m[key]
	return ok
}

// hasDefaultBelow reports whether a "default" keyword appears anywhere in
// doc below its top level.
func hasDefaultBelow(doc any) bool {
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if k == "default" || k == "const" || k == "enum" || k == "examples" {
				continue
			}
			if hasKey(v, "default") || hasDefaultBelow(v) {
				return true
			}
		}
	case []any:
		for _, v := range d {
			if hasKey(v, "default") || hasDefaultBelow(v) {
				return true
			}
		}
	}
	return false
}
