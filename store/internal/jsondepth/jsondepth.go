// Package jsondepth finds JSON documents nested more deeply than
// encoding/json decodes, for the stores: json.Marshal writes such a
// document, but json.Unmarshal fails on it ("exceeded max depth"), so a
// store that wrote one could never read it back.
package jsondepth

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolrun/toolrun"
)

// Max is how deeply arrays and objects may nest in a document that
// encoding/json decodes.
const Max = 10000

// ErrTooDeep is the error of a value a store refuses because TooDeep
// reports it; callers prefix the name of the value. It wraps
// toolrun.ErrUnstorable.
var ErrTooDeep = fmt.Errorf("arrays and objects nested more than %d deep, deeper than JSON decoding allows: %w", Max, toolrun.ErrUnstorable)

// TooDeep reports whether the JSON document b (as json.Marshal writes it)
// nests arrays and objects more than Max deep, and if so the name of the
// member of its outermost object that holds the first value nested too
// deeply ("" when b is not an object). Every level takes an opening and a
// closing bracket, so a document of at most twice Max bytes is not read; a
// longer one is read once, its strings skipped.
func TooDeep(b []byte) (member string, deep bool) {
	if len(b) <= 2*Max {
		return "", false
	}
	depth := 0
	var key []byte // the last string of the outermost object, quoted
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			end := stringEnd(b, i)
			if depth == 1 && b[0] == '{' {
				// In an object the last string before a value nested
				// in it is that value's name.
				key = b[i:min(end+1, len(b))]
			}
			i = end
		case '{', '[':
			depth++
			if depth > Max {
				_ = json.Unmarshal(key, &member)
				return member, true
			}
		case '}', ']':
			depth--
		}
	}
	return "", false
}

// stringEnd returns the index of the quote that ends the JSON string whose
// opening quote is at b[open], or len(b) if none does: the first quote
// after it not escaped by an odd number of backslashes.
func stringEnd(b []byte, open int) int {
	for from := open + 1; ; {
		k := bytes.IndexByte(b[from:], '"')
		if k < 0 {
			return len(b)
		}
		q, n := from+k, 0
		for q-1-n > open && b[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		from = q + 1
	}
}
