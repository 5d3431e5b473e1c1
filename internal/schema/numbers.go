package schema

import (
	"fmt"
	"strconv"
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
