package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
)

// groupAppend is one single-message append of a group-commit test.
type groupAppend struct {
	st     *postgres.Store
	thread string
	m      *toolrun.Message
	ctx    context.Context
	err    error
}

// runBatched runs appends as one batch: it holds the group committer's
// in-flight slots with appends to thread "hold" until every append of
// appends is queued (in order), calls queued, then lets them go, and checks
// that a batch of wantBatch appends ran.
func runBatched(t *testing.T, st *postgres.Store, appends []*groupAppend, queued func(), wantBatch int) {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "hold"}); err != nil && !errors.Is(err, toolrun.ErrThreadExists) {
		t.Fatal(err)
	}
	release := make(chan struct{})
	started := make(chan int, 64)
	var mu sync.Mutex
	var sizes []int
	postgres.SetGroupHook(st, func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		started <- n
		<-release
	})
	defer postgres.SetGroupHook(st, nil)
	var holders sync.WaitGroup
	for range postgres.GroupInFlight {
		holders.Go(func() {
			if err := st.AppendMessages(ctx, "hold", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "hold"}); err != nil {
				t.Error(err)
			}
		})
		<-started
	}
	var wg sync.WaitGroup
	for i, a := range appends {
		if a.ctx == nil {
			a.ctx = ctx
		}
		wg.Go(func() { a.err = a.st.AppendMessages(a.ctx, a.thread, a.m) })
		waitFor(t, func() bool { return postgres.GroupQueued(st) == i+1 })
	}
	if queued != nil {
		queued()
	}
	close(release)
	holders.Wait()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(sizes, wantBatch) {
		t.Fatalf("batch sizes %v; want one batch of %d appends", sizes, wantBatch)
	}
}

// wantFallbacks checks how many batches the server refused as a whole.
func wantFallbacks(t *testing.T, st *postgres.Store, want int64) {
	t.Helper()
	if got := postgres.GroupFallbacks(st); got != want {
		t.Errorf("%d batches refused by the server and retried one by one; want %d", got, want)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

func result(call string) *toolrun.Message {
	return &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: call, Name: "search", ToolStatus: toolrun.StatusSuccess, Content: "r " + call}
}

// Appends coalesced into one transaction: each gets its own outcome, with
// the error it would get alone (unknown thread, duplicate result within
// the batch and against a stored one, stale lease), the others commit, and
// appends to one thread keep their order.
func TestGroupCommitOutcomes(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c", "leased", "lost"} {
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.AppendMessages(ctx, "b", result("stored")); err != nil {
		t.Fatal(err)
	}
	lease, err := st.TryAcquireLease(ctx, "leased", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := st.TryAcquireLease(ctx, "lost", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReleaseLease(ctx, lost); err != nil {
		t.Fatal(err)
	}
	fenced, stale := st.WithLease(lease), st.WithLease(lost)

	appends := []*groupAppend{
		{st: st, thread: "a", m: result("a1")},
		{st: st, thread: "c", m: result("c1")},
		{st: st, thread: "a", m: result("a2")},
		{st: st, thread: "a", m: result("dup")},
		{st: st, thread: "nope", m: result("x")},        // unknown thread
		{st: st, thread: "a", m: result("dup")},         // duplicate within the batch
		{st: st, thread: "b", m: result("stored")},      // duplicate of a stored result
		{st: fenced, thread: "leased", m: result("l1")}, // current lease
		{st: stale, thread: "lost", m: result("s1")},    // released lease
		{st: st, thread: "a", m: &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "a3", Metadata: map[string]any{"k": "v"}}},
		{st: st, thread: "b", m: result("b1")},
	}
	runBatched(t, st, appends, nil, len(appends))
	wantFallbacks(t, st, 0)

	want := []error{nil, nil, nil, nil, toolrun.ErrNotFound, toolrun.ErrDuplicateToolResult, toolrun.ErrDuplicateToolResult,
		nil, postgres.ErrStaleLease, nil, nil}
	for i, a := range appends {
		if want[i] == nil && a.err != nil || want[i] != nil && !errors.Is(a.err, want[i]) {
			t.Errorf("append %d (%s %s): %v; want %v", i, a.thread, a.m.ToolCallID, a.err, want[i])
		}
	}
	// The same failing appends alone give the same errors, word for word.
	for i, a := range appends {
		if a.err == nil {
			continue
		}
		m := *a.m
		m.Seq = 0
		err := a.st.AppendMessages(ctx, a.thread, &m)
		if err == nil || err.Error() != a.err.Error() {
			t.Errorf("append %d alone: %v; batched: %v", i, err, a.err)
		}
	}
	// Stored: what succeeded, with the Seqs written back, in append order
	// per thread.
	for _, thread := range []string{"a", "b", "c", "leased"} {
		var sent []*toolrun.Message
		for _, a := range appends {
			if a.thread == thread && a.err == nil {
				sent = append(sent, a.m)
			}
		}
		p, err := st.ListMessages(ctx, thread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
		if err != nil {
			t.Fatal(err)
		}
		got := p.Messages
		if thread == "b" {
			got = got[1:] // the result stored before
		}
		if len(got) != len(sent) {
			t.Fatalf("thread %s: %d messages stored, %d appended", thread, len(got), len(sent))
		}
		for i, m := range sent {
			if got[i].Seq != m.Seq || got[i].ID != m.ID || got[i].Content != m.Content || got[i].ThreadID != thread {
				t.Errorf("thread %s message %d: stored %+v, appended %+v", thread, i, got[i], *m)
			}
			if i > 0 && sent[i].Seq <= sent[i-1].Seq {
				t.Errorf("thread %s: Seq %d after %d", thread, sent[i].Seq, sent[i-1].Seq)
			}
		}
	}
	if p, _ := st.ListMessages(ctx, "a", toolrun.MessageQuery{Limit: 1}); p.Total != 4 {
		t.Errorf("thread a Total = %d, want 4", p.Total)
	}
	if got, err := st.ToolResult(ctx, "a", "dup"); err != nil || got.Seq != appends[3].m.Seq {
		t.Errorf("ToolResult(dup) = %+v, %v; want the first, Seq %d", got, err, appends[3].m.Seq)
	}
	if _, err := st.ToolResult(ctx, "lost", "s1"); !errors.Is(err, toolrun.ErrNotFound) {
		t.Errorf("a result refused for its stale lease was stored: %v", err)
	}
}

// An append the server refuses outright (PostgreSQL text cannot hold NUL)
// fails the batch's statement; the batch is then retried append by append,
// so only that append fails, with its own error, and nothing is stored
// twice.
func TestGroupCommitStatementFails(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	appends := []*groupAppend{
		{st: st, thread: "a", m: result("a1")},
		{st: st, thread: "b", m: result("bad\x00id")},
		{st: st, thread: "a", m: &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "no tool call id"}},
		{st: st, thread: "b", m: result("b1")},
	}
	runBatched(t, st, appends, nil, len(appends))
	wantFallbacks(t, st, 1)
	for i, a := range appends {
		if (i == 1) != (a.err != nil) {
			t.Errorf("append %d: %v", i, a.err)
		}
	}
	m := result("bad\x00id")
	if err := st.AppendMessages(ctx, "b", m); err == nil || err.Error() != appends[1].err.Error() {
		t.Errorf("alone: %v; batched: %v", err, appends[1].err)
	}
	for thread, want := range map[string]int{"a": 2, "b": 1} {
		p, err := st.ListMessages(ctx, thread, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
		if err != nil || len(p.Messages) != want {
			t.Errorf("thread %s: %d messages, %v; want %d", thread, len(p.Messages), err, want)
		}
	}
}

// An append whose context ends while it waits for a batch returns the
// context's error and is not stored; the rest of the batch is.
func TestGroupCommitCancelWhileQueued(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	appends := []*groupAppend{
		{st: st, thread: "a", m: result("a1")},
		{st: st, thread: "a", m: result("gone"), ctx: cctx},
		{st: st, thread: "a", m: result("a2")},
	}
	runBatched(t, st, appends, func() {
		cancel()
		waitFor(t, func() bool { return postgres.GroupQueued(st) == 2 })
	}, 2)
	wantFallbacks(t, st, 0)
	if !errors.Is(appends[1].err, context.Canceled) || appends[0].err != nil || appends[2].err != nil {
		t.Fatalf("errors %v, %v, %v", appends[0].err, appends[1].err, appends[2].err)
	}
	if _, err := st.ToolResult(ctx, "a", "gone"); !errors.Is(err, toolrun.ErrNotFound) {
		t.Errorf("cancelled append stored: %v", err)
	}
}

// Many goroutines append to a few threads at once, some of them the same
// tool result: per thread, every append either stored once or was refused
// as a duplicate, Seqs are unique and increasing, and each goroutine's own
// appends keep their order.
func TestGroupCommitConcurrent(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	const threads, workers, per = 4, 32, 20
	for i := range threads {
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: fmt.Sprint("t", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	stored := map[string]int{} // thread/call → successful appends
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			thread := fmt.Sprint("t", w%threads)
			var last int64
			for j := range per {
				call := fmt.Sprintf("w%d-%d", w, j)
				if j%5 == 0 {
					call = fmt.Sprintf("shared-%d", j) // every worker of the thread tries it
				}
				m := result(call)
				err := st.AppendMessages(ctx, thread, m)
				if err != nil && !errors.Is(err, toolrun.ErrDuplicateToolResult) {
					t.Error(err)
					return
				}
				if err == nil {
					if m.Seq <= last {
						t.Errorf("worker %d: Seq %d after %d", w, m.Seq, last)
					}
					last = m.Seq
					mu.Lock()
					stored[thread+"/"+call]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	wantFallbacks(t, st, 0)
	total := 0
	for i := range threads {
		thread := fmt.Sprint("t", i)
		p, err := st.ListMessages(ctx, thread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for k, m := range p.Messages {
			if k > 0 && m.Seq <= p.Messages[k-1].Seq {
				t.Errorf("thread %s: Seq %d after %d", thread, m.Seq, p.Messages[k-1].Seq)
			}
			if seen[m.ToolCallID] {
				t.Errorf("thread %s: two results for %s", thread, m.ToolCallID)
			}
			seen[m.ToolCallID] = true
			if stored[thread+"/"+m.ToolCallID] != 1 {
				t.Errorf("thread %s: %s stored, %d appends succeeded", thread, m.ToolCallID, stored[thread+"/"+m.ToolCallID])
			}
		}
		total += len(p.Messages)
		if p.Total != len(p.Messages) {
			t.Errorf("thread %s: Total %d, %d messages", thread, p.Total, len(p.Messages))
		}
	}
	// Per thread: 8 workers × 16 own calls + 4 shared calls.
	if want := threads * (workers/threads*(per-per/5) + per/5); total != want || len(stored) != want {
		t.Errorf("%d messages stored, %d distinct successes; want %d", total, len(stored), want)
	}
}

// A database at schema version 1 (the previous release: row-level count
// trigger, no batch function) is upgraded on open: its counts carry on and
// batches work.
func TestMigrateFromVersion1(t *testing.T) {
	url, schema := dbURL(t), newSchema(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`CREATE SCHEMA ` + pgx.Identifier{schema}.Sanitize(),
		`SET search_path = ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		postgres.Migration1,
		`INSERT INTO schema_version (version) VALUES (1)`,
		`INSERT INTO threads (id, created_at, next_seq) VALUES ('a', now(), 1)`,
		`INSERT INTO messages (thread_id, seq, id, role, tool_call_id, created_at, body)
			VALUES ('a', 1, 'm1', 'tool', 'before', now(), '{"role":"tool","tool_call_id":"before"}')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st, err := postgres.Open(ctx, url, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var v int
	if err := st.Pool().QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != postgres.SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", v, err, postgres.SchemaVersion)
	}
	appends := []*groupAppend{{st: st, thread: "a", m: result("x")}, {st: st, thread: "a", m: result("before")}}
	runBatched(t, st, appends, nil, 2)
	wantFallbacks(t, st, 0)
	if appends[0].err != nil || !errors.Is(appends[1].err, toolrun.ErrDuplicateToolResult) || appends[0].m.Seq != 2 {
		t.Errorf("after upgrade: %v (Seq %d), %v", appends[0].err, appends[0].m.Seq, appends[1].err)
	}
	if err := st.AppendMessages(ctx, "a", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Silent: true}, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		q    toolrun.MessageQuery
		want int
	}{{toolrun.MessageQuery{Limit: 1}, 3}, {toolrun.MessageQuery{Limit: 1, IncludeSilent: true}, 4}} {
		if p, err := st.ListMessages(ctx, "a", q.q); err != nil || p.Total != q.want {
			t.Errorf("Total(%+v) = %d, %v; want %d", q.q, p.Total, err, q.want)
		}
	}
}
