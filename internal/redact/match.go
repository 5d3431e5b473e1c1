package redact

import (
	"slices"
	"strings"
)

// machine finds every occurrence of a set of patterns in one pass over a
// text: an Aho–Corasick automaton behind a one-byte prefilter.
//
// The automaton's root has a dense transition table; every other state has
// its edges sorted by byte and a failure link. Each state records the
// longest pattern that ends there (its own, or one reached through failure
// links), which is all the redactor needs: a shorter pattern ending at the
// same place lies inside the longer one.
//
// The prefilter: every pattern contains at least one byte of a small set
// (for each secret, a letter or digit of its value that every form keeps,
// chosen to be rare in ordinary text; or, for a secret without one, the
// first byte of each of its forms). The scan jumps from one such byte to the
// next, and runs the automaton only from lookback bytes before each one
// until the automaton is back at its root. No byte is run through the
// automaton twice, so a scan is linear in the text's length.
type machine struct {
	root     [256]int32
	first    []int32 // state s's edges are edgeByte/edgeNext[first[s]:first[s+1]]
	edgeByte []byte
	edgeNext []int32
	fail     []int32
	outLen   []int32 // length of the longest pattern ending in the state, 0 if none
	outID    []int32 // the secret of that pattern

	pre      [256]byte // 1 for a prefilter byte
	preOne   int       // the only prefilter byte, or -1
	lookback int       // most bytes a pattern can have before its first prefilter byte

	// single is the only pattern, when there is just one; the scan is then
	// a loop over strings.Index.
	single   string
	singleID int32
}

// pattern is one form of one secret.
type pattern struct {
	text string
	id   int32
}

// newMachine builds a machine for patterns, whose texts are distinct and
// not empty, with prefilter bytes pre.
func newMachine(patterns []pattern, pre []byte) *machine {
	m := &machine{preOne: -1}
	if len(patterns) == 1 {
		m.single, m.singleID = patterns[0].text, patterns[0].id
		return m
	}
	for _, c := range pre {
		m.pre[c] = 1
	}
	if n := countTrue(&m.pre); n == 1 {
		m.preOne = int(pre[0])
	}
	for _, p := range patterns {
		if k := firstIndexIn(p.text, &m.pre); k > m.lookback {
			m.lookback = k
		}
	}

	// The trie, with edges kept as a map while it is built.
	type key struct {
		state int32
		c     byte
	}
	edges := map[key]int32{}
	children := [][]byte{nil}
	m.outLen = []int32{0}
	m.outID = []int32{0}
	for _, p := range patterns {
		s := int32(0)
		for i := 0; i < len(p.text); i++ {
			k := key{s, p.text[i]}
			t, ok := edges[k]
			if !ok {
				t = int32(len(children))
				edges[k] = t
				children[s] = append(children[s], p.text[i])
				children = append(children, nil)
				m.outLen = append(m.outLen, 0)
				m.outID = append(m.outID, 0)
			}
			s = t
		}
		m.outLen[s] = int32(len(p.text))
		m.outID[s] = p.id
	}
	n := len(children)

	// Failure links and inherited outputs, breadth first so that a state's
	// failure target, which is shallower, is finished before it.
	m.fail = make([]int32, n)
	queue := make([]int32, 0, n)
	for _, c := range children[0] {
		t := edges[key{0, c}]
		m.root[c] = t
		queue = append(queue, t)
	}
	goTo := func(s int32, c byte) int32 {
		for s != 0 {
			if t, ok := edges[key{s, c}]; ok {
				return t
			}
			s = m.fail[s]
		}
		return m.root[c]
	}
	for q := 0; q < len(queue); q++ {
		s := queue[q]
		for _, c := range children[s] {
			t := edges[key{s, c}]
			if s != 0 {
				m.fail[t] = goTo(m.fail[s], c)
			}
			if m.outLen[t] == 0 {
				m.outLen[t] = m.outLen[m.fail[t]]
				m.outID[t] = m.outID[m.fail[t]]
			}
			queue = append(queue, t)
		}
	}

	// Compact the edges of every state but the root.
	m.first = make([]int32, n+1)
	for s := 1; s < n; s++ {
		cs := children[s]
		slices.Sort(cs)
		m.first[s] = int32(len(m.edgeByte))
		for _, c := range cs {
			m.edgeByte = append(m.edgeByte, c)
			m.edgeNext = append(m.edgeNext, edges[key{int32(s), c}])
		}
	}
	m.first[n] = int32(len(m.edgeByte))
	return m
}

// step returns the state after reading c in state s.
func (m *machine) step(s int32, c byte) int32 {
	for s != 0 {
		lo, hi := m.first[s], m.first[s+1]
		for k := lo; k < hi; k++ {
			if m.edgeByte[k] == c {
				return m.edgeNext[k]
			}
		}
		s = m.fail[s]
	}
	return m.root[c]
}

// match is one occurrence of a secret: text[start:end].
type match struct {
	start, end int
	id         int32
}

// add records the occurrence mt, found after every occurrence in ms, and
// keeps ms sorted and free of occurrences inside another: since mt ends
// after every occurrence before it, those that start where it does or
// later lie inside it and are dropped.
func add(ms []match, mt match) []match {
	for len(ms) > 0 && ms[len(ms)-1].start >= mt.start {
		ms = ms[:len(ms)-1]
	}
	return append(ms, mt)
}

// scan appends to ms the occurrences of the patterns in text that no other
// occurrence contains, in increasing order of start (and of end).
func (m *machine) scan(text string, ms []match) []match {
	if m.single != "" {
		return m.scanSingle(text, ms)
	}
	n := len(text)
	pos := 0
	for pos < n {
		i := m.next(text, pos)
		if i < 0 {
			break
		}
		j := max(pos, i-m.lookback)
		s := int32(0)
		for j < n {
			s = m.step(s, text[j])
			j++
			if l := m.outLen[s]; l != 0 {
				ms = add(ms, match{start: j - int(l), end: j, id: m.outID[s]})
			}
			if s == 0 && j > i {
				break
			}
		}
		pos = j
	}
	return ms
}

// next returns the index of the first prefilter byte in text at or after
// pos, or -1.
func (m *machine) next(text string, pos int) int {
	if m.preOne >= 0 {
		k := strings.IndexByte(text[pos:], byte(m.preOne))
		if k < 0 {
			return -1
		}
		return pos + k
	}
	pre := &m.pre
	i := pos
	for ; i+4 <= len(text); i += 4 {
		if pre[text[i]]|pre[text[i+1]]|pre[text[i+2]]|pre[text[i+3]] != 0 {
			break
		}
	}
	for ; i < len(text); i++ {
		if pre[text[i]] != 0 {
			return i
		}
	}
	return -1
}

// scanSingle is scan for a machine of one pattern.
func (m *machine) scanSingle(text string, ms []match) []match {
	p := m.single
	for pos := 0; pos+len(p) <= len(text); {
		k := strings.Index(text[pos:], p)
		if k < 0 {
			break
		}
		start := pos + k
		ms = add(ms, match{start: start, end: start + len(p), id: m.singleID})
		pos = start + 1
	}
	return ms
}

func countTrue(t *[256]byte) int {
	n := 0
	for _, b := range t {
		n += int(b)
	}
	return n
}

// firstIndexIn returns the index of the first byte of s in set, or len(s).
func firstIndexIn(s string, set *[256]byte) int {
	for i := 0; i < len(s); i++ {
		if set[s[i]] != 0 {
			return i
		}
	}
	return len(s)
}
