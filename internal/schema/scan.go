package schema

import (
	"strconv"
	"unicode/utf8"
)

// Scan checks JSON text against the fast path without building generic
// values, and collects the defaults the text lacks as a patch (see
// DefaultsPatch). supported is false when the schema has no fast path or
// the text needs what the scanner does not do (escaped keys, escaped
// strings under string constraints, defaults inside arrays, enums of
// objects or arrays); the caller then uses Decode, Validate and
// DefaultsPatch. When supported is true and data is valid JSON, ok is the
// validator's verdict. The scanner checks JSON syntax only loosely: a
// caller that skips json.Valid must treat a later syntax error of a full
// decoder as "not valid JSON". Scan never panics.
func (s *Schema) Scan(data string) (ok bool, patch map[string]any, supported bool) {
	return s.scan(data, false)
}

// Check is Scan for a caller that applies the defaults itself along object
// properties (see package argdecode): it builds no patch. missing reports
// whether some object lacked a property that has a default.
func (s *Schema) Check(data string) (ok, missing, supported bool) {
	ok, patch, supported := s.scan(data, true)
	return ok, patch != nil, supported
}

// missingDefaults stands for a patch in Check's mode; it is never written.
var missingDefaults = map[string]any{}

func (s *Schema) scan(data string, noPatch bool) (bool, map[string]any, bool) {
	if s.fast == nil {
		return false, nil, false
	}
	sc := scanner{b: data, noPatch: noPatch}
	ok, patch := sc.value(s.fast, 0)
	if sc.peek() != 0 {
		sc.unsupported = true // trailing data
	}
	if sc.unsupported {
		return false, nil, false
	}
	return ok, patch, true
}

type scanner struct {
	b           string
	i           int
	unsupported bool
	noPatch     bool // Check: report missing defaults with missingDefaults
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value against n (nil: any value) and returns its verdict
// and the defaults patch of an object.
func (s *scanner) value(n *fastNode, depth int) (bool, map[string]any) {
	if depth > 64 {
		s.unsupported = true
		return false, nil
	}
	s.ws()
	if s.i >= len(s.b) {
		s.unsupported = true
		return false, nil
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(n, depth)
	case c == '[':
		return s.array(n, depth), nil
	case c == '"':
		raw, escaped := s.str()
		return s.checkString(n, raw, escaped), nil
	case c == 't' || c == 'f':
		v := c == 't'
		lit := "false"
		if v {
			lit = "true"
		}
		if !s.literal(lit) {
			return false, nil
		}
		return s.checkScalar(n, tBool, v), nil
	case c == 'n':
		if !s.literal("null") {
			return false, nil
		}
		return s.checkScalar(n, tNull, nil), nil
	default:
		start := s.i
		exp, frac := false, false
	token:
		for s.i < len(s.b) {
			c := s.b[s.i]
			switch {
			case c >= '0' && c <= '9' || c == '-' || c == '+':
			case c == '.':
				frac = true
			case c == 'e' || c == 'E':
				exp = true
			default:
				break token
			}
			s.i++
		}
		if s.i == start {
			s.unsupported = true // not a JSON value: the full path reports it
			return false, nil
		}
		tok := s.b[start:s.i]
		if len(tok) > MaxNumberLen || exp && numberTooBig(tok) != "" {
			s.unsupported = true // refused by its size: the full path says so
			return false, nil
		}
		f, err := strconv.ParseFloat(tok, 64)
		if err != nil {
			s.unsupported = true // out of range: let the full path decide
			return false, nil
		}
		return s.checkNumber(n, num{f: f, text: tok}, !frac && !exp), nil
	}
}

// literal consumes the exact bytes of lit.
func (s *scanner) literal(lit string) bool {
	if s.i+len(lit) > len(s.b) || s.b[s.i:s.i+len(lit)] != lit {
		s.unsupported = true
		return false
	}
	s.i += len(lit)
	return true
}

// expect consumes byte c after white space, or marks the text unsupported.
func (s *scanner) expect(c byte) bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != c {
		s.unsupported = true
		return false
	}
	s.i++
	return true
}

// peek returns the next byte after white space, or 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// str scans a string and returns its raw contents and whether it has escapes.
func (s *scanner) str() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		s.unsupported = true
		return "", false
	}
	s.i++ // opening quote
	start := s.i
	escaped := false
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped
		}
		if s.b[s.i] < 0x20 {
			s.unsupported = true // a control character: not valid JSON
			return "", escaped
		}
		s.i++
	}
	s.unsupported = true
	return "", escaped
}

func (s *scanner) checkScalar(n *fastNode, bit uint8, v any) bool {
	if n == nil {
		return true
	}
	if n.types != 0 && n.types&bit == 0 {
		return false
	}
	if n.enum != nil && !s.inEnum(n.enum, v) {
		return false
	}
	if !n.hasConst {
		return true
	}
	eq, sure := jsonEqual(n.constVal, v)
	if !sure {
		s.unsupported = true
	}
	return eq && sure
}

// checkNumber checks the number x, read from argument text (integer: the
// text has no fraction or exponent). float64 settles most comparisons; one
// it cannot (5.0000000000000001 against an integer type or a maximum of 5,
// 1.0000000000000000001 against an enum of 1) is left to the full path.
func (s *scanner) checkNumber(n *fastNode, x num, integer bool) bool {
	if n == nil {
		return true
	}
	if n.types != 0 {
		bit := tNum
		if integer {
			bit |= tInt
		} else if n.types&tInt != 0 && n.types&tNum == 0 {
			isInt, sure := intness(x.text, x.f)
			if !sure {
				s.unsupported = true
				return false
			}
			if isInt {
				bit |= tInt
			}
		}
		if n.types&bit == 0 {
			return false
		}
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			y, ok := numberOf(e)
			if !ok {
				continue
			}
			eq, sure := x.equal(y)
			if !sure {
				s.unsupported = true
				return false
			}
			if eq {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.hasConst {
		y, ok := numberOf(n.constVal)
		if !ok {
			return false
		}
		eq, sure := x.equal(y)
		if !sure {
			s.unsupported = true
			return false
		}
		if !eq {
			return false
		}
	}
	if n.min == nil && n.max == nil && n.xmin == nil && n.xmax == nil {
		return true
	}
	ok, sure := n.inBounds(x)
	if !sure {
		// float64 cannot tell such a number from its bound (2⁶³ from the
		// int64 maximum): the full path compares it exactly.
		s.unsupported = true
		return false
	}
	return ok
}

func (s *scanner) checkString(n *fastNode, raw string, escaped bool) bool {
	if n == nil {
		return true
	}
	if n.types != 0 && n.types&tStr == 0 {
		return false
	}
	needsValue := n.enum != nil || n.hasConst || n.pattern != nil || n.minLen > 0 || n.maxLen >= 0
	if !needsValue {
		return true
	}
	if escaped || !utf8.ValidString(raw) {
		s.unsupported = true
		return false
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if es, ok := e.(string); ok && es == raw {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.hasConst {
		if cs, ok := n.constVal.(string); !ok || cs != raw {
			return false
		}
	}
	if n.minLen > 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(raw)
		if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(raw)
}

// inEnum is inEnum for the scan: a value that might equal an enum value
// without the fast path being sure is left to the full path.
func (s *scanner) inEnum(enum []any, v any) bool {
	for _, e := range enum {
		eq, sure := jsonEqual(e, v)
		if !sure {
			s.unsupported = true
			return false
		}
		if eq {
			return true
		}
	}
	return false
}

func (s *scanner) object(n *fastNode, depth int) (bool, map[string]any) {
	s.i++ // {
	if n != nil {
		if n.types != 0 && n.types&tObj == 0 || n.enum != nil || n.hasConst || len(n.required) > 64 || len(n.defaults) > 64 {
			if n.types != 0 && n.types&tObj == 0 {
				s.skipRest()
				return false, nil
			}
			s.unsupported = true
			return false, nil
		}
	}
	var required, present uint64
	var patch map[string]any
	ok := true
	if s.peek() == '}' {
		s.i++
	} else {
		for {
			s.ws()
			key, escaped := s.str()
			if escaped || s.unsupported {
				s.unsupported = true
				return false, nil
			}
			if !s.expect(':') {
				return false, nil
			}
			var child *fastNode
			known := false
			if n != nil {
				child, known = n.props[key]
				if !known {
					if n.closed {
						ok = false
					}
					child = n.extra
				}
				for j, r := range n.required {
					if r == key {
						required |= 1 << j
					}
				}
				for j, d := range n.defaults {
					if d == key {
						present |= 1 << j
					}
				}
			}
			vok, sub := s.value(child, depth+1)
			if s.unsupported {
				return false, nil
			}
			if !vok {
				ok = false
			}
			if sub != nil && known {
				if s.noPatch {
					patch = missingDefaults
				} else {
					if patch == nil {
						patch = map[string]any{}
					}
					patch[key] = sub
				}
			}
			switch s.peek() {
			case ',':
				s.i++
				continue
			case '}':
				s.i++
			default:
				s.unsupported = true
				return false, nil
			}
			break
		}
	}
	if n == nil {
		return ok, nil
	}
	if len(n.required) > 0 && required != 1<<len(n.required)-1 {
		ok = false
	}
	for j, d := range n.defaults {
		if present&(1<<j) == 0 {
			if s.noPatch {
				return ok, missingDefaults
			}
			if patch == nil {
				patch = map[string]any{}
			}
			patch[d] = deepCopy(n.props[d].def)
		}
	}
	return ok, patch
}

// skipRest skips the rest of an object or array after its opening bracket.
func (s *scanner) skipRest() {
	depth := 1
	for s.i < len(s.b) && depth > 0 {
		switch s.b[s.i] {
		case '"':
			s.str()
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
		s.i++
	}
}

func (s *scanner) array(n *fastNode, depth int) bool {
	s.i++ // [
	if n != nil && (n.enum != nil || n.hasConst) {
		s.unsupported = true
		return false
	}
	if n != nil && n.types != 0 && n.types&tArr == 0 {
		s.skipRest()
		return false
	}
	var items *fastNode
	if n != nil {
		items = n.items
	}
	ok := true
	count := 0
	if s.peek() == ']' {
		s.i++
	} else {
		for {
			vok, sub := s.value(items, depth+1)
			if s.unsupported {
				return false
			}
			if sub != nil {
				s.unsupported = true // defaults inside array items: full path
				return false
			}
			if !vok {
				ok = false
			}
			count++
			switch s.peek() {
			case ',':
				s.i++
				continue
			case ']':
				s.i++
			default:
				s.unsupported = true
				return false
			}
			break
		}
	}
	if n != nil && (count < n.minItems || n.maxItems >= 0 && count > n.maxItems) {
		ok = false
	}
	return ok
}
