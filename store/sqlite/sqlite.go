// Package sqlite is a durable [toolrun.Store] in one SQLite database file,
// for a program that runs on one machine.
//
// It uses github.com/ncruces/go-sqlite3, a pure-Go (no cgo) build of SQLite,
// through that library's own entry point (driver.Open), so it does not
// depend on the name a database/sql driver is registered under.
//
//	st, err := sqlite.Open("toolrun.db", nil)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st})
//
// # Durability
//
// The database runs in WAL mode. With the default Options.Synchronous
// (SyncNormal) a write that returned survives a crash of the process (kill
// -9, panic) but the last commits may be lost if the machine loses power;
// SyncFull makes every commit survive power loss too, at a few times the
// cost per write. Every AppendMessages call is one transaction: all its
// messages are stored or none.
//
// # Schema
//
// Open and New create or upgrade the schema to [SchemaVersion], recording
// applied versions in the schema_version table. The one-result-per-tool-call
// rule is a unique index of the database, so it holds for every process that
// writes to the file. Version 3 gives Thread.Arguments and SessionTurns and
// Message.Side and CallDigest columns and moves what older builds kept in
// message metadata (error details, queued calls, the side), thread
// properties (arguments, session turns) and free child statuses (now
// ChildEntry.Report) into the typed fields; a caller's own keys stay.
//
// The Store keeps records as given (see toolrun.Store): it makes no ids
// and reads no clock for them; it refuses a message without ID or
// CreatedAt and a thread without ID. It also refuses, with an error
// wrapping toolrun.ErrUnstorable, a record holding a value that nests
// arrays and objects more than 10,000 deep (thread arguments or
// properties, message metadata or error data, child initial arguments):
// encoding/json writes such a value but cannot read it back.
//
// Times are stored as Unix microseconds in 64 bits: a time more than about
// 292,000 years from 1970 is refused, with an error naming its field.
//
// # Secrets
//
// Secret env values (every [toolrun.EnvValue] whose Type is not
// [toolrun.VarText]; an unset type means secret) are encrypted at rest with
// AES-256-GCM under the key ring of Options.Keys (package store/keyring):
// the value column holds sealed text that names the key id and opens only
// in its own row. Nothing else is encrypted: messages, values, files,
// thread records, env names and types, and text values are stored as
// given. Without keys, SetEnv refuses a secret value with an error that
// wraps keyring.ErrNoKey and names the fix, unless
// Options.PlaintextSecrets allows plain text.
//
// A stored value that cannot be decrypted with the configured keys (its key
// is not in the ring, the key under its id is another one, or the row was
// altered or copied from another row) makes GetEnv and ListEnv fail with an
// error that names the variable and the key id and wraps
// keyring.ErrDecrypt (and keyring.ErrUnknownKey for a missing key); ListEnv
// then fails as a whole rather than return the owner's env without that
// value. A secret stored in plain text (by a build before encryption, or
// with PlaintextSecrets) is recognised as such and stays readable;
// [Store.ReencryptSecrets] encrypts it, and after a key rotation seals
// every value again with the ring's first key. Schema version 2 marks a
// database that may hold sealed values: builds before encryption, which
// would take the sealed text for the value, refuse to open it.
//
// # Linking another SQLite driver
//
// Importing github.com/ncruces/go-sqlite3/driver registers a database/sql
// driver named "sqlite3", which collides with other SQLite drivers (such as
// mattn/go-sqlite3) that register the same name. Build with
//
//	-ldflags=-X=github.com/ncruces/go-sqlite3/driver.driverName=
//
// (or any other name) to skip or rename that registration; this package
// keeps working because it never opens the database by driver name.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/internal/envcrypt"
	"github.com/toolrun/toolrun/store/internal/jsondepth"
	"github.com/toolrun/toolrun/store/keyring"
)

// Synchronous is an SQLite PRAGMA synchronous level (a plain value).
type Synchronous string

// The supported synchronous levels.
const (
	// SyncNormal (the default) makes commits survive a process crash; in
	// WAL mode the last commits may be lost on power loss.
	SyncNormal Synchronous = "NORMAL"
	// SyncFull also makes every commit survive power loss.
	SyncFull Synchronous = "FULL"
)

// Options configure a Store. A nil *Options means defaults. Open reads it
// once; it is not retained (the Keys ring is, and is immutable).
type Options struct {
	// Synchronous is the durability level of commits; "" means SyncNormal.
	// Open applies it to every connection; New leaves the connections of
	// the given *sql.DB as they are.
	Synchronous Synchronous
	// BusyTimeout is how long a statement waits for a lock held by another
	// connection or process before failing; 0 means 10 seconds. Open only.
	BusyTimeout time.Duration
	// Exclusive keeps the database locked by this Store for as long as it is
	// open (PRAGMA locking_mode=EXCLUSIVE) and uses one connection. No other
	// process can then open the file, and reads wait for writes, but every
	// transaction skips the shared-memory locking of WAL mode: small reads
	// and writes take about half the time. Appends gain little (WAL
	// checkpoints then run inside the commits, not in the background).
	// Open only.
	Exclusive bool
	// Keys encrypts secret env values at rest: the ring's first key seals
	// the values SetEnv writes, every key of it opens stored ones (see
	// Secrets in the package doc). nil means no keys: SetEnv then refuses
	// secret values, unless PlaintextSecrets is set.
	Keys *keyring.Ring
	// PlaintextSecrets lets a Store without Keys store secret env values
	// unencrypted, as builds before encryption did. It is meant for
	// development and tests; it may not be combined with Keys.
	PlaintextSecrets bool
}

// Store is a toolrun.Store in an SQLite database. It is safe for concurrent
// use; several processes may also open the same file.
type Store struct {
	db      *sql.DB
	owned   bool             // Close closes db
	wmu     sync.Mutex       // serialises this process's writes
	seqs    map[string]int64 // thread → last Seq this Store wrote or read; under wmu
	w       writer           // the connection writes run on
	readers readers          // the connections pages of messages are read on

	cmu    sync.Mutex
	counts map[countKey]countEntry // message counts per thread and filter
	closed sync.Once
	cerr   error
	stmts  sync.Map // query text → *sql.Stmt, reads (on db)
	wstmts sync.Map // query text → *sql.Stmt, writes (on w.q)

	env envcrypt.Policy // how env values are stored
}

var _ toolrun.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, configures
// WAL mode, the synchronous level and the busy timeout on every connection,
// and applies schema migrations. The path ":memory:" opens a private
// in-memory database (one connection, gone on Close). path may also be an
// SQLite "file:" URI. Close the Store when done.
//
// The file is opened through a VFS this package registers as "toolrun-wal":
// the driver's own, except that it writes each WAL frame with one system
// call instead of two (see walVFS); the files are SQLite's usual format, so
// other programs may open them as they are. A URI that names its own vfs
// keeps it.
func Open(path string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	env, err := envcrypt.New(opts.Keys, opts.PlaintextSecrets)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	level := opts.Synchronous
	if level == "" {
		level = SyncNormal
	}
	if level != SyncNormal && level != SyncFull {
		return nil, fmt.Errorf("sqlite: unsupported Synchronous %q", level)
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	memory := path == "" || path == ":memory:"
	if memory {
		path = ":memory:"
	}
	db, err := driver.Open(walURI(path), func(c *sqlite3.Conn) error {
		if err := c.BusyTimeout(busy); err != nil {
			return err
		}
		pragmas := "PRAGMA journal_mode=WAL;"
		if memory {
			pragmas = ""
		}
		if opts.Exclusive {
			pragmas = "PRAGMA locking_mode=EXCLUSIVE;" + pragmas
		}
		// A checkpoint (WAL copied into the database file, both fsynced)
		// runs in the commit that crosses wal_autocheckpoint pages; each
		// costs a fixed part (the fsyncs) that a larger interval spreads
		// over more appends: 4000 pages (16 MiB of WAL with 4 KiB pages,
		// instead of SQLite's 1000) measured ~10 % cheaper single appends,
		// reads unchanged. Durability is unchanged: a commit is in the WAL
		// either way. (In the default mode the Store's own write
		// connection checkpoints in the background instead; see
		// writer.committed. The setting still applies to writes made
		// through DB().)
		return c.Exec(pragmas + "PRAGMA synchronous=" + string(level) + "; PRAGMA foreign_keys=ON; PRAGMA wal_autocheckpoint=" + fmt.Sprint(walAutoCheckpoint) + ";")
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if memory || opts.Exclusive {
		db.SetMaxOpenConns(1)
	}
	s, err := newStore(db, true, !memory && !opts.Exclusive, env)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

// New returns a Store on an open database of
// github.com/ncruces/go-sqlite3/driver (from its Open, or sql.Open with its
// driver name), after applying schema migrations. It does not change the
// connections' settings: configure WAL mode, synchronous and busy timeout
// yourself. Unless db is limited to one connection, the Store keeps one of
// its connections for its writes until it is closed, and up to one per
// processor (at most 4, and never more than the pool's limit less two) for
// reading pages of messages. Close the Store before
// db; closing the Store does not close db. opts may be nil; of its fields
// only Keys and PlaintextSecrets apply.
func New(db *sql.DB, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	env, err := envcrypt.New(opts.Keys, opts.PlaintextSecrets)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	s, err := newStore(db, false, false, env)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return s, nil
}

// newStore migrates db and sets up the write connection; bgCheckpoint
// moves WAL checkpoints off the write path (see writer).
func newStore(db *sql.DB, owned, bgCheckpoint bool, env envcrypt.Policy) (*Store, error) {
	ctx := context.Background()
	if err := db.PingContext(ctx); err != nil {
		return nil, err
	}
	if err := checkDriver(ctx, db); err != nil {
		return nil, err
	}
	if err := migrate(ctx, db); err != nil {
		return nil, fmt.Errorf("migrate schema: %w", err)
	}
	s := &Store{db: db, owned: owned, env: env}
	if err := s.w.init(ctx, db, bgCheckpoint); err != nil {
		return nil, err
	}
	s.readers.init(db, s.w.conn != nil)
	return s, nil
}

// walAutoCheckpoint is the WAL size, in pages, at which a commit
// checkpoints (PRAGMA wal_autocheckpoint) on connections Open configures.
const walAutoCheckpoint = 4000

// DB returns the underlying database, for backups and inspection.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database if Open opened it. It may be called more than
// once.
func (s *Store) Close() error {
	s.closed.Do(func() {
		s.cerr = s.readers.close()
		for _, m := range []*sync.Map{&s.stmts, &s.wstmts} {
			m.Range(func(_, st any) bool {
				st.(*sql.Stmt).Close()
				return true
			})
		}
		s.wmu.Lock()
		s.cerr = errors.Join(s.cerr, s.w.close())
		s.wmu.Unlock()
		if s.owned {
			s.cerr = errors.Join(s.cerr, s.db.Close())
		}
	})
	return s.cerr
}

// Every write is one SQL statement, atomic on its own, run without an
// explicit transaction: BEGIN and COMMIT would cost as much as the write.
// Writes of this process are serialised by wmu; writers in other processes
// wait through the busy timeout.
//
// Preparing is the costliest step of a small statement, so every query is
// prepared once and cached (database/sql keeps one prepared copy per
// connection).

// querier is what *sql.DB and *sql.Conn have in common.
type querier interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// prepared returns the cached prepared statement of query on q, or nil
// when preparing fails (the query then runs unprepared and reports the
// error).
func prepared(ctx context.Context, q querier, cache *sync.Map, query string) *sql.Stmt {
	if st, ok := cache.Load(query); ok {
		return st.(*sql.Stmt)
	}
	st, err := q.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if prev, loaded := cache.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt)
	}
	return st
}

// exec runs a write statement on the write connection; callers hold wmu
// (through write).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := prepared(ctx, s.w.q, &s.wstmts, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return s.w.q.ExecContext(ctx, query, args...)
}

// execRow runs a write statement that returns a row on the write
// connection; callers hold wmu.
func (s *Store) execRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := prepared(ctx, s.w.q, &s.wstmts, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.w.q.QueryRowContext(ctx, query, args...)
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := prepared(ctx, s.db, &s.stmts, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.db.QueryRowContext(ctx, query, args...)
}

func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := prepared(ctx, s.db, &s.stmts, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.db.QueryContext(ctx, query, args...)
}

// write runs fn, one writer of this process at a time. A statement whose
// snapshot another process's commit made stale (SQLITE_BUSY_SNAPSHOT) has
// changed nothing and is retried.
func (s *Store) write(ctx context.Context, fn func() error) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	for i := 0; ; i++ {
		err := fn()
		if err == nil {
			s.w.committed(ctx)
		}
		if err == nil || i >= 100 || !errors.Is(err, sqlite3.BUSY_SNAPSHOT) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(i+1) * time.Millisecond):
		}
	}
}

// micros returns t as it is stored: Unix microseconds, precision below a
// microsecond dropped. The zero time is stored as its own (negative) value,
// so it comes back zero. A time that microseconds in an int64 cannot hold
// (about 292,000 years either side of 1970) is refused with an error that
// names field, where t.UnixMicro would overflow into another time.
func micros(t time.Time, field string) (int64, error) {
	us := t.UnixMicro()
	if !time.UnixMicro(us).Equal(t.Truncate(time.Microsecond)) {
		return 0, fmt.Errorf("%s %s is outside the times the store can hold (Unix microseconds in 64 bits, about 292,000 years either side of 1970)",
			field, t.Format(time.RFC3339Nano))
	}
	return us, nil
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// nullMicros is micros, with NULL for the zero time.
func nullMicros(t time.Time, field string) (sql.NullInt64, error) {
	if t.IsZero() {
		return sql.NullInt64{}, nil
	}
	us, err := micros(t, field)
	return sql.NullInt64{Int64: us, Valid: err == nil}, err
}

// jsonOrNull encodes v, or returns NULL for an empty map or slice. It
// refuses a value nested too deeply to decode (see jsondepth.TooDeep).
func jsonOrNull(v any, empty bool) (sql.NullString, error) {
	if empty {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, err
	}
	if _, deep := jsondepth.TooDeep(b); deep {
		return sql.NullString{}, jsondepth.ErrTooDeep
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// ---- threads ----

// CreateThread implements toolrun.ThreadStore.
func (s *Store) CreateThread(ctx context.Context, t *toolrun.Thread) error {
	if t.ID == "" {
		return errors.New("sqlite: create thread: the thread has no ID")
	}
	args, props, tags, err := threadJSON(t)
	var created int64
	var terminated sql.NullInt64
	if err == nil {
		created, err = micros(t.CreatedAt, "CreatedAt")
	}
	if err == nil {
		terminated, err = nullMicros(t.TerminatedAt, "TerminatedAt")
	}
	if err != nil {
		return fmt.Errorf("sqlite: create thread %q: %w", t.ID, err)
	}
	err = s.write(ctx, func() error {
		res, err := s.exec(ctx, `INSERT INTO threads (id, agent_id, user_id, parent_id, arguments, session_turns, properties, tags, created_at, terminated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			t.ID, t.AgentID, t.UserID, t.ParentID, args, t.SessionTurns, props, tags, created, terminated)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return toolrun.ErrThreadExists
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: create thread %q: %w", t.ID, err)
	}
	return nil
}

// threadJSON encodes the JSON columns of a thread, NULL for nil.
func threadJSON(t *toolrun.Thread) (args, props, tags sql.NullString, err error) {
	if args, err = jsonOrNull(t.Arguments, t.Arguments == nil); err != nil {
		return args, props, tags, fmt.Errorf("arguments: %w", err)
	}
	if props, err = jsonOrNull(t.Properties, t.Properties == nil); err != nil {
		return args, props, tags, fmt.Errorf("properties: %w", err)
	}
	if tags, err = jsonOrNull(t.Tags, t.Tags == nil); err != nil {
		return args, props, tags, fmt.Errorf("tags: %w", err)
	}
	return args, props, tags, nil
}

// GetThread implements toolrun.ThreadStore.
func (s *Store) GetThread(ctx context.Context, id string) (*toolrun.Thread, error) {
	var (
		t                 = toolrun.Thread{ID: id}
		args, props, tags sql.NullString
		created           int64
		terminated        sql.NullInt64
	)
	err := s.queryRow(ctx, `SELECT agent_id, user_id, parent_id, arguments, session_turns, properties, tags, created_at, terminated_at
		FROM threads WHERE id = ?`, id).Scan(&t.AgentID, &t.UserID, &t.ParentID, &args, &t.SessionTurns, &props, &tags, &created, &terminated)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get thread %q: %w", id, err)
	}
	t.CreatedAt = fromMicros(created)
	if terminated.Valid {
		t.TerminatedAt = fromMicros(terminated.Int64)
	}
	if args.Valid {
		if err := json.Unmarshal([]byte(args.String), &t.Arguments); err != nil {
			return nil, fmt.Errorf("sqlite: get thread %q: arguments: %w", id, err)
		}
	}
	if props.Valid {
		if err := json.Unmarshal([]byte(props.String), &t.Properties); err != nil {
			return nil, fmt.Errorf("sqlite: get thread %q: properties: %w", id, err)
		}
	}
	if tags.Valid {
		if err := json.Unmarshal([]byte(tags.String), &t.Tags); err != nil {
			return nil, fmt.Errorf("sqlite: get thread %q: tags: %w", id, err)
		}
	}
	return &t, nil
}

// UpdateThread implements toolrun.ThreadStore.
func (s *Store) UpdateThread(ctx context.Context, t *toolrun.Thread) error {
	args, props, tags, err := threadJSON(t)
	var terminated sql.NullInt64
	if err == nil {
		terminated, err = nullMicros(t.TerminatedAt, "TerminatedAt")
	}
	if err != nil {
		return fmt.Errorf("sqlite: update thread %q: %w", t.ID, err)
	}
	err = s.write(ctx, func() error {
		res, err := s.exec(ctx, `UPDATE threads SET agent_id = ?, user_id = ?, parent_id = ?, arguments = ?, session_turns = ?,
			properties = ?, tags = ?, terminated_at = ? WHERE id = ?`,
			t.AgentID, t.UserID, t.ParentID, args, t.SessionTurns, props, tags, terminated, t.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return toolrun.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: update thread %q: %w", t.ID, err)
	}
	return nil
}

// ---- messages ----

// AppendMessages implements toolrun.MessageStore. All messages are written
// by one INSERT statement, so they are stored together or not at all; the
// statement numbers them after the thread's highest Seq, and the unique
// index on tool results refuses a duplicate.
//
// The statement runs on the write connection through SQLite's own API (a
// prepared statement bound column by column), not database/sql: that
// skips boxing every value into an interface and database/sql's conversion
// of each, a measurable part of a single-message append.
func (s *Store) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	// Prepare everything outside the write lock; write back only on success.
	rows := make([]msgRow, len(msgs))
	for i, m := range msgs {
		if m.ID == "" {
			return fmt.Errorf("sqlite: append to thread %q: message %d has no ID", threadID, i)
		}
		if m.CreatedAt.IsZero() {
			return fmt.Errorf("sqlite: append to thread %q: message %d (%s) has no CreatedAt", threadID, i, m.ID)
		}
		if m.Depth < 0 || m.Depth > math.MaxInt32 {
			return fmt.Errorf("sqlite: append to thread %q: message %d (%s) has depth %d, outside 0 to %d", threadID, i, m.ID, m.Depth, math.MaxInt32)
		}
		r := &rows[i]
		created, err := micros(m.CreatedAt, "CreatedAt")
		if err != nil {
			return fmt.Errorf("sqlite: append to thread %q: message %d (%s): %w", threadID, i, m.ID, err)
		}
		extra, err := encodeExtra(m)
		if err != nil {
			return fmt.Errorf("sqlite: append to thread %q: encode message %d (%s): %w", threadID, i, m.ID, err)
		}
		r.m, r.created, r.extra = m, created, extra
	}
	var base int64
	err := s.write(ctx, func() error {
		if len(msgs) == 0 {
			var one int
			err := s.queryRow(ctx, `SELECT 1 FROM threads WHERE id = ?`, threadID).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return toolrun.ErrNotFound
			}
			return err
		}
		return s.w.raw(ctx, func(c *rawConn) error {
			if len(msgs) <= insertChunk {
				// Optimistic: the thread's last Seq comes from the cache of
				// this process's appends, or the database. Another process
				// may have appended since; every writer numbers from the
				// last Seq up, so ours then collide on the primary key,
				// nothing of ours is stored, and we read the last Seq again.
				last, cached := s.seqs[threadID]
				for attempt := 0; ; attempt++ {
					var err error
					if !cached {
						if last, err = c.lastSeq(threadID); err != nil {
							return err
						}
					}
					err = c.insert(threadID, last, rows)
					if errors.Is(err, sqlite3.CONSTRAINT_PRIMARYKEY) && attempt < 100 {
						cached = false
						continue
					}
					if err != nil {
						delete(s.seqs, threadID)
						return err
					}
					base = last
					s.cacheSeq(threadID, last+int64(len(msgs)))
					return nil
				}
			}
			// Very long appends: one IMMEDIATE transaction of several
			// statements.
			delete(s.seqs, threadID)
			return c.tx(func() error {
				var err error
				if base, err = c.lastSeq(threadID); err != nil {
					return err
				}
				for lo := 0; lo < len(rows); lo += insertChunk {
					if err := c.insert(threadID, base+int64(lo), rows[lo:min(lo+insertChunk, len(rows))]); err != nil {
						return err
					}
				}
				return nil
			})
		})
	})
	if err != nil {
		return fmt.Errorf("sqlite: append to thread %q: %w", threadID, err)
	}
	for i, m := range msgs {
		m.Seq = base + int64(i) + 1
	}
	return nil
}

// insertChunk is the most messages one INSERT statement carries; longer
// appends use an explicit transaction.
const insertChunk = 100

// msgRow is a message ready to insert: the caller's message and the
// values AppendMessages encoded for it.
type msgRow struct {
	m       *toolrun.Message
	created int64   // CreatedAt in Unix microseconds
	extra   *string // JSON of the fields without a column; nil = NULL
}

// cacheSeq remembers the last Seq of a thread; callers hold wmu.
func (s *Store) cacheSeq(threadID string, last int64) {
	if s.seqs == nil || len(s.seqs) >= 4096 {
		s.seqs = make(map[string]int64)
	}
	s.seqs[threadID] = last
}

func mapInsertErr(err error) error {
	if errors.Is(err, sqlite3.CONSTRAINT_UNIQUE) {
		return toolrun.ErrDuplicateToolResult
	}
	return err
}

// The message columns, in the order AppendMessages binds and scanMessage
// reads them. The fields without a column — tool calls, attachments,
// error details, queued calls, metadata and any field added to Message
// later — are kept as JSON in extra, NULL when they are all empty: most
// messages (plain tool results and turn messages, whose side and call
// digest have columns) need no JSON at all.
const (
	msgColumns      = `seq, id, role, tool_call_id, depth, silent, created_at, content, name, tool_status, parent_id, prompt, subagent_id, side, call_digest, extra`
	msgCols         = 16
	msgPlaceholders = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

// emptyExtra is the encoding of a message whose fields all have columns.
var emptyExtra, _ = json.Marshal(columnless(&toolrun.Message{}))

// zeroHead and zeroTail are the keys every encoding of a columnless message
// begins and ends with, all zero values of fields that have columns (they
// are not omitempty). extra is stored without them: a row's JSON then holds
// only what it has, and decodes in half the time. Rows stored with them
// (before, or should Message's encoding change) decode all the same.
var (
	zeroHead = []byte(`{"id":"","thread_id":"","seq":0,"role":"","content":"",`)
	zeroTail = []byte(`,"created_at":"0001-01-01T00:00:00Z"}`)
)

// columnless returns m without the fields that have columns.
func columnless(m *toolrun.Message) *toolrun.Message {
	c := *m
	c.ID, c.ThreadID, c.Seq, c.Role, c.Content, c.ToolCallID, c.Name, c.ToolStatus = "", "", 0, "", "", "", "", ""
	c.ParentID, c.Depth, c.Silent, c.Prompt, c.SubagentID, c.CreatedAt = "", 0, false, "", "", time.Time{}
	c.Side, c.CallDigest = "", ""
	return &c
}

// encodeExtra returns the JSON of m's fields without a column, or nil.
// Most messages (every plain tool result) have none of those fields set,
// which a reflect zero check finds without encoding anything; it covers any
// field added to Message later too. A field nested too deeply to decode
// (see jsondepth.TooDeep) is refused with an error naming its JSON key.
func encodeExtra(m *toolrun.Message) (*string, error) {
	c := columnless(m)
	if reflect.ValueOf(c).Elem().IsZero() {
		return nil, nil
	}
	b, err := json.Marshal(c)
	if err != nil || bytes.Equal(b, emptyExtra) {
		return nil, err
	}
	if member, deep := jsondepth.TooDeep(b); deep {
		return nil, fmt.Errorf("%s: %w", member, jsondepth.ErrTooDeep)
	}
	if len(b) > len(zeroHead)+len(zeroTail) && bytes.HasPrefix(b, zeroHead) && bytes.HasSuffix(b, zeroTail) {
		x := "{" + string(b[len(zeroHead):len(b)-len(zeroTail)]) + "}"
		return &x, nil
	}
	x := string(b)
	return &x, nil
}

// scanMessage reads the msgColumns of a row, then extraDest. It refuses a
// row whose integer column holds another type, as rawMessage does.
func scanMessage(threadID string, sc interface{ Scan(...any) error }, extraDest ...any) (toolrun.Message, error) {
	var (
		m            toolrun.Message
		ints         [len(intColumns)]any // seq, depth, silent, created_at
		role, status string
		extra        []byte
	)
	dest := append([]any{&ints[0], &m.ID, &role, &m.ToolCallID, &ints[1], &ints[2], &ints[3],
		&m.Content, &m.Name, &status, &m.ParentID, &m.Prompt, &m.SubagentID, &m.Side, &m.CallDigest, &extra}, extraDest...)
	if err := sc.Scan(dest...); err != nil {
		return m, err
	}
	var v [len(intColumns)]int64
	for i, x := range ints {
		n, ok := x.(int64)
		if !ok {
			return m, errColumnType(v[0], m.ID, i, valueType(x))
		}
		v[i] = n
	}
	m.Seq, m.Depth, m.Silent = v[0], int(v[1]), v[2] != 0
	if extra != nil {
		var x toolrun.Message
		if err := json.Unmarshal(extra, &x); err != nil {
			return m, fmt.Errorf("decode message %d: %w", m.Seq, err)
		}
		m = mergeExtra(m, x)
	}
	m.ThreadID, m.Role, m.ToolStatus, m.CreatedAt = threadID, toolrun.Role(role), toolrun.Status(status), fromMicros(v[3])
	return m, nil
}

// intColumns are the integer columns of msgColumns (their indexes there,
// and names), in the order scanMessage and rawMessage check them. The
// columns are not STRICT: user SQL may store another type in them, which
// both refuse.
var intColumns = [...]struct {
	col  int
	name string
}{{0, "seq"}, {4, "depth"}, {5, "silent"}, {6, "created_at"}}

// errColumnType is the error of a message row whose integer column
// intColumns[i] holds a value of type typ. The row is named by its seq, or
// by its id when the seq is the value in question.
func errColumnType(seq int64, id string, i int, typ sqlite3.Datatype) error {
	if i == 0 {
		return fmt.Errorf("decode message %q: column %s holds %s", id, intColumns[i].name, typ)
	}
	return fmt.Errorf("decode message %d: column %s holds %s", seq, intColumns[i].name, typ)
}

// valueType returns the SQLite type of a value the driver read (it gives
// a TEXT that looks like a time as a time.Time).
func valueType(v any) sqlite3.Datatype {
	switch v.(type) {
	case int64:
		return sqlite3.INTEGER
	case float64:
		return sqlite3.FLOAT
	case []byte:
		return sqlite3.BLOB
	case nil:
		return sqlite3.NULL
	}
	return sqlite3.TEXT
}

// mergeExtra copies into m every field of x (decoded from extra) that has
// no column; fields with a column are zero in x.
func mergeExtra(m, x toolrun.Message) toolrun.Message {
	x.ID, x.Seq, x.Role, x.Content, x.ToolCallID, x.Name, x.ToolStatus = m.ID, m.Seq, m.Role, m.Content, m.ToolCallID, m.Name, m.ToolStatus
	x.ParentID, x.Depth, x.Silent, x.Prompt, x.SubagentID = m.ParentID, m.Depth, m.Silent, m.Prompt, m.SubagentID
	x.Side, x.CallDigest = m.Side, m.CallDigest
	return x
}

// ListMessages implements toolrun.MessageStore.
//
// Total is counted incrementally: Seqs are handed out contiguously and rows
// are never removed, so the Store remembers, per thread and filter, the
// count up to the last Seq it saw, and each query counts only the rows
// appended since (in the same statement as the page, so both see one
// snapshot). The first query of a thread and filter in a process counts all
// its rows once.
//
// A query with After reads only the rows after it (see listAfter).
func (s *Store) ListMessages(ctx context.Context, threadID string, q toolrun.MessageQuery) (toolrun.MessagePage, error) {
	depth, filter := listFilter(q)
	if q.After > 0 {
		return s.listAfter(ctx, threadID, q, depth, filter)
	}
	key := countKey{threadID, q.IncludeSilent, depth}
	s.cmu.Lock()
	known, cached := s.counts[key]
	s.cmu.Unlock()
	tail := `(SELECT count(*) FROM messages WHERE thread_id = ?1 AND seq > ?3` + filter + `),
		coalesce((SELECT seq FROM messages WHERE thread_id = ?1 ORDER BY seq DESC LIMIT 1), 0)`
	dir := "DESC"
	if q.Order == toolrun.OrderAsc {
		dir = "ASC"
	}
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = -1
	}
	off := max(q.Offset, 0)
	var added, last int64
	matching := int64(-1)
	if cached {
		matching = max(known.n-int64(off), 0)
	}
	page, err := s.listPage(ctx, threadID, pageRoom(limit, matching), `SELECT `+msgColumns+`, `+tail+` FROM messages
		WHERE thread_id = ?1`+filter+` ORDER BY seq `+dir+` LIMIT +?4 OFFSET ?5`,
		[]any{threadID, depth, known.last, limit, off}, &added, &last)
	if err == nil && len(page.Messages) == 0 {
		err = s.queryRow(ctx, `SELECT `+tail, threadID, depth, known.last).Scan(&added, &last)
	}
	if err != nil {
		return toolrun.MessagePage{}, fmt.Errorf("sqlite: list messages of thread %q: %w", threadID, err)
	}
	if cached && last < known.last {
		// Not the database the count was taken on (replaced under us):
		// forget every count and start again.
		s.cmu.Lock()
		s.counts = nil
		s.cmu.Unlock()
		return s.ListMessages(ctx, threadID, q)
	}
	page.Total = int(known.n + added)
	s.cmu.Lock()
	if s.counts == nil || len(s.counts) >= 4096 {
		s.counts = make(map[countKey]countEntry)
	}
	s.counts[key] = countEntry{last: last, n: known.n + added}
	s.cmu.Unlock()
	page.HasMore = off+len(page.Messages) < page.Total
	if q.Order == toolrun.OrderDefault {
		slices.Reverse(page.Messages)
	}
	return page, nil
}

// listFilter returns the depth parameter (?2) of q and the SQL of its depth
// and silence filters.
func listFilter(q toolrun.MessageQuery) (int64, string) {
	depth := int64(q.MaxDepth)
	if depth < 0 {
		depth = -1
	}
	filter := ` AND (?2 < 0 OR depth <= ?2)`
	if !q.IncludeSilent {
		filter += ` AND silent = 0`
	}
	return depth, filter
}

// listAfter answers a query with After. The primary key (thread_id, seq)
// seeks to the first row after After, or to the thread's last row and back
// to After, so the rows read are the rows returned, the rows the offset
// skips and the rows the filters leave out (TestListAfterPlans). Total is
// the number of matching rows after After: taken from the page when the
// page runs to the end of that range (a query without Limit), counted in
// the same statement otherwise (an index range of the rows after After).
func (s *Store) listAfter(ctx context.Context, threadID string, q toolrun.MessageQuery, depth int64, filter string) (toolrun.MessagePage, error) {
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = -1
	}
	off := max(q.Offset, 0)
	query, count := afterSQL(q, filter)
	var total int64
	var tail []any
	if limit > 0 {
		tail = []any{&total}
	}
	page, err := s.listPage(ctx, threadID, pageRoom(limit, -1), query, []any{threadID, depth, q.After, limit, off}, tail...)
	switch {
	case err != nil:
	case limit < 0 && (len(page.Messages) > 0 || off == 0):
		total = int64(off + len(page.Messages))
	case len(page.Messages) == 0:
		// The offset passed every row after After: fewer than it to count.
		err = s.queryRow(ctx, count, threadID, depth, q.After).Scan(&total)
	}
	if err != nil {
		return toolrun.MessagePage{}, fmt.Errorf("sqlite: list messages of thread %q: %w", threadID, err)
	}
	page.Total = int(total)
	page.HasMore = off+len(page.Messages) < page.Total
	if q.Order == toolrun.OrderDefault {
		slices.Reverse(page.Messages)
	}
	return page, nil
}

// afterSQL returns the page statement of a query with After (thread ?1,
// depth ?2, After ?3, limit ?4, offset ?5; with a Limit, each row also
// carries the count) and the statement counting its rows (?1 to ?3).
func afterSQL(q toolrun.MessageQuery, filter string) (query, count string) {
	dir := "DESC"
	if q.Order == toolrun.OrderAsc {
		dir = "ASC"
	}
	rng := ` FROM messages WHERE thread_id = ?1 AND seq > ?3` + filter
	count = `SELECT count(*)` + rng
	query = `SELECT ` + msgColumns
	if q.Limit > 0 {
		query += `, (` + count + `)`
	}
	return query + rng + ` ORDER BY seq ` + dir + ` LIMIT +?4 OFFSET ?5`, count
}

// countKey names one message filter of one thread; countEntry is its
// number of matching rows up to Seq last.
type (
	countKey struct {
		thread string
		silent bool
		depth  int64
	}
	countEntry struct{ last, n int64 }
)

// pageRoom is the room a page is read into: as many messages as its query
// can return — limit (-1: none), and matching, the number of rows known to
// match it (-1: not known) plus a few appended since they were counted — up
// to maxPageRoom, so that most pages are allocated once instead of growing
// row by row. Knowing neither (a query with After reads the few rows of a
// step), none: the page grows as it is read.
func pageRoom(limit, matching int64) int {
	if limit <= 0 && matching < 0 {
		return 0
	}
	n := int64(maxPageRoom)
	if limit > 0 {
		n = min(n, limit)
	}
	if matching >= 0 {
		n = min(n, matching+4)
	}
	return int(n)
}

const maxPageRoom = 256

// listPage reads the messages of a page query into room for room of them
// (see readPage for the query's shape).
func (s *Store) listPage(ctx context.Context, threadID string, room int, query string, args []any, tail ...any) (toolrun.MessagePage, error) {
	if page, ok, err := s.readPage(ctx, threadID, room, query, args, tail); ok {
		return page, err
	}
	page := toolrun.MessagePage{Messages: make([]toolrun.Message, 0, room)}
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return page, err
	}
	defer rows.Close()
	for rows.Next() {
		m, err := scanMessage(threadID, rows, tail...)
		if err != nil {
			return page, err
		}
		page.Messages = append(page.Messages, m)
	}
	return page, rows.Err()
}

// ToolResult implements toolrun.MessageStore.
func (s *Store) ToolResult(ctx context.Context, threadID, toolCallID string) (*toolrun.Message, error) {
	m, err := scanMessage(threadID, s.queryRow(ctx, `SELECT `+msgColumns+` FROM messages
		WHERE thread_id = ? AND tool_call_id = ? AND role = 'tool' AND tool_call_id <> ''`, threadID, toolCallID))
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: tool result %q of thread %q: %w", toolCallID, threadID, err)
	}
	return &m, nil
}

// ---- values ----

// GetValue implements toolrun.ValueStore.
func (s *Store) GetValue(ctx context.Context, threadID, key string) (json.RawMessage, error) {
	var v []byte
	err := s.queryRow(ctx, `SELECT value FROM thread_values WHERE thread_id = ? AND key = ?`, threadID, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get value %q of thread %q: %w", key, threadID, err)
	}
	return json.RawMessage(v), nil
}

// SetValue implements toolrun.ValueStore.
func (s *Store) SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error {
	var err error
	if isJSONNull(value) {
		err = s.write(ctx, func() error {
			_, err := s.exec(ctx, `DELETE FROM thread_values WHERE thread_id = ? AND key = ?`, threadID, key)
			return err
		})
	} else if !json.Valid(value) {
		err = errors.New("not valid JSON")
	} else {
		err = s.write(ctx, func() error {
			_, err := s.exec(ctx, `INSERT INTO thread_values (thread_id, key, value) VALUES (?, ?, ?)
				ON CONFLICT (thread_id, key) DO UPDATE SET value = excluded.value`, threadID, key, string(value))
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("sqlite: set value %q of thread %q: %w", key, threadID, err)
	}
	return nil
}

func isJSONNull(v json.RawMessage) bool {
	return len(v) == 0 || strings.TrimSpace(string(v)) == "null"
}

// ---- env ----

// checkScope refuses scopes other than thread and user, as the memory
// store does.
func checkScope(scope toolrun.EnvScope) error {
	if scope != toolrun.ScopeThread && scope != toolrun.ScopeUser {
		return fmt.Errorf("unknown env scope %q", scope)
	}
	return nil
}

// GetEnv implements toolrun.EnvStore. A secret value is decrypted; one
// that cannot be fails with an error wrapping keyring.ErrDecrypt.
func (s *Store) GetEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string) (toolrun.EnvValue, error) {
	if err := checkScope(scope); err != nil {
		return toolrun.EnvValue{}, fmt.Errorf("sqlite: get env: %w", err)
	}
	var v toolrun.EnvValue
	var stored string
	err := s.queryRow(ctx, `SELECT value, type FROM env WHERE scope = ? AND owner_id = ? AND name = ?`,
		string(scope), ownerID, name).Scan(&stored, &v.Type)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err == nil {
		v.Value, err = s.env.Open(scope, ownerID, name, stored, string(v.Type))
	}
	if err != nil {
		return toolrun.EnvValue{}, fmt.Errorf("sqlite: get env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	return v, nil
}

// SetEnv implements toolrun.EnvStore. A secret value is encrypted with the
// first key of Options.Keys; without keys it is refused (an error wrapping
// keyring.ErrNoKey) unless Options.PlaintextSecrets is set.
func (s *Store) SetEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string, v toolrun.EnvValue) error {
	if err := checkScope(scope); err != nil {
		return fmt.Errorf("sqlite: set env: %w", err)
	}
	value, err := s.env.Seal(scope, ownerID, name, v)
	if err == nil {
		err = s.write(ctx, func() error {
			_, err := s.exec(ctx, `INSERT INTO env (scope, owner_id, name, value, type) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (scope, owner_id, name) DO UPDATE SET value = excluded.value, type = excluded.type`,
				string(scope), ownerID, name, value, string(v.Type))
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("sqlite: set env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	return nil
}

// DeleteEnv implements toolrun.EnvStore.
func (s *Store) DeleteEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string) error {
	if err := checkScope(scope); err != nil {
		return fmt.Errorf("sqlite: delete env: %w", err)
	}
	err := s.write(ctx, func() error {
		_, err := s.exec(ctx, `DELETE FROM env WHERE scope = ? AND owner_id = ? AND name = ?`, string(scope), ownerID, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	return nil
}

// ListEnv implements toolrun.EnvStore. Secret values are decrypted; when
// one cannot be, the call fails with that variable's error (wrapping
// keyring.ErrDecrypt) rather than return the env without it, which would
// let the variable resolve from further down the env chain.
func (s *Store) ListEnv(ctx context.Context, scope toolrun.EnvScope, ownerID string) (map[string]toolrun.EnvValue, error) {
	if err := checkScope(scope); err != nil {
		return nil, fmt.Errorf("sqlite: list env: %w", err)
	}
	rows, err := s.query(ctx, `SELECT name, value, type FROM env WHERE scope = ? AND owner_id = ?`, string(scope), ownerID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list env %s/%s: %w", scope, ownerID, err)
	}
	defer rows.Close()
	out := map[string]toolrun.EnvValue{}
	for rows.Next() {
		var name, stored string
		var v toolrun.EnvValue
		if err := rows.Scan(&name, &stored, &v.Type); err != nil {
			return nil, fmt.Errorf("sqlite: list env %s/%s: %w", scope, ownerID, err)
		}
		if v.Value, err = s.env.Open(scope, ownerID, name, stored, string(v.Type)); err != nil {
			return nil, fmt.Errorf("sqlite: list env %s/%s/%s: %w", scope, ownerID, name, err)
		}
		out[name] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list env %s/%s: %w", scope, ownerID, err)
	}
	return out, nil
}

// reencryptBatch is how many env rows ReencryptSecrets reads at a time.
const reencryptBatch = 256

// ReencryptSecrets encrypts with the first key of Options.Keys every
// secret env value that is not yet encrypted with it: secrets stored in
// plain text (by a build before encryption, or with PlaintextSecrets) and
// values sealed with an older key of the ring. It returns how many values
// it rewrote. Run it after putting a new key first in the ring, and drop
// the old keys only once it has returned without error (and no process
// still seals with them).
//
// It walks the env table in batches; each value is replaced only if its
// row is unchanged since it was read, so a concurrent SetEnv is never
// undone, and a run that stops part way (an error, ctx cancelled) can be
// run again. A value that cannot be decrypted stops it with that
// variable's error, wrapping keyring.ErrDecrypt. Without keys it fails
// with an error wrapping keyring.ErrNoKey.
//
// The rows are rewritten with PRAGMA secure_delete on, and the WAL is then
// checkpointed and truncated, so the replaced plaintext does not remain in
// the database or WAL file. Plaintext that earlier writes left in free
// space (a secret replaced before encryption was enabled) is not touched:
// run VACUUM once after the first ReencryptSecrets of a database that held
// plaintext secrets, and treat secrets that were ever stored in plain text
// (and copies in backups) as exposed.
func (s *Store) ReencryptSecrets(ctx context.Context) (int, error) {
	if s.env.Keys() == nil {
		return 0, fmt.Errorf("sqlite: reencrypt secrets: %w", envcrypt.ErrNoKeyToReencrypt)
	}
	stale, staleArgs := s.env.Stale("?", "?")
	query := `SELECT scope, owner_id, name, value, type FROM env
		WHERE (scope, owner_id, name) > (?, ?, ?) AND ` + stale + `
		ORDER BY scope, owner_id, name LIMIT ` + fmt.Sprint(reencryptBatch)
	type row struct{ scope, owner, name, value, typ, sealed string }
	n := 0
	var after row
	for {
		rows, err := s.query(ctx, query, append([]any{after.scope, after.owner, after.name}, staleArgs...)...)
		if err != nil {
			return n, fmt.Errorf("sqlite: reencrypt secrets: %w", err)
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.scope, &r.owner, &r.name, &r.value, &r.typ); err != nil {
				rows.Close()
				return n, fmt.Errorf("sqlite: reencrypt secrets: %w", err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return n, fmt.Errorf("sqlite: reencrypt secrets: %w", err)
		}
		changes := 0
		for i := range batch {
			r := &batch[i]
			sealed, ok, err := s.env.Reseal(r.scope, r.owner, r.name, r.value, r.typ)
			if err != nil {
				return n, fmt.Errorf("sqlite: reencrypt secrets: env %s/%s/%s: %w", r.scope, r.owner, r.name, err)
			}
			if ok {
				r.sealed = sealed
				changes++
			}
		}
		if changes > 0 {
			err = s.write(ctx, func() error {
				// secure_delete zeroes the space the replaced values leave in
				// their pages, so a secret that was stored in plain text does
				// not stay in the file beside its encrypted form.
				var prev int
				if err := s.execRow(ctx, `PRAGMA secure_delete`).Scan(&prev); err != nil {
					return err
				}
				if _, err := s.exec(ctx, `PRAGMA secure_delete = ON`); err != nil {
					return err
				}
				defer s.exec(context.WithoutCancel(ctx), `PRAGMA secure_delete = `+fmt.Sprint(prev))
				for _, r := range batch {
					if r.sealed == "" {
						continue
					}
					res, err := s.exec(ctx, `UPDATE env SET value = ?
					WHERE scope = ? AND owner_id = ? AND name = ? AND value = ? AND type = ?`,
						r.sealed, r.scope, r.owner, r.name, r.value, r.typ)
					if err != nil {
						return fmt.Errorf("env %s/%s/%s: %w", r.scope, r.owner, r.name, err)
					}
					if k, _ := res.RowsAffected(); k == 1 {
						n++
					}
				}
				return nil
			})
		}
		if err != nil {
			return n, fmt.Errorf("sqlite: reencrypt secrets: %w", err)
		}
		if len(batch) < reencryptBatch {
			break
		}
		after = batch[len(batch)-1]
	}
	if n > 0 {
		// Copy the WAL into the database and empty it, so that no older
		// frame of a rewritten page (one with a plaintext secret) remains
		// in it. A reader holding an old snapshot may keep this from
		// completing; the frames are then overwritten as the WAL is reused.
		_ = s.write(ctx, func() error {
			_, err := s.exec(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
			return err
		})
	}
	return n, nil
}

// ---- files ----

// WriteFile implements toolrun.FileStore.
func (s *Store) WriteFile(ctx context.Context, threadID string, f toolrun.FileInfo, data []byte) (toolrun.FileInfo, error) {
	if data == nil {
		data = []byte{}
	}
	path, mimeType := f.Path, f.MimeType
	info := toolrun.FileInfo{Path: path, MimeType: mimeType, Size: int64(len(data)), UpdatedAt: f.UpdatedAt}
	createdAt, err := micros(f.CreatedAt, "CreatedAt")
	var updatedAt int64
	if err == nil {
		updatedAt, err = micros(f.UpdatedAt, "UpdatedAt")
	}
	if err == nil {
		err = s.write(ctx, func() error {
			var created int64
			err := s.execRow(ctx, `INSERT INTO files (thread_id, path, mime_type, size, created_at, updated_at, data)
				VALUES (?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (thread_id, path) DO UPDATE SET mime_type = excluded.mime_type, size = excluded.size,
					updated_at = excluded.updated_at, data = excluded.data
				RETURNING created_at`,
				threadID, path, mimeType, info.Size, createdAt, updatedAt, data).Scan(&created)
			info.CreatedAt = fromMicros(created)
			return err
		})
	}
	if err != nil {
		return toolrun.FileInfo{}, fmt.Errorf("sqlite: write file %q of thread %q: %w", path, threadID, err)
	}
	return info, nil
}

// ReadFile implements toolrun.FileStore.
func (s *Store) ReadFile(ctx context.Context, threadID, path string) ([]byte, toolrun.FileInfo, error) {
	info := toolrun.FileInfo{Path: path}
	var created, updated int64
	var data []byte
	err := s.queryRow(ctx, `SELECT mime_type, size, created_at, updated_at, data FROM files WHERE thread_id = ? AND path = ?`,
		threadID, path).Scan(&info.MimeType, &info.Size, &created, &updated, &data)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, toolrun.FileInfo{}, fmt.Errorf("sqlite: read file %q of thread %q: %w", path, threadID, err)
	}
	if data == nil {
		data = []byte{}
	}
	info.CreatedAt, info.UpdatedAt = fromMicros(created), fromMicros(updated)
	return data, info, nil
}

// StatFile implements toolrun.FileStore.
func (s *Store) StatFile(ctx context.Context, threadID, path string) (toolrun.FileInfo, error) {
	info := toolrun.FileInfo{Path: path}
	var created, updated int64
	err := s.queryRow(ctx, `SELECT mime_type, size, created_at, updated_at FROM files WHERE thread_id = ? AND path = ?`,
		threadID, path).Scan(&info.MimeType, &info.Size, &created, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return toolrun.FileInfo{}, fmt.Errorf("sqlite: stat file %q of thread %q: %w", path, threadID, err)
	}
	info.CreatedAt, info.UpdatedAt = fromMicros(created), fromMicros(updated)
	return info, nil
}

// dirRange returns the half-open path range [lo, hi) of the files strictly
// below dir: every path that starts with dir + "/" sorts at or after
// dir + "/" and before dir + "0" ('0' follows '/' in byte order).
func dirRange(dir string) (self, lo, hi string, all bool) {
	d := strings.TrimSuffix(dir, "/")
	if d == "" {
		return "", "", "", true
	}
	return d, d + "/", d + "0", false
}

// ListFiles implements toolrun.FileStore.
func (s *Store) ListFiles(ctx context.Context, threadID, dir string) ([]toolrun.FileInfo, error) {
	q := `SELECT path, mime_type, size, created_at, updated_at FROM files WHERE thread_id = ?`
	args := []any{threadID}
	if self, lo, hi, all := dirRange(dir); !all {
		q += ` AND (path = ? OR (path >= ? AND path < ?))`
		args = append(args, self, lo, hi)
	}
	rows, err := s.query(ctx, q+` ORDER BY path`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list files %q of thread %q: %w", dir, threadID, err)
	}
	defer rows.Close()
	out := []toolrun.FileInfo{}
	for rows.Next() {
		var f toolrun.FileInfo
		var created, updated int64
		if err := rows.Scan(&f.Path, &f.MimeType, &f.Size, &created, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: list files %q of thread %q: %w", dir, threadID, err)
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list files %q of thread %q: %w", dir, threadID, err)
	}
	return out, nil
}

// DeleteFile implements toolrun.FileStore.
func (s *Store) DeleteFile(ctx context.Context, threadID, path string) error {
	err := s.write(ctx, func() error {
		res, err := s.exec(ctx, `DELETE FROM files WHERE thread_id = ? AND path = ?`, threadID, path)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return toolrun.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete file %q of thread %q: %w", path, threadID, err)
	}
	return nil
}

// ---- children ----

// PutChild implements toolrun.ChildStore. It refuses an entry nested too
// deeply to decode (see jsondepth.TooDeep).
func (s *Store) PutChild(ctx context.Context, e toolrun.ChildEntry) error {
	created, updated := e.CreatedAt, e.UpdatedAt
	e.CreatedAt, e.UpdatedAt = time.Time{}, time.Time{}
	body, err := json.Marshal(&e)
	if member, deep := jsondepth.TooDeep(body); deep {
		err = fmt.Errorf("%s: %w", member, jsondepth.ErrTooDeep)
	}
	var createdAt, updatedAt int64
	if err == nil {
		createdAt, err = micros(created, "CreatedAt")
	}
	if err == nil {
		updatedAt, err = micros(updated, "UpdatedAt")
	}
	if err != nil {
		return fmt.Errorf("sqlite: put child %q of %q: %w", e.Reference, e.ParentID, err)
	}
	err = s.write(ctx, func() error {
		_, err := s.exec(ctx, `INSERT INTO children (parent_id, reference, created_at, updated_at, body) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (parent_id, reference) DO UPDATE SET updated_at = excluded.updated_at, body = excluded.body`,
			e.ParentID, e.Reference, createdAt, updatedAt, string(body))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: put child %q of %q: %w", e.Reference, e.ParentID, err)
	}
	return nil
}

// scanChild decodes a child entry from its row: its key columns, its times
// and its body, which holds the other fields (the key and times in it are
// not read: the columns are the entry's).
func scanChild(parentID, reference string, created, updated int64, body []byte) (toolrun.ChildEntry, error) {
	var e toolrun.ChildEntry
	if err := json.Unmarshal(body, &e); err != nil {
		return toolrun.ChildEntry{}, fmt.Errorf("decode entry %q: %w", reference, err)
	}
	e.ParentID, e.Reference = parentID, reference
	e.CreatedAt, e.UpdatedAt = fromMicros(created), fromMicros(updated)
	return e, nil
}

// Child implements toolrun.ChildStore.
func (s *Store) Child(ctx context.Context, parentID, reference string) (toolrun.ChildEntry, error) {
	var parent, ref string
	var created, updated int64
	var body []byte
	err := s.queryRow(ctx, `SELECT parent_id, reference, created_at, updated_at, body FROM children WHERE parent_id = ? AND reference = ?`,
		parentID, reference).Scan(&parent, &ref, &created, &updated, &body)
	if errors.Is(err, sql.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	var e toolrun.ChildEntry
	if err == nil {
		e, err = scanChild(parent, ref, created, updated, body)
	}
	if err != nil {
		return toolrun.ChildEntry{}, fmt.Errorf("sqlite: child %q of %q: %w", reference, parentID, err)
	}
	return e, nil
}

// Children implements toolrun.ChildStore.
func (s *Store) Children(ctx context.Context, parentID string) ([]toolrun.ChildEntry, error) {
	rows, err := s.query(ctx, `SELECT parent_id, reference, created_at, updated_at, body FROM children WHERE parent_id = ? ORDER BY ord`, parentID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: children of %q: %w", parentID, err)
	}
	defer rows.Close()
	out := []toolrun.ChildEntry{}
	for rows.Next() {
		var parent, ref string
		var created, updated int64
		var body []byte
		if err := rows.Scan(&parent, &ref, &created, &updated, &body); err != nil {
			// A column of another type (written by user SQL): name the
			// entry, reading the row again for its reference alone.
			var key any
			if rows.Scan(new(any), &key, new(any), new(any), new(any)) == nil {
				err = fmt.Errorf("decode entry %q: %w", fmt.Sprint(key), err)
			}
			return nil, fmt.Errorf("sqlite: children of %q: %w", parentID, err)
		}
		e, err := scanChild(parent, ref, created, updated, body)
		if err != nil {
			return nil, fmt.Errorf("sqlite: children of %q: %w", parentID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: children of %q: %w", parentID, err)
	}
	return out, nil
}
