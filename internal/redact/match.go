package redact

import (
	"slices"
	"strings"
)

// machine finds every occurrence of a set of patterns in one pass over a
// text: an Aho–Corasick automaton behind a prefilter on pairs of bytes.
//
// The automaton's root has a dense transition table; every other state has
// a short list of edges and a failure link. Each state records the
// longest pattern that ends there (its own, or one reached through failure
// links), which is all the redactor needs: a shorter pattern ending at the
// same place lies inside the longer one.
//
// Patterns that are encoded forms can also be found in a text whose line
// breaks have been taken out (see lines.go): each state also records the
// longest of those that ends there, in enc.
//
// The prefilter: every pattern contains at least one pair of adjacent bytes
// from a small set (for each secret, two adjacent letters or digits of its
// value, which every form keeps side by side, chosen to be rare in ordinary
// text; or, for a secret without such a pair, the first two bytes of each
// of its forms). The scan jumps from one such pair to the next, and runs the
// automaton only from a few bytes before it (the most bytes any pattern
// whose first prefilter pair it is has before it) until the automaton is
// back at its root. No byte is run through the automaton twice, so a scan
// is linear in the text's length.
type machine struct {
	root   [256]int32
	states []state
	edges  []edge

	pre [256]byte // 1 for the first byte of a prefilter pair
	// pairs has bit pairBit(b0, b1) set for each prefilter pair b0, b1.
	// Other pairs may share a bit: the automaton then finds nothing there.
	pairs [64]uint64
	// preFew lists the first bytes of the prefilter pairs when there are
	// at most maxFew of them (one secret's value and its base64 forms),
	// which the scan then looks for with strings.IndexByte, each on its own.
	preFew []byte
	// lookback maps a prefilter pair to the most bytes a pattern has before
	// it when it is the pattern's first prefilter pair.
	lookback map[uint16]int
	// enc holds, by state, the longest breakable pattern (see pattern)
	// that ends there; nil when no pattern is breakable.
	enc []output
	// encPairs has the bits of the prefilter pairs of the breakable
	// patterns, as pairs has, and encPre is 1 for their first bytes.
	encPairs [64]uint64
	encPre   [256]byte
	// reach is the length of the longest breakable pattern but one, and
	// minEnc the length of the shortest.
	reach, minEnc int
	// longest is the length of the longest pattern.
	longest int
}

// output is a pattern that ends in a state: its length (0 for none) and
// the secret it names.
type output struct {
	len, id int32
}

// state is a state of the automaton but the root. Most states, those in
// the part of a pattern no other pattern shares, have one edge, which is
// kept in the state itself.
type state struct {
	lo, hi int32 // its edges are edges[lo:hi], when it has more than one
	fail   int32
	outLen int32 // length of the longest pattern ending here, 0 if none
	outID  int32 // the secret of that pattern
	next   int32 // the target of its only edge, or 0
	c      byte  // the byte of its only edge
	// trie holds the flags below, which Redactor.Partial reads to find
	// the start of a pattern at the end of a text (see tail).
	trie byte
}

// The flags of state.trie: a pattern ends in the state (its own, not one
// reached through failure links); the state is on the path of a breakable
// pattern (the text that leads to it starts one); a breakable pattern ends
// in it.
const (
	ownEnd byte = 1 << iota
	encPath
	encEnd
)

type edge struct {
	c    byte
	next int32
}

// pattern is one form of one secret.
type pattern struct {
	text string
	id   int32
	// encID is the secret the pattern is an encoded form of, which may
	// be found with line breaks inside it; -1 when it is none's.
	encID int32
}

// newMachine builds a machine for patterns, whose texts are distinct and
// at least two bytes long, with prefilter pairs pairs; each pattern must
// contain one, and each breakable pattern one of encPairs, which are among
// pairs.
func newMachine(patterns []pattern, pairs, encPairs [][2]byte) *machine {
	m := &machine{}
	for _, p := range pairs {
		m.pre[p[0]] = 1
		k := pairBit(p[0], p[1])
		m.pairs[k>>6] |= 1 << (k & 63)
	}
	for _, p := range encPairs {
		m.encPre[p[0]] = 1
		k := pairBit(p[0], p[1])
		m.encPairs[k>>6] |= 1 << (k & 63)
		// A line break can fall between the two bytes of the pair: the
		// first byte followed by the first byte of a newline is a
		// prefilter pair too (see breakNear), and followed by a space or
		// a tab that starts a line break a stop of the scan (see
		// splitAtSpace).
		for _, c := range []byte{'\n', '\r', '\\'} {
			k := pairBit(p[0], c)
			m.pairs[k>>6] |= 1 << (k & 63)
		}
	}
	if countTrue(&m.pre) <= maxFew {
		for c := range 256 {
			if m.pre[c] != 0 {
				m.preFew = append(m.preFew, byte(c))
			}
		}
	}
	m.setLookback(patterns)

	// The trie. Inserting the patterns in sorted order, each shares the
	// states of its common prefix with the one before.
	sorted := slices.Clone(patterns)
	slices.SortFunc(sorted, func(a, b pattern) int { return strings.Compare(a.text, b.text) })
	// The children of a state are a list through firstChild and sibling,
	// last added first, so in decreasing byte order; label is the byte
	// that leads to a state.
	// The trie has at most one state per byte of the patterns, and the
	// root.
	most := 1
	for _, p := range patterns {
		most += len(p.text)
	}
	firstChild := append(make([]int32, 0, most), -1)
	sibling := append(make([]int32, 0, most), -1)
	label := append(make([]byte, 0, most), 0)
	outLen := append(make([]int32, 0, most), 0)
	outID := append(make([]int32, 0, most), 0)
	enc := append(make([]output, 0, most), output{})
	trie := append(make([]byte, 0, most), 0)
	breakable := false
	path := []int32{0} // path[i] is the state after the first i bytes of prev
	prev := ""
	for _, p := range sorted {
		l := commonPrefix(prev, p.text)
		path = path[:l+1]
		s := path[l]
		for i := l; i < len(p.text); i++ {
			t := int32(len(label))
			label = append(label, p.text[i])
			firstChild = append(firstChild, -1)
			sibling = append(sibling, firstChild[s])
			firstChild[s] = t
			outLen = append(outLen, 0)
			outID = append(outID, 0)
			enc = append(enc, output{})
			trie = append(trie, 0)
			s = t
			path = append(path, s)
		}
		outLen[s] = int32(len(p.text))
		outID[s] = p.id
		trie[s] |= ownEnd
		m.longest = max(m.longest, len(p.text))
		if p.encID >= 0 {
			enc[s] = output{int32(len(p.text)), p.encID}
			trie[s] |= encEnd
			for _, t := range path[1:] {
				trie[t] |= encPath
			}
			breakable = true
			m.reach = max(m.reach, len(p.text)-1)
			if m.minEnc == 0 || len(p.text) < m.minEnc {
				m.minEnc = len(p.text)
			}
		}
		prev = p.text
	}
	n := len(label)
	child := func(s int32, c byte) (int32, bool) {
		for t := firstChild[s]; t >= 0 && label[t] >= c; t = sibling[t] {
			if label[t] == c {
				return t, true
			}
		}
		return 0, false
	}

	// Failure links and inherited outputs, breadth first so that a state's
	// failure target, which is shallower, is finished before it.
	fail := make([]int32, n)
	queue := make([]int32, 0, n)
	for t := firstChild[0]; t >= 0; t = sibling[t] {
		m.root[label[t]] = t
		queue = append(queue, t)
	}
	goTo := func(s int32, c byte) int32 {
		for s != 0 {
			if t, ok := child(s, c); ok {
				return t
			}
			s = fail[s]
		}
		return m.root[c]
	}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		for t := firstChild[s]; t >= 0; t = sibling[t] {
			if s != 0 {
				fail[t] = goTo(fail[s], label[t])
			}
			if outLen[t] == 0 {
				outLen[t] = outLen[fail[t]]
				outID[t] = outID[fail[t]]
			}
			if enc[t].len == 0 {
				enc[t] = enc[fail[t]]
			}
			queue = append(queue, t)
		}
	}

	// Compact the edges. State 0, the root, is only a placeholder in
	// states: the scan uses root.
	m.states = make([]state, n)
	m.edges = make([]edge, 0, n-1)
	for s := 1; s < n; s++ {
		st := &m.states[s]
		st.fail, st.outLen, st.outID, st.trie = fail[s], outLen[s], outID[s], trie[s]
		if t := firstChild[s]; t >= 0 && sibling[t] < 0 {
			st.c, st.next = label[t], t
			continue
		}
		st.lo = int32(len(m.edges))
		for t := firstChild[s]; t >= 0; t = sibling[t] {
			m.edges = append(m.edges, edge{label[t], int32(t)})
		}
		st.hi = int32(len(m.edges))
	}
	if breakable {
		m.enc = enc
	}
	return m
}

// commonPrefix returns the length of the common prefix of a and b.
func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// setLookback works out lookback from the prefilter.
func (m *machine) setLookback(patterns []pattern) {
	m.lookback = map[uint16]int{}
	for _, p := range patterns {
		k := m.firstPair(p.text)
		if k < 0 {
			panic("redact: a pattern without a prefilter pair")
		}
		key := uint16(p.text[k])<<8 | uint16(p.text[k+1])
		m.lookback[key] = max(m.lookback[key], k)
	}
}

// step returns the state after reading c in state s.
func (m *machine) step(s int32, c byte) int32 {
	for s != 0 {
		st := &m.states[s]
		if st.next != 0 {
			if st.c == c {
				return st.next
			}
		} else {
			for _, e := range m.edges[st.lo:st.hi] {
				if e.c == c {
					return e.next
				}
			}
		}
		s = st.fail
	}
	return m.root[c]
}

// match is one occurrence of a secret: text[start:end].
type match struct {
	start, end int
	id         int32
	// broken marks an encoded form found with line breaks inside it.
	broken bool
}

// add records the occurrence mt, found after every occurrence in ms, and
// keeps ms sorted and free of occurrences inside another: since mt ends
// after every occurrence before it, those that start where it does or
// later lie inside it and are dropped. An occurrence of the same secret
// that overlaps or touches the last one, and is broken if and only if it
// is, extends it instead, which changes neither the ranges, nor their
// names, nor the line breaks kept, and keeps ms short on texts such as a
// secret repeated many times.
func add(ms []match, mt match) []match {
	ms = dropInside(ms, mt)
	if n := len(ms); n > 0 && ms[n-1].id == mt.id && ms[n-1].broken == mt.broken && mt.start <= ms[n-1].end {
		ms[n-1].end = mt.end
		return ms
	}
	return append(ms, mt)
}

// dropInside drops the occurrences at the end of ms that lie inside mt,
// which ends after all of them: those that start where it does or later.
func dropInside(ms []match, mt match) []match {
	for len(ms) > 0 && ms[len(ms)-1].start >= mt.start {
		ms = ms[:len(ms)-1]
	}
	return ms
}

// scan appends to ms the occurrences of the patterns in text that no other
// occurrence contains, in increasing order of start (and of end), those of
// one secret that overlap or touch joined. It does not look for broken
// occurrences (see lines.go).
func (m *machine) scan(text string, ms []match) []match {
	return m.scanFor(text, ms, nil)
}

// scanAll is scan, and also looks for the broken occurrences of the
// breakable patterns, which it returns apart, in increasing order of end.
func (m *machine) scanAll(text string, ms []match) ([]match, []match) {
	if m.enc == nil {
		return m.scanFor(text, ms, nil), nil
	}
	var ls lineScan
	ms = m.scanFor(text, ms, &ls)
	return ms, ls.found
}

// scanEncoded appends to ms the occurrences in text of the breakable
// patterns that no other occurrence of one contains, in increasing order of
// start (and of end). Unlike scan it keeps occurrences of one secret that
// overlap or touch apart: whether each has a line break inside it is
// decided on its own. m.enc must not be nil. It runs as scanFor does.
func (m *machine) scanEncoded(text string, ms []match) []match {
	n := len(text)
	pos := 0
	var few fewCursors
	few.reset()
	fewp := &few
	if len(text) < 64 {
		// A short window: testing each byte is faster.
		fewp = nil
	}
	for pos < n {
		i := m.next(text, pos, fewp, false)
		if i < 0 {
			break
		}
		j := max(pos, i-m.lookback[uint16(text[i])<<8|uint16(text[i+1])])
		s := int32(0)
		for j < n {
			s = m.step(s, text[j])
			j++
			if s == 0 {
				if j > i {
					break
				}
				continue
			}
			if o := m.enc[s]; o.len != 0 {
				mt := match{start: j - int(o.len), end: j, id: o.id}
				ms = append(dropInside(ms, mt), mt)
			}
		}
		pos = j
	}
	return ms
}

// scanFor is scan; with ls, it also looks for broken occurrences near
// each place it runs the automaton over, and near each pair of a
// breakable form split by a line break that starts with a space or a tab,
// and records them in ls.
func (m *machine) scanFor(text string, ms []match, ls *lineScan) []match {
	n := len(text)
	pos := 0
	search := 0 // where to look for the next stop, at or after pos
	var few fewCursors
	few.reset()
	for pos < n {
		i := m.next(text, search, &few, ls != nil)
		if i < 0 {
			break
		}
		if c := text[i+1]; isIndent(c) && !m.isPair(text[i], c) {
			// A stop for a pair split by a line break that starts with a
			// space or a tab (see splitAtSpace), which is no pattern's
			// pair: the automaton does not run, and pos stays where it is.
			if k := innerBreak(text, i+1); k > 0 && m.isEncPair(text[i], text[i+1+k]) && i+1+m.reach+breakMargin > ls.done {
				m.scanBreaks(text, i, i+1, ls)
			}
			search = i + 1
			continue
		}
		j := max(pos, i-m.lookback[uint16(text[i])<<8|uint16(text[i+1])])
		from := j
		s := int32(0)
		for j < n {
			s = m.step(s, text[j])
			j++
			if s == 0 {
				if j > i {
					break
				}
				continue
			}
			if st := &m.states[s]; st.outLen != 0 {
				ms = add(ms, match{start: j - int(st.outLen), end: j, id: st.outID})
			}
		}
		if ls != nil && j+m.reach+breakMargin > ls.done && m.mayBreak(text, i, from, j) {
			m.scanBreaks(text, from, j, ls)
		}
		pos, search = j, j
	}
	return ms
}

// maxFew is the most first bytes of prefilter pairs the scan looks for one
// by one, with strings.IndexByte; past it, it tests every byte.
const maxFew = 8

// fewCursors holds, for each byte of machine.preFew, the index of its next
// occurrence in the text from where it was last looked for (the text's last
// index when there is none), or -1 before the first look. A scan's calls
// of next only ever move forward, so each byte's occurrences are looked
// for once.
type fewCursors [maxFew]int

func (f *fewCursors) reset() {
	for k := range f {
		f[k] = -1
	}
}

// next returns the index of the first prefilter pair in text at or after
// pos, or -1; with split, also of the first place where splitAtSpace holds.
// Without few, it tests every byte.
func (m *machine) next(text string, pos int, few *fewCursors, split bool) int {
	if m.preFew != nil && few != nil {
		end := len(text) - 1 // a pair starts before the last byte
		for pos < end {
			best := -1
			for k, c := range m.preFew {
				if few[k] < pos {
					few[k] = end
					if j := strings.IndexByte(text[pos:end], c); j >= 0 {
						few[k] = pos + j
					}
				}
				if few[k] < end && (best < 0 || few[k] < best) {
					best = few[k]
				}
			}
			if best < 0 {
				return -1
			}
			if m.isPair(text[best], text[best+1]) || split && isIndent(text[best+1]) && m.splitAtSpace(text, best) {
				return best
			}
			pos = best + 1
		}
		return -1
	}
	pre := &m.pre
	end := len(text) - 1 // a pair starts before the last byte
	for i := pos; i < end; {
		if i+4 <= end && pre[text[i]]|pre[text[i+1]]|pre[text[i+2]]|pre[text[i+3]] == 0 {
			i += 4
			continue
		}
		if pre[text[i]] != 0 && (m.isPair(text[i], text[i+1]) || split && isIndent(text[i+1]) && m.splitAtSpace(text, i)) {
			return i
		}
		i++
	}
	return -1
}

// isPair reports whether b0, b1 may be a prefilter pair: it is when it is
// one, and rarely when it is not.
func (m *machine) isPair(b0, b1 byte) bool {
	k := pairBit(b0, b1)
	return m.pairs[k>>6]&(1<<(k&63)) != 0
}

// isEncPair reports whether b0, b1 may be the prefilter pair of a
// breakable pattern, as isPair does.
func (m *machine) isEncPair(b0, b1 byte) bool {
	k := pairBit(b0, b1)
	return m.encPairs[k>>6]&(1<<(k&63)) != 0
}

// pairBit returns the bit of pairs for b0, b1, one of 4096.
func pairBit(b0, b1 byte) uint {
	return (uint(b0)<<4 ^ uint(b1)) & 4095
}

// firstPair returns the index of the first prefilter pair in s, or -1,
// by the same test as next.
func (m *machine) firstPair(s string) int {
	for i := 0; i+1 < len(s); i++ {
		if m.pre[s[i]] != 0 && m.isPair(s[i], s[i+1]) {
			return i
		}
	}
	return -1
}

func countTrue(t *[256]byte) int {
	n := 0
	for _, b := range t {
		n += int(b)
	}
	return n
}
