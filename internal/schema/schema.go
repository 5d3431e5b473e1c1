// Package schema turns Go argument types and JSON Schema documents into
// compiled validators, and applies the defaults a schema declares.
//
// It wraps github.com/invopop/jsonschema (reflection) and
// github.com/santhosh-tekuri/jsonschema/v6 (validation). Schemas are compiled
// once, at registration; validation and defaulting never recompile.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	reflector "github.com/invopop/jsonschema"
	validator "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema together with the document advertised to
// models. It is immutable and safe for concurrent use.
type Schema struct {
	doc      map[string]any
	raw      json.RawMessage
	compiled *validator.Schema
	fast     *fastNode // nil: no fast path for this schema
	defaults bool      // some subschema declares a default
}

// Issue is one failing location of a validation.
type Issue struct {
	Path    string // dot-joined instance path, "root" for the top level
	Message string
}

// String formats the issue as "[path] message".
func (i Issue) String() string { return "[" + i.Path + "] " + i.Message }

// Doc returns the advertised document. Callers must not modify it.
func (s *Schema) Doc() map[string]any { return s.doc }

// JSON returns the advertised document encoded as JSON. Callers must not modify it.
func (s *Schema) JSON() json.RawMessage { return s.raw }

// HasDefaults reports whether any subschema declares a default value.
func (s *Schema) HasDefaults() bool { return s.defaults }

// ForType reflects the JSON Schema of t, which must be a struct type (or a
// pointer to one). Recursive types are refused, since describing them needs
// $ref, which models handle badly. Every object is closed
// (additionalProperties false) and nothing is referenced: the schema is fully
// inlined and carries no $schema or $id key. A json.Number field is a
// number.
func ForType(t reflect.Type) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("argument type %s is not a struct: tool arguments are a JSON object", t)
	}
	if err := checkRecursion(t, nil); err != nil {
		return nil, err
	}
	r := &reflector.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true, Mapper: mapType}
	s := r.ReflectFromType(t)
	s.Version = ""
	s.ID = ""
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("argument type %s: %w", t, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("argument type %s: %w", t, err)
	}
	stripKeys(doc)
	if err := checkTagDefaults(t, doc, nil); err != nil {
		return nil, fmt.Errorf("argument type %s: %w", t, err)
	}
	addTypeBounds(t, doc)
	return doc, nil
}

// mapType gives the schema of the Go types the reflector gets wrong: a
// json.Number is a string in Go but a number in JSON, which is what a model
// must send (encoding/json also takes a string holding a number, which
// models have no reason to send).
func mapType(t reflect.Type) *reflector.Schema {
	if t == reflect.TypeFor[json.Number]() {
		return &reflector.Schema{Type: "number"}
	}
	return nil
}

// stripKeys removes keys that models must not see, at every level.
func stripKeys(v any) {
	switch x := v.(type) {
	case map[string]any:
		delete(x, "$schema")
		delete(x, "$id")
		for _, c := range x {
			stripKeys(c)
		}
	case []any:
		for _, c := range x {
			stripKeys(c)
		}
	}
}

// checkRecursion walks t's exported fields and fails when a struct type
// contains itself, directly or through pointers, slices, arrays or maps.
func checkRecursion(t reflect.Type, stack []reflect.Type) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		if t.Kind() == reflect.Map {
			if err := checkRecursion(t.Key(), stack); err != nil {
				return err
			}
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	for i, s := range stack {
		if s == t {
			path := make([]string, 0, len(stack)-i+1)
			for _, p := range stack[i:] {
				path = append(path, p.String())
			}
			path = append(path, t.String())
			return fmt.Errorf("argument type %s is recursive (%s): recursive types need $ref, which toolrun does not generate", stack[0], strings.Join(path, " -> "))
		}
	}
	stack = append(stack, t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		if tag := f.Tag.Get("json"); tag == "-" {
			continue
		}
		if err := checkRecursion(f.Type, stack); err != nil {
			return err
		}
	}
	return nil
}

// noLoader refuses every $ref that is not inside the document itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s refused: remote and file $ref are not allowed", url)
}

// Compile compiles doc, a JSON Schema document (a map, or JSON text as
// []byte or json.RawMessage). Remote and file references are refused.
func Compile(name string, doc any) (*Schema, error) {
	var raw []byte
	switch d := doc.(type) {
	case json.RawMessage:
		raw = d
	case []byte:
		raw = d
	case string:
		raw = []byte(d)
	default:
		b, err := json.Marshal(d)
		if err != nil {
			return nil, fmt.Errorf("schema is not JSON-encodable: %w", err)
		}
		raw = b
	}
	parsed, err := validator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	obj, ok := parsed.(map[string]any)
	if !ok {
		return nil, errors.New("schema must be a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, fmt.Errorf("schema type must be \"object\" (tool arguments are a JSON object), got %v", t)
	}
	clampCounts(parsed)
	c := validator.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(validator.Draft2020)
	loc := "urn:toolrun:schema:" + name
	if err := c.AddResource(loc, parsed); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %w", err)
	}
	if err := checkCycles(compiled, name); err != nil {
		return nil, err
	}
	if err := checkDefaults(compiled, nil, map[*validator.Schema]bool{}); err != nil {
		return nil, err
	}
	// Numbers stay exact (json.Number): a float64 would advertise the
	// 64-bit integer limits rounded past them.
	var adv map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&adv); err != nil {
		return nil, err
	}
	stripKeys(adv)
	advRaw, err := json.Marshal(adv)
	if err != nil {
		return nil, err
	}
	fast := compileFast(parsed)
	if asserts(compiled, map[*validator.Schema]bool{}) {
		fast = nil // the fast path reads "format" as an annotation only
	}
	return &Schema{doc: adv, raw: advRaw, compiled: compiled, fast: fast,
		defaults: hasDefaults(compiled, map[*validator.Schema]bool{})}, nil
}

// asserts reports whether the validator checks a "format" somewhere in s:
// draft 2019-09 and later only annotate with it, but a schema that declares
// an earlier draft ($schema draft-07 …) asserts it. It follows what the
// fast path supports (properties, additionalProperties, items) and $ref.
func asserts(s *validator.Schema, seen map[*validator.Schema]bool) bool {
	if s == nil || seen[s] {
		return false
	}
	seen[s] = true
	if s.Format != nil {
		return true
	}
	for _, p := range s.Properties {
		if asserts(p, seen) {
			return true
		}
	}
	if ap, ok := s.AdditionalProperties.(*validator.Schema); ok && asserts(ap, seen) {
		return true
	}
	switch items := s.Items.(type) {
	case *validator.Schema:
		if asserts(items, seen) {
			return true
		}
	case []*validator.Schema:
		for _, it := range items {
			if asserts(it, seen) {
				return true
			}
		}
	}
	return asserts(s.Items2020, seen) || asserts(s.Ref, seen)
}

// checkDefaults refuses a default that its own subschema does not accept
// (a value outside the enum, of the wrong type): a tool would otherwise be
// called with arguments its schema forbids.
func checkDefaults(s *validator.Schema, path []string, seen map[*validator.Schema]bool) error {
	if s == nil || seen[s] {
		return nil
	}
	seen[s] = true
	if s.Default != nil {
		if err := s.Validate(*s.Default); err != nil {
			where := "the top level"
			if len(path) > 0 {
				where = "property " + strings.Join(path, ".")
			}
			var issues []Issue
			if ve, ok := err.(*validator.ValidationError); ok {
				collect(ve, &issues)
			}
			msgs := make([]string, len(issues))
			for i, is := range issues {
				msgs[i] = is.Message
			}
			b, _ := json.Marshal(*s.Default)
			return fmt.Errorf("%s: default %s is not a valid value: %s", where, b, strings.Join(msgs, "; "))
		}
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := checkDefaults(s.Properties[n], append(path, n), seen); err != nil {
			return err
		}
	}
	for _, sub := range s.AllOf {
		if err := checkDefaults(sub, path, seen); err != nil {
			return err
		}
	}
	if err := checkDefaults(s.Items2020, append(path, "[]"), seen); err != nil {
		return err
	}
	if ap, ok := s.AdditionalProperties.(*validator.Schema); ok {
		if err := checkDefaults(ap, append(path, "{}"), seen); err != nil {
			return err
		}
	}
	return checkDefaults(s.Ref, path, seen)
}

func hasDefaults(s *validator.Schema, seen map[*validator.Schema]bool) bool {
	if s == nil || seen[s] {
		return false
	}
	seen[s] = true
	for _, p := range s.Properties {
		if p.Default != nil || hasDefaults(p, seen) {
			return true
		}
	}
	for _, sub := range s.AllOf {
		if hasDefaults(sub, seen) {
			return true
		}
	}
	if hasDefaults(s.Items2020, seen) {
		return true
	}
	return hasDefaults(s.Ref, seen)
}

var printer = message.NewPrinter(language.English)

// Validate checks v, a value decoded by [Decode], and returns every failing
// location, sorted by path then message. It returns nil when v is valid.
func (s *Schema) Validate(v any) []Issue {
	// The validator reads a number as an exact fraction, at a cost that
	// grows with the square of its digits: a model's number of a million
	// digits (or of 1e999999, eight characters) would take seconds, which
	// ctx cannot interrupt. Such a number is refused wherever it stands,
	// before the fast path, which refuses it too.
	if path, msg := longNumber(v); msg != "" {
		return []Issue{{Path: path, Message: msg}}
	}
	if s.fast != nil && s.fast.valid(v) {
		return nil
	}
	err := s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *validator.ValidationError
	if !errors.As(err, &ve) {
		return []Issue{{Path: "root", Message: err.Error()}}
	}
	var out []Issue
	collect(ve, &out)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Message < out[j].Message
	})
	// Drop exact duplicates (alternatives of a combinator can repeat a leaf).
	dedup := out[:0]
	for i, is := range out {
		if i > 0 && is == out[i-1] {
			continue
		}
		dedup = append(dedup, is)
	}
	return dedup
}

// MaxNumberLen is the most characters a number in validated arguments may
// have, and the most digits it may have once its exponent is written out:
// far more than any exact integer or decimal a tool takes.
const MaxNumberLen = 1000

// longNumber returns the path of the first number in v that numberTooBig
// refuses and why, or "", "" when there is none. Paths are joined as the
// validator's issues are; one is built only for the number found.
func longNumber(v any) (path, msg string) {
	var keys []string // the path to the number, innermost first
	var find func(v any) string
	find = func(v any) string {
		switch x := v.(type) {
		case json.Number:
			return numberTooBig(string(x))
		case map[string]any:
			for k, el := range x {
				if m := find(el); m != "" {
					keys = append(keys, k)
					return m
				}
			}
		case []any:
			for i, el := range x {
				if m := find(el); m != "" {
					keys = append(keys, strconv.Itoa(i))
					return m
				}
			}
		}
		return ""
	}
	msg = find(v)
	if msg == "" {
		return "", ""
	}
	if len(keys) == 0 {
		return "root", msg
	}
	slices.Reverse(keys)
	return strings.Join(keys, "."), msg
}

func collect(e *validator.ValidationError, out *[]Issue) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	var missing []string
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		missing = k.Missing
	case *kind.DependentRequired:
		missing = k.Missing
	case *kind.Dependency:
		missing = k.Missing
	}
	if len(missing) > 0 {
		// A missing property is reported at its own path, so the model sees
		// which field to add.
		for _, p := range missing {
			*out = append(*out, Issue{Path: strings.Join(append(append([]string(nil), e.InstanceLocation...), p), "."), Message: MissingMessage})
		}
		return
	}
	path := "root"
	if len(e.InstanceLocation) > 0 {
		path = strings.Join(e.InstanceLocation, ".")
	}
	*out = append(*out, Issue{Path: path, Message: e.ErrorKind.LocalizedString(printer)})
}

// MissingMessage is the issue message of a required property that is absent.
const MissingMessage = "required property is missing"

// Decode parses JSON text into the generic form Validate expects.
func Decode(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeExact is Decode with numbers kept as json.Number, for validation:
// float64 would round a number past a 64-bit limit onto it.
func decodeExact(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	for off := dec.InputOffset(); off < int64(len(b)); off++ {
		switch c := b[off]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return nil, &trailingDataError{offset: off, char: c}
		}
	}
	return v, nil
}

// trailingDataError is the syntax error of argument text that goes on
// after its JSON value: `{"a":1} {"a":2}`.
type trailingDataError struct {
	offset int64 // where the extra data starts, in bytes from the start of the text
	char   byte  // its first byte
}

func (e *trailingDataError) Error() string {
	return fmt.Sprintf("unexpected data after the arguments at offset %d: %q (one JSON value is expected, and nothing after it)", e.offset, string([]byte{e.char}))
}

// DefaultsPatch returns the defaults v lacks as a sparse object that,
// decoded on top of v's own decoding, yields v with its defaults applied
// (nested objects hold only their missing keys). full reports that a default
// is needed inside an array, where a patch cannot merge: apply ApplyDefaults
// and re-encode instead. The patch is nil when nothing is missing.
func (s *Schema) DefaultsPatch(v any) (patch map[string]any, full bool) {
	if !s.defaults {
		return nil, false
	}
	return defaultsPatch(s.compiled, v, 0)
}

func defaultsPatch(s *validator.Schema, v any, depth int) (map[string]any, bool) {
	obj, ok := v.(map[string]any)
	if s == nil || depth > 64 || !ok {
		if arr, isArr := v.([]any); isArr && s != nil && s.Items2020 != nil && len(arr) > 0 && hasDefaults(s.Items2020, map[*validator.Schema]bool{}) {
			return nil, true
		}
		return nil, false
	}
	var patch map[string]any
	full := false
	merge := func(p map[string]any, f bool) {
		full = full || f
		for k, x := range p {
			if patch == nil {
				patch = map[string]any{}
			}
			patch[k] = x
		}
	}
	if s.Ref != nil {
		merge(defaultsPatch(s.Ref, v, depth+1))
	}
	for _, sub := range s.AllOf {
		merge(defaultsPatch(sub, v, depth+1))
	}
	for name, p := range s.Properties {
		cur, present := obj[name]
		if !present {
			if p.Default != nil {
				if patch == nil {
					patch = map[string]any{}
				}
				patch[name] = deepCopy(*p.Default)
			}
			continue
		}
		sub, f := defaultsPatch(p, cur, depth+1)
		full = full || f
		if sub != nil {
			if patch == nil {
				patch = map[string]any{}
			}
			patch[name] = sub
		}
	}
	return patch, full
}

// ApplyDefaults fills in, inside v, every missing object property whose
// schema declares a default, at any depth reached through properties, allOf,
// items and $ref. It reports whether it changed anything.
func (s *Schema) ApplyDefaults(v any) bool {
	if !s.defaults {
		return false
	}
	return applyDefaults(s.compiled, v, 0)
}

func applyDefaults(s *validator.Schema, v any, depth int) bool {
	if s == nil || depth > 64 {
		return false
	}
	changed := false
	if s.Ref != nil {
		changed = applyDefaults(s.Ref, v, depth+1) || changed
	}
	for _, sub := range s.AllOf {
		changed = applyDefaults(sub, v, depth+1) || changed
	}
	switch x := v.(type) {
	case map[string]any:
		for name, p := range s.Properties {
			cur, ok := x[name]
			if !ok {
				if p.Default != nil {
					x[name] = deepCopy(*p.Default)
					changed = true
				}
				continue
			}
			changed = applyDefaults(p, cur, depth+1) || changed
		}
	case []any:
		if s.Items2020 != nil {
			for _, el := range x {
				changed = applyDefaults(s.Items2020, el, depth+1) || changed
			}
		}
	}
	return changed
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, c := range x {
			m[k] = deepCopy(c)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, c := range x {
			a[i] = deepCopy(c)
		}
		return a
	}
	return v
}
