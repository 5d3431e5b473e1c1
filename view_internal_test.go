package toolrun

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomRows is a thread's rows as a turn could read them: user and
// assistant messages of both sides, assistant calls whose results follow
// (some late, some never stored), and runs of queued results.
func randomRows(r *rand.Rand, n int) []Message {
	var rows []Message
	open := []ToolCall{} // calls still without a result
	id := 0
	next := func(p string) string { id++; return fmt.Sprintf("%s%d", p, id) }
	for len(rows) < n {
		side := []string{"a", "b"}[r.IntN(2)]
		switch k := r.IntN(6); {
		case k == 0:
			rows = append(rows, Message{ID: next("u"), Role: RoleUser, Content: "question", Side: side})
		case k == 1:
			m := Message{ID: next("m"), Role: RoleAssistant, Content: []string{"", "thinking"}[r.IntN(2)], Side: side}
			for range r.IntN(3) {
				c := ToolCall{ID: next("call_"), Name: "search", Arguments: "{}"}
				m.ToolCalls = append(m.ToolCalls, c)
				open = append(open, c)
			}
			rows = append(rows, m)
		case k <= 3 && len(open) > 0:
			i := r.IntN(len(open))
			c := open[i]
			open = append(open[:i], open[i+1:]...)
			rows = append(rows, Message{ID: next("r"), Role: RoleTool, ToolCallID: c.ID, Name: c.Name, Content: "result", ToolStatus: StatusSuccess, Side: side})
		case k == 4:
			rows = append(rows, Message{ID: next("q"), Role: RoleTool, ToolCallID: next("call_") + "_q1", Name: "notify", Content: "queued result",
				Queued: true, Arguments: `{"to":"x"}`, ToolStatus: StatusSuccess, Side: side})
		default:
			rows = append(rows, Message{ID: next("s"), Role: RoleSystem, Content: "note"})
		}
	}
	return rows
}

// A turn's view grows with the rows its later requests read: adding them
// to a clean view gives exactly the perspective of all the rows, and a view
// that is not clean says so (and is then computed again from all rows).
func TestViewGrowsAsThePerspectiveOfAllRows(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	grew := 0
	for i := range 5000 {
		rows := randomRows(r, 2+r.IntN(30))
		cut := r.IntN(len(rows) + 1)
		side := []string{"a", "b"}[r.IntN(2)]
		past := r.IntN(4) != 0
		want := perspective(side, past, rows)
		var v view
		v.add(side, past, rows[:cut])
		if !v.clean {
			continue
		}
		grew++
		v.add(side, past, rows[cut:])
		if !reflect.DeepEqual(v.out, want) && !(len(v.out) == 0 && len(want) == 0) {
			t.Fatalf("case %d (cut at %d of %d, side %s, past tools %v): grown view\n%+v\nwant\n%+v", i, cut, len(rows), side, past, v.out, want)
		}
	}
	if grew < 1000 {
		t.Fatalf("only %d of 5000 cases had a clean view to grow", grew)
	}
}
