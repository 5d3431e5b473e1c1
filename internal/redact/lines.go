package redact

import (
	"strings"
	"unsafe"
)

// Encoded forms broken into lines.
//
// Encoders that break their output into lines (base64 at 76 columns, PEM
// and MIME at 64 or 76, xxd -p at 60, or any width a tool chooses) put a
// line break wherever a line is full, so inside a secret's encoded form
// too. A line break, here, is a newline, "\n" or "\r\n", or either written
// as a JSON string writes it (`\n`, `\r\n`), with the whitespace around it,
// between two encoding characters (encChars): the spaces and tabs at the
// end of the line before it (editors, copy and paste and fold leave them),
// blank lines after that line, which may hold spaces and tabs too, and the
// indentation of the next line; in a break of escaped newlines the `\t`
// escapes count as tabs. A break's newlines are all of one kind, written
// as text or as a JSON string writes them. What a break holds before its
// last newline is at most maxLead bytes, and the indentation after that
// newline at most maxIndent bytes (see breakLen): encoded lines indented in
// a YAML block scalar or a config file, with spaces at their ends or a
// blank line between them, are broken lines as much as those that are not.
// A longer stretch of whitespace, one with newlines of both kinds in it,
// and a bare "\r" end a run of encoded lines instead. The breakable forms
// (base64, base32 and hex, see pattern.encID) are also looked for in the
// text with such breaks taken out: an occurrence with a break inside it is
// a broken one. The bytes of a break are none of the encoded text's
// characters, so a broken occurrence never starts with the n of a `\n`,
// the r of a `\r\n` or the t of a `\t` inside one. No other form is looked
// for there, so a raw or escaped value is never found across a line break.
//
// A broken occurrence is redacted with the breaks inside it: its range
// runs from its first encoded character to its last. The placeholders of
// the range are followed by those breaks, as they were written, so the
// text keeps its lines, each line after the secret in its place and with
// its indentation, and the blank lines and the spaces at the ends of lines
// inside the secret kept too (see Redactor.ranges).
//
// Finding them costs next to nothing on text without line breaks near the
// prefilter pairs of breakable forms. Every broken occurrence has its
// form's pair whole, where the scan stops or which it runs the automaton
// over, or has a line break between the two bytes of that pair. When the
// break starts with its newline, the pair's first byte followed by the
// newline's first byte ('\n', '\r' or '\\') is a prefilter pair too (see
// newMachine). When it starts with spaces or tabs at the end of the line,
// the scan stops at the pair's first byte followed by a space or a tab and
// another byte of a break (see splitAtSpace), and there only looks for a
// break and the pair's second byte after it, without running the
// automaton: after a word, a space is followed by the next word, so the
// scan seldom stops there. Neither adds a first byte to the prefilter's,
// so the scan looks at the same bytes. So at each place the scan runs the
// automaton over, it looks for a pair of a breakable form
// (machine.encPairs) with a line break between encoding characters next to
// it or inside it (see mayBreak), and at each such stop for the pair split
// there; only there is the text looked at again: from each line break near it, the
// encoding characters and the breaks between them are copied without the
// breaks into a window on the stack, as far as the longest breakable form
// reaches past the last break, and the window is scanned for the breakable
// forms alone. Looking for a break next to a pair looks at the few bytes
// where the encoding characters around the pair end, and at whitespace and
// newlines only when they are there.

// encChars are the characters of the encodings whose forms may be broken
// into lines: the base64 alphabets (standard and URL-safe), and with them
// base32 and hex in either case.
var encChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || strings.IndexByte("+/-_", byte(c)) >= 0
	}
	return t
}()

// breakLen returns the length of the line break that starts at s[i], or
// 0. A line break is a stretch of newlines ("\n" and "\r\n", or `\n` and
// `\r\n`, not both kinds in one break), spaces and tabs, and in a break of
// escaped newlines `\t` escapes too, that holds a newline: the spaces at
// the end of a line, the blank lines after it, each of which may hold
// spaces too, and the indentation of the next line. The bytes before its
// last newline are at most maxLead, and those after it at most maxIndent.
// The stretch is taken whole: a break is never a part of a longer one.
func breakLen(s string, i int) int {
	k, nl := breakRun(s, i)
	if nl < 0 {
		return 0
	}
	if end := nl + newlineLen(s, nl); nl-i > maxLead || k-end > maxIndent {
		return 0
	}
	return k - i
}

// maxLead is the most bytes a line break holds before its last newline:
// the spaces and tabs at the end of the line before it and the blank
// lines after that line. maxIndent is the most bytes of indentation a line
// break takes after its last newline. An encoded form is not found across
// longer ones; the bounds keep short the stretches the search looks back
// over. maxBreak is the length of the longest line break.
const (
	maxLead   = 64
	maxIndent = 64
	maxBreak  = maxLead + breakMargin + maxIndent
)

// The kinds of the bytes of a line break: a newline as text writes it, a
// newline or tab as a JSON string writes it, and spaces and tabs, which
// are both.
const (
	rawBreak     = 1
	escapedBreak = 2
)

// breakToken returns the length of the piece of a line break at s[k], 0
// when there is none, whether it is a newline, and its kind (0 for a space
// or a tab).
func breakToken(s string, k int) (n int, newline bool, kind int) {
	switch s[k] {
	case ' ', '\t':
		return 1, false, 0
	case '\n':
		return 1, true, rawBreak
	case '\r':
		if k+1 < len(s) && s[k+1] == '\n' {
			return 2, true, rawBreak
		}
	case '\\':
		if k+1 < len(s) {
			switch s[k+1] {
			case 'n':
				return 2, true, escapedBreak
			case 't':
				return 2, false, escapedBreak
			case 'r':
				if strings.HasPrefix(s[k+2:], `\n`) {
					return 4, true, escapedBreak
				}
			}
		}
	}
	return 0, false, 0
}

// breakRun returns the end of the pieces of one kind of line break from
// s[i] on, and the start of the last newline among them (-1 for none). It
// stops past the longest line break.
func breakRun(s string, i int) (end, newline int) {
	k, nl, kind := i, -1, 0
	for k < len(s) && k-i <= maxBreak {
		n, isNL, kd := breakToken(s, k)
		if n == 0 || kd != 0 && kind != 0 && kd != kind {
			break
		}
		kind |= kd
		if isNL {
			nl = k
		}
		k += n
	}
	return k, nl
}

// newlineLen returns the length of the newline at s[i].
func newlineLen(s string, i int) int {
	n, _, _ := breakToken(s, i)
	return n
}

// innerBreak returns the length of the line break that starts at s[i]
// when it lies between two encoding characters, or 0.
func innerBreak(s string, i int) int {
	if i == 0 || !encChars[s[i-1]] {
		return 0
	}
	n := breakLen(s, i)
	if n == 0 || i+n >= len(s) || !encChars[s[i+n]] {
		return 0
	}
	return n
}

// breakEndingAt returns the length of the line break between encoding
// characters that ends at e, or 0. It goes back over the pieces of a line
// break before e, as far as the longest break reaches, and takes the
// longest break that ends at e, as the scan takes them: a piece of a
// break can end with an encoding character (the n of `\n`, the t of `\t`,
// the r of `\r\n`), after which a shorter break may start.
func breakEndingAt(s string, e int) int {
	if e >= len(s) || !encChars[s[e]] {
		return 0
	}
	best := 0
	kinds := 0               // the kinds of the pieces in s[k:e]
	nlStart, nlEnd := -1, -1 // the last newline in s[k:e]
	// valid reports whether a break between encoding characters starts
	// at b, with its last newline at nl.
	valid := func(b, nl int) bool {
		return b > 0 && encChars[s[b-1]] && nl >= 0 && nl-b <= maxLead
	}
	for k := e; k > 0 && e-k < maxBreak; {
		n, isNL, kind := tokenBefore(s, k)
		if n == 0 {
			break
		}
		if kinds |= kind; kinds == rawBreak|escapedBreak {
			break
		}
		if nlEnd < 0 {
			if !isNL && e-k+n > maxIndent { // an indentation too long
				break
			}
			if isNL {
				nlEnd, nlStart = k, k-n
			}
		}
		k -= n
		if n == 4 && valid(k+2, max(nlStart, k+2)) { // the `\n` of a `\r\n`
			best = e - k - 2
		}
		if valid(k, nlStart) {
			best = e - k
		}
	}
	return best
}

// tokenBefore returns what breakToken does for the piece of a line break
// that ends at s[k], taking "\r\n" and `\r\n` whole.
func tokenBefore(s string, k int) (n int, newline bool, kind int) {
	switch c := s[k-1]; {
	case c == ' ' || c == '\t':
		return 1, false, 0
	case c == '\n':
		if k >= 2 && s[k-2] == '\r' {
			return 2, true, rawBreak
		}
		return 1, true, rawBreak
	case k >= 2 && s[k-2] == '\\' && c == 't':
		return 2, false, escapedBreak
	case k >= 2 && s[k-2] == '\\' && c == 'n':
		if k >= 4 && s[k-4:k-2] == `\r` {
			return 4, true, escapedBreak
		}
		return 2, true, escapedBreak
	}
	return 0, false, 0
}

// isIndent reports whether c is a space or a tab.
func isIndent(c byte) bool { return c == ' ' || c == '\t' }

// writeBreaks calls write with each line break in s, which holds encoding
// characters and line breaks only, starting with a character or a break.
func writeBreaks(s string, write func(string)) {
	for i := 0; i < len(s); {
		if n := breakLen(s, i); n > 0 {
			write(s[i : i+n])
			i += n
		} else {
			i++
		}
	}
}

// nextInnerBreak returns the index of the first line break between
// encoding characters that starts in s[lo:hi], or -1. It looks at each
// newline from lo on, as far as the first newline of a break that starts
// before hi can be, and at the break that holds it, which is the longest
// one that ends where the pieces of a break after that newline end (see
// breakEndingAt): a break that starts before lo and holds newlines after
// it is not one that starts in s[lo:hi], and neither is a shorter break
// inside it, such as the `\n` of a `\r\n`.
func nextInnerBreak(s string, lo, hi int) int {
	lim := min(len(s), hi+maxLead+breakMargin)
	nl := indexIn(s, lo, lim, '\n')
	bs := indexIn(s, lo, lim, '\\')
	for {
		i := min(nl, bs)
		if i < 0 {
			i = max(nl, bs)
		}
		if i < 0 {
			return -1
		}
		q := i // where the newline starts
		if i == nl {
			if i > lo && s[i-1] == '\r' {
				q--
			}
			nl = indexIn(s, i+1, lim, '\n')
		} else {
			bs = indexIn(s, i+1, lim, '\\')
		}
		n, isNL, _ := breakToken(s, q)
		if n == 0 || !isNL {
			continue
		}
		e, _ := breakRun(s, q)
		if k := breakEndingAt(s, e); k > 0 && e-k <= i {
			switch b := e - k; {
			case b >= hi:
				return -1
			case b >= lo:
				return b
			}
		}
	}
}

// indexIn returns the index of the first c in s[lo:hi], or -1.
func indexIn(s string, lo, hi int, c byte) int {
	if lo >= hi {
		return -1
	}
	if i := strings.IndexByte(s[lo:hi], c); i >= 0 {
		return lo + i
	}
	return -1
}

// lineScan is the state of the search for broken occurrences during a
// scan.
type lineScan struct {
	done  int     // the text before done has been looked at
	found []match // the broken occurrences, in increasing order of end
}

// breakMargin is the length of the longest newline, `\r\n`: how many bytes
// further than m.reach encoding characters from a pair in an occurrence a
// break inside it is looked for, or its newline looked for past the most
// bytes a break holds before it.
const breakMargin = 4

// mayBreak reports whether a broken occurrence may be near s[a:b], which
// the scan ran the automaton over from the pair at i: whether a pair of a
// breakable form in it, whole or with a line break between its two bytes,
// has a line break near it (see breakNear). The scan found no pair in
// s[a:i], and s[b-1:b+1] is the last pair it passed over.
func (m *machine) mayBreak(s string, i, a, b int) bool {
	for x := i; x < b && x+1 < len(s); x++ {
		if m.encPre[s[x]] == 0 {
			continue
		}
		if c := s[x+1]; breakStart[c] {
			if n := innerBreak(s, x+1); n > 0 && m.isEncPair(s[x], s[x+1+n]) {
				return true
			}
		} else if m.isEncPair(s[x], c) && m.breakNear(s, x, x+2) {
			return true
		}
	}
	return false
}

// breakNear reports whether a line break between encoding characters is
// near the pair s[a:b]: reached from it over at most m.reach encoding
// characters. A broken occurrence with the pair whole has one: its nearest
// break to the pair, with only its characters between them.
func (m *machine) breakNear(s string, a, b int) bool {
	return m.breakBefore(s, a) || m.breakAfter(s, b)
}

// longWalk is how many encoding characters breakBefore and breakAfter walk
// over before they look for the bytes of a line break further on at once:
// most walks, over words, are shorter.
const longWalk = 16

// breakBefore reports whether a line break between encoding characters
// ends at most m.reach+1 encoding characters before a, with only encoding
// characters between them.
func (m *machine) breakBefore(s string, a int) bool {
	y, lo := a, max(0, a-m.reach-1)
	for y > lo && encChars[s[y-1]] {
		y--
		// A break that ends at lo or after has a newline byte at most
		// breakMargin bytes before lo, or its indentation right before lo.
		if a-y == longWalk && !hasBreakByte(s[max(0, lo-breakMargin):y]) && (lo == 0 || !isIndent(s[lo-1])) {
			return false
		}
	}
	// The break ends at y, or at y+1 when the walk took the n of a `\n` or
	// the t of a `\t`.
	return breakEndingAt(s, y) > 0 || breakEndingAt(s, y+1) > 0
}

// breakAfter reports whether a line break between encoding characters
// starts at most m.reach+1 encoding characters after b, with only encoding
// characters between them.
func (m *machine) breakAfter(s string, b int) bool {
	z, hi := b, min(len(s), b+m.reach+1)
	for z < hi && encChars[s[z]] {
		z++
		// A break that starts at hi or before has a newline byte or a
		// backslash at most breakMargin bytes after hi, or starts with a
		// space or a tab at hi or before.
		if z-b == longWalk && !hasBreakByte(s[z:min(len(s), hi+breakMargin)]) && !hasIndentByte(s[z:min(len(s), hi+1)]) {
			return false
		}
	}
	return z < len(s) && innerBreak(s, z) > 0
}

// hasIndentByte reports whether s holds a space or a tab.
func hasIndentByte(s string) bool {
	return strings.IndexByte(s, ' ') >= 0 || strings.IndexByte(s, '\t') >= 0
}

// splitAtSpace reports whether s[i] may be the first byte of a breakable
// form's pair that a line break starting with a space or a tab splits:
// the first byte of such a pair, followed by a space or a tab and another
// byte a line break may hold (one that starts a piece of one). In text the
// space after a word is followed by the next word, so the scan seldom
// stops there. s[i+1] must exist. It is not inlined, to keep the loops
// of machine.next, which call it where no prefilter pair is, as short as
// they are without it.
//
//go:noinline
func (m *machine) splitAtSpace(s string, i int) bool {
	return isIndent(s[i+1]) && i+2 < len(s) && breakStart[s[i+2]] && m.encPre[s[i]] != 0
}

// breakStart holds the first bytes of the pieces of a line break: a
// newline's, a space, a tab and a backslash.
var breakStart = [256]bool{'\n': true, '\r': true, '\\': true, ' ': true, '\t': true}

// hasBreakByte reports whether s holds a '\n' or a '\\', which every line
// break holds.
func hasBreakByte(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\\') >= 0
}

// scanBreaks adds to ls the broken occurrences with a prefilter pair in
// s[a:b], and those in the same runs of encoding characters and line
// breaks, and moves ls.done past them. The first line break of such an
// occurrence lies between the place found below and m.reach+breakMargin
// bytes past b.
func (m *machine) scanBreaks(s string, a, b int, ls *lineScan) {
	// Every such occurrence starts at or after the place found by going
	// back from a over as many encoding characters as a form can reach, and
	// the line breaks between them, and the piece of a break a may lie in
	// (any bytes a break may hold, as many as the longest break has); the
	// text before ls.done has been looked at already.
	lo := max(a, ls.done)
	for k := m.reach + 1 + maxBreak; k > 0 && lo > ls.done; {
		if n := breakEndingAt(s, lo); n > 0 {
			lo -= n
			continue
		}
		if c := s[lo-1]; !encChars[c] && !breakStart[c] {
			break
		}
		lo--
		k--
	}
	lo = max(lo, ls.done)
	hi := min(len(s), b+m.reach+breakMargin)
	for lo < hi {
		br := nextInnerBreak(s, lo, hi)
		if br < 0 {
			break
		}
		lo = m.scanAround(s, br, ls)
	}
	ls.done = max(lo, hi)
}

// scanAround adds to ls the broken occurrences around the line break at
// b, which lies between encoding characters, and returns where it
// stopped looking.
//
// The window starts as many characters before b as the longest breakable
// form has but one, or at the first encoding character before b, or right
// after the line break before b, whose last bytes may be encoding
// characters (the n of `\n`, the t of `\t`) but are none of the text's; and
// runs on over encoding characters and line breaks between them, until as
// many characters after the last break as the longest form has but one: no
// occurrence with that break inside it reaches further.
func (m *machine) scanAround(s string, b int, ls *lineScan) int {
	start := b
	for start > 0 && b-start < m.reach && encChars[s[start-1]] && breakEndingAt(s, start) == 0 {
		start--
	}
	// Most breaks between encoding characters are in ordinary text, between
	// two words, shorter together than any breakable form.
	n, end := runLen(s, start, max(smallWindow, m.minEnc))
	switch {
	case n < m.minEnc:
		return end
	case n < smallWindow:
		var text [smallWindow]byte
		var segs [smallWindow]segment
		return m.scanRun(s, start, ls, text[:0], segs[:0])
	}
	var text [windowLen]byte
	var segs [windowLen]segment
	return m.scanRun(s, start, ls, text[:0], segs[:0])
}

// runLen returns the number of encoding characters from start on, with
// the line breaks between them, counting up to limit, and where they end.
func runLen(s string, start, limit int) (int, int) {
	n, p := 0, start
	for n < limit && p < len(s) {
		if k := innerBreak(s, p); k > 0 && n > 0 {
			p += k
			continue
		}
		if !encChars[s[p]] {
			break
		}
		n++
		p++
	}
	return n, p
}

// The windows scanRun copies a text into without its line breaks are on
// the stack: smallWindow characters for a run of fewer characters, and
// windowLen for longer ones. A window holds at least twice the longest
// breakable form: a Redactor with a form longer than 255 characters (the
// hex of a secret of 128 bytes or more) uses longer windows, allocated
// when a text fills one.
const (
	smallWindow = 64
	windowLen   = 512
)

// segment is a stretch of a window copied from one line: it starts at
// the window's character j, which is the text's character o.
type segment struct{ j, o int }

// window is the text of a run with its line breaks taken out.
type window struct {
	text []byte
	segs []segment
}

// at returns the index in the text of the window's character k.
func (w *window) at(k int) int {
	lo, hi := 0, len(w.segs)
	for hi-lo > 1 { // the last segment starting at or before k
		if mid := (lo + hi) / 2; w.segs[mid].j <= k {
			lo = mid
		} else {
			hi = mid
		}
	}
	return w.segs[lo].o + k - w.segs[lo].j
}

// scanRun does the work of scanAround from start, the window's first
// character, with text and segs as the window's empty buffers. When the
// window is full, it is scanned and a new one starts as many characters
// before its end as the longest form has but one, so that an occurrence
// that does not fit in the first is whole in the second.
func (m *machine) scanRun(s string, start int, ls *lineScan, text []byte, segs []segment) int {
	reach := m.reach
	w := window{text, segs}
	size := max(cap(text), 2*reach+2)
	done := 0      // the end of the last window scanned
	target := size // the window's length at which to stop
	p := start
	for p < len(s) && len(w.text) < target {
		if n := innerBreak(s, p); n > 0 && len(w.text) > 0 {
			p += n
			target = len(w.text) + reach
			continue
		}
		if !encChars[s[p]] {
			break
		}
		q, end := p+1, min(len(s), p+min(target, size)-len(w.text))
		for q < end && encChars[s[q]] {
			q++
		}
		w.segs = append(w.segs, segment{len(w.text), p})
		w.text = append(w.text, s[p:q]...)
		p = q
		if len(w.text) == size {
			m.scanWindow(&w, done, ls)
			done = w.at(size-1) + 1
			p = w.at(size - reach)
			target -= size - reach
			w.text, w.segs = w.text[:0], w.segs[:0]
		}
	}
	if len(w.text) > 0 {
		m.scanWindow(&w, done, ls)
	}
	return p
}

// scanWindow adds to ls the occurrences of breakable forms in w that have
// a line break inside them and end after done, in the text's indexes.
func (m *machine) scanWindow(w *window, done int, ls *lineScan) {
	for _, mt := range m.scanEncoded(unsafe.String(unsafe.SliceData(w.text), len(w.text)), nil) {
		start, end := w.at(mt.start), w.at(mt.end-1)+1
		if end-start > mt.end-mt.start && end > done {
			ls.found = append(ls.found, match{start: start, end: end, id: mt.id, broken: true})
		}
	}
}

// withBroken returns ms, the occurrences the scan found, and broken, in
// increasing order of end, merged: sorted and none inside another, as
// scan returns them.
func withBroken(ms, broken []match) []match {
	if len(broken) == 0 {
		return ms
	}
	// Merged in order of end (on one end, the occurrence that starts later
	// first), add drops those inside another.
	out := make([]match, 0, len(ms)+len(broken))
	i, j := 0, 0
	for i < len(ms) || j < len(broken) {
		if j == len(broken) || i < len(ms) && (ms[i].end < broken[j].end ||
			ms[i].end == broken[j].end && ms[i].start >= broken[j].start) {
			out = add(out, ms[i])
			i++
		} else {
			out = add(out, broken[j])
			j++
		}
	}
	return out
}
