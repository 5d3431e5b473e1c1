// Package safefmt formats values that may misbehave when formatted: a
// recovered panic value whose String or Error method panics itself, or a
// value whose formatting never ends in a reasonable size.
//
// fmt already catches a panic in a String or Error method, but it formats
// the value that method panicked with, and a second panic while it does so
// escapes fmt. Code that formats a recovered value inside a deferred
// function must not panic, so it uses Sprint instead.
package safefmt

import (
	"fmt"
	"reflect"
)

// MaxLen is the longest text Sprint returns; longer texts are cut and end
// with "… (cut)".
const MaxLen = 64 << 10

// Sprint returns fmt.Sprint(v), or, when formatting v panics, a text naming
// v's type. It never panics.
func Sprint(v any) (s string) {
	defer func() {
		if recover() != nil {
			s = describe(v)
		}
	}()
	s = fmt.Sprint(v)
	if len(s) > MaxLen {
		s = cut(s)
	}
	return s
}

// Error returns err.Error(), or, when that panics, a text naming err's
// type. A nil error gives "<nil>". It never panics.
func Error(err error) (s string) {
	if err == nil {
		return "<nil>"
	}
	defer func() {
		if recover() != nil {
			s = describe(err)
		}
	}()
	s = err.Error()
	if len(s) > MaxLen {
		s = cut(s)
	}
	return s
}

// describe names v's type without calling any of its methods.
func describe(v any) (s string) {
	defer func() {
		if recover() != nil {
			s = "value whose formatting panicked"
		}
	}()
	return "value of type " + reflect.TypeOf(v).String() + " (formatting it panicked)"
}

// cut shortens s to MaxLen bytes on a UTF-8 boundary.
func cut(s string) string {
	n := MaxLen
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "… (cut)"
}
