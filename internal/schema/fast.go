package schema

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
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
	min, max   *bound
	xmin, xmax *bound
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
			x, ok := numberOf(v)
			if !ok {
				return nil
			}
			b := &bound{f: x.f, safe: x.tieSafe()}
			switch k {
			case "minimum":
				n.min = b
			case "maximum":
				n.max = b
			case "exclusiveMinimum":
				n.xmin = b
			default:
				n.xmax = b
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

// valid reports whether v, decoded by encoding/json (numbers as float64,
// or as json.Number), satisfies n. It says false whenever it cannot be sure
// (a number whose float64 does not settle the comparison): the validator,
// which compares numbers exactly, then decides.
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
		case json.Number:
			bit = tNum
			f, _ := strconv.ParseFloat(string(x), 64)
			isInt, sure := intness(string(x), f)
			if isInt {
				bit |= tInt
			} else if !sure && n.types&tInt != 0 && n.types&tNum == 0 {
				return false // 5.0000000000000001: only the validator can tell
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
	if n.enum != nil && !inEnum(n.enum, v) {
		return false
	}
	if n.hasConst {
		if eq, sure := jsonEqual(n.constVal, v); !eq || !sure {
			return false
		}
	}
	switch x := v.(type) {
	case float64, json.Number:
		num, _ := numberOf(x)
		if ok, sure := n.inBounds(num); !ok || !sure {
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

// inBounds reports whether x satisfies n's minimum, maximum and exclusive
// bounds, and whether that is certain.
func (n *fastNode) inBounds(x num) (ok, sure bool) {
	sure = true
	if n.min != nil {
		c, s := x.cmp(n.min)
		if s && c < 0 {
			return false, true
		}
		sure = sure && s
	}
	if n.max != nil {
		c, s := x.cmp(n.max)
		if s && c > 0 {
			return false, true
		}
		sure = sure && s
	}
	if n.xmin != nil {
		c, s := x.cmp(n.xmin)
		if s && c <= 0 {
			return false, true
		}
		sure = sure && s
	}
	if n.xmax != nil {
		c, s := x.cmp(n.xmax)
		if s && c >= 0 {
			return false, true
		}
		sure = sure && s
	}
	return true, sure
}

// inEnum reports whether v is certainly one of enum's values.
func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		if eq, sure := jsonEqual(e, v); eq && sure {
			return true
		}
	}
	return false
}

// jsonEqual compares two decoded JSON values, numbers by value. sure is
// false when two numbers have the same float64 but that does not prove
// them equal (1 and 1.0000000000000000001).
func jsonEqual(a, b any) (eq, sure bool) {
	na, aNum := numberOf(a)
	nb, bNum := numberOf(b)
	if aNum || bNum {
		if !aNum || !bNum {
			return false, true
		}
		return na.equal(nb)
	}
	switch x := a.(type) {
	case nil:
		return b == nil, true
	case bool:
		y, ok := b.(bool)
		return ok && x == y, true
	case string:
		y, ok := b.(string)
		return ok && x == y, true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false, true
		}
		sure = true
		for i := range x {
			eq, s := jsonEqual(x[i], y[i])
			if s && !eq {
				return false, true
			}
			sure = sure && s
		}
		return sure, sure
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false, true
		}
		sure = true
		for k, e := range x {
			f, ok := y[k]
			if !ok {
				return false, true
			}
			eq, s := jsonEqual(e, f)
			if s && !eq {
				return false, true
			}
			sure = sure && s
		}
		return sure, sure
	}
	return false, true
}
