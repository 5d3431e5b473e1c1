package schema

import (
	"math"
	"regexp"
	"unicode/utf8"
)

// fastNode is a schema compiled for the fast path: a check that answers
// only "valid or not" for the keywords that struct-generated schemas use.
// When it says invalid, or when a schema uses any other keyword, the full
// validator runs and produces the error messages; so the fast path can only
// make valid input cheaper, never change a verdict.
type fastNode struct {
	types      uint8 // bit set of jsonTypes; 0 = any
	props      map[string]*fastNode
	required   []string
	closed     bool      // additionalProperties: false
	extra      *fastNode // additionalProperties: schema
	items      *fastNode
	enum       []any
	hasConst   bool
	constVal   any
	min, max   *float64
	xmin, xmax *float64
	minLen     int
	maxLen     int // -1: none
	minItems   int
	maxItems   int // -1: none
	pattern    *regexp.Regexp
	def        any // the "default" value, when hasDef
	hasDef     bool
	defaults   []string // properties that declare a default
}

const (
	tNull uint8 = 1 << iota
	tBool
	tInt
	tNum
	tStr
	tArr
	tObj
)

var annotation = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "$comment": true,
	"format": true, "deprecated": true, "readOnly": true, "writeOnly": true, "$schema": true, "$id": true,
}

// compileFast builds the fast path for a schema document, or returns nil
// when it uses a keyword the fast path does not know.
func compileFast(doc any) *fastNode {
	m, ok := doc.(map[string]any)
	if !ok {
		if b, ok := doc.(bool); ok && b {
			return &fastNode{maxLen: -1, maxItems: -1}
		}
		return nil
	}
	n := &fastNode{maxLen: -1, maxItems: -1}
	for k, v := range m {
		switch k {
		case "type":
			switch t := v.(type) {
			case string:
				bit := typeBit(t)
				if bit == 0 {
					return nil
				}
				n.types |= bit
			case []any:
				for _, e := range t {
					s, _ := e.(string)
					bit := typeBit(s)
					if bit == 0 {
						return nil
					}
					n.types |= bit
				}
			default:
				return nil
			}
		case "properties":
			ps, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			n.props = make(map[string]*fastNode, len(ps))
			for name, p := range ps {
				c := compileFast(p)
				if c == nil {
					return nil
				}
				n.props[name] = c
			}
		case "required":
			rs, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, r := range rs {
				s, ok := r.(string)
				if !ok {
					return nil
				}
				n.required = append(n.required, s)
			}
		case "additionalProperties":
			switch a := v.(type) {
			case bool:
				n.closed = !a
			default:
				if n.extra = compileFast(a); n.extra == nil {
					return nil
				}
			}
		case "items":
			if n.items = compileFast(v); n.items == nil {
				return nil
			}
		case "enum":
			e, ok := v.([]any)
			if !ok {
				return nil
			}
			n.enum = e
		case "const":
			n.hasConst, n.constVal = true, v
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			f, ok := number(v)
			if !ok {
				return nil
			}
			switch k {
			case "minimum":
				n.min = &f
			case "maximum":
				n.max = &f
			case "exclusiveMinimum":
				n.xmin = &f
			default:
				n.xmax = &f
			}
		case "minLength", "maxLength", "minItems", "maxItems":
			f, ok := number(v)
			if !ok || f < 0 || f != math.Trunc(f) {
				return nil
			}
			switch k {
			case "minLength":
				n.minLen = int(f)
			case "maxLength":
				n.maxLen = int(f)
			case "minItems":
				n.minItems = int(f)
			default:
				n.maxItems = int(f)
			}
		case "pattern":
			s, ok := v.(string)
			if !ok {
				return nil
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil
			}
			n.pattern = re
		case "default":
			n.def, n.hasDef = v, true
		default:
			if !annotation[k] {
				return nil
			}
		}
	}
	for name, p := range n.props {
		if p.hasDef {
			n.defaults = append(n.defaults, name)
		}
	}
	return n
}

func typeBit(t string) uint8 {
	switch t {
	case "null":
		return tNull
	case "boolean":
		return tBool
	case "integer":
		return tInt
	case "number":
		return tNum
	case "string":
		return tStr
	case "array":
		return tArr
	case "object":
		return tObj
	}
	return 0
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case interface{ Float64() (float64, error) }:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// valid reports whether v, decoded by encoding/json, satisfies n.
func (n *fastNode) valid(v any) bool {
	if n.types != 0 {
		var bit uint8
		switch x := v.(type) {
		case nil:
			bit = tNull
		case bool:
			bit = tBool
		case float64:
			bit = tNum
			if x == math.Trunc(x) && !math.IsInf(x, 0) {
				bit |= tInt
			}
		case string:
			bit = tStr
		case []any:
			bit = tArr
		case map[string]any:
			bit = tObj
		default:
			return false
		}
		if n.types&bit == 0 {
			return false
		}
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if jsonEqual(e, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.hasConst && !jsonEqual(n.constVal, v) {
		return false
	}
	switch x := v.(type) {
	case float64:
		if n.min != nil && x < *n.min || n.max != nil && x > *n.max ||
			n.xmin != nil && x <= *n.xmin || n.xmax != nil && x >= *n.xmax {
			return false
		}
	case string:
		if n.minLen > 0 || n.maxLen >= 0 {
			l := utf8.RuneCountInString(x)
			if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
				return false
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			return false
		}
	case []any:
		if len(x) < n.minItems || n.maxItems >= 0 && len(x) > n.maxItems {
			return false
		}
		if n.items != nil {
			for _, e := range x {
				if !n.items.valid(e) {
					return false
				}
			}
		}
	case map[string]any:
		for _, r := range n.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for k, e := range x {
			if p, ok := n.props[k]; ok {
				if !p.valid(e) {
					return false
				}
				continue
			}
			if n.closed {
				return false
			}
			if n.extra != nil && !n.extra.valid(e) {
				return false
			}
		}
	}
	return true
}

// jsonEqual compares two decoded JSON values (numbers by value).
func jsonEqual(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && fa == fb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, e := range x {
			f, ok := y[k]
			if !ok || !jsonEqual(e, f) {
				return false
			}
		}
		return true
	}
	return false
}
