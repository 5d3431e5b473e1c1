package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/postgres"
	"github.com/toolrun/toolrun/store/storetest"
)

var testIDs atomic.Int64

// testID returns a fresh message id, as the front layer would give one.
func testID() string { return fmt.Sprint("msg-", testIDs.Add(1)) }

// testTime is the creation time of the tests' messages.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// dbURL returns TOOLRUN_POSTGRES_URL or skips the test.
func dbURL(t testing.TB) string {
	u := os.Getenv("TOOLRUN_POSTGRES_URL")
	if u == "" {
		t.Skip("TOOLRUN_POSTGRES_URL is not set")
	}
	return u
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB) string {
	url := dbURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "toolrun_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

var schemas sync.Map // *postgres.Store → schema, for reopen

// testKeys is the key ring of the stores the tests open; the conformance
// suite stores secret env values.
var testKeys = func() *keyring.Ring {
	k, err := keyring.Generate("test-1")
	if err != nil {
		panic(err)
	}
	r, err := keyring.New(k)
	if err != nil {
		panic(err)
	}
	return r
}()

// openTemp opens a store in a fresh schema.
func openTemp(t testing.TB) *postgres.Store { return openTempOpts(t, false) }

func openTempOpts(t testing.TB, async bool) *postgres.Store {
	t.Helper()
	schema := newSchema(t)
	st, err := postgres.Open(context.Background(), dbURL(t), &postgres.Options{Schema: schema, MaxConns: 8, AsyncCommit: async, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	schemas.Store(st, schema)
	return st
}

func reopen(old toolrun.Store) (toolrun.Store, error) {
	schema, _ := schemas.Load(old.(*postgres.Store))
	old.(*postgres.Store).Close()
	st, err := postgres.Open(context.Background(), os.Getenv("TOOLRUN_POSTGRES_URL"), &postgres.Options{Schema: schema.(string), MaxConns: 8, Keys: testKeys})
	if err != nil {
		return nil, err
	}
	schemas.Store(st, schema)
	return st, nil
}

func TestConformance(t *testing.T) {
	dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTemp(t) }, &storetest.Options{Reopen: reopen})
}

// A store bound to a current lease behaves like any store, including for
// the leased thread.
func TestConformanceNew(t *testing.T) {
	url := dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store {
		schema := newSchema(t)
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
		conn.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := postgres.New(t.Context(), pool, &postgres.Options{Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, nil)
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTemp(b) })
}

func BenchmarkStoreAsyncCommit(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTempOpts(b, true) })
}

// AsyncCommit changes durability, not behaviour.
func TestConformanceAsyncCommit(t *testing.T) {
	dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTempOpts(t, true) }, nil)
}

// Env scopes other than thread and user are refused, as by the memory store.
func TestUnknownEnvScope(t *testing.T) {
	st := openTemp(t)
	if err := st.SetEnv(t.Context(), "agent", "a", "K", toolrun.EnvValue{Value: "v"}); err == nil {
		t.Error("SetEnv accepted scope \"agent\"")
	}
}

// deepMap returns a map with n maps nested below it, one in the other.
func deepMap(n int) map[string]any {
	root := map[string]any{}
	cur := root
	for range n {
		next := map[string]any{}
		cur["d"] = next
		cur = next
	}
	return root
}

// A value nested deeper than encoding/json decodes (10,000 levels of
// arrays and objects in the stored document) is refused with an error that
// names it and wraps ErrUnstorable, and nothing of its write is stored:
// stored, it could not be read back, and every later read of its thread
// (or of the parent's children) would fail. A value just as deep as
// decoding allows is stored and reads back. A thread's JSON columns hold
// its maps themselves; a message's body and a child's body hold them one
// level down.
func TestTooDeepValuesAreRefused(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	refused := func(what string, err error, field string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s nested too deeply was stored", what)
		}
		if !errors.Is(err, toolrun.ErrUnstorable) || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s nested too deeply: %v; want an error naming %s and wrapping ErrUnstorable", what, err, field)
		}
	}

	// Threads.
	for _, n := range []int{9999, 10000, 10001} {
		for _, field := range []string{"properties", "arguments"} {
			th := &toolrun.Thread{ID: fmt.Sprint(field, n), CreatedAt: testTime}
			if field == "properties" {
				th.Properties = deepMap(n)
			} else {
				th.Arguments = deepMap(n)
			}
			err := st.CreateThread(ctx, th)
			if n > 9999 {
				refused("CreateThread of "+field, err, field)
				if _, err := st.GetThread(ctx, th.ID); !errors.Is(err, toolrun.ErrNotFound) {
					t.Fatalf("GetThread after a refused CreateThread: %v, want ErrNotFound", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("CreateThread of %s %d maps deep: %v", field, n, err)
			}
			got, err := st.GetThread(ctx, th.ID)
			if err != nil || !reflect.DeepEqual(got, th) {
				t.Fatalf("GetThread of %s %d maps deep: %v", field, n, err)
			}
		}
	}
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t", Properties: map[string]any{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	err := st.UpdateThread(ctx, &toolrun.Thread{ID: "t", Properties: deepMap(10000)})
	refused("UpdateThread of properties", err, "properties")
	if got, err := st.GetThread(ctx, "t"); err != nil || got.Properties["k"] != "v" {
		t.Fatalf("GetThread after a refused UpdateThread: %+v, %v; want the thread unchanged", got, err)
	}

	// Messages, one at a time (group commit) and several together: a
	// refused append stores none of its messages, and the thread's
	// earlier messages still read.
	if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "first"}); err != nil {
		t.Fatal(err)
	}
	ok := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Metadata: deepMap(9998)}
	if err := st.AppendMessages(ctx, "t", ok); err != nil {
		t.Fatalf("AppendMessages of metadata 9998 maps deep: %v", err)
	}
	for _, m := range []*toolrun.Message{
		{Role: toolrun.RoleUser, Metadata: deepMap(9999)},
		{Role: toolrun.RoleTool, ToolCallID: "c1", ErrorData: deepMap(10001)},
	} {
		m.ID, m.CreatedAt = testID(), testTime
		field := "metadata"
		if m.ErrorData != nil {
			field = "error_data"
		}
		plain := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "with it"}
		refused("AppendMessages of "+field, st.AppendMessages(ctx, "t", plain, m), field)
		refused("AppendMessages of "+field, st.AppendMessages(ctx, "t", m), field)
	}
	for _, q := range []toolrun.MessageQuery{{IncludeSilent: true, MaxDepth: -1}, {After: 1}} {
		want := 2 - int(q.After)
		page, err := st.ListMessages(ctx, "t", q)
		if err != nil {
			t.Fatalf("ListMessages(%+v) after refused appends: %v", q, err)
		}
		if n := len(page.Messages); n != want || page.Messages[n-1].ID != ok.ID || !reflect.DeepEqual(page.Messages[n-1].Metadata, ok.Metadata) {
			t.Fatalf("ListMessages(%+v) after refused appends: %d messages, want the %d stored before", q, n, want)
		}
	}

	// Children.
	if err := st.PutChild(ctx, toolrun.ChildEntry{ParentID: "t", Reference: "ok", InitialArguments: deepMap(9998)}); err != nil {
		t.Fatalf("PutChild of initial arguments 9998 maps deep: %v", err)
	}
	refused("PutChild of initial_arguments", st.PutChild(ctx, toolrun.ChildEntry{ParentID: "t", Reference: "deep", InitialArguments: deepMap(9999)}), "initial_arguments")
	kids, err := st.Children(ctx, "t")
	if err != nil || len(kids) != 1 || kids[0].Reference != "ok" {
		t.Fatalf("Children after a refused PutChild: %+v, %v; want the entry stored before", kids, err)
	}
}

// A MaxDepth above the range of the depth column (int4) selects every
// depth, as no message is deeper, where pgx failed to encode it.
func TestMaxDepthAboveTheColumnsRange(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []int{0, 5, math.MaxInt32} {
		if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Depth: d}); err != nil {
			t.Fatal(err)
		}
	}
	for _, depth := range []int{math.MaxInt32, math.MaxInt32 + 1, math.MaxInt} {
		for _, q := range []toolrun.MessageQuery{{MaxDepth: depth}, {MaxDepth: depth, Limit: 2}, {MaxDepth: depth, After: 1}, {MaxDepth: depth, After: 1, Limit: 1}} {
			page, err := st.ListMessages(ctx, "t", q)
			total, n := 3-int(q.After), 3-int(q.After)
			if q.Limit > 0 {
				n = min(n, q.Limit)
			}
			if err != nil || page.Total != total || len(page.Messages) != n {
				t.Fatalf("ListMessages(%+v): %d messages, total %d, %v; want %d of the %d after Seq %d", q, len(page.Messages), page.Total, err, n, total, q.After)
			}
		}
	}
}

// SessionTurns, stored in an int4 column, is refused outside that range
// with an error naming it, and nothing is written, where pgx failed with
// an error naming neither the field nor the fault. Both ends of the range
// are stored and read back.
func TestSessionTurnsOutsideTheColumnsRange(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t", AgentID: "a"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt} {
		err := st.CreateThread(ctx, &toolrun.Thread{ID: "far", SessionTurns: n})
		if err == nil || !strings.Contains(err.Error(), "SessionTurns") {
			t.Fatalf("CreateThread with SessionTurns %d: %v; want an error naming SessionTurns", n, err)
		}
		if _, err := st.GetThread(ctx, "far"); !errors.Is(err, toolrun.ErrNotFound) {
			t.Fatalf("GetThread after a refused CreateThread: %v, want ErrNotFound", err)
		}
		err = st.UpdateThread(ctx, &toolrun.Thread{ID: "t", AgentID: "changed", SessionTurns: n})
		if err == nil || !strings.Contains(err.Error(), "SessionTurns") {
			t.Fatalf("UpdateThread with SessionTurns %d: %v; want an error naming SessionTurns", n, err)
		}
		if th, err := st.GetThread(ctx, "t"); err != nil || th.AgentID != "a" || th.SessionTurns != 0 {
			t.Fatalf("GetThread after a refused UpdateThread: %+v, %v; want the thread unchanged", th, err)
		}
	}
	for _, n := range []int{math.MaxInt32, math.MinInt32} {
		id := fmt.Sprint("edge", n)
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id, SessionTurns: n}); err != nil {
			t.Fatalf("CreateThread with SessionTurns %d: %v", n, err)
		}
		if th, err := st.GetThread(ctx, id); err != nil || th.SessionTurns != n {
			t.Fatalf("GetThread of SessionTurns %d: %+v, %v", n, th, err)
		}
		if err := st.UpdateThread(ctx, &toolrun.Thread{ID: "t", AgentID: "a", SessionTurns: n}); err != nil {
			t.Fatalf("UpdateThread with SessionTurns %d: %v", n, err)
		}
		if th, err := st.GetThread(ctx, "t"); err != nil || th.SessionTurns != n {
			t.Fatalf("GetThread after UpdateThread of SessionTurns %d: %+v, %v", n, th, err)
		}
	}
}

// A child entry's ParentID and Reference are its key columns, whatever its
// JSON body says (user SQL may have written one without them), and a body
// that does not decode into an entry fails Child and Children with an
// error naming the entry.
func TestChildBodyFromUserSQL(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	for _, ref := range []string{"a", "b"} {
		if err := st.PutChild(ctx, toolrun.ChildEntry{ParentID: "p", Reference: ref, Name: "n-" + ref, CreatedAt: testTime, UpdatedAt: testTime}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(ref, body string) {
		t.Helper()
		if _, err := st.Pool().Exec(ctx, `UPDATE children SET body = $1::json WHERE parent_id = 'p' AND reference = $2`, body, ref); err != nil {
			t.Fatal(err)
		}
	}
	set("a", `{}`)
	set("b", `{"parent_id":"other","reference":"x","name":"n-b"}`)
	e, err := st.Child(ctx, "p", "a")
	if err != nil || e.ParentID != "p" || e.Reference != "a" || !e.CreatedAt.Equal(testTime) {
		t.Fatalf("Child of a body {}: %+v, %v; want ParentID p, Reference a", e, err)
	}
	kids, err := st.Children(ctx, "p")
	if err != nil || len(kids) != 2 {
		t.Fatalf("Children: %+v, %v", kids, err)
	}
	for i, ref := range []string{"a", "b"} {
		if kids[i].ParentID != "p" || kids[i].Reference != ref {
			t.Errorf("Children: entry %d is %+v; want ParentID p, Reference %s", i, kids[i], ref)
		}
	}
	if kids[1].Name != "n-b" {
		t.Errorf("Children: entry b lost the rest of its body: %+v", kids[1])
	}
	set("b", `{"blocking":"yes"}`)
	if _, err := st.Child(ctx, "p", "b"); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("Child of a body that does not decode: %v; want an error naming the entry", err)
	}
	if _, err := st.Children(ctx, "p"); err == nil || !strings.Contains(err.Error(), `decode entry "b"`) {
		t.Errorf("Children with a body that does not decode: %v; want an error naming the entry", err)
	}
}

// A time outside the range of PostgreSQL's timestamps (4713 BC to 294276
// AD) is refused with an error naming its field, and nothing is written:
// pgx bound a year of -300000 wrapped around, and it read back as 284554.
// The ends of the range are stored and read back.
func TestTimesOutsideTheTimestampRange(t *testing.T) {
	st := openTemp(t)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t", CreatedAt: testTime}); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error, field string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: %v; want an error naming %s", what, err, field)
		}
	}
	for _, at := range []time.Time{time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-4713, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)} {
		what := fmt.Sprint("year ", at.Year())
		refused(what+" as a thread's CreatedAt", st.CreateThread(ctx, &toolrun.Thread{ID: "far", CreatedAt: at}), "CreatedAt")
		refused(what+" as a thread's TerminatedAt", st.CreateThread(ctx, &toolrun.Thread{ID: "far", CreatedAt: testTime, TerminatedAt: at}), "TerminatedAt")
		if _, err := st.GetThread(ctx, "far"); !errors.Is(err, toolrun.ErrNotFound) {
			t.Fatalf("GetThread after refused CreateThreads: %v, want ErrNotFound", err)
		}
		refused(what+" as TerminatedAt in UpdateThread", st.UpdateThread(ctx, &toolrun.Thread{ID: "t", AgentID: "changed", TerminatedAt: at}), "TerminatedAt")
		if th, err := st.GetThread(ctx, "t"); err != nil || th.AgentID != "" || !th.TerminatedAt.IsZero() {
			t.Fatalf("GetThread after a refused UpdateThread: %+v, %v; want the thread unchanged", th, err)
		}
		refused(what+" as a message's CreatedAt", st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: at, Role: toolrun.RoleUser}), "CreatedAt")
		if page, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{}); err != nil || len(page.Messages) != 0 {
			t.Fatalf("ListMessages after a refused append: %d messages, %v; want none", len(page.Messages), err)
		}
		_, err := st.WriteFile(ctx, "t", toolrun.FileInfo{Path: "/f", CreatedAt: at, UpdatedAt: testTime}, []byte("x"))
		refused(what+" as a file's CreatedAt", err, "CreatedAt")
		_, err = st.WriteFile(ctx, "t", toolrun.FileInfo{Path: "/f", CreatedAt: testTime, UpdatedAt: at}, []byte("x"))
		refused(what+" as a file's UpdatedAt", err, "UpdatedAt")
		if _, err := st.StatFile(ctx, "t", "/f"); !errors.Is(err, toolrun.ErrNotFound) {
			t.Fatalf("StatFile after refused writes: %v, want ErrNotFound", err)
		}
		refused(what+" as a child's CreatedAt", st.PutChild(ctx, toolrun.ChildEntry{ParentID: "t", Reference: "c", CreatedAt: at, UpdatedAt: testTime}), "CreatedAt")
		refused(what+" as a child's UpdatedAt", st.PutChild(ctx, toolrun.ChildEntry{ParentID: "t", Reference: "c", CreatedAt: testTime, UpdatedAt: at}), "UpdatedAt")
		if _, err := st.Child(ctx, "t", "c"); !errors.Is(err, toolrun.ErrNotFound) {
			t.Fatalf("Child after refused PutChilds: %v, want ErrNotFound", err)
		}
	}
	for i, at := range []time.Time{time.Date(-4712, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(294276, 12, 31, 23, 59, 59, 999999000, time.UTC)} {
		id := fmt.Sprint("edge", i)
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id, CreatedAt: at, TerminatedAt: at}); err != nil {
			t.Fatalf("CreateThread at %v: %v", at, err)
		}
		th, err := st.GetThread(ctx, id)
		if err != nil || !th.CreatedAt.Equal(at) || !th.TerminatedAt.Equal(at) {
			t.Fatalf("a thread created and terminated at %v reads back as %v, %v (%v)", at, th.CreatedAt, th.TerminatedAt, err)
		}
		if _, err := st.WriteFile(ctx, id, toolrun.FileInfo{Path: "/f", CreatedAt: at, UpdatedAt: at}, []byte("x")); err != nil {
			t.Fatalf("WriteFile at %v: %v", at, err)
		}
		if f, err := st.StatFile(ctx, id, "/f"); err != nil || !f.CreatedAt.Equal(at) || !f.UpdatedAt.Equal(at) {
			t.Fatalf("a file written at %v reads back as %+v (%v)", at, f, err)
		}
		if err := st.PutChild(ctx, toolrun.ChildEntry{ParentID: id, Reference: "c", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatalf("PutChild at %v: %v", at, err)
		}
		if c, err := st.Child(ctx, id, "c"); err != nil || !c.CreatedAt.Equal(at) || !c.UpdatedAt.Equal(at) {
			t.Fatalf("a child put at %v reads back as %+v (%v)", at, c, err)
		}
	}
}
