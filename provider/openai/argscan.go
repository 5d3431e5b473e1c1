package openai

import "encoding/json"

// argScan follows the arguments of one streamed tool call as their
// fragments arrive, so that whether the arguments received so far are
// valid JSON is known without reading them again each time a call
// starts. Each byte is scanned once, by feed. The scan follows only the
// structure of the text (brackets, strings and their escapes, and the
// grammar of a number or literal standing alone); json.Valid decides,
// when the structure says the text could be complete, and its answer is
// kept until a byte other than white space arrives.
//
// The scan relies on two facts about JSON. Appending white space to a
// text does not change whether it is valid. And once the top-level value
// has ended (its container closed, its string closed, or its number or
// literal followed by white space), no appended text makes an invalid
// text valid, and any byte but white space makes it invalid for good.
type argScan struct {
	phase   uint8 // one of the ph constants
	depth   int   // brackets open, in phContainer
	inStr   bool  // inside a string, in phContainer
	esc     bool  // after a backslash inside a string
	num     uint8 // where a number is in its grammar, in phNumber
	lit     string
	litN    int  // bytes of lit matched, in phLiteral
	checked bool // valid is json.Valid's answer for the text as it is now
	valid   bool
	// fed counts the bytes given to feed, validated those json.Valid
	// read: the work done, which the tests check.
	fed, validated int
}

// The phases of an argScan.
const (
	phBefore    = iota // only white space so far
	phContainer        // inside the top-level array or object
	phString           // inside the top-level string
	phNumber           // in a top-level number
	phLiteral          // in a top-level true, false or null
	phAfter            // the top-level value ended; white space since
	phDead             // no text that starts with this one is valid JSON
)

// The states of a number, after: a minus sign, a leading zero, a digit
// of the integer part, the decimal point, a digit of the fraction, the
// exponent's "e", the exponent's sign, a digit of the exponent.
const (
	numMinus = iota
	numZero
	numInt
	numDot
	numFrac
	numE
	numESign
	numExp
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// feed scans the next fragment of the arguments.
func (a *argScan) feed(frag string) {
	a.fed += len(frag)
	for i := 0; i < len(frag) && a.phase != phDead; i++ {
		c := frag[i]
		if !isSpace(c) {
			a.checked = false
		}
		switch a.phase {
		case phBefore:
			a.start(c)
		case phContainer:
			switch {
			case a.inStr:
				a.inStr, a.esc = a.esc || c != '"', !a.esc && c == '\\'
			case c == '"':
				a.inStr = true
			case c == '[' || c == '{':
				a.depth++
			case c == ']' || c == '}':
				if a.depth--; a.depth == 0 {
					a.phase = phAfter
				}
			}
		case phString:
			if !a.esc && c == '"' {
				a.phase = phAfter
			}
			a.esc = !a.esc && c == '\\'
		case phNumber:
			a.number(c)
		case phLiteral:
			switch {
			case a.litN < len(a.lit) && c == a.lit[a.litN]:
				a.litN++
			case isSpace(c) && a.litN == len(a.lit):
				a.phase = phAfter
			default:
				a.phase = phDead
			}
		case phAfter:
			if !isSpace(c) {
				a.phase = phDead
			}
		}
	}
}

// start scans the first byte that is not white space, or more white space.
func (a *argScan) start(c byte) {
	switch {
	case isSpace(c):
	case c == '[' || c == '{':
		a.phase, a.depth = phContainer, 1
	case c == '"':
		a.phase = phString
	case c == '-':
		a.phase, a.num = phNumber, numMinus
	case c == '0':
		a.phase, a.num = phNumber, numZero
	case isDigit(c):
		a.phase, a.num = phNumber, numInt
	case c == 't':
		a.phase, a.lit, a.litN = phLiteral, "true", 1
	case c == 'f':
		a.phase, a.lit, a.litN = phLiteral, "false", 1
	case c == 'n':
		a.phase, a.lit, a.litN = phLiteral, "null", 1
	default:
		a.phase = phDead
	}
}

// number scans the next byte of a top-level number.
func (a *argScan) number(c byte) {
	next := -1
	switch {
	case isSpace(c):
		if a.numComplete() {
			a.phase = phAfter
		} else {
			a.phase = phDead
		}
		return
	case isDigit(c):
		switch a.num {
		case numMinus:
			next = numInt
			if c == '0' {
				next = numZero
			}
		case numInt, numFrac, numExp:
			next = int(a.num)
		case numDot:
			next = numFrac
		case numE, numESign:
			next = numExp
		}
	case c == '.':
		if a.num == numZero || a.num == numInt {
			next = numDot
		}
	case c == 'e' || c == 'E':
		if a.num == numZero || a.num == numInt || a.num == numFrac {
			next = numE
		}
	case c == '+' || c == '-':
		if a.num == numE {
			next = numESign
		}
	}
	if next < 0 {
		a.phase = phDead
		return
	}
	a.num = uint8(next)
}

// numComplete reports whether the number scanned so far is a whole one.
func (a *argScan) numComplete() bool {
	switch a.num {
	case numZero, numInt, numFrac, numExp:
		return true
	}
	return false
}

// couldBeValid reports whether the text scanned so far may be valid JSON;
// when it is false, the text is not valid.
func (a *argScan) couldBeValid() bool {
	switch a.phase {
	case phAfter:
		return true
	case phNumber:
		return a.numComplete()
	case phLiteral:
		return a.litN == len(a.lit)
	}
	return false
}

// pending reports whether the text may be valid JSON and json.Valid has
// not yet been asked about it as it is now.
func (a *argScan) pending() bool { return !a.checked && a.couldBeValid() }

// isValid reports whether text, all the fragments fed so far, is valid
// JSON. It runs json.Valid only when the scan says the text could be
// valid and the answer for the text as it is now is not yet known.
func (a *argScan) isValid(text string) bool {
	if !a.couldBeValid() {
		return false
	}
	if !a.checked {
		a.validated += len(text)
		a.checked, a.valid = true, json.Valid([]byte(text))
		if !a.valid && a.phase == phAfter {
			a.phase = phDead
		}
	}
	return a.valid
}
