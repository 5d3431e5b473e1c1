package redact

import (
	"cmp"
	"slices"
	"strings"
)

// Partial returns s, a text whose end is not its end (the first part of
// a text still arriving, such as a tool call's arguments while a model
// streams them), with every secret replaced as String replaces it, and
// with the end of s replaced too when it is the first MinLen bytes or more
// of a form of a secret: a secret the end of s cuts is not shown in part.
// That holds for every form String finds, the encoded forms broken into
// lines included, also when s ends inside a line break, or inside a
// backslash escape of one. The end so replaced becomes the placeholder
// of a secret that has a form starting with it; the line breaks inside a
// broken form, and a line break s ends with, are kept after it. When
// nothing is replaced Partial returns s itself.
//
// Partial costs a look at the last bytes of s, as many as the longest
// form has, more than String does: it is meant for the few texts that are
// shown before they are whole, not for every text.
func (r *Redactor) Partial(s string) string {
	if r == nil || len(s) < MinLen {
		return s
	}
	var buf [8]match
	ms := buf[:0]
	if len(s) >= r.minLen {
		ms = r.find(s, ms)
	}
	if t, ok := r.m.tail(s); ok {
		ms = withTail(ms, t)
	}
	if len(ms) == 0 {
		return s
	}
	return r.renderString(s, ms)
}

// tail returns the longest start of a form at the end of s, of MinLen
// bytes or more: written as it is, ending at the end of s, or a breakable
// form with line breaks inside it, ending where a line break at the end
// of s starts, or at the end of s.
func (m *machine) tail(s string) (match, bool) {
	best := match{start: len(s)}
	// The state after the last bytes of s, as many as a start of a
	// pattern has at most, is that of the longest start of a pattern
	// that ends s.
	st := int32(0)
	for i := max(0, len(s)-(m.longest-1)); i < len(s); i++ {
		st = m.step(st, s[i])
	}
	if st != 0 {
		if n, id := m.startAt(st, false); n >= MinLen {
			best = match{start: len(s) - n, end: len(s), id: id}
		}
	}
	if m.enc != nil {
		if t, ok := m.brokenTail(s); ok && t.start < best.start {
			best = t
		}
	}
	return best, best.end > 0
}

// brokenTail returns the longest start of a breakable form, of MinLen
// characters or more, at the end of s with line breaks inside it or after
// it (one cut short by the end of s included). Its range ends with its
// last character.
func (m *machine) brokenTail(s string) (match, bool) {
	e := tailBreak(s)
	if e == 0 || !encChars[s[e-1]] {
		return match{}, false
	}
	// The window: the indexes of the encoding characters before e, last
	// first, over the line breaks between them, as many as a start of a
	// breakable form has at most.
	var buf [smallWindow]int
	pos := buf[:0]
	broke := e < len(s)
	for k := e; len(pos) < m.reach; {
		if len(pos) > 0 {
			if n := breakEndingAt(s, k); n > 0 {
				k -= n
				broke = true
				continue
			}
		}
		if k == 0 || !encChars[s[k-1]] {
			break
		}
		k--
		pos = append(pos, k)
	}
	if !broke {
		return match{}, false // written as it is: tail has looked
	}
	st := int32(0)
	for j := len(pos) - 1; j >= 0; j-- {
		st = m.step(st, s[pos[j]])
	}
	// The failure links lead to the shorter starts of patterns that end the
	// window: the first on a breakable pattern's path is the longest start
	// of one.
	for st != 0 && m.states[st].trie&encPath == 0 {
		st = m.states[st].fail
	}
	if st == 0 {
		return match{}, false
	}
	n, id := m.startAt(st, true)
	if n < MinLen {
		return match{}, false
	}
	start := pos[n-1]
	return match{start: start, end: e, id: id, broken: e-start > n}, true
}

// startAt returns the length of the text that leads to state s, and the
// secret of the nearest pattern that starts with it (of a breakable one
// with enc): it goes down the trie from s to the end of that pattern,
// whose length is known there, counting the steps.
func (m *machine) startAt(s int32, enc bool) (int, int32) {
	steps := 0
	for {
		st := &m.states[s]
		if !enc && st.trie&ownEnd != 0 {
			return int(st.outLen) - steps, st.outID
		}
		if enc && st.trie&encEnd != 0 {
			return int(m.enc[s].len) - steps, m.enc[s].id
		}
		// A state where no pattern ends has an edge, and one on the path
		// of a breakable pattern with enc.
		next := st.next
		if next == 0 {
			for _, e := range m.edges[st.lo:st.hi] {
				if !enc || m.states[e.next].trie&encPath != 0 {
					next = e.next
					break
				}
			}
		}
		s = next
		steps++
	}
}

// tailBreak returns where the line break that s ends with starts, one cut
// short by the end of s (a backslash, the `\r` of a `\r\n`) included; or
// len(s) when s does not end with one. It goes back over the pieces of a
// break, as far as the longest break reaches, whatever their kinds.
func tailBreak(s string) int {
	e := len(s)
	switch {
	case strings.HasSuffix(s, `\r\`):
		e -= 3
	case strings.HasSuffix(s, `\r`):
		e -= 2
	case strings.HasSuffix(s, `\`), strings.HasSuffix(s, "\r"):
		e--
	}
	for e > 0 && len(s)-e <= maxBreak {
		n, _, _ := tokenBefore(s, e)
		if n == 0 {
			break
		}
		e -= n
	}
	return e
}

// withTail returns ms, the occurrences find returned, with t, which ends
// at the end of the text or where a line break there starts, added as
// find would add it: it is left out when an occurrence contains it, and
// those it contains are dropped.
func withTail(ms []match, t match) []match {
	for _, o := range ms {
		if o.start <= t.start && o.end >= t.end {
			return ms
		}
	}
	ms = slices.DeleteFunc(ms, func(o match) bool { return o.start >= t.start && o.end <= t.end })
	i, _ := slices.BinarySearchFunc(ms, t.start, func(o match, start int) int { return cmp.Compare(o.start, start) })
	return slices.Insert(ms, i, t)
}
