package sandbox

import (
	"encoding/json"
	"errors"
)

// sourceMap is a decoded version-3 source map, reduced to what the sandbox
// needs: mapping a generated (line, column) to an original one. It keeps
// the mappings text and, per generated line, where the line starts and the
// decoder's state there; a lookup decodes one line. That costs 16 bytes a
// line instead of a slice of segments, since lookups happen only for
// errors.
type sourceMap struct {
	sources    []string
	mappings   string
	lines      []lineStart // per generated line (0-based)
	lineOffset int         // generated lines added before the mapped text
}

// lineStart is where a line's segments start in mappings and the running
// source index, original line and original column at that point (they are
// relative across lines in the format).
type lineStart struct {
	off, src, ol, oc int32
}

const b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var b64index = func() [256]int8 {
	var t [256]int8
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(b64chars); i++ {
		t[b64chars[i]] = int8(i)
	}
	return t
}()

var errBadVLQ = errors.New("invalid base64 VLQ")

// segment is one decoded mapping segment.
type segment struct {
	genCol, src, ol, oc int
	fields              int // number of fields (1, 4 or 5)
}

// nextSegment decodes the segment starting at m[i] (i at a segment start,
// not at ',' or ';'), with deltas applied to st; it returns the index after
// it.
func nextSegment(m string, i int, st *segment) (int, error) {
	n := 0
	var vals [5]int
	shift, acc := 0, 0
	for ; i < len(m) && m[i] != ',' && m[i] != ';'; i++ {
		d := b64index[m[i]]
		if d < 0 {
			return i, errBadVLQ
		}
		acc |= int(d&31) << shift
		if d&32 != 0 {
			shift += 5
			if shift > 60 {
				return i, errBadVLQ
			}
			continue
		}
		v := acc >> 1
		if acc&1 != 0 {
			v = -v
		}
		if n < 5 {
			vals[n] = v
		}
		n++
		shift, acc = 0, 0
	}
	st.genCol += vals[0]
	st.fields = n
	if n >= 4 {
		st.src += vals[1]
		st.ol += vals[2]
		st.oc += vals[3]
	}
	return i, nil
}

func parseSourceMap(data []byte) (*sourceMap, error) {
	var raw struct {
		Sources  []string `json:"sources"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	sm := &sourceMap{sources: raw.Sources, mappings: raw.Mappings}
	m := raw.Mappings
	var st segment
	sm.lines = append(sm.lines, lineStart{})
	for i := 0; i < len(m); {
		switch m[i] {
		case ';':
			i++
			st.genCol = 0
			sm.lines = append(sm.lines, lineStart{off: int32(i), src: int32(st.src), ol: int32(st.ol), oc: int32(st.oc)})
		case ',':
			i++
		default:
			var err error
			if i, err = nextSegment(m, i, &st); err != nil {
				return nil, err
			}
		}
	}
	return sm, nil
}

// lookup maps a 1-based generated line and column to the original source
// index and 1-based line and column: the last segment of the line starting
// at or before the column (or the line's first segment).
func (sm *sourceMap) lookup(line, col int) (src, oline, ocol int, ok bool) {
	if sm == nil {
		return 0, 0, 0, false
	}
	l := line - 1 - sm.lineOffset
	if l < 0 || l >= len(sm.lines) {
		return 0, 0, 0, false
	}
	ls := sm.lines[l]
	st := segment{src: int(ls.src), ol: int(ls.ol), oc: int(ls.oc)}
	c := col - 1
	var best segment
	found := false
	m := sm.mappings
	for i := int(ls.off); i < len(m) && m[i] != ';'; {
		if m[i] == ',' {
			i++
			continue
		}
		var err error
		if i, err = nextSegment(m, i, &st); err != nil {
			return 0, 0, 0, false
		}
		if st.fields < 4 {
			continue
		}
		if !found || st.genCol <= c {
			best, found = st, true
		}
		if st.genCol > c {
			break
		}
	}
	if !found || best.src < 0 || best.src >= len(sm.sources) {
		return 0, 0, 0, false
	}
	return best.src, best.ol + 1, best.oc + 1, true
}
