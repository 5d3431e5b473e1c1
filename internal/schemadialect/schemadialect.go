// Package schemadialect rewrites a tool's JSON Schema into the form a model
// provider accepts.
//
// Every dialect inlines local "$ref"s (and drops "$defs"/"definitions"),
// removes "$schema", "$id" and "$comment", and makes the root an object
// schema. The OpenAI strict dialect also applies the rules of OpenAI's
// strict function calling: every property required (optional ones made
// nullable), "additionalProperties": false on every object, and only the
// keywords strict mode accepts. NoTypeArrays rewrites "type": [...] into
// "anyOf" for servers that reject type arrays.
//
// Rewriting changes only what the model is shown: the executor still
// validates arguments against the tool's own schema. Each change that drops
// or loosens something is reported as a Note; LogNotes logs them.
//
// Inlining writes a copy of a $ref's target at every use, so a definition
// shared by two properties of a shared definition doubles at each level: a
// 2 KB schema can stand for gigabytes. A rewrite that would write more than
// MaxNodes subschemas, or more than MaxBytes of JSON, fails with an error
// wrapping ErrTooLarge instead.
//
//	out, notes, err := schemadialect.Rewrite(tool.Parameters, schemadialect.OpenAIStrict)
//	schemadialect.LogNotes(logger, "openai", tool.Name, notes)
package schemadialect

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// Dialect selects the rewriting rules. The zero value is the permissive
// form OpenAI (non-strict) and Anthropic accept.
type Dialect struct {
	// Strict applies OpenAI strict-mode rules.
	Strict bool
	// NoTypeArrays rewrites type arrays ("type": ["string", "null"]) into
	// "anyOf" with one branch per type.
	NoTypeArrays bool
}

// The dialects of the providers in this module.
var (
	OpenAI       = Dialect{}
	OpenAIStrict = Dialect{Strict: true}
	Anthropic    = Dialect{}
)

// Note describes one change that dropped or loosened part of a schema.
type Note struct {
	// Path is the JSON pointer of the schema that changed ("" for the root).
	Path string `json:"path"`
	// Keyword is the keyword concerned.
	Keyword string `json:"keyword"`
	// Reason says what was done.
	Reason string `json:"reason"`
	// Incompatible means the dialect cannot express the schema faithfully
	// (strict mode only): callers should send the tool non-strict instead.
	Incompatible bool `json:"incompatible,omitempty"`
}

// String formats the note as "<path> <keyword>: <reason>".
func (n Note) String() string {
	p := n.Path
	if p == "" {
		p = "/"
	}
	return p + " " + n.Keyword + ": " + n.Reason
}

// LogNotes logs each note as a warning naming the provider and the tool.
// A nil logger logs nothing.
func LogNotes(l *slog.Logger, provider, tool string, notes []Note) {
	if l == nil {
		return
	}
	for _, n := range notes {
		l.LogAttrs(context.Background(), slog.LevelWarn, "tool schema rewritten for provider",
			slog.String("provider", provider), slog.String("tool", tool),
			slog.String("path", n.Path), slog.String("keyword", n.Keyword), slog.String("reason", n.Reason))
	}
}

// Incompatible reports whether any note is Incompatible.
func Incompatible(notes []Note) bool {
	return slices.ContainsFunc(notes, func(n Note) bool { return n.Incompatible })
}

// The bounds of one rewrite: how many subschemas it may write (every copy
// of an inlined $ref target counts) and how long its JSON text may be. A
// schema a model can sensibly be shown stays far below both.
const (
	MaxNodes = 10_000
	MaxBytes = 1 << 20
)

// ErrTooLarge is wrapped by the error of a rewrite that would pass MaxNodes
// or MaxBytes.
var ErrTooLarge = errors.New("schema too large once rewritten for a provider")

// Rewrite returns schema rewritten for d, and the notes about what it
// dropped or loosened. A nil or empty schema, or JSON null, becomes an
// object schema with no properties. It fails for text that is not JSON,
// for a root that is not an object schema, and, with an error wrapping
// ErrTooLarge that names the $ref inlined most often, for a schema whose
// rewrite would pass MaxNodes subschemas or MaxBytes of JSON.
func Rewrite(schema json.RawMessage, d Dialect) (json.RawMessage, []Note, error) {
	var root *object
	if s := bytes.TrimSpace(schema); len(s) == 0 || string(s) == "null" {
		root = newObject()
	} else {
		v, err := decode(s)
		if err != nil {
			return nil, nil, fmt.Errorf("schemadialect: schema is not valid JSON: %w", err)
		}
		o, ok := v.(*object)
		if !ok {
			if b, ok := v.(bool); ok && b {
				o = newObject()
			} else {
				return nil, nil, errors.New("schemadialect: schema is not a JSON object")
			}
		}
		root = o
	}
	w := &walker{d: d, root: root, inlined: map[string]int{}}
	out := w.schema(root, "", nil)
	if w.over != "" {
		return nil, nil, w.tooLarge(fmt.Sprintf("writes more than %d subschemas", MaxNodes), w.over)
	}
	o, ok := out.(*object)
	if !ok {
		o = newObject()
	}
	if err := w.fixRoot(o); err != nil {
		return nil, w.notes, err
	}
	var buf bytes.Buffer
	if err := encode(&buf, o, MaxBytes); err != nil {
		if errors.Is(err, errEncodeLimit) {
			return nil, nil, w.tooLarge(fmt.Sprintf("is longer than %d bytes", MaxBytes), "")
		}
		return nil, w.notes, err
	}
	return buf.Bytes(), w.notes, nil
}

type walker struct {
	d     Dialect
	root  *object
	notes []Note
	depth int
	// nodes counts the subschemas written; over is the path at which it
	// passed MaxNodes, after which the walk writes nothing more.
	nodes int
	over  string
	// inlined counts the copies written of each $ref's target.
	inlined map[string]int
}

// tooLarge words the error of a rewrite past its bounds: what passed which
// bound, where, and the $ref whose target was copied most often, which is
// what to turn into something smaller.
func (w *walker) tooLarge(what, path string) error {
	msg := "rewriting the schema " + what
	if path != "" {
		msg += " (at " + path + ")"
	}
	ref, n := "", 0
	for r, c := range w.inlined {
		if c > n || c == n && r < ref {
			ref, n = r, c
		}
	}
	if n > 1 {
		msg += fmt.Sprintf("; $ref %q is inlined %d times (every use of a $ref writes a copy of its target)", ref, n)
	}
	return fmt.Errorf("schemadialect: %w: %s", ErrTooLarge, msg)
}

func (w *walker) note(path, kw, reason string, incompatible bool) {
	w.notes = append(w.notes, Note{Path: path, Keyword: kw, Reason: reason, Incompatible: incompatible})
}

// Keywords removed silently: they never change what a valid argument is.
var silent = map[string]bool{"$schema": true, "$id": true, "$comment": true, "$anchor": true, "$dynamicAnchor": true, "$defs": true, "definitions": true}

// Keywords whose value is a schema, a list of schemas or a map of schemas.
var (
	schemaKW    = map[string]bool{"additionalProperties": true, "items": true, "not": true, "if": true, "then": true, "else": true, "contains": true, "propertyNames": true, "unevaluatedProperties": true, "unevaluatedItems": true, "additionalItems": true}
	schemaArrKW = map[string]bool{"anyOf": true, "oneOf": true, "allOf": true, "prefixItems": true}
	schemaMapKW = map[string]bool{"properties": true, "patternProperties": true, "dependentSchemas": true}
)

// strictKW are the keywords OpenAI strict mode accepts.
var strictKW = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "description": true, "title": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true,
}

// strictFormats are the string formats OpenAI strict mode accepts.
var strictFormats = map[string]bool{"date-time": true, "time": true, "date": true, "duration": true, "email": true, "hostname": true, "ipv4": true, "ipv6": true, "uuid": true}

const maxDepth = 64

// schema rewrites one (sub)schema. stack holds the $refs being inlined.
func (w *walker) schema(v any, path string, stack []string) any {
	o, ok := v.(*object)
	if !ok {
		if b, isBool := v.(bool); isBool && w.d.Strict {
			w.note(path, "", fmt.Sprintf("boolean schema %v cannot be expressed in strict mode", b), true)
			return newObject()
		}
		return v // booleans and malformed values pass through
	}
	if w.over != "" {
		return newObject()
	}
	if w.nodes++; w.nodes > MaxNodes {
		w.over = path
		if w.over == "" {
			w.over = "/"
		}
		return newObject()
	}
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxDepth {
		w.note(path, "", "schema nested too deeply; replaced by an unconstrained schema", true)
		return newObject()
	}
	if ref, ok := o.get("$ref"); ok {
		o = w.inline(o, ref, path, stack, &stack)
	}
	out := newObject()
	for _, k := range o.keys {
		val := o.vals[k]
		switch {
		case silent[k]:
			continue
		case k == "$ref":
			continue // unresolved, already noted
		case schemaMapKW[k]:
			if m, ok := val.(*object); ok {
				nm := newObject()
				for _, pk := range m.keys {
					nm.set(pk, w.schema(m.vals[pk], path+"/"+k+"/"+escape(pk), stack))
				}
				val = nm
			}
		case schemaArrKW[k]:
			if a, ok := val.([]any); ok {
				na := make([]any, len(a))
				for i, e := range a {
					na[i] = w.schema(e, path+"/"+k+"/"+strconv.Itoa(i), stack)
				}
				val = na
			}
		case schemaKW[k]:
			if _, isBool := val.(bool); isBool && k == "additionalProperties" {
				break // true or false, handled by the strict rules
			}
			if a, ok := val.([]any); ok && k == "items" { // draft-04 tuple items
				na := make([]any, len(a))
				for i, e := range a {
					na[i] = w.schema(e, path+"/items/"+strconv.Itoa(i), stack)
				}
				val = na
			} else {
				val = w.schema(val, path+"/"+k, stack)
			}
		}
		out.set(k, val)
	}
	if w.d.Strict {
		w.strict(out, path)
	}
	if w.d.NoTypeArrays {
		return w.splitTypes(out, path)
	}
	return out
}

// inline replaces a $ref by the schema it points to, with the sibling
// keywords of the $ref laid over it.
func (w *walker) inline(o *object, ref any, path string, stack []string, newStack *[]string) *object {
	s, _ := ref.(string)
	rest := o.clone()
	rest.del("$ref")
	if !strings.HasPrefix(s, "#") {
		w.note(path, "$ref", fmt.Sprintf("non-local reference %q removed", s), true)
		return rest
	}
	if slices.Contains(stack, s) {
		w.note(path, "$ref", fmt.Sprintf("recursive reference %q replaced by an unconstrained schema", s), true)
		return rest
	}
	target, ok := w.resolve(s)
	if !ok {
		w.note(path, "$ref", fmt.Sprintf("unresolvable reference %q removed", s), true)
		return rest
	}
	merged := target.clone()
	for _, k := range rest.keys {
		merged.set(k, rest.vals[k])
	}
	if _, has := merged.get("$ref"); has && merged.vals["$ref"] == ref {
		merged.del("$ref")
	}
	*newStack = append(slices.Clip(stack), s)
	w.inlined[s]++
	if inner, ok := merged.get("$ref"); ok {
		return w.inline(merged, inner, path, *newStack, newStack)
	}
	return merged
}

// resolve follows a local JSON pointer ("#/$defs/Name") from the root.
func (w *walker) resolve(ref string) (*object, bool) {
	p := strings.TrimPrefix(ref, "#")
	var cur any = w.root
	if p != "" {
		if !strings.HasPrefix(p, "/") {
			return nil, false
		}
		for _, tok := range strings.Split(p[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch c := cur.(type) {
			case *object:
				v, ok := c.get(tok)
				if !ok {
					return nil, false
				}
				cur = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				cur = c[i]
			default:
				return nil, false
			}
		}
	}
	o, ok := cur.(*object)
	return o, ok
}

func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// types returns the "type" of o as a list.
func types(o *object) []string {
	switch t := o.vals["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func isObjectSchema(o *object) bool {
	if slices.Contains(types(o), "object") {
		return true
	}
	_, hasProps := o.get("properties")
	return hasProps && o.vals["type"] == nil
}

// strict applies OpenAI strict-mode rules to one rewritten schema.
func (w *walker) strict(o *object, path string) {
	if all, ok := o.get("allOf"); ok {
		o.del("allOf")
		w.mergeAllOf(o, all, path)
	}
	if one, ok := o.get("oneOf"); ok {
		o.del("oneOf")
		if _, has := o.get("anyOf"); has {
			w.note(path, "oneOf", "dropped: the schema has anyOf as well", false)
		} else {
			o.set("anyOf", one)
			w.note(path, "oneOf", "rewritten as anyOf (matching several branches is no longer excluded)", false)
		}
	}
	for _, k := range slices.Clone(o.keys) {
		if !strictKW[k] {
			o.del(k)
			w.note(path, k, "dropped: not supported in strict mode", k == "patternProperties" || k == "not" || k == "if")
		}
	}
	if f, ok := o.vals["format"].(string); ok && !strictFormats[f] {
		o.del("format")
		w.note(path, "format", fmt.Sprintf("dropped: format %q is not supported in strict mode", f), false)
	}
	if !isObjectSchema(o) {
		return
	}
	if _, ok := o.get("type"); !ok {
		o.set("type", "object")
	}
	props, _ := o.vals["properties"].(*object)
	if ap, ok := o.get("additionalProperties"); ok && ap != false {
		if props == nil || len(props.keys) == 0 {
			w.note(path, "additionalProperties", "an object with free-form keys cannot be expressed in strict mode", true)
		} else {
			w.note(path, "additionalProperties", "replaced by false: strict mode forbids extra keys", false)
		}
	}
	o.set("additionalProperties", false)
	if props == nil {
		props = newObject()
		o.set("properties", props)
	}
	required := map[string]bool{}
	if r, ok := o.vals["required"].([]any); ok {
		for _, e := range r {
			if s, ok := e.(string); ok {
				required[s] = true
			}
		}
	}
	all := make([]any, 0, len(props.keys))
	for _, k := range props.keys {
		all = append(all, k)
		if !required[k] {
			props.vals[k] = nullable(props.vals[k])
		}
	}
	o.set("required", all)
}

// mergeAllOf folds allOf branches into o: properties and required are
// combined, other keywords are taken where o does not have them.
func (w *walker) mergeAllOf(o *object, all any, path string) {
	branches, _ := all.([]any)
	for _, b := range branches {
		bo, ok := b.(*object)
		if !ok {
			continue
		}
		for _, k := range bo.keys {
			v := bo.vals[k]
			switch k {
			case "properties":
				bp, _ := v.(*object)
				op, _ := o.vals["properties"].(*object)
				if op == nil {
					op = newObject()
					o.set("properties", op)
				}
				if bp != nil {
					for _, pk := range bp.keys {
						if _, dup := op.get(pk); !dup {
							op.set(pk, bp.vals[pk])
						}
					}
				}
			case "required":
				r, _ := o.vals["required"].([]any)
				br, _ := v.([]any)
				for _, e := range br {
					if !slices.Contains(r, e) {
						r = append(r, e)
					}
				}
				o.set("required", r)
			default:
				if _, has := o.get(k); !has {
					o.set(k, v)
				} else if k != "type" && k != "description" && k != "title" && !sameJSON(o.vals[k], v) {
					w.note(path, "allOf", fmt.Sprintf("conflicting %q of a branch dropped", k), false)
				}
			}
		}
	}
	w.note(path, "allOf", "merged into the enclosing schema", false)
}

// nullable makes a property schema accept null.
func nullable(v any) any {
	o, ok := v.(*object)
	if !ok {
		return v
	}
	o = o.clone()
	switch t := o.vals["type"].(type) {
	case string:
		if t == "null" {
			return o
		}
		o.set("type", []any{t, "null"})
		addNullEnum(o)
		return o
	case []any:
		if !slices.Contains(t, any("null")) {
			o.set("type", append(slices.Clip(t), "null"))
			addNullEnum(o)
		}
		return o
	}
	if a, ok := o.vals["anyOf"].([]any); ok {
		for _, b := range a {
			if bo, ok := b.(*object); ok && bo.vals["type"] == "null" {
				return o
			}
		}
		n := newObject()
		n.set("type", "null")
		o.set("anyOf", append(slices.Clip(a), n))
		return o
	}
	if _, ok := o.get("enum"); ok {
		addNullEnum(o)
		return o
	}
	n := newObject()
	n.set("type", "null")
	w := newObject()
	w.set("anyOf", []any{o, n})
	return w
}

func addNullEnum(o *object) {
	if e, ok := o.vals["enum"].([]any); ok && !slices.Contains(e, nil) {
		o.set("enum", append(slices.Clip(e), nil))
	}
}

// Keywords that only constrain values of one type, for splitTypes.
var typeKW = map[string]string{
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number", "multipleOf": "number",
	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array", "uniqueItems": "array", "contains": "array",
	"properties": "object", "required": "object", "additionalProperties": "object", "patternProperties": "object",
	"minProperties": "object", "maxProperties": "object", "propertyNames": "object",
}

// splitTypes rewrites "type": [a, b] into "anyOf": [{"type": a, …}, {"type": b, …}],
// moving type-specific keywords into the branch they constrain.
func (w *walker) splitTypes(o *object, path string) any {
	ts, ok := o.vals["type"].([]any)
	if !ok {
		return o
	}
	if len(ts) == 1 {
		o.set("type", ts[0])
		return o
	}
	if _, has := o.get("anyOf"); has {
		w.note(path, "type", "type array dropped: the schema has anyOf as well", false)
		o.del("type")
		return o
	}
	out := newObject()
	branches := make([]any, 0, len(ts))
	for _, t := range ts {
		b := newObject()
		b.set("type", t)
		branches = append(branches, b)
	}
	for _, k := range o.keys {
		if k == "type" {
			continue
		}
		kt, specific := typeKW[k]
		if !specific {
			out.set(k, o.vals[k])
			continue
		}
		for i, t := range ts {
			if t == kt || (kt == "number" && t == "integer") {
				branches[i].(*object).set(k, o.vals[k])
			}
		}
	}
	out.set("anyOf", branches)
	return out
}

// fixRoot makes the root an object schema: providers accept nothing else
// as function parameters.
func (w *walker) fixRoot(o *object) error {
	if t, ok := o.get("type"); ok && t != "object" {
		return fmt.Errorf("schemadialect: root schema has type %v: tool arguments must be an object", t)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if", "then", "else"} {
		if _, ok := o.get(k); ok {
			if k == "allOf" && !w.d.Strict {
				w.mergeAllOf(o, o.vals[k], "")
				o.del(k)
				continue
			}
			o.del(k)
			w.note("", k, "dropped: providers accept no "+k+" at the top level of tool parameters", false)
		}
	}
	o.set("type", "object")
	if _, ok := o.get("properties"); !ok {
		o.set("properties", newObject())
		if w.d.Strict {
			o.set("required", []any{})
			o.set("additionalProperties", false)
		}
	}
	if w.d.Strict {
		// Rerun the object rules in case the root had no "type" before.
		w.strict(o, "")
	}
	return nil
}

func sameJSON(a, b any) bool {
	var ba, bb bytes.Buffer
	return encode(&ba, a, 0) == nil && encode(&bb, b, 0) == nil && bytes.Equal(ba.Bytes(), bb.Bytes())
}
