package sqlite

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// A query with After reads the rows after After through the primary key
// (thread_id, seq), in the order it returns them: SQLite's plan for the
// page and for the count is a search of that key with both bounds, never a
// scan of the table and never a sort. The plans are taken on a database
// with many threads and rows, analysed, so that the planner has the
// statistics it has in use.
func TestListAfterPlans(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "plans.db"), &Options{PlaintextSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	for th := range 20 {
		id := fmt.Sprint("t", th)
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
		msgs := make([]*toolrun.Message, 100)
		for i := range msgs {
			msgs[i] = &toolrun.Message{ID: fmt.Sprint(id, "-", i), Role: toolrun.RoleUser, Content: "x", Depth: i % 3, Silent: i%7 == 0, CreatedAt: testTimeInternal}
		}
		if err := st.AppendMessages(ctx, id, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.DB().ExecContext(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	for _, order := range []toolrun.Order{toolrun.OrderDefault, toolrun.OrderDesc, toolrun.OrderAsc} {
		for _, limit := range []int{0, 10} {
			for _, silent := range []bool{false, true} {
				for _, depth := range []int{0, -1} {
					q := toolrun.MessageQuery{After: 50, Order: order, Limit: limit, IncludeSilent: silent, MaxDepth: depth}
					d, filter := listFilter(q)
					query, count := afterSQL(q, filter)
					for _, s := range []struct {
						sql  string
						args []any
					}{{query, []any{"t3", d, q.After, limit, 0}}, {count, []any{"t3", d, q.After}}} {
						sql := s.sql
						plan := explain(t, st, sql, s.args...)
						if !strings.Contains(plan, "SEARCH messages USING PRIMARY KEY (thread_id=? AND seq>?)") ||
							strings.Contains(plan, "SCAN") || strings.Contains(plan, "TEMP B-TREE") {
							t.Errorf("query %+v: plan of\n%s\nis\n%s", q, sql, plan)
						}
					}
				}
			}
		}
	}
	if testing.Verbose() {
		q := toolrun.MessageQuery{After: 50, Limit: 10}
		d, filter := listFilter(q)
		query, _ := afterSQL(q, filter)
		t.Logf("plan of the newest 10 after a Seq:\n%s", explain(t, st, query, "t3", d, q.After, 10, 0))
	}
}

// testTimeInternal is the creation time of the internal tests' messages.
var testTimeInternal = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// explain returns SQLite's query plan of sql with args, one line per step.
func explain(t *testing.T, st *Store, sql string, args ...any) string {
	t.Helper()
	rows, err := st.DB().QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n")
}
