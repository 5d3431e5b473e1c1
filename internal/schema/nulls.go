package schema

import (
	"bytes"
	"encoding/json"
	"strings"
)

// StripOptionalNulls removes from the argument text every property whose
// value is null, whose subschema does not accept null, and which its object
// does not require — at the top level and in nested objects and array
// items. A schema dialect that makes every optional property required and
// nullable (OpenAI's strict mode) makes models send null for "not given";
// removing those nulls gives back what the tool's own schema means, so
// validation and defaults then work as for any other model. It returns the
// text unchanged (and false) when there is nothing to remove or the text is
// not JSON (validation then reports it).
func (s *Schema) StripOptionalNulls(text string) (string, bool) {
	if s == nil || !strings.Contains(text, "null") {
		return text, false
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return text, false
	}
	if !stripNulls(s.doc, v, 0) {
		return text, false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return text, false
	}
	return strings.TrimSuffix(buf.String(), "\n"), true
}

// stripNulls removes the optional nulls from v as doc describes it and
// reports whether it removed any.
func stripNulls(doc map[string]any, v any, depth int) bool {
	if doc == nil || depth > 64 {
		return false
	}
	changed := false
	switch x := v.(type) {
	case map[string]any:
		props, _ := doc["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := doc["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for k, e := range x {
			sub, _ := props[k].(map[string]any)
			if sub == nil {
				continue
			}
			if e == nil {
				if !required[k] && !acceptsNull(sub) {
					delete(x, k)
					changed = true
				}
				continue
			}
			changed = stripNulls(sub, e, depth+1) || changed
		}
	case []any:
		items, _ := doc["items"].(map[string]any)
		for _, e := range x {
			changed = stripNulls(items, e, depth+1) || changed
		}
	}
	return changed
}

// acceptsNull reports whether a subschema lets null through: its type
// names null, or it has no type and no constraint against it.
func acceptsNull(doc map[string]any) bool {
	switch t := doc["type"].(type) {
	case string:
		return t == "null"
	case []any:
		for _, e := range t {
			if e == "null" {
				return true
			}
		}
		return false
	}
	if enum, ok := doc["enum"].([]any); ok {
		for _, e := range enum {
			if e == nil {
				return true
			}
		}
		return false
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := doc[k].([]any); ok {
			for _, a := range alts {
				if m, ok := a.(map[string]any); ok && acceptsNull(m) {
					return true
				}
			}
			return false
		}
	}
	_, hasConst := doc["const"]
	return !hasConst
}
