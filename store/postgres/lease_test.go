package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
)

// openShared opens n stores (separate pools, as separate service instances
// would have) on one fresh schema.
func openShared(t *testing.T, n int) []*postgres.Store {
	t.Helper()
	url, schema := dbURL(t), newSchema(t)
	out := make([]*postgres.Store, n)
	for i := range out {
		st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		out[i] = st
	}
	return out
}

func TestLeaseLifecycle(t *testing.T) {
	st := openShared(t, 1)[0]
	ctx := t.Context()
	a, err := st.TryAcquireLease(ctx, "t1", "instance-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token < 1 || a.Owner != "instance-a" || time.Until(a.ExpiresAt) < 50*time.Second {
		t.Errorf("lease = %+v", a)
	}
	// Held: another owner, or the same owner name, cannot take it.
	for _, owner := range []string{"instance-b", "instance-a"} {
		_, err = st.TryAcquireLease(ctx, "t1", owner, time.Minute)
		if !errors.Is(err, postgres.ErrLeaseHeld) || !strings.Contains(err.Error(), "instance-a") {
			t.Errorf("TryAcquireLease by %s of a held lease: %v; want ErrLeaseHeld naming the holder", owner, err)
		}
	}
	// Leases are per thread.
	if _, err := st.TryAcquireLease(ctx, "t2", "instance-b", time.Minute); err != nil {
		t.Errorf("lease on another thread: %v", err)
	}
	// AcquireLease gives up when its context ends, saying why.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = st.AcquireLease(short, "t1", "instance-b", time.Minute)
	if !errors.Is(err, postgres.ErrLeaseHeld) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("AcquireLease until deadline: %v; want ErrLeaseHeld and DeadlineExceeded", err)
	}
	// Renew extends.
	r, err := st.RenewLease(ctx, a, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !r.ExpiresAt.After(a.ExpiresAt) || r.Token != a.Token {
		t.Errorf("renewed lease %+v, was %+v", r, a)
	}
	// Release frees it at once; the next owner gets a greater token.
	if err := st.ReleaseLease(ctx, r); err != nil {
		t.Fatal(err)
	}
	b, err := st.TryAcquireLease(ctx, "t1", "instance-b", time.Minute)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if b.Token <= a.Token {
		t.Errorf("token after takeover = %d, not above %d", b.Token, a.Token)
	}
	// The old lease is stale for renew, release and writes.
	if _, err := st.RenewLease(ctx, a, time.Minute); !errors.Is(err, postgres.ErrStaleLease) {
		t.Errorf("renew of a taken-over lease: %v", err)
	}
	if err := st.ReleaseLease(ctx, a); !errors.Is(err, postgres.ErrStaleLease) {
		t.Errorf("release of a taken-over lease: %v", err)
	}
	if _, ok := st.WithLease(b).Lease(); !ok {
		t.Error("WithLease store reports no lease")
	}
}

// A crashed owner's lease expires; a second instance takes the thread
// over, and the first instance's late writes are all refused and store
// nothing.
func TestLeaseTakeoverFencesStaleOwner(t *testing.T) {
	stores := openShared(t, 2)
	instA, instB := stores[0], stores[1]
	ctx := t.Context()
	const thread = "thr-shared"
	la, err := instA.AcquireLease(ctx, thread, "instance-a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	a := instA.WithLease(la)
	if err := a.CreateThread(ctx, &toolrun.Thread{ID: thread}); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "by a"}); err != nil {
		t.Fatalf("write under a current lease: %v", err)
	}
	// Instance A stops renewing (it crashed, or stalled in a GC pause).
	// Instance B waits for the lease and takes over once it expires.
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lb, err := instB.AcquireLease(wctx, thread, "instance-b", time.Minute)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Errorf("took over after %v, before the lease expired", time.Since(start))
	}
	if lb.Token <= la.Token {
		t.Errorf("takeover token %d not above %d", lb.Token, la.Token)
	}
	b := instB.WithLease(lb)
	if err := b.AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "by b"}); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
	// Every kind of late write by A is refused.
	_, writeErr := a.WriteFile(ctx, thread, toolrun.FileInfo{Path: "/f", MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("x"))
	late := map[string]error{
		"AppendMessages": a.AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "late a"},
			&toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: "c1", Content: "late result"}),
		"UpdateThread": a.UpdateThread(ctx, &toolrun.Thread{ID: thread, AgentID: "hijack"}),
		"SetValue":     a.SetValue(ctx, thread, "k", json.RawMessage(`1`)),
		"SetEnv":       a.SetEnv(ctx, toolrun.ScopeThread, thread, "K", toolrun.EnvValue{Value: "v", Type: toolrun.VarText}),
		"DeleteEnv":    a.DeleteEnv(ctx, toolrun.ScopeThread, thread, "K"),
		"WriteFile":    writeErr,
		"DeleteFile":   a.DeleteFile(ctx, thread, "/f"),
		"PutChild":     a.PutChild(ctx, toolrun.ChildEntry{ParentID: thread, Reference: "c"}),
	}
	for op, err := range late {
		if !errors.Is(err, postgres.ErrStaleLease) {
			t.Errorf("stale owner's %s: %v; want ErrStaleLease", op, err)
		}
	}
	p, err := instB.ListMessages(ctx, thread, toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range p.Messages {
		got = append(got, m.Content)
	}
	if strings.Join(got, ",") != "by a,by b" {
		t.Errorf("messages = %q; want only the writes made under current leases", got)
	}
	if th, _ := instB.GetThread(ctx, thread); th == nil || th.AgentID != "" {
		t.Errorf("stale UpdateThread reached the store: %+v", th)
	}
	if _, err := instB.GetValue(ctx, thread, "k"); !errors.Is(err, toolrun.ErrNotFound) {
		t.Errorf("stale SetValue reached the store: %v", err)
	}
	if _, err := instB.StatFile(ctx, thread, "/f"); !errors.Is(err, toolrun.ErrNotFound) {
		t.Errorf("stale WriteFile reached the store: %v", err)
	}
	// Writes outside the leased thread are not fenced.
	if err := a.SetEnv(ctx, toolrun.ScopeUser, "u1", "K", toolrun.EnvValue{Value: "v", Type: toolrun.VarText}); err != nil {
		t.Errorf("user env write through a stale lease: %v", err)
	}
}

// Two instances competing for one thread never hold its lease at the same
// time, every acquisition gets a greater token, and every write made under
// a held lease succeeds.
func TestLeaseMutualExclusion(t *testing.T) {
	stores := openShared(t, 2)
	ctx := t.Context()
	const thread = "thr-contended"
	if err := stores[0].CreateThread(ctx, &toolrun.Thread{ID: thread}); err != nil {
		t.Fatal(err)
	}
	var (
		holder   atomic.Int32
		mu       sync.Mutex
		tokens   []int64
		wg       sync.WaitGroup
		deadline = time.Now().Add(2 * time.Second)
	)
	for w := range 4 { // two goroutines per instance
		st := stores[w%2]
		owner := fmt.Sprintf("instance-%d-worker-%d", w%2, w)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				l, err := st.AcquireLease(actx, thread, owner, 5*time.Second)
				cancel()
				if err != nil {
					t.Errorf("%s: acquire: %v", owner, err)
					return
				}
				if !holder.CompareAndSwap(0, int32(w+1)) {
					t.Errorf("%s acquired the lease while worker %d held it", owner, holder.Load()-1)
				}
				mu.Lock()
				tokens = append(tokens, l.Token)
				mu.Unlock()
				err = st.WithLease(l).AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: owner})
				if err != nil {
					t.Errorf("%s: write under a held lease: %v", owner, err)
				}
				time.Sleep(2 * time.Millisecond)
				holder.Store(0)
				if err := st.ReleaseLease(ctx, l); err != nil {
					t.Errorf("%s: release: %v", owner, err)
				}
			}
		})
	}
	wg.Wait()
	if len(tokens) < 4 {
		t.Fatalf("only %d acquisitions", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Errorf("acquisition %d got token %d after %d", i, tokens[i], tokens[i-1])
		}
	}
	p, err := stores[1].ListMessages(ctx, thread, toolrun.MessageQuery{MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != len(tokens) {
		t.Errorf("%d messages for %d acquisitions", p.Total, len(tokens))
	}
	t.Logf("%d acquisitions", len(tokens))
}

// Several instances starting at once on an empty schema apply each
// migration exactly once.
func TestConcurrentMigrations(t *testing.T) {
	url, schema := dbURL(t), newSchema(t)
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, 4)
	for i := range stores {
		wg.Go(func() {
			st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 2})
			if err != nil {
				t.Errorf("instance %d: %v", i, err)
				return
			}
			stores[i] = st
		})
	}
	wg.Wait()
	for _, st := range stores {
		if st != nil {
			defer st.Close()
		}
	}
	if stores[0] == nil {
		t.FailNow()
	}
	var n, v int
	if err := stores[0].Pool().QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_version`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != postgres.SchemaVersion || v != postgres.SchemaVersion {
		t.Errorf("schema_version: %d rows, max %d; want %d", n, v, postgres.SchemaVersion)
	}
}

// Concurrent appends from two instances get unique, increasing Seqs.
func TestAppendsAcrossInstances(t *testing.T) {
	stores := openShared(t, 2)
	ctx := t.Context()
	if err := stores[0].CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, st := range stores {
		for g := range 3 {
			wg.Go(func() {
				for j := range 30 {
					m := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("c%d-%d-%d", i, g, j)}
					if err := st.AppendMessages(ctx, "t", m); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	p, err := stores[1].ListMessages(ctx, "t", toolrun.MessageQuery{Order: toolrun.OrderAsc, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 180 {
		t.Fatalf("%d messages, want 180", len(p.Messages))
	}
	for i := 1; i < len(p.Messages); i++ {
		if p.Messages[i].Seq != p.Messages[i-1].Seq+1 {
			t.Fatalf("Seq %d follows %d", p.Messages[i].Seq, p.Messages[i-1].Seq)
		}
	}
	err = stores[0].AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: "c1-2-29"})
	if !errors.Is(err, toolrun.ErrDuplicateToolResult) {
		t.Errorf("duplicate across instances: %v", err)
	}
}

// LockThread keeps its lease alive past ttl and frees it on release.
func TestLockThread(t *testing.T) {
	stores := openShared(t, 2)
	ctx := t.Context()
	const thread = "thr-locked"
	st, release, err := stores[0].LockThread(ctx, thread, "instance-a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: thread}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(800 * time.Millisecond) // well past ttl: only renewal keeps it
	if _, err := stores[1].TryAcquireLease(ctx, thread, "instance-b", time.Minute); !errors.Is(err, postgres.ErrLeaseHeld) {
		t.Fatalf("another instance got a renewed lease: %v", err)
	}
	if err := st.AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "still mine"}); err != nil {
		t.Fatalf("write after ttl under a renewed lease: %v", err)
	}
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendMessages(ctx, thread, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser}); !errors.Is(err, postgres.ErrStaleLease) {
		t.Errorf("write after release: %v; want ErrStaleLease", err)
	}
	if _, err := stores[1].TryAcquireLease(ctx, thread, "instance-b", time.Minute); err != nil {
		t.Errorf("acquire after release: %v", err)
	}
}

func fileTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
