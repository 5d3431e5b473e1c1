package sqlite_test

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/sqlite"
	"github.com/toolrun/toolrun/store/storetest"
)

var testIDs atomic.Int64

// testID returns a fresh message id, as the front layer would give one.
func testID() string { return fmt.Sprint("msg-", testIDs.Add(1)) }

// testTime is the creation time of the tests' messages.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// paths remembers the file of each store opened by a test, for Reopen.
var paths sync.Map // *sqlite.Store → string

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

// withKeys returns opts with Keys set to testKeys unless it has keys or
// allows plaintext secrets.
func withKeys(opts *sqlite.Options) *sqlite.Options {
	o := sqlite.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Keys == nil && !o.PlaintextSecrets {
		o.Keys = testKeys
	}
	return &o
}

// openTemp opens a store in a fresh file, with testKeys unless opts has
// keys or allows plaintext secrets.
func openTemp(t testing.TB, opts *sqlite.Options) *sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "toolrun.db")
	st, err := sqlite.Open(path, withKeys(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	paths.Store(st, path)
	return st
}

func reopen(old toolrun.Store) (toolrun.Store, error) {
	p, _ := paths.Load(old.(*sqlite.Store))
	if err := old.(*sqlite.Store).Close(); err != nil {
		return nil, err
	}
	st, err := sqlite.Open(p.(string), withKeys(nil))
	if err != nil {
		return nil, err
	}
	paths.Store(st, p)
	return st, nil
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTemp(t, nil) }, &storetest.Options{Reopen: reopen})
}

func TestConformanceSyncFull(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTemp(t, &sqlite.Options{Synchronous: sqlite.SyncFull}) }, &storetest.Options{Reopen: reopen})
}

func TestConformanceExclusive(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTemp(t, &sqlite.Options{Exclusive: true}) }, &storetest.Options{Reopen: reopen})
}

func TestConformanceInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store {
		st, err := sqlite.Open(":memory:", withKeys(nil))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, nil)
}

func TestPragmas(t *testing.T) {
	for _, tt := range []struct {
		opts *sqlite.Options
		want int // PRAGMA synchronous: 1 NORMAL, 2 FULL
	}{{nil, 1}, {&sqlite.Options{Synchronous: sqlite.SyncFull}, 2}} {
		st := openTemp(t, tt.opts)
		var mode string
		var level int
		// Use one connection so both pragmas read the same session.
		conn, err := st.DB().Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&level); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		if mode != "wal" || level != tt.want {
			t.Errorf("opts %+v: journal_mode %q synchronous %d; want wal, %d", tt.opts, mode, level, tt.want)
		}
	}
	if _, err := sqlite.Open(filepath.Join(t.TempDir(), "x.db"), &sqlite.Options{Synchronous: "OFF"}); err == nil {
		t.Error("Open accepted Synchronous OFF")
	}
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var v, n int
	if err := st.DB().QueryRow(`SELECT max(version), count(*) FROM schema_version`).Scan(&v, &n); err != nil {
		t.Fatal(err)
	}
	if v != sqlite.SchemaVersion || n != sqlite.SchemaVersion {
		t.Errorf("schema_version max %d count %d; want %d", v, n, sqlite.SchemaVersion)
	}
	st.Close()
	// Opening again applies nothing twice.
	st, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := st.DB().QueryRow(`SELECT count(*) FROM schema_version`).Scan(&n); err != nil || n != sqlite.SchemaVersion {
		t.Errorf("after reopen schema_version has %d rows (%v)", n, err)
	}
	// A database from a newer build is refused with a clear error.
	if _, err := st.DB().Exec(`INSERT INTO schema_version (version, applied_at) VALUES (?, 0)`, sqlite.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err = sqlite.Open(path, nil)
	if err == nil || !strings.Contains(err.Error(), "newer than this build supports") {
		t.Errorf("Open of a newer schema: %v", err)
	}
}

// The unique tool-result rule is the database's: even a raw insert that
// bypasses the Store is refused.
func TestToolResultIndex(t *testing.T) {
	st := openTemp(t, nil)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: "c1", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err := st.DB().Exec(`INSERT INTO messages (thread_id, seq, id, role, tool_call_id, created_at, content, name, tool_status, parent_id, prompt, subagent_id)
		VALUES ('t', 99, 'm', 'tool', 'c1', 0, '', '', '', '', '', '')`)
	if err == nil {
		t.Fatal("a raw duplicate tool result was accepted by the database")
	}
}

// Two Store values on one file (as two processes would be) share Seq
// assignment safely and see each other's writes.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*sqlite.Store
	for i := range stores {
		st, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		stores[i] = st
	}
	ctx := t.Context()
	if err := stores[0].CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Go(func() {
			for j := range 50 {
				m := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("c%d-%d", i, j), Content: "x"}
				if err := st.AppendMessages(ctx, "t", m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	p, err := stores[1].ListMessages(ctx, "t", toolrun.MessageQuery{Order: toolrun.OrderAsc, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 100 {
		t.Fatalf("listed %d messages, want 100", len(p.Messages))
	}
	for i := 1; i < len(p.Messages); i++ {
		if p.Messages[i].Seq <= p.Messages[i-1].Seq {
			t.Fatalf("Seq %d follows %d", p.Messages[i].Seq, p.Messages[i-1].Seq)
		}
	}
	// The duplicate rule spans both stores.
	err = stores[0].AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: "c1-7"})
	if !errors.Is(err, toolrun.ErrDuplicateToolResult) {
		t.Errorf("duplicate through the other store: %v", err)
	}
}

// New works on a caller's *sql.DB and leaves it open on Close.
func TestNewOnExistingDB(t *testing.T) {
	db, err := driver.Open(filepath.Join(t.TempDir(), "own.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateThread(t.Context(), &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := db.Ping(); err != nil {
		t.Errorf("Close closed the caller's database: %v", err)
	}
	// The Store left no statement open that would keep a connection from
	// closing.
	if err := db.Close(); err != nil {
		t.Errorf("closing the caller's db after the Store: %v", err)
	}
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTemp(b, nil) })
}

func BenchmarkStoreExclusive(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTemp(b, &sqlite.Options{Exclusive: true}) })
}

func BenchmarkStoreSyncFull(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTemp(b, &sqlite.Options{Synchronous: sqlite.SyncFull}) })
}

// Total stays exact when another Store (another process) appends between
// two queries of a Store that has counted the thread before.
func TestTotalAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counts.db")
	a, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if err := a.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	totals := func(want, wantAll int) {
		t.Helper()
		for _, q := range []toolrun.MessageQuery{{Limit: 1}, {Limit: 1, IncludeSilent: true, MaxDepth: -1}} {
			p, err := a.ListMessages(ctx, "t", q)
			if err != nil {
				t.Fatal(err)
			}
			w := want
			if q.IncludeSilent {
				w = wantAll
			}
			if p.Total != w {
				t.Errorf("Total(%+v) = %d, want %d", q, p.Total, w)
			}
		}
	}
	totals(0, 0)
	for i := range 3 {
		if err := b.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Silent: i == 1}); err != nil {
			t.Fatal(err)
		}
	}
	totals(2, 3)
	if err := b.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Depth: 1}, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser}); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Silent: true}); err != nil {
		t.Fatal(err)
	}
	totals(3, 6)
}

// Env scopes other than thread and user are refused, as by the memory store.
func TestUnknownEnvScope(t *testing.T) {
	st := openTemp(t, nil)
	if err := st.SetEnv(t.Context(), "agent", "a", "K", toolrun.EnvValue{Value: "v"}); err == nil {
		t.Error("SetEnv accepted scope \"agent\"")
	}
	if _, err := st.ListEnv(t.Context(), "agent", "a"); err == nil {
		t.Error("ListEnv accepted scope \"agent\"")
	}
}

// BenchmarkBareInsert is the floor to compare AppendToolResult with: a
// prepared two-column INSERT (no index, no Store) through database/sql on
// the same driver, WAL + synchronous=NORMAL, with and without
// locking_mode=EXCLUSIVE. Both run on the same machine in the same window
// as BenchmarkStore, so their ratio is what to compare across runs.
func BenchmarkBareInsert(b *testing.B) {
	for _, tt := range []struct{ name, pragmas string }{
		{"WAL", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"},
		{"WALExclusive", "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			db, err := driver.Open(filepath.Join(b.TempDir(), "bare.db"), func(c *sqlite3.Conn) error { return c.Exec(tt.pragmas) })
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			if _, err := db.Exec(`CREATE TABLE t (a INTEGER, b TEXT)`); err != nil {
				b.Fatal(err)
			}
			st, err := db.Prepare(`INSERT INTO t VALUES (?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			i := 0
			for b.Loop() {
				i++
				if _, err := st.Exec(i, `{"results":["a","b","c"]}`); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
		})
	}
}

// Paths with characters that mean something in a URI open the file at
// exactly that path.
func TestOddPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a b?c#d%20e.db")
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateThread(t.Context(), &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := driver.Open(path) // a plain name, not a URI
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM threads`).Scan(&n); err != nil || n != 1 {
		t.Errorf("threads in %q: %d, %v", path, n, err)
	}
}

// The WAL the Store writes (one write per frame, see vfs.go) is SQLite's
// own: a Store over a plain connection of the driver (as another program
// would open the file) appends to the same thread at the same time, and
// reads everything back.
func TestPlainConnectionShares(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	db, err := driver.Open(path, func(c *sqlite3.Conn) error {
		return c.Exec(`PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	if err := a.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i, st := range []*sqlite.Store{a, b} {
		wg.Go(func() {
			for j := range 300 {
				m := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("c%d-%d", i, j), Content: strings.Repeat("x", j)}
				if err := st.AppendMessages(ctx, "t", m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, st := range []*sqlite.Store{a, b} {
		p, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{Order: toolrun.OrderAsc})
		if err != nil || len(p.Messages) != 600 || p.Total != 600 {
			t.Fatalf("listed %d of %d, %v; want 600", len(p.Messages), p.Total, err)
		}
		for i, m := range p.Messages {
			if m.Seq != int64(i+1) || len(m.Content) > 300 || m.Content != strings.Repeat("x", len(m.Content)) {
				t.Fatalf("message %d: Seq %d, content of %d bytes", i, m.Seq, len(m.Content))
			}
		}
	}
	var check string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
}

// With checkpoints in the background, the WAL still starts over from its
// beginning: under a stream of appends that never pauses it stays near
// wal_autocheckpoint pages instead of growing.
func TestWALStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("12,000 appends")
	}
	st := openTemp(t, nil)
	path, _ := paths.Load(st)
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	maxWAL := int64(0)
	for i := range 12000 {
		if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: fmt.Sprint("c", i), Content: "result"}); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			if fi, err := os.Stat(path.(string) + "-wal"); err == nil {
				maxWAL = max(maxWAL, fi.Size())
			}
		}
	}
	if fi, err := os.Stat(path.(string) + "-wal"); err == nil {
		maxWAL = max(maxWAL, fi.Size())
	}
	// 24,000 frames were written. The WAL starts over once it passes 4,000
	// pages and a background checkpoint has finished, so on a quiet
	// machine it holds 4,000 pages and what was appended during one
	// checkpoint, under 12,000. How far past 4,000 it gets depends on how
	// soon the background checkpoint finishes, which a loaded machine
	// delays; what holds whatever the timing is the hard limit: from
	// 16,000 pages a write checkpoints inline, and the WAL starts over.
	// Without checkpoints it would reach 24,000.
	const frame = 4096 + 24
	t.Logf("max WAL %d pages", maxWAL/frame)
	if limit := int64((4*4000 + 100) * frame); maxWAL > limit {
		t.Errorf("WAL grew to %d bytes, over %d (16,000 pages and a write)", maxWAL, limit)
	}
	var check string
	if err := st.DB().QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
}

// A Store whose pool has one connection (Exclusive, or a caller's db
// limited to one) does not keep that connection: DB() works alongside.
func TestOneConnectionPool(t *testing.T) {
	excl := openTemp(t, &sqlite.Options{Exclusive: true})
	db, err := driver.Open(filepath.Join(t.TempDir(), "one.db"), func(c *sqlite3.Conn) error {
		return c.Exec(`PRAGMA journal_mode=WAL`)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	one, err := sqlite.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*sqlite.Store{excl, one} {
		ctx := t.Context()
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleTool, ToolCallID: fmt.Sprint("c", i)}); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&n); err != nil || n != i+1 {
				t.Fatalf("DB() counts %d messages, %v; want %d", n, err, i+1)
			}
		}
	}
	one.Close()
	if err := db.Close(); err != nil {
		t.Errorf("closing the caller's db after the Store: %v", err)
	}
}

// flipCtx is a context that reports itself cancelled from its n-th Err call
// on: SQLite checks Err before each statement and while one runs, so some n
// ends it at any chosen point of a write.
type flipCtx struct {
	context.Context
	n atomic.Int32
}

func (c *flipCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// An append of more than 100 messages (one explicit transaction) whose
// context ends at any point stores all or nothing and leaves no
// transaction open on the write connection: the next append commits and
// other connections see it.
func TestCancelledLongAppend(t *testing.T) {
	for _, opts := range []*sqlite.Options{nil, {Exclusive: true}} {
		st := openTemp(t, opts)
		ctx := t.Context()
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil {
			t.Fatal(err)
		}
		want := 0
		for n := int32(1); ; n++ {
			c := &flipCtx{Context: context.Background()}
			c.n.Store(n)
			msgs := make([]*toolrun.Message, 150)
			for i := range msgs {
				msgs[i] = &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "x"}
			}
			err := st.AppendMessages(c, "t", msgs...)
			if err == nil {
				want += len(msgs)
			}
			if err := st.AppendMessages(ctx, "t", &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser, Content: "marker"}); err != nil {
				t.Fatalf("Exclusive=%v, cancelled at Err call %d: next append: %v", opts != nil, n, err)
			}
			want++
			var got int
			if qerr := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&got); qerr != nil || got != want {
				t.Fatalf("Exclusive=%v, cancelled at Err call %d (append: %v): DB() counts %d messages, %v; want %d",
					opts != nil, n, err, got, qerr, want)
			}
			if err == nil {
				t.Logf("Exclusive=%v: %d points of cancellation", opts != nil, n-1)
				break // the context was never consulted that often
			}
		}
	}
}

// fakeDriver is a database/sql driver that is not SQLite: its connections
// open, and every statement fails.
type fakeDriver struct{}

func (fakeDriver) Open(string) (sqldriver.Conn, error) { return fakeConn{}, nil }

type fakeConn struct{}

var errFake = errors.New("fake driver: not supported")

func (fakeConn) Prepare(string) (sqldriver.Stmt, error) { return nil, errFake }
func (fakeConn) Close() error                           { return nil }
func (fakeConn) Begin() (sqldriver.Tx, error)           { return nil, errFake }

var registerFake = sync.OnceFunc(func() { sql.Register("toolrun-fake", fakeDriver{}) })

// New refuses a database of another driver with an error saying so, before
// running anything on it.
func TestNewForeignDriver(t *testing.T) {
	registerFake()
	for _, conns := range []int{0, 1} {
		db, err := sql.Open("toolrun-fake", "")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(conns)
		_, err = sqlite.New(db, nil)
		if err == nil || !strings.Contains(err.Error(), "github.com/ncruces/go-sqlite3/driver") {
			t.Errorf("New on a foreign driver (max %d connections): %v; want an error naming the driver it needs", conns, err)
		}
		db.Close()
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
// its maps themselves; a message's extra and a child's body hold them one
// level down.
func TestTooDeepValuesAreRefused(t *testing.T) {
	st := openTemp(t, nil)
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

	// Messages: a refused append stores none of its messages, and the
	// thread's earlier messages still read.
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

// A time is stored as Unix microseconds in 64 bits: one outside that range
// (about 292,000 years either side of 1970) is refused with an error naming
// the field, and nothing of its write is stored, where it was stored as
// another time (year 300000 read back as year -284555). The first and last
// times of the range are stored and read back, and so is a time with
// nanoseconds, which loses them as before.
func TestTimesOutsideTheStoredRange(t *testing.T) {
	st := openTemp(t, nil)
	ctx := t.Context()
	far := []time.Time{time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC)}
	edges := []time.Time{time.UnixMicro(math.MinInt64).UTC(), time.UnixMicro(math.MaxInt64).UTC(), testTime.Add(789 * time.Nanosecond)}
	refused := func(what string, err error, field string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Fatalf("%s: %v; want an error naming %s", what, err, field)
		}
	}
	readBack := func(what string, got, want time.Time) {
		t.Helper()
		if !got.Equal(want.Truncate(time.Microsecond)) {
			t.Fatalf("%s: read back %v, want %v", what, got, want)
		}
	}
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "t", CreatedAt: testTime}); err != nil {
		t.Fatal(err)
	}
	for i, at := range far {
		what := fmt.Sprint("time ", at.Year())
		id := fmt.Sprint("far", i)
		refused(what+" as a thread's CreatedAt", st.CreateThread(ctx, &toolrun.Thread{ID: id, CreatedAt: at}), "CreatedAt")
		refused(what+" as a thread's TerminatedAt", st.CreateThread(ctx, &toolrun.Thread{ID: id, CreatedAt: testTime, TerminatedAt: at}), "TerminatedAt")
		if _, err := st.GetThread(ctx, id); !errors.Is(err, toolrun.ErrNotFound) {
			t.Fatalf("GetThread after refused CreateThreads: %v, want ErrNotFound", err)
		}
		refused(what+" as TerminatedAt in UpdateThread", st.UpdateThread(ctx, &toolrun.Thread{ID: "t", AgentID: "changed", TerminatedAt: at}), "TerminatedAt")
		if th, err := st.GetThread(ctx, "t"); err != nil || th.AgentID != "" || !th.TerminatedAt.IsZero() {
			t.Fatalf("GetThread after a refused UpdateThread: %+v, %v; want the thread unchanged", th, err)
		}
		plain := &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleUser}
		refused(what+" as a message's CreatedAt", st.AppendMessages(ctx, "t", plain, &toolrun.Message{ID: testID(), CreatedAt: at, Role: toolrun.RoleUser}), "CreatedAt")
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
	for i, at := range edges {
		what := fmt.Sprint("time ", at)
		id := fmt.Sprint("edge", i)
		if err := st.CreateThread(ctx, &toolrun.Thread{ID: id, CreatedAt: at, TerminatedAt: at}); err != nil {
			t.Fatalf("%s: CreateThread: %v", what, err)
		}
		th, err := st.GetThread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		readBack(what+" as a thread's CreatedAt", th.CreatedAt, at)
		readBack(what+" as a thread's TerminatedAt", th.TerminatedAt, at)
		if err := st.AppendMessages(ctx, id, &toolrun.Message{ID: testID(), CreatedAt: at, Role: toolrun.RoleUser}); err != nil {
			t.Fatalf("%s: AppendMessages: %v", what, err)
		}
		page, err := st.ListMessages(ctx, id, toolrun.MessageQuery{})
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("%s: ListMessages: %d messages, %v", what, len(page.Messages), err)
		}
		readBack(what+" as a message's CreatedAt", page.Messages[0].CreatedAt, at)
		if _, err := st.WriteFile(ctx, id, toolrun.FileInfo{Path: "/f", CreatedAt: at, UpdatedAt: at}, []byte("x")); err != nil {
			t.Fatalf("%s: WriteFile: %v", what, err)
		}
		f, err := st.StatFile(ctx, id, "/f")
		if err != nil {
			t.Fatal(err)
		}
		readBack(what+" as a file's CreatedAt", f.CreatedAt, at)
		readBack(what+" as a file's UpdatedAt", f.UpdatedAt, at)
		if err := st.PutChild(ctx, toolrun.ChildEntry{ParentID: id, Reference: "c", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatalf("%s: PutChild: %v", what, err)
		}
		c, err := st.Child(ctx, id, "c")
		if err != nil {
			t.Fatal(err)
		}
		readBack(what+" as a child's CreatedAt", c.CreatedAt, at)
		readBack(what+" as a child's UpdatedAt", c.UpdatedAt, at)
	}
}

// A child entry's ParentID and Reference are its key columns, whatever its
// JSON body says (user SQL may have written one without them), and a body
// that does not decode, or a time column of another type, fails Child and
// Children with an error naming the entry.
func TestChildBodyFromUserSQL(t *testing.T) {
	st := openTemp(t, nil)
	ctx := t.Context()
	for _, ref := range []string{"a", "b"} {
		if err := st.PutChild(ctx, toolrun.ChildEntry{ParentID: "p", Reference: ref, Name: "n-" + ref, CreatedAt: testTime, UpdatedAt: testTime}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(ref, body string) {
		t.Helper()
		if _, err := st.DB().ExecContext(ctx, `UPDATE children SET body = ? WHERE parent_id = 'p' AND reference = ?`, body, ref); err != nil {
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
	set("b", `{not json`)
	if _, err := st.Child(ctx, "p", "b"); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Errorf("Child of a body that does not decode: %v; want an error naming the entry", err)
	}
	if _, err := st.Children(ctx, "p"); err == nil || !strings.Contains(err.Error(), `decode entry "b"`) {
		t.Errorf("Children with a body that does not decode: %v; want an error naming the entry", err)
	}
	set("b", `{}`)
	if _, err := st.DB().ExecContext(ctx, `UPDATE children SET updated_at = 'later' WHERE reference = 'b'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Children(ctx, "p"); err == nil || !strings.Contains(err.Error(), `decode entry "b"`) {
		t.Errorf("Children with a time that is not an integer: %v; want an error naming the entry", err)
	}
}
