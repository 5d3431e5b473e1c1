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
// v's type. It never panics. A value that holds itself (a map stored in
// itself), or nests or spreads too far, is not given to fmt, which follows
// maps and slices without end and would overflow the stack, which cannot
// be recovered: the text names its type.
func Sprint(v any) (s string) {
	defer func() {
		if recover() != nil {
			s = describe(v)
		}
	}()
	if unformattable(v) {
		return "value of type " + reflect.TypeOf(v).String() + " (cyclic, or too deep or too large to format)"
	}
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

// The most a value Sprint formats may nest, and the most values it may hold.
const (
	maxDepth = 64
	maxNodes = 1 << 16
)

// unformattable reports whether fmt could follow v's maps, slices, arrays,
// structs and interfaces deeper than maxDepth or through more than
// maxNodes values: a value that holds itself always does. fmt follows a
// pointer only at the top (it prints the address of one inside), and so
// does this walk.
func unformattable(v any) bool {
	if v == nil {
		return false
	}
	nodes := 0
	var walk func(x reflect.Value, depth int) bool
	walk = func(x reflect.Value, depth int) bool {
		if nodes++; nodes > maxNodes || depth > maxDepth {
			return true
		}
		switch x.Kind() {
		case reflect.Pointer:
			if depth == 0 && !x.IsNil() {
				return walk(x.Elem(), depth+1)
			}
		case reflect.Interface:
			if !x.IsNil() {
				return walk(x.Elem(), depth+1)
			}
		case reflect.Map:
			for it := x.MapRange(); it.Next(); {
				if walk(it.Key(), depth+1) || walk(it.Value(), depth+1) {
					return true
				}
			}
		case reflect.Slice, reflect.Array:
			if x.Kind() == reflect.Slice && x.Type().Elem().Kind() == reflect.Uint8 {
				return false // bytes: printed as a list of numbers, no deeper
			}
			for i := range x.Len() {
				if walk(x.Index(i), depth+1) {
					return true
				}
			}
		case reflect.Struct:
			for i := range x.NumField() {
				if walk(x.Field(i), depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(reflect.ValueOf(v), 0)
}
