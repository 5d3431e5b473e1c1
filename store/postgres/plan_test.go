package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
)

// A query with After reads the rows after After through the primary key
// (thread_id, seq): for the page and the count, with the plan PostgreSQL
// makes for the values given and with the generic plan a cached statement
// may get, every node that reads messages reads it through messages_pkey
// bounded by thread and Seq (an index scan in Seq order, or for a few rows
// a bitmap scan and a sort of just those rows), and reads (returns plus
// filters out) no more rows than lie after After on the thread: never the
// thread's earlier rows, never other threads'.
// The plans are taken with EXPLAIN ANALYZE on 20 threads of 500 messages,
// analysed, so the planner has the statistics it has in use.
func TestListAfterPlan(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	const perThread, after = 500, 450
	for th := range 20 {
		id := fmt.Sprint("t", th)
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
		for lo := 0; lo < perThread; lo += 100 {
			msgs := make([]*toolrun.Message, 100)
			for i := range msgs {
				msgs[i] = &toolrun.Message{ID: testID(), Role: toolrun.RoleUser, Content: "x", Depth: i % 3, Silent: i%7 == 0, CreatedAt: testTime}
			}
			if err := st.AppendMessages(ctx, id, msgs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	conn, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	prepared := 0
	plan := func(generic bool, sql string, args []any) any {
		t.Helper()
		if !generic {
			var out []byte
			if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+sql, args...).Scan(&out); err != nil {
				t.Fatalf("explain %s: %v", sql, err)
			}
			var p any
			_ = json.Unmarshal(out, &p)
			return p
		}
		// EXECUTE takes no bound parameters: its values go in as literals.
		params := make([]string, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case string:
				params[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
			case *int64:
				params[i] = "NULL"
				if v != nil {
					params[i] = fmt.Sprint(*v)
				}
			default:
				params[i] = fmt.Sprint(v)
			}
		}
		prepared++
		name := fmt.Sprint("toolrun_plan_", prepared)
		for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, `PREPARE ` + name + ` AS ` + sql} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		defer conn.Exec(ctx, `RESET plan_cache_mode`)
		var out []byte
		if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE `+name+`(`+strings.Join(params, ", ")+`)`).Scan(&out); err != nil {
			t.Fatalf("explain execute %s: %v", sql, err)
		}
		var p any
		_ = json.Unmarshal(out, &p)
		return p
	}
	for _, order := range []toolrun.Order{toolrun.OrderDefault, toolrun.OrderDesc, toolrun.OrderAsc} {
		for _, limit := range []int{0, 10} {
			for _, silent := range []bool{false, true} {
				for _, depth := range []int{0, -1} {
					q := toolrun.MessageQuery{After: after, Order: order, Limit: limit, IncludeSilent: silent, MaxDepth: depth}
					query, qargs, count, cargs := postgres.ListSQL("t3", q)
					for _, generic := range []bool{false, true} {
						for _, s := range []struct {
							sql  string
							args []any
						}{{query, qargs}, {count, cargs}} {
							p := plan(generic, s.sql, s.args)
							for _, problem := range planProblems(p, perThread-after) {
								t.Errorf("query %+v (generic plan %v): %s\n%s\nplan: %s", q, generic, problem, s.sql, short(p))
							}
						}
					}
				}
			}
		}
	}
}

// planProblems walks an EXPLAIN (FORMAT JSON) plan and describes every
// node that reads messages other than through its primary key bounded by
// thread and Seq, or reads more than maxRows rows of it.
func planProblems(p any, maxRows int) []string {
	var out []string
	bounded := func(cond string) bool {
		return strings.Contains(cond, "thread_id =") && strings.Contains(cond, "seq >")
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		typ, _ := n["Node Type"].(string)
		rel, _ := n["Relation Name"].(string)
		idx, _ := n["Index Name"].(string)
		switch {
		case typ == "Bitmap Index Scan":
			if cond, _ := n["Index Cond"].(string); idx != "messages_pkey" || !bounded(cond) {
				out = append(out, fmt.Sprintf("bitmap index scan of %q with condition %q", idx, cond))
			}
		case rel != "messages":
		case typ == "Index Scan" || typ == "Index Only Scan":
			if cond, _ := n["Index Cond"].(string); idx != "messages_pkey" || !bounded(cond) {
				out = append(out, fmt.Sprintf("%s of %q with condition %q", typ, idx, cond))
			}
		case typ == "Bitmap Heap Scan":
			if cond, _ := n["Recheck Cond"].(string); !bounded(cond) {
				out = append(out, fmt.Sprintf("bitmap heap scan rechecking %q", cond))
			}
		default:
			out = append(out, typ+" on messages")
		}
		if rel == "messages" {
			read := num(n["Actual Rows"])*num(n["Actual Loops"]) + num(n["Rows Removed by Filter"])
			if read > float64(maxRows) {
				out = append(out, fmt.Sprintf("%s read %v rows, more than the %d after After", typ, read, maxRows))
			}
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				if m, ok := k.(map[string]any); ok {
					walk(m)
				}
			}
		}
	}
	if list, ok := p.([]any); ok && len(list) > 0 {
		if top, ok := list[0].(map[string]any); ok {
			if root, ok := top["Plan"].(map[string]any); ok {
				walk(root)
				return out
			}
		}
	}
	return []string{"no plan"}
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func short(p any) string {
	b, _ := json.Marshal(p)
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}
