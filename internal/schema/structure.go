package schema

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"

	validator "github.com/santhosh-tekuri/jsonschema/v6"
)

// countKeywords are the keywords whose value is a count of characters,
// items or properties.
var countKeywords = map[string]bool{
	"minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true,
	"minContains": true, "maxContains": true,
}

// maxCount stands for every count larger than it: no string, array or
// object of arguments comes near it, and float64 and int hold it exactly.
const maxCount = 1 << 53

var maxCountNumber = json.Number(fmt.Sprint(maxCount))

// clampCounts replaces, in a parsed schema document, every count larger
// than maxCount by maxCount. The validator would otherwise keep such a
// count modulo 2⁶⁴ (minLength 1e300 became 0 and accepted every string);
// clamped, it means what the author wrote for every value a call can hold.
// Values that are data (enum, const, default, examples) are left as they
// are; the names under properties and the other maps of subschemas are
// names, never keywords.
func clampCounts(v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			clampCounts(e)
		}
	case map[string]any:
		for k, e := range x {
			switch {
			case countKeywords[k]:
				if n, ok := e.(json.Number); ok && tooLargeCount(n) {
					x[k] = maxCountNumber
				}
			case k == "enum" || k == "const" || k == "default" || k == "examples":
			case k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions" || k == "dependentSchemas":
				if m, ok := e.(map[string]any); ok {
					for _, sub := range m {
						clampCounts(sub)
					}
				}
			default:
				clampCounts(e)
			}
		}
	}
}

func tooLargeCount(n json.Number) bool {
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.Cmp(big.NewRat(maxCount, 1)) > 0
}

// checkCycles refuses a schema in which a subschema, through $ref and the
// other keywords that apply a subschema to the same value (allOf, anyOf,
// oneOf, not, if, then, else, dependentSchemas), comes back to itself
// without descending into a part of the value. Validating a value that
// reaches it could never end; the validator stops it with an error, so
// every call reaching it would fail, whatever its arguments.
func checkCycles(root *validator.Schema, name string) error {
	const (
		open = 1 + iota
		done
	)
	state := map[*validator.Schema]int{}
	var path []*validator.Schema
	var visit func(s *validator.Schema) error
	visit = func(s *validator.Schema) error {
		if s == nil || state[s] == done {
			return nil
		}
		if state[s] == open {
			i := len(path) - 1
			for path[i] != s {
				i--
			}
			names := make([]string, 0, len(path)-i+1)
			for _, p := range path[i:] {
				names = append(names, where(p, name))
			}
			names = append(names, where(s, name))
			return fmt.Errorf("schema has a reference cycle that never reaches a value: %s", strings.Join(names, " -> "))
		}
		state[s] = open
		path = append(path, s)
		for _, sub := range samePlace(s) {
			if err := visit(sub); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[s] = done
		for _, sub := range parts(s) {
			if err := visit(sub); err != nil {
				return err
			}
		}
		return nil
	}
	return visit(root)
}

// where names a subschema by its place in the document: "#/$defs/a".
func where(s *validator.Schema, name string) string {
	loc := strings.TrimPrefix(s.Location, "urn:toolrun:schema:"+name)
	if loc == "" || loc == "#" {
		return "#"
	}
	return loc
}

// samePlace returns the subschemas s applies to the value it is given.
func samePlace(s *validator.Schema) []*validator.Schema {
	out := []*validator.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, d := range s.DependentSchemas {
		out = append(out, d)
	}
	for _, d := range s.Dependencies {
		if sub, ok := d.(*validator.Schema); ok {
			out = append(out, sub)
		}
	}
	return out
}

// parts returns the subschemas s applies to parts of the value it is given
// (properties, items, property names, decoded content).
func parts(s *validator.Schema) []*validator.Schema {
	out := []*validator.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	for _, p := range s.Properties {
		out = append(out, p)
	}
	for _, p := range s.PatternProperties {
		out = append(out, p)
	}
	out = append(out, s.PrefixItems...)
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch x := v.(type) {
		case *validator.Schema:
			out = append(out, x)
		case []*validator.Schema:
			out = append(out, x...)
		}
	}
	return out
}
