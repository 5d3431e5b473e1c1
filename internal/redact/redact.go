// Package redact replaces secret values in text and in JSON-like values by
// a placeholder naming the secret, [REDACTED:<NAME>].
//
// It is what keeps a thread's secret env values out of everything that
// leaves a tool: stored content, error text, error data, metadata, emitted
// events, log and span attributes (the contract's "Variables and secrets").
//
// # What is found
//
// A secret is found in every form listed in forms.go: its raw value, its
// JSON-escaped forms (as encoding/json, JSON.stringify, Python, PHP, .NET
// and others write it, with either hex case, and escaped twice for JSON kept
// inside a JSON string), its percent-encoded forms (query, path,
// encodeURIComponent, RFC 3986 and form encoding, with either hex case), its
// HTML-escaped forms (each way of writing the quotes) and,
// for a secret of 7 bytes or more, its encoded forms: base64 in either
// alphabet and base32 in either case, at any offset inside a longer encoded
// text (an HTTP Basic credential, say), hex in either case, and hex with
// ':', ' ' or '-' between its bytes (fingerprints, dumps). Its base64,
// base32 and hex forms are also found broken into lines, as base64, PEM,
// MIME and xxd -p write them at any width: with "\n" or "\r\n" between any
// two of their characters, or `\n` or `\r\n` inside a JSON string, each
// followed or not by the next line's indentation (up to 64 spaces and
// tabs, or `\t` escapes inside a JSON string), as in a YAML block scalar,
// and preceded or not by spaces and tabs at the end of the line and blank
// lines (up to 64 bytes of them in all) (see lines.go). No other form is
// found across a line break. The forms are made once, when the [Redactor]
// is built.
//
// Secrets shorter than [MinLen] bytes are never redacted: replacing a one-
// to three-byte value everywhere would garble unrelated text. [New] reports
// them so that the caller can warn.
//
// # Overlaps
//
// Every occurrence of every form of every secret is found, overlapping ones
// included, and the union of their byte ranges is replaced: ranges that
// overlap or touch are merged, and each merged range is replaced once. A
// merged range becomes the placeholders of the secrets whose occurrences make
// it up, each secret once, in the order their first occurrence in the range
// starts; an occurrence that lies wholly inside another occurrence does not
// count. So with A = "tok-1234" and B = "1234-the-rest-of-the-long-key",
// "tok-1234-the-rest-of-the-long-key" becomes "[REDACTED:A][REDACTED:B]",
// "tok-1234tok-1234" becomes "[REDACTED:A]", and with C = "tok-1234-the",
// which contains A, "tok-1234-the" becomes "[REDACTED:C]". Every
// placeholder keeps the one format, so text can still be searched for
// [REDACTED:...].
//
// An encoded form found broken into lines is replaced from its first
// character to its last, line breaks included, and the placeholders are
// followed by those line breaks as they were written, indentation, blank
// lines and spaces at the ends of lines included, so that every line after
// it keeps its place and indentation:
// base64 at 76 columns with the secret's characters from column 60 of one
// line to column 14 of the next becomes the first 59 characters of the
// line, the placeholder, the line break, and the rest of the next line
// from its 15th character on.
//
// When two secrets share a form (the same value under two names, or one
// secret's escaped form equal to another's value), the secret that comes
// first in the slice given to [New] names it.
//
// # Cost
//
// All forms of all secrets are found in one scan: a prefilter skips to the
// next pair of adjacent bytes that every form of some secret contains (two
// letters or digits of its value, rare in ordinary text; each base64 form
// has a pair of its own), and an Aho–Corasick automaton built once per
// Redactor looks at the bytes around it (see machine). A text with no
// secret in it is returned as it is, without allocating. Building a
// Redactor is slower: before base64 forms were added, about 5µs for a
// secret of letters and digits (one form), 30µs for a base64 one, 170µs
// for 24 bytes full of characters that encoders write differently (59
// forms), and 1.5ms for a 1.7 KB PEM key; the base64 and HTML forms made
// building one for an API key 3.3 times as slow (8.7 → 28 µs, BenchmarkNew)
// and one for the benchmark's ten secrets 2 times (0.27 → 0.56 ms), and the
// scan of 20 KB with one secret and no match in it about twice as slow
// (0.46–0.55 → 0.89–1.06 µs; with a match, or ten secrets, no slower
// beyond the noise).
//
// Encoded forms broken into lines (see lines.go) are looked for only where
// the scan runs the automaton over a prefilter pair of a breakable form
// with a line break between encoding characters next to it; elsewhere they
// cost a look at the bytes the scan stops at. Measured on a shared,
// noisy machine (fastest of 12 interleaved runs): the scan of 20 KB with
// one secret and no match took 2.3 µs before the forms in hex with
// separators, 2.6 with them (one more first byte to look for) and 2.75
// with broken forms; with ten secrets 13–15 µs in all three; 20 KB of log
// lines that end and start with words (BenchmarkLines) 3.2 µs with one
// secret and 24–31 µs with ten, as before. A found occurrence costs 40–70
// ns more (200 bytes: 366 → 402 ns with one secret, 337 → 404 with ten).
// Text with line breaks near a breakable form's pair is looked at again
// around them: 20 KB of base64 at 76 columns takes 76–100 µs instead of 20
// with one secret, and 200–240 instead of 76 with ten; the same base64
// with its lines indented takes about as long as without (388 µs and 386
// with ten secrets), and so does base64 with spaces at the ends of its
// lines and blank lines between them (see docs/benchmarks.md). A text with line breaks, indented or not, and no secret is still
// returned without allocating, for secrets of up to 127 bytes; for a
// longer one, a long encoded run allocates its windows. The six forms in
// hex with separators, three times as long as the secret, and the broken
// forms' bookkeeping made building a Redactor about 1.3 times as slow,
// less what sizing the automaton's slices once saves: 67–88 → 105–116 µs
// for one secret, 1.09–1.13 → 1.35–1.40 ms for ten (BenchmarkNew).
//
// Redactors are built once per set of secrets and kept (the root
// package's redactor cache).
package redact

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// MinLen is the length in bytes of the shortest secret value that is
// redacted.
const MinLen = 4

// Secret is a value to redact and the name its placeholder shows.
type Secret struct {
	// Name is shown in the placeholder [REDACTED:<Name>]; it is not secret.
	Name string
	// Value is the secret; values shorter than MinLen bytes are skipped.
	Value string
}

// Redactor replaces secret values by placeholders. A nil *Redactor redacts
// nothing; all its methods are then cheap and return their argument.
// A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	m            *machine
	placeholders []string // by secret id
	minLen       int      // length of the shortest form
	numeric      bool     // some form can occur in the text of a JSON number
}

// New returns a Redactor for secrets, and the names of the secrets it skips
// because their values are shorter than MinLen, each name once, in order.
// It returns a nil Redactor when no secret is left to redact.
//
// Secrets with the same name share a placeholder; a secret's values are all
// redacted.
func New(secrets []Secret) (r *Redactor, skipped []string) {
	var (
		patterns []pattern
		pairs    [][2]byte
		encPairs [][2]byte          // the pairs of the encoded forms, among pairs
		seen     = map[string]int{} // index in patterns
		ids      = map[string]int32{}
		names    []string
	)
	for _, sec := range secrets {
		if len(sec.Value) < MinLen {
			if !slices.Contains(skipped, sec.Name) {
				skipped = append(skipped, sec.Name)
			}
			continue
		}
		id, ok := ids[sec.Name]
		if !ok {
			id = int32(len(names))
			ids[sec.Name] = id
			names = append(names, sec.Name)
		}
		fs := forms(sec.Value)
		if p, ok := anchor(sec.Value); ok {
			pairs = append(pairs, p)
		} else {
			for _, f := range fs {
				pairs = append(pairs, [2]byte{f[0], f[1]})
			}
		}
		// The value's own bytes are not in its encoded forms: each brings
		// a pair of its own. The pairs of the forms in hex with separators
		// are chosen last, starting with bytes already chosen when they can:
		// their letters and digits are all pairs of hex digits, most of
		// them starting with a digit.
		enc := encodedForms(sec.Value, fs)
		ep := pairsAmong(enc, pairs)
		pairs = append(pairs, ep...)
		encPairs = append(encPairs, ep...)
		sep := separatedHexForms(sec.Value, slices.Concat(fs, enc))
		pairs = append(pairs, pairsAmong(sep, pairs)...)
		for i, f := range slices.Concat(fs, enc, sep) {
			k, ok := seen[f]
			if !ok {
				k = len(patterns)
				seen[f] = k
				patterns = append(patterns, pattern{text: f, id: id, encID: -1})
			}
			// Only the base64, base32 and hex forms (enc) may have line
			// breaks inside them, as encoders that break lines write
			// them; raw and escaped values, and hex with separators, never.
			if isEnc := i >= len(fs) && i < len(fs)+len(enc); isEnc && patterns[k].encID < 0 {
				patterns[k].encID = id
			}
		}
	}
	// A name skipped for one value and redacted for another is not skipped.
	skipped = slices.DeleteFunc(skipped, func(name string) bool { _, ok := ids[name]; return ok })
	if len(skipped) == 0 {
		skipped = nil
	}
	if len(patterns) == 0 {
		return nil, skipped
	}
	r = &Redactor{m: newMachine(patterns, pairs, encPairs), minLen: len(patterns[0].text)}
	for _, name := range names {
		r.placeholders = append(r.placeholders, "[REDACTED:"+name+"]")
	}
	for _, p := range patterns {
		r.minLen = min(r.minLen, len(p.text))
		if strings.Trim(p.text, "0123456789+-.eE") == "" {
			r.numeric = true
		}
	}
	return r, skipped
}

// Active reports whether r has anything to redact (r is not nil).
func (r *Redactor) Active() bool { return r != nil }

// String returns s with every secret replaced. When s contains no secret
// it returns s itself and does not allocate.
func (r *Redactor) String(s string) string {
	out, _ := r.redactString(s)
	return out
}

// Bytes returns b with every secret replaced, in a new slice. When b
// contains no secret it returns b itself and does not allocate. b is only
// read.
func (r *Redactor) Bytes(b []byte) []byte {
	out, _ := r.redactBytes(b)
	return out
}

// redactBytes returns b redacted, in a new slice, and true; or b and false
// when nothing was replaced.
func (r *Redactor) redactBytes(b []byte) ([]byte, bool) {
	if r == nil || len(b) < r.minLen {
		return b, false
	}
	s := unsafe.String(unsafe.SliceData(b), len(b))
	var buf [8]match
	ms := r.find(s, buf[:0])
	if len(ms) == 0 {
		return b, false
	}
	n := 0
	r.ranges(s, ms, func(piece string) { n += len(piece) })
	return r.render(make([]byte, 0, n), s, ms), true
}

// AppendString appends s with every secret replaced to dst and returns the
// extended slice.
func (r *Redactor) AppendString(dst []byte, s string) []byte {
	if r == nil || len(s) < r.minLen {
		return append(dst, s...)
	}
	var buf [8]match
	ms := r.find(s, buf[:0])
	if len(ms) == 0 {
		return append(dst, s...)
	}
	return r.render(dst, s, ms)
}

// redactString returns s redacted and whether anything was replaced.
func (r *Redactor) redactString(s string) (string, bool) {
	if r == nil || len(s) < r.minLen {
		return s, false
	}
	var buf [8]match
	ms := r.find(s, buf[:0])
	if len(ms) == 0 {
		return s, false
	}
	return r.renderString(s, ms), true
}

// find appends to ms the occurrences of secrets in s, in increasing order
// of start and of end, none inside another: those the scan finds and the
// encoded forms with line breaks inside them.
func (r *Redactor) find(s string, ms []match) []match {
	ms, broken := r.m.scanAll(s, ms)
	return withBroken(ms, broken)
}

// render appends s to dst with the occurrences ms replaced: occurrences
// that overlap or touch form one range, which becomes the placeholders of
// their secrets, each once, in order.
func (r *Redactor) render(dst []byte, s string, ms []match) []byte {
	r.ranges(s, ms, func(piece string) { dst = append(dst, piece...) })
	return dst
}

// renderString returns s with the occurrences ms replaced, as render.
func (r *Redactor) renderString(s string, ms []match) string {
	n := 0
	r.ranges(s, ms, func(piece string) { n += len(piece) })
	var b strings.Builder
	b.Grow(n)
	r.ranges(s, ms, func(piece string) { b.WriteString(piece) })
	return b.String()
}

// ranges calls write with the pieces of the redacted text in order: the
// text between ranges, the placeholders of each range, and after them the
// line breaks inside the range's broken occurrences, as they were written,
// so that the lines after the range keep their places.
func (r *Redactor) ranges(s string, ms []match, write func(string)) {
	var named [4]int32
	last := 0
	for k := 0; k < len(ms); {
		first := k
		start, end := ms[k].start, ms[k].end
		listed := named[:0]
		for ; k < len(ms) && ms[k].start <= end; k++ {
			end = max(end, ms[k].end)
			if id := ms[k].id; !slices.Contains(listed, id) {
				listed = append(listed, id)
			}
		}
		write(s[last:start])
		for _, id := range listed {
			write(r.placeholders[id])
		}
		done := start // broken occurrences overlap: each break is written once
		for _, mt := range ms[first:k] {
			if mt.broken {
				writeBreaks(s[max(mt.start, done):mt.end], write)
				done = mt.end
			}
		}
		last = end
	}
	write(s[last:])
}

// The texts that stand for values Value cannot walk.
const (
	// TooDeep replaces a map or slice nested more than MaxDepth levels deep.
	TooDeep = "[REDACTED: nested too deeply]"
	// Cycle replaces a map or slice met again inside itself.
	Cycle = "[REDACTED: cycle]"
)

// MaxDepth is the deepest nesting of maps and slices Value walks.
const MaxDepth = 10000

// Value returns v with every secret replaced in the keys and string values
// of a JSON-like tree. It knows map[string]any, []any, string,
// map[string]string, []string, json.RawMessage (redacted as text; when a
// placeholder would make valid JSON invalid, the value is decoded, redacted
// and encoded again), json.Number and the Go number types, bool and nil;
// other values are returned as they are. A number whose JSON text contains
// a secret becomes the redacted text, a string.
//
// When nothing is replaced Value returns v itself. Otherwise it returns a
// copy of the containers on the way to a replacement; unchanged subtrees are
// shared with v. When a key is redacted to the same text as another key of
// the map, a key that was not redacted keeps its value, and otherwise the
// redacted key that sorts first by its original text.
//
// v should be a tree, as jsonvalue.Normalize returns. A map or slice met
// again inside itself becomes the text Cycle, and one nested more than
// MaxDepth levels deep the text TooDeep, so that Value ends on any input.
func (r *Redactor) Value(v any) any {
	if r == nil {
		return v
	}
	out, _ := r.value(v, nil, 0)
	return out
}

// frame is a container on the path Value is walking, which is a chain of
// frames on the goroutine stack, innermost first.
type frame struct {
	p  unsafe.Pointer
	n  int // the length of a slice; -1 for a map
	up *frame
}

// enter returns the text that stands for the container p when Value
// cannot walk into it, or "".
func enter(c *frame, depth int) string {
	if depth >= MaxDepth {
		return TooDeep
	}
	for f := c.up; f != nil; f = f.up {
		if f.p == c.p && f.n == c.n {
			return Cycle
		}
	}
	return ""
}

// value returns v redacted and whether anything changed.
func (r *Redactor) value(v any, up *frame, depth int) (any, bool) {
	switch x := v.(type) {
	case string:
		if s, changed := r.redactString(x); changed {
			return s, true
		}
	case map[string]any:
		if len(x) == 0 {
			return v, false
		}
		f := frame{reflect.ValueOf(x).UnsafePointer(), -1, up}
		if s := enter(&f, depth); s != "" {
			return s, true
		}
		out := r.object(x, &f, depth)
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		if len(x) == 0 {
			return v, false
		}
		f := frame{unsafe.Pointer(unsafe.SliceData(x)), len(x), up}
		if s := enter(&f, depth); s != "" {
			return s, true
		}
		var out []any
		for i, e := range x {
			if ne, changed := r.value(e, &f, depth+1); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = ne
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []string:
		var out []string
		for i, e := range x {
			if ne, changed := r.redactString(e); changed {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = ne
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case map[string]string:
		var out map[string]any
		var pending []pendingKey
		for k, e := range x {
			nk, kc := r.redactString(k)
			ne, ec := r.redactString(e)
			if !kc && !ec {
				continue
			}
			if out == nil {
				out = make(map[string]any, len(x))
				for k, e := range x {
					out[k] = e
				}
			}
			set(out, &pending, k, nk, kc, ne)
		}
		flush(out, pending)
		if out == nil {
			return v, false
		}
		m := make(map[string]string, len(out))
		for k, e := range out {
			m[k] = e.(string)
		}
		return m, true
	case json.RawMessage:
		return r.raw(x, up, depth)
	case json.Number:
		if r.numeric {
			if s, changed := r.redactString(string(x)); changed {
				return s, true
			}
		}
	case float64, float32, int, int64, int32, uint64, uint:
		if r.numeric {
			return r.number(v)
		}
	}
	return v, false
}

// pendingKey is a redacted key waiting to be put in the copy of its map.
type pendingKey struct {
	key, orig string
	val       any
}

// object returns a redacted copy of x, or nil when nothing changed.
func (r *Redactor) object(x map[string]any, f *frame, depth int) map[string]any {
	var out map[string]any
	var pending []pendingKey
	for k, e := range x {
		nk, kc := r.redactString(k)
		ne, ec := r.value(e, f, depth+1)
		if !kc && !ec {
			continue
		}
		if out == nil {
			out = maps.Clone(x)
		}
		set(out, &pending, k, nk, kc, ne)
	}
	flush(out, pending)
	return out
}

// set records the value of key k, whose redacted text is nk (changed if kc),
// in the copy out. A renamed key waits until every key has been seen.
func set(out map[string]any, pending *[]pendingKey, k, nk string, kc bool, val any) {
	if !kc {
		out[k] = val
		return
	}
	delete(out, k)
	*pending = append(*pending, pendingKey{nk, k, val})
}

// flush puts the renamed keys in out, in order of their redacted and then
// original text; a key already present keeps its value.
func flush(out map[string]any, p []pendingKey) {
	if len(p) == 0 {
		return
	}
	slices.SortFunc(p, func(a, b pendingKey) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		return strings.Compare(a.orig, b.orig)
	})
	for _, e := range p {
		if _, ok := out[e.key]; !ok {
			out[e.key] = e.val
		}
	}
}

// number returns the redacted JSON text of the number v when that text
// contains a secret.
func (r *Redactor) number(v any) (any, bool) {
	var buf [32]byte
	b := buf[:0]
	switch x := v.(type) {
	case float64:
		b = appendFloat(b, x, 64)
	case float32:
		b = appendFloat(b, float64(x), 32)
	case int:
		b = strconv.AppendInt(b, int64(x), 10)
	case int64:
		b = strconv.AppendInt(b, x, 10)
	case int32:
		b = strconv.AppendInt(b, int64(x), 10)
	case uint64:
		b = strconv.AppendUint(b, x, 10)
	case uint:
		b = strconv.AppendUint(b, uint64(x), 10)
	}
	if out, changed := r.redactBytes(b); changed {
		return string(out), true
	}
	return v, false
}

// raw redacts JSON text.
func (r *Redactor) raw(x json.RawMessage, up *frame, depth int) (any, bool) {
	out, changed := r.redactBytes(x)
	if !changed {
		return x, false
	}
	if json.Valid(out) || !json.Valid(x) {
		return json.RawMessage(out), true
	}
	// A placeholder made the JSON invalid: a secret outside a string, or a
	// name that needs escaping. Redact the decoded value and encode it.
	dec := json.NewDecoder(bytes.NewReader(x))
	dec.UseNumber()
	var tree any
	if dec.Decode(&tree) == nil {
		red, _ := r.value(tree, up, depth+1)
		if b, err := json.Marshal(red); err == nil {
			return json.RawMessage(b), true
		}
	}
	b, _ := json.Marshal(string(out))
	return json.RawMessage(b), true
}

// appendFloat appends f as encoding/json writes it.
func appendFloat(b []byte, f float64, bits int) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.AppendFloat(b, f, 'g', -1, bits)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21)) {
		format = 'e'
	}
	n := len(b)
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// e-07 is written e-7.
		if k := len(b); k-n >= 4 && b[k-4] == 'e' && b[k-3] == '-' && b[k-2] == '0' {
			b[k-2] = b[k-1]
			b = b[:k-1]
		}
	}
	return b
}

// anchor returns two adjacent letters or digits of value that are rare in
// ordinary text, the rarity of the first weighing most, and near the start
// of value, so that little has to be looked at again when they are found.
// Every form of value contains them side by side.
func anchor(value string) ([2]byte, bool) {
	var best [2]byte
	score := -1
	for i := 0; i+1 < len(value); i++ {
		c0, c1 := value[i], value[i+1]
		if !isAlnum(c0) || !isAlnum(c1) {
			continue
		}
		s := 2*strings.IndexByte(byFrequency, c0) + strings.IndexByte(byFrequency, c1) - 2*min(i, 60)
		if s > score || score < 0 {
			best, score = [2]byte{c0, c1}, s
		}
	}
	return best, best[0] != 0
}

// pairsAmong returns a prefilter pair for each of forms, which have no
// pair of the secret's value, starting with as few bytes beyond the first
// bytes of pairs as it can: the fewer first bytes the pairs have, the
// faster the scan finds them (see machine.preFew). A form takes its pair
// of letters and digits whose first byte is already chosen, the one whose
// second byte is the least common; when none of the forms left has one, a
// first byte is chosen for as many of them, and as rare, as can be (a
// greedy weighted set cover). A form without two adjacent letters or
// digits gets its first two bytes.
func pairsAmong(forms []string, pairs [][2]byte) [][2]byte {
	var chosen [256]bool
	for _, p := range pairs {
		chosen[p[0]] = true
	}
	out := make([][2]byte, len(forms))
	left := make([]int, 0, len(forms))
	for i, f := range forms {
		if _, ok := anchor(f); ok {
			left = append(left, i)
		} else {
			out[i] = [2]byte{f[0], f[1]}
		}
	}
	for len(left) > 0 {
		rest := left[:0]
		for _, i := range left {
			if p, ok := rarestPairFrom(forms[i], &chosen); ok {
				out[i] = p
			} else {
				rest = append(rest, i)
			}
		}
		left = rest
		if len(left) == 0 {
			break
		}
		var count [256]int
		for _, i := range left {
			var starts [256]bool
			f := forms[i]
			for k := 0; k+1 < len(f); k++ {
				if isAlnum(f[k]) && isAlnum(f[k+1]) {
					starts[f[k]] = true
				}
			}
			for c, ok := range starts {
				if ok {
					count[c]++
				}
			}
		}
		// Each byte chosen is a stop wherever it occurs in the text: weigh
		// the forms it covers by how rare it is (its place in byFrequency,
		// roughly the inverse of its frequency).
		best, bestScore := -1, 0
		for c := range count {
			if count[c] == 0 {
				continue
			}
			if score := count[c] * (strings.IndexByte(byFrequency, byte(c)) + 1); score > bestScore {
				best, bestScore = c, score
			}
		}
		chosen[best] = true
	}
	return out
}

// rarestPairFrom returns f's pair of letters and digits that starts with a
// chosen byte and has the least common second byte.
func rarestPairFrom(f string, chosen *[256]bool) ([2]byte, bool) {
	var best [2]byte
	score := -1
	for i := 0; i+1 < len(f); i++ {
		c0, c1 := f[i], f[i+1]
		if !isAlnum(c0) || !isAlnum(c1) || !chosen[c0] {
			continue
		}
		if s := strings.IndexByte(byFrequency, c1); s > score {
			best, score = [2]byte{c0, c1}, s
		}
	}
	return best, score >= 0
}

// byFrequency lists the ASCII letters and digits from the most to the least
// common in a mix of English prose, JSON and source code (a rough order;
// it only steers the prefilter).
const byFrequency = "etaoinsrhl0dc1um2fpgwyb3vk45ETAOINSRHLDCUM6789xjqzFPGWYBVKXJQZ"
