package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxExponent is where numberSize stops counting an exponent: far past
// MaxNumberLen, and small enough that no sum overflows.
const maxExponent = 1_000_000_000

// numberSize returns how many digits the validator's exact arithmetic
// builds for the JSON number text: the digits of its mantissa plus the
// size of its exponent (1e999999 is a million digits written out). An
// exponent past maxExponent counts as maxExponent, and clamped reports it.
func numberSize(text string) (size int, clamped bool) {
	i := 0
	for ; i < len(text) && text[i] != 'e' && text[i] != 'E'; i++ {
		if text[i] >= '0' && text[i] <= '9' {
			size++
		}
	}
	exp := 0
	for i++; i < len(text); i++ {
		if c := text[i]; c >= '0' && c <= '9' {
			exp = exp*10 + int(c-'0')
			if exp > maxExponent {
				exp, clamped = maxExponent, true
			}
		}
	}
	return min(size, maxExponent) + exp, clamped
}

// numberTooBig says why the JSON number text is refused by its size, or
// returns "" when it is not: more than MaxNumberLen characters, or more
// than MaxNumberLen digits once its exponent is written out.
func numberTooBig(text string) string {
	if len(text) > MaxNumberLen {
		return fmt.Sprintf("a number of %d characters; numbers may have at most %d", len(text), MaxNumberLen)
	}
	size, clamped := numberSize(text)
	if size <= MaxNumberLen {
		return ""
	}
	count := strconv.Itoa(size)
	if clamped {
		count = "more than " + strconv.Itoa(maxExponent)
	}
	return fmt.Sprintf("a number of %s digits when written out; numbers may have at most %d", count, MaxNumberLen)
}

// num is a decoded number as the fast path compares it: its float64, and
// what the validator reads exactly — the text of a json.Number or of a
// number in argument text, or the shortest decimal of a float64 (exact is
// then true and text is empty).
type num struct {
	f     float64
	text  string
	exact bool
}

// bound is a minimum or maximum of the fast path: its float64, and whether
// two numbers with that float64 are certainly equal to it (tieSafe).
type bound struct {
	f    float64
	safe bool
}

// numberOf returns v as a num when it is a decoded number.
func numberOf(v any) (num, bool) {
	switch x := v.(type) {
	case float64:
		return num{f: x, exact: true}, true
	case json.Number:
		// Out of range, ParseFloat gives ±Inf (or 0): still on the right
		// side of every finite float64, and never tieSafe.
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return num{}, false
		}
		return num{f: f, text: string(x)}, true
	}
	return num{}, false
}

// float64 is monotonic in the decimal it rounds (a < b gives float(a) ≤
// float(b)), so two numbers with different float64 values compare as
// those values do; only when the float64 values are equal can the numbers
// still differ (5 and 5.0000000000000001). They cannot when both are
// tieSafe: decimals of at most 15 digits without an exponent (float64
// keeps 15 significant digits, so distinct ones stay distinct) and
// integers below 2⁵³ (float64 holds them exactly). Any other tie is left
// to the validator.

// tieSafe reports whether x is in the set where equal float64 values mean
// equal numbers.
func (x num) tieSafe() bool {
	if x.exact {
		if x.f == math.Trunc(x.f) && math.Abs(x.f) < 1<<53 {
			return true
		}
		// The validator reads a float64 as its shortest decimal.
		var buf [32]byte
		b := strconv.AppendFloat(buf[:0], x.f, 'g', -1, 64)
		return textTieSafe(b, x.f)
	}
	return textTieSafe(x.text, x.f)
}

// textTieSafe is tieSafe for the number text whose float64 is f.
func textTieSafe[T string | []byte](text T, f float64) bool {
	digits, frac := 0, false
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			frac = true
		case c == 'e' || c == 'E':
			return false
		}
	}
	return digits <= 15 || !frac && math.Abs(f) < 1<<53
}

// cmp compares x with b: the sign of x - b, and whether it is certain.
func (x num) cmp(b *bound) (int, bool) {
	switch {
	case x.f < b.f:
		return -1, true
	case x.f > b.f:
		return 1, true
	case b.safe && x.tieSafe():
		return 0, true
	}
	return 0, false
}

// equal reports whether x and y are the same number, and whether that is
// certain.
func (x num) equal(y num) (eq, sure bool) {
	if x.f != y.f {
		return false, true
	}
	if x.tieSafe() && y.tieSafe() {
		return true, true
	}
	return false, false
}

// intness reports whether the number text, whose float64 is f, is an
// integer, and whether that is certain: 5.0 is, 5.5 is not, and
// 5.0000000000000001 (whose float64 is 5) only the validator can tell.
func intness(text string, f float64) (isInt, sure bool) {
	if !strings.ContainsAny(text, ".eE") {
		return true, true
	}
	if f != math.Trunc(f) {
		return false, true // an integer's float64 has no fraction
	}
	if textTieSafe(text, f) {
		return true, true
	}
	return false, false
}
