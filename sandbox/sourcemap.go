package sandbox

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// sourceMap is a decoded version-3 source map, reduced to what the sandbox
// needs: mapping a generated (line, column) to an original one.
type sourceMap struct {
	sources    []string
	lines      [][]mapSegment // per generated line (0-based)
	lineOffset int            // generated lines added before the mapped text
}

type mapSegment struct {
	genCol  int
	src     int
	origLn  int
	origCol int
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

func parseSourceMap(data []byte) (*sourceMap, error) {
	var raw struct {
		Sources  []string `json:"sources"`
		Mappings string   `json:"mappings"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	sm := &sourceMap{sources: raw.Sources}
	var src, ol, oc int
	for _, line := range strings.Split(raw.Mappings, ";") {
		var segs []mapSegment
		gc := 0
		for _, seg := range strings.Split(line, ",") {
			if seg == "" {
				continue
			}
			var vals [5]int
			n := 0
			shift, acc := 0, 0
			for i := 0; i < len(seg); i++ {
				d := b64index[seg[i]]
				if d < 0 {
					return nil, errors.New("invalid base64 VLQ")
				}
				acc |= int(d&31) << shift
				if d&32 != 0 {
					shift += 5
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
			gc += vals[0]
			if n >= 4 {
				src += vals[1]
				ol += vals[2]
				oc += vals[3]
				segs = append(segs, mapSegment{genCol: gc, src: src, origLn: ol, origCol: oc})
			}
		}
		sm.lines = append(sm.lines, segs)
	}
	return sm, nil
}

// lookup maps a 1-based generated line and column to the original source
// index and 1-based line and column.
func (sm *sourceMap) lookup(line, col int) (src, oline, ocol int, ok bool) {
	l := line - 1 - sm.lineOffset
	if sm == nil || l < 0 || l >= len(sm.lines) {
		return 0, 0, 0, false
	}
	segs := sm.lines[l]
	if len(segs) == 0 {
		return 0, 0, 0, false
	}
	c := col - 1
	i := sort.Search(len(segs), func(i int) bool { return segs[i].genCol > c }) - 1
	if i < 0 {
		i = 0
	}
	s := segs[i]
	if s.src < 0 || s.src >= len(sm.sources) {
		return 0, 0, 0, false
	}
	return s.src, s.origLn + 1, s.origCol + 1, true
}
