package toolrun

import (
	"strconv"
	"testing"
)

// The small sets of a request (call ids, offered tools, streamed calls)
// find their members by walking slices and move to a map past a few; both
// sides of that line answer the same.
func TestSmallSetsAnswerTheSameBeyondTheirSlice(t *testing.T) {
	for _, n := range []int{1, fewKeys, fewKeys + 1, 3 * fewKeys} {
		var s idSet
		for i := range n {
			s.add("id" + strconv.Itoa(i))
			s.add("id" + strconv.Itoa(i/2)) // added again: no change
		}
		for i := range n {
			if !s.has("id" + strconv.Itoa(i)) {
				t.Errorf("idSet of %d: id%d is missing", n, i)
			}
		}
		if s.has("id"+strconv.Itoa(n)) || s.has("") {
			t.Errorf("idSet of %d holds an id never added", n)
		}
		if len(s.k.entries) != n {
			t.Errorf("idSet of %d keeps %d ids", n, len(s.k.entries))
		}
	}

	for _, n := range []int{0, 1, fewKeys, fewKeys + 1, 4 * fewKeys} {
		ts := &toolset{gated: true}
		for i := range n {
			ts.offer(&handler{name: "t" + strconv.Itoa(i), spec: ToolSpec{Name: "t" + strconv.Itoa(i)}})
			ts.offer(&handler{name: "t" + strconv.Itoa(i/2), spec: ToolSpec{Name: "again"}}) // a name offered already is not offered twice
		}
		specs := ts.specs()
		if len(specs) != n {
			t.Fatalf("toolset of %d offers %d specs", n, len(specs))
		}
		for i, sp := range specs {
			name := "t" + strconv.Itoa(i)
			if sp.Name != name {
				t.Errorf("toolset of %d: spec %d is %q; want %q (the first offered, in order)", n, i, sp.Name, name)
			}
			if h := ts.offered(name); h == nil || h.spec.Name != name {
				t.Errorf("toolset of %d: %s resolves to %v", n, name, h)
			}
		}
		if ts.offered("t"+strconv.Itoa(n)) != nil {
			t.Errorf("toolset of %d offers a name never offered", n)
		}
		if n > 0 && &specs[0] == &ts.specs()[0] {
			t.Errorf("toolset of %d hands two requests the same specs", n)
		}
	}

	for _, n := range []int{1, fewKeys, fewKeys + 1, 3 * fewKeys} {
		r := response{max: 1 << 40}
		// Interleaved, as parallel calls stream: index i's chunks between others'.
		for round := range 3 {
			for i := range n {
				pc, err := r.call(10 * i)
				if err != nil {
					t.Fatal(err)
				}
				pc.args.WriteString(strconv.Itoa(round))
			}
		}
		if len(r.calls.entries) != n {
			t.Fatalf("%d streamed calls collected as %d", n, len(r.calls.entries))
		}
		for k, e := range r.calls.entries {
			if idx, pc := e.key, e.val; idx != 10*k || pc.args.String() != "012" {
				t.Errorf("%d streamed calls: call %d has index %d and arguments %q; want %d and \"012\"", n, k, idx, pc.args.String(), 10*k)
			}
		}
	}
}
