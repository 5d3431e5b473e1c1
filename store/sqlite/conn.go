package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ncruces/go-sqlite3"

	"github.com/toolrun/toolrun"
)

// writer is the connection a Store's writes run on, and what those writes
// keep on it: statements prepared through SQLite's own API (for appends)
// and the WAL checkpoint policy. Every method except init runs under the
// Store's wmu.
//
// When the pool may open more than one connection, the Store takes one out
// of the pool for its whole life (conn): writes never wait for a pooled
// connection, and statements prepared on it stay valid. A pool of one
// connection (Exclusive, ":memory:", or a caller's db limited to one) is
// not held: each write checks that connection out, so reads and DB() keep
// working; its statements stay prepared on it between writes.
type writer struct {
	db   *sql.DB
	conn *sql.Conn // held for the Store's life; nil with a one-connection pool
	q    querier   // conn, or db

	c    *sqlite3.Conn                  // the connection the statements below belong to
	ins  [insertChunk + 1]*sqlite3.Stmt // INSERT of n messages
	last *sqlite3.Stmt                  // the thread's last Seq

	// Background checkpoints (Open's default mode only; see committed).
	bg       bool
	pages    int // WAL size in pages after the last commit on c (WAL hook)
	kick     chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	running  atomic.Bool // a background checkpoint is under way
	finished atomic.Bool // one finished since the last inline catch-up
}

// errNotNcruces is returned by New for a database of another driver.
var errNotNcruces = errors.New("the database's driver is not github.com/ncruces/go-sqlite3/driver")

// checkDriver returns errNotNcruces unless db's connections are the
// ncruces driver's, before anything runs on it.
func checkDriver(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if _, ok := dc.(interface{ Raw() *sqlite3.Conn }); !ok {
			return errNotNcruces
		}
		return nil
	})
}

func (w *writer) init(ctx context.Context, db *sql.DB, bg bool) error {
	w.db, w.q = db, db
	if db.Stats().MaxOpenConnections != 1 {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		w.conn, w.q = conn, conn
	}
	err := w.raw(ctx, func(c *rawConn) error {
		if bg && w.conn != nil {
			// The hook replaces SQLite's automatic checkpoint on this
			// connection (wal_autocheckpoint); committed decides instead.
			c.c.WALHook(func(_ *sqlite3.Conn, _ string, pages int) error {
				w.pages = pages
				return nil
			})
			w.bg = true
		}
		return nil
	})
	if err != nil {
		if w.conn != nil {
			w.conn.Close()
		}
		return err
	}
	if w.bg {
		w.kick, w.done = make(chan struct{}, 1), make(chan struct{})
		w.wg.Add(1)
		go w.checkpointer()
	}
	return nil
}

// raw runs fn on the write connection's *sqlite3.Conn, with ctx
// interrupting its statements.
func (w *writer) raw(ctx context.Context, fn func(c *rawConn) error) error {
	conn := w.conn
	if conn == nil {
		var err error
		if conn, err = w.db.Conn(ctx); err != nil {
			return err
		}
		defer conn.Close()
	}
	return conn.Raw(func(dc any) error {
		d, ok := dc.(interface{ Raw() *sqlite3.Conn })
		if !ok {
			return errNotNcruces
		}
		c := d.Raw()
		if c != w.c {
			// Another connection than the statements were prepared on:
			// database/sql closed the old one (a one-connection pool only);
			// its close failed while statements were open, so finish it.
			if old := w.c; old != nil {
				w.finalize()
				old.Close()
			}
			w.c = c
		}
		defer c.SetInterrupt(c.SetInterrupt(ctx))
		return fn(&rawConn{w: w, c: c})
	})
}

// finalize closes the prepared statements.
func (w *writer) finalize() {
	for i, st := range w.ins {
		if st != nil {
			st.Close()
			w.ins[i] = nil
		}
	}
	if w.last != nil {
		w.last.Close()
		w.last = nil
	}
}

// close stops background checkpoints, closes the statements and gives the
// held connection back.
func (w *writer) close() error {
	if w.bg {
		close(w.done)
		w.wg.Wait()
		w.bg = false
	}
	if w.c == nil && w.conn == nil {
		return nil
	}
	err := w.raw(context.Background(), func(*rawConn) error {
		w.finalize()
		return nil
	})
	w.c = nil
	if w.conn != nil {
		err = errors.Join(err, w.conn.Close())
		w.conn = nil
	}
	return err
}

// committed runs after each successful write. In the default mode of Open
// the WAL is checkpointed in the background instead of inside the commit
// that crosses walAutoCheckpoint pages, as SQLite would: a checkpoint
// fsyncs the WAL and the database file, the dearest part of it being the
// fsync of the megabytes written to the WAL since the last one, and it
// would otherwise stall every few thousandth write for milliseconds.
//
// A passive checkpoint on another connection copies what the WAL holds
// while writes go on, but a WAL can only start again from its beginning
// once every frame in it is checkpointed, which a background checkpoint
// racing a busy writer seldom achieves. So once one has finished, the next
// write finishes the job inline: a checkpoint of the few frames appended
// meanwhile (little to fsync), after which SQLite restarts the WAL at the
// next write. Past walHardLimit pages (a background checkpoint blocked,
// say, by a long read) the write checkpoints inline whatever happens.
// Durability does not depend on checkpoints: a commit is in the WAL.
func (w *writer) committed(ctx context.Context) {
	if !w.bg {
		return
	}
	if w.pages < walAutoCheckpoint {
		w.finished.Store(false)
		return
	}
	if w.pages >= walHardLimit || w.finished.Swap(false) {
		w.pages = 0
		_, _ = w.q.ExecContext(context.WithoutCancel(ctx), `PRAGMA wal_checkpoint(PASSIVE)`)
		return
	}
	if !w.running.Swap(true) {
		w.kick <- struct{}{}
	}
}

// walHardLimit is the WAL size, in pages, from which writes checkpoint
// inline even while a background checkpoint runs.
const walHardLimit = 4 * walAutoCheckpoint

// checkpointer runs the background checkpoints committed asks for.
func (w *writer) checkpointer() {
	defer w.wg.Done()
	for {
		select {
		case <-w.done:
			return
		case <-w.kick:
		}
		_, _ = w.db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`)
		w.finished.Store(true)
		w.running.Store(false)
	}
}

// rawConn is the write connection during one raw call.
type rawConn struct {
	w *writer
	c *sqlite3.Conn
}

// prepare returns *slot, preparing query into it first if needed.
func (c *rawConn) prepare(slot **sqlite3.Stmt, query func() string) (*sqlite3.Stmt, error) {
	if *slot != nil {
		return *slot, nil
	}
	st, _, err := c.c.Prepare(query())
	if err != nil {
		return nil, err
	}
	*slot = st
	return st, nil
}

// lastSeq returns the thread's highest Seq, 0 when it has no messages.
func (c *rawConn) lastSeq(threadID string) (int64, error) {
	st, err := c.prepare(&c.w.last, func() string {
		return `SELECT seq FROM messages WHERE thread_id = ? ORDER BY seq DESC LIMIT 1`
	})
	if err != nil {
		return 0, err
	}
	if err := st.BindText(1, threadID); err != nil {
		return 0, err
	}
	var last int64
	if st.Step() {
		last = st.ColumnInt64(0)
	}
	return last, st.Reset()
}

// insertSQL is the INSERT of n messages: the thread id is ?1, then msgCols
// values per message. It reads no messages and returns no rows, so SQLite
// needs no temporary table for it; it inserts nothing when the thread does
// not exist.
func insertSQL(n int) string {
	var q strings.Builder
	q.WriteString(`INSERT INTO messages (thread_id, ` + msgColumns + `) SELECT ?1`)
	for c := range msgCols {
		q.WriteString(", column")
		q.WriteString(strconv.Itoa(c + 1))
	}
	q.WriteString(` FROM (VALUES `)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(msgPlaceholders)
	}
	q.WriteString(`) WHERE EXISTS (SELECT 1 FROM threads WHERE id = ?1)`)
	return q.String()
}

// insert inserts rows numbered from base+1 in one statement. Nothing is
// inserted, and ErrNotFound returned, when the thread does not exist.
func (c *rawConn) insert(threadID string, base int64, rows []msgRow) error {
	n := len(rows)
	st, err := c.prepare(&c.w.ins[n], func() string { return insertSQL(n) })
	if err != nil {
		return err
	}
	b := binder{st: st}
	b.text(1, threadID)
	for i, r := range rows {
		p, m := 2+i*msgCols, r.m
		b.int(p, base+int64(i)+1)
		b.text(p+1, m.ID)
		b.text(p+2, string(m.Role))
		b.text(p+3, m.ToolCallID)
		b.int(p+4, int64(m.Depth))
		b.bool(p+5, m.Silent)
		b.int(p+6, r.created)
		b.text(p+7, m.Content)
		b.text(p+8, m.Name)
		b.text(p+9, string(m.ToolStatus))
		b.text(p+10, m.ParentID)
		b.text(p+11, m.Prompt)
		b.text(p+12, m.SubagentID)
		b.text(p+13, m.Side)
		b.text(p+14, m.CallDigest)
		if r.extra == nil {
			b.null(p + 15)
		} else {
			b.text(p+15, *r.extra)
		}
	}
	if b.err == nil {
		b.err = st.Exec()
	}
	// Do not keep the values (contents may be large) until the next append.
	st.ClearBindings()
	if b.err != nil {
		return mapInsertErr(b.err)
	}
	if k := c.c.Changes(); k != int64(n) {
		if k == 0 {
			return toolrun.ErrNotFound
		}
		return fmt.Errorf("inserted %d of %d messages", k, n)
	}
	return nil
}

// tx runs fn in an IMMEDIATE transaction.
func (c *rawConn) tx(fn func() error) error {
	if err := c.c.Exec(`BEGIN IMMEDIATE`); err != nil {
		return err
	}
	if err := fn(); err != nil {
		c.rollback()
		return err
	}
	if err := c.c.Exec(`COMMIT`); err != nil {
		c.rollback()
		return err
	}
	return nil
}

// rollback ends the open transaction, if any, even when the context of the
// write has ended: Conn.Exec refuses to run anything once the interrupt
// context is done, which would leave the write connection inside the
// transaction (holding the write lock, every later write uncommitted).
func (c *rawConn) rollback() {
	if c.c.GetAutocommit() {
		return // SQLite already rolled back (an interrupted write does)
	}
	defer c.c.SetInterrupt(c.c.SetInterrupt(context.Background()))
	c.c.Exec(`ROLLBACK`)
}

// binder binds parameters, keeping the first error.
type binder struct {
	st  *sqlite3.Stmt
	err error
}

func (b *binder) text(i int, v string) {
	if b.err == nil {
		b.err = b.st.BindText(i, v)
	}
}

func (b *binder) int(i int, v int64) {
	if b.err == nil {
		b.err = b.st.BindInt64(i, v)
	}
}

func (b *binder) bool(i int, v bool) {
	if b.err == nil {
		b.err = b.st.BindBool(i, v)
	}
}

func (b *binder) null(i int) {
	if b.err == nil {
		b.err = b.st.BindNull(i)
	}
}
