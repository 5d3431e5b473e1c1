// Package postgres is a [toolrun.Store] in PostgreSQL, for several service
// instances that share one database. It uses github.com/jackc/pgx/v5.
//
//	st, err := postgres.Open(ctx, "postgres://app@db/toolrun", nil)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.Close()
//
//	// Own the thread before running it, and write through the lease.
//	lease, err := st.AcquireLease(ctx, threadID, instanceID, 30*time.Second)
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer st.ReleaseLease(ctx, lease)
//	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st.WithLease(lease)})
//
// # Consistency
//
// Every write is one round trip and one transaction. AppendMessages is a
// single statement that locks the thread's row, takes the next Seqs from it
// and inserts every message, so concurrent appends from any number of
// instances get unique, increasing Seqs and a batch is stored whole or not
// at all. A unique index refuses a second result for a tool call
// ([toolrun.ErrDuplicateToolResult]).
//
// Single-message appends made at the same time by many goroutines (a
// service running many threads) are committed together: while two such
// batches are being committed, new ones wait and go as the next batch, one
// round trip, one transaction and one WAL flush for all of them. Each
// caller still returns only once its own message is committed, with the
// outcome and error it would have had alone.
//
// # Thread ownership
//
// A lease ([Lease]) says which owner (a service instance) runs a thread; see
// [Store.AcquireLease]. Its token grows on every takeover. A store bound to
// a lease with [Store.WithLease] checks, in the same transaction as each
// write to that thread, that the lease is still current, and fails with
// [ErrStaleLease] otherwise: an instance that stalled past its lease's
// expiry cannot write over the new owner's work. Leases use the database's
// clock, so instances need no synchronised clocks.
//
// # Schema
//
// Open and New create or upgrade the tables to [SchemaVersion] under a
// PostgreSQL advisory lock, recording versions in schema_version. The
// tables live in the first schema of the connection's search_path, or in
// Options.Schema. Version 4 gives Thread.Arguments and SessionTurns columns
// and moves what older builds kept in message metadata (error details,
// queued calls, the side), thread properties (arguments, session turns)
// and free child statuses (now ChildEntry.Report) into the typed fields; a
// caller's own keys stay.
//
// The Store keeps records as given (see toolrun.Store): it makes no ids
// and reads no clock for them; it refuses a message without ID or
// CreatedAt and a thread without ID. It also refuses, with an error
// wrapping toolrun.ErrUnstorable, a record holding a value that nests
// arrays and objects more than 10,000 deep (thread arguments or
// properties, message metadata or error data, child initial arguments):
// encoding/json writes such a value but cannot read it back.
//
// Message.Depth and Thread.SessionTurns are kept in 32-bit integer
// columns. A Depth outside 0 to 2³¹−1 is refused, as by every store; a
// SessionTurns outside −2³¹ to 2³¹−1 is refused too, where the memory and
// SQLite stores keep any int. A MessageQuery.MaxDepth above 2³¹−1 selects
// every depth, as no message is deeper. Times are kept in timestamp
// columns: one outside their range, 4713 BC to 294276 AD, is refused.
//
// # Secrets
//
// Secret env values (every [toolrun.EnvValue] whose Type is not
// [toolrun.VarText]; an unset type means secret) are encrypted with
// AES-256-GCM under the key ring of Options.Keys (package store/keyring)
// before they leave the process: the value column holds sealed text that
// names the key id and opens only in its own row, so the server, its WAL,
// replicas and dumps never see the secret. Nothing else is encrypted:
// messages, values, files, thread records, env names and types, and text
// values are stored as given. Without keys, SetEnv refuses a secret value
// with an error that wraps keyring.ErrNoKey and names the fix, unless
// Options.PlaintextSecrets allows plain text. Every instance sharing a
// database needs the keys of the values it reads.
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
// every value again with the ring's first key. Schema version 3 marks a
// database that may hold sealed values: builds before encryption, which
// would take the sealed text for the value, refuse to open it.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/internal/envcrypt"
	"github.com/toolrun/toolrun/store/internal/jsondepth"
	"github.com/toolrun/toolrun/store/keyring"
)

// Options configure a Store. A nil *Options means defaults. Open reads it
// once; it is not retained (the Keys ring is, and is immutable).
type Options struct {
	// Schema is the PostgreSQL schema that holds the tables; Open creates it
	// if needed and puts it first on every connection's search_path. ""
	// means the connection's own search_path (normally "public"). New
	// ignores it: set search_path in the pool's configuration.
	Schema string
	// MaxConns caps the pool Open creates; 0 means pgxpool's default.
	MaxConns int32
	// AsyncCommit sets synchronous_commit=off on the pool's connections:
	// a commit returns before its WAL record is flushed, several times
	// faster, but if the database server (not this process) crashes, the
	// writes of the last moments (up to about three times
	// wal_writer_delay) are lost. A lost tool result means the call runs
	// again after a resume. The default waits for the flush. Open only.
	AsyncCommit bool
	// LeaseTTL is how long a thread lease taken by AcquireThread (the
	// toolrun runtime's turns) lasts without renewal; it is renewed every
	// third of it while the turn runs. A crashed owner's threads are taken
	// over after at most this long. 0 means 30 seconds.
	LeaseTTL time.Duration
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

// Store is a toolrun.Store in PostgreSQL. It is safe for concurrent use, and
// any number of Stores, in any number of processes, may share a database.
type Store struct {
	pool  *pgxpool.Pool
	owned bool   // Close closes pool
	lease *Lease // writes to lease.ThreadID are fenced; nil: none
	ttl   time.Duration
	group *group // group commit of single-message appends, shared with WithLease stores
	env   envcrypt.Policy
}

var _ toolrun.Store = (*Store)(nil)

// Open connects to the database at url (a PostgreSQL URL or key=value
// string), creates Options.Schema if set, and applies schema migrations.
// Close the Store when done.
func Open(ctx context.Context, url string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	env, err := envcrypt.New(opts.Keys, opts.PlaintextSecrets)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.AsyncCommit {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	}
	if opts.Schema != "" {
		// Create the schema on a plain connection first; the pool's
		// connections then start with it on their search_path.
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
		if err != nil {
			return nil, fmt.Errorf("postgres: open: %w", err)
		}
		_, err = conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{opts.Schema}.Sanitize())
		conn.Close(ctx)
		if err != nil && !isCode(err, "23505", "42P06") { // a concurrent CREATE SCHEMA won the race
			return nil, fmt.Errorf("postgres: open: create schema %q: %w", opts.Schema, err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: migrate schema: %w", err)
	}
	return newStore(&Store{pool: pool, owned: true, ttl: opts.LeaseTTL, env: env}), nil
}

func newStore(s *Store) *Store {
	s.group = newGroup(&Store{pool: s.pool})
	return s
}

// New returns a Store on an existing pool after applying schema migrations
// in the first schema of its search_path. Closing the Store does not close
// pool. opts may be nil; of its fields only LeaseTTL, Keys and
// PlaintextSecrets apply.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	env, err := envcrypt.New(opts.Keys, opts.PlaintextSecrets)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		return nil, fmt.Errorf("postgres: migrate schema: %w", err)
	}
	return newStore(&Store{pool: pool, ttl: opts.LeaseTTL, env: env}), nil
}

// Pool returns the underlying connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool if Open created it and this is not a store
// returned by WithLease. It may be called more than once.
func (s *Store) Close() error {
	if s.owned && s.lease == nil {
		s.pool.Close()
	}
	return nil
}

// fenced reports whether writes to thread must check the lease.
func (s *Store) fenced(thread string) bool { return s.lease != nil && s.lease.ThreadID == thread }

// isCode reports whether err is a PostgreSQL error with one of the codes.
func isCode(err error, codes ...string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && slices.Contains(codes, pe.Code)
}

// mapErr turns PostgreSQL errors the Store contract names into sentinels.
func mapErr(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "TRL01":
		return fmt.Errorf("%w: %s", ErrStaleLease, pe.Message)
	case pe.Code == "23505" && pe.ConstraintName == "messages_tool_result":
		return toolrun.ErrDuplicateToolResult
	case pe.Code == "22021" || pe.Code == "22P05":
		// A text the server cannot hold: a NUL byte in a text column, or a
		// \u0000 escape in a jsonb one.
		return fmt.Errorf("%w: %w", toolrun.ErrUnstorable, err)
	}
	return err
}

// writeQuery runs a write that returns rows, calling each for every row.
// When the store is bound to a lease on thread, the lease check and the
// write go in one batch: one round trip, one implicit transaction.
func (s *Store) writeQuery(ctx context.Context, thread, query string, args []any, each func(pgx.Rows) error) error {
	return s.writeQueryToken(ctx, thread, s.token(thread), query, args, each)
}

// token returns the lease token writes to thread check, 0 when unfenced.
func (s *Store) token(thread string) int64 {
	if !s.fenced(thread) {
		return 0
	}
	return s.lease.Token
}

// writeQueryToken is writeQuery checking lease token on thread (0: no check).
func (s *Store) writeQueryToken(ctx context.Context, thread string, token int64, query string, args []any, each func(pgx.Rows) error) error {
	if token == 0 {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return mapErr(err)
		}
		return mapErr(drain(rows, each))
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT toolrun_check_lease($1, $2)`, thread, token)
	b.Queue(query, args...)
	br := s.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return mapErr(err)
	}
	rows, err := br.Query()
	if err == nil {
		err = drain(rows, each)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return mapErr(err)
}

// writeExec runs a write that returns no rows and reports rows affected.
func (s *Store) writeExec(ctx context.Context, thread, query string, args ...any) (int64, error) {
	if !s.fenced(thread) {
		tag, err := s.pool.Exec(ctx, query, args...)
		return tag.RowsAffected(), mapErr(err)
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT toolrun_check_lease($1, $2)`, thread, s.lease.Token)
	b.Queue(query, args...)
	br := s.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return 0, mapErr(err)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag.RowsAffected(), mapErr(err)
}

func drain(rows pgx.Rows, each func(pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ---- threads ----

// CreateThread implements toolrun.ThreadStore.
func (s *Store) CreateThread(ctx context.Context, t *toolrun.Thread) error {
	if t.ID == "" {
		return errors.New("postgres: create thread: the thread has no ID")
	}
	args, props, tags, err := threadJSON(t)
	if err == nil {
		err = errors.Join(checkThread(t), checkTime("CreatedAt", t.CreatedAt))
	}
	if err != nil {
		return fmt.Errorf("postgres: create thread %q: %w", t.ID, err)
	}
	n, err := s.writeExec(ctx, t.ID, `INSERT INTO threads (id, agent_id, user_id, parent_id, arguments, session_turns, properties, tags, created_at, terminated_at)
		VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::jsonb, $8::jsonb, $9, $10) ON CONFLICT (id) DO NOTHING`,
		t.ID, t.AgentID, t.UserID, t.ParentID, args, t.SessionTurns, props, tags, t.CreatedAt, nullTime(t.TerminatedAt))
	if err == nil && n == 0 {
		err = toolrun.ErrThreadExists
	}
	if err != nil {
		return fmt.Errorf("postgres: create thread %q: %w", t.ID, err)
	}
	return nil
}

// checkThread refuses a thread with a field its columns cannot hold, but
// for its CreatedAt (which only CreateThread writes): a SessionTurns
// outside the range of the integer column (the memory and SQLite stores
// keep any int), a TerminatedAt outside that of timestamps.
func checkThread(t *toolrun.Thread) error {
	if t.SessionTurns < math.MinInt32 || t.SessionTurns > math.MaxInt32 {
		return fmt.Errorf("SessionTurns %d is outside %d to %d", t.SessionTurns, math.MinInt32, math.MaxInt32)
	}
	return checkTime("TerminatedAt", t.TerminatedAt)
}

// The range of PostgreSQL's timestamps: 4713 BC to 294276 AD.
var (
	minTime = time.Date(-4712, time.January, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(294276, time.December, 31, 23, 59, 59, 999999999, time.UTC)
)

// checkTime refuses a time outside the range of PostgreSQL's timestamps,
// naming its field: pgx would bind one far outside it wrapped around (a
// year of -300000 as 284554), and PostgreSQL refuses the others with an
// error that names neither.
func checkTime(field string, t time.Time) error {
	if t.Before(minTime) || t.After(maxTime) {
		return fmt.Errorf("%s %v is outside the range of PostgreSQL's timestamps (4713 BC to 294276 AD)", field, t)
	}
	return nil
}

// threadJSON encodes the JSON columns of a thread, NULL for nil. It
// refuses a value nested too deeply to decode (see jsondepth.TooDeep).
func threadJSON(t *toolrun.Thread) (args, props, tags *string, err error) {
	enc := func(v any, null bool, what string) (*string, error) {
		if null {
			return nil, nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if _, deep := jsondepth.TooDeep(b); deep {
			return nil, fmt.Errorf("%s: %w", what, jsondepth.ErrTooDeep)
		}
		return jsonArg(b), nil
	}
	if args, err = enc(t.Arguments, t.Arguments == nil, "arguments"); err != nil {
		return
	}
	if props, err = enc(t.Properties, t.Properties == nil, "properties"); err != nil {
		return
	}
	tags, err = enc(t.Tags, t.Tags == nil, "tags")
	return
}

// jsonArg passes encoded JSON as text, or NULL when b is nil.
func jsonArg(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// GetThread implements toolrun.ThreadStore.
func (s *Store) GetThread(ctx context.Context, id string) (*toolrun.Thread, error) {
	t := toolrun.Thread{ID: id}
	var args, props, tags []byte
	var terminated *time.Time
	var turns int32
	err := s.pool.QueryRow(ctx, `SELECT agent_id, user_id, parent_id, arguments::text, session_turns, properties::text, tags::text, created_at, terminated_at
		FROM threads WHERE id = $1`, id).Scan(&t.AgentID, &t.UserID, &t.ParentID, &args, &turns, &props, &tags, &t.CreatedAt, &terminated)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get thread %q: %w", id, err)
	}
	t.CreatedAt = utc(t.CreatedAt)
	t.SessionTurns = int(turns)
	if terminated != nil {
		t.TerminatedAt = terminated.UTC()
	}
	if args != nil {
		if err := json.Unmarshal(args, &t.Arguments); err != nil {
			return nil, fmt.Errorf("postgres: get thread %q: arguments: %w", id, err)
		}
	}
	if props != nil {
		if err := json.Unmarshal(props, &t.Properties); err != nil {
			return nil, fmt.Errorf("postgres: get thread %q: properties: %w", id, err)
		}
	}
	if tags != nil {
		if err := json.Unmarshal(tags, &t.Tags); err != nil {
			return nil, fmt.Errorf("postgres: get thread %q: tags: %w", id, err)
		}
	}
	return &t, nil
}

// UpdateThread implements toolrun.ThreadStore.
func (s *Store) UpdateThread(ctx context.Context, t *toolrun.Thread) error {
	args, props, tags, err := threadJSON(t)
	if err == nil {
		err = checkThread(t)
	}
	if err != nil {
		return fmt.Errorf("postgres: update thread %q: %w", t.ID, err)
	}
	n, err := s.writeExec(ctx, t.ID, `UPDATE threads SET agent_id = $2, user_id = $3, parent_id = $4, arguments = $5::jsonb,
		session_turns = $6, properties = $7::jsonb, tags = $8::jsonb, terminated_at = $9 WHERE id = $1`,
		t.ID, t.AgentID, t.UserID, t.ParentID, args, t.SessionTurns, props, tags, nullTime(t.TerminatedAt))
	if err == nil && n == 0 {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: update thread %q: %w", t.ID, err)
	}
	return nil
}

// ---- messages ----

// appendSQL inserts the messages given as parallel arrays in one statement:
// the UPDATE locks the thread's row (ordering concurrent appends) and hands
// out the next Seqs; no row comes back when the thread does not exist.
const appendSQL = `WITH t AS (
	UPDATE threads SET next_seq = next_seq + $2 WHERE id = $1 RETURNING next_seq - $2 AS base
)
INSERT INTO messages (thread_id, seq, id, role, tool_call_id, depth, silent, created_at, body)
SELECT $1, t.base + m.ord, m.id, m.role, m.tool_call_id, m.depth, m.silent, m.created_at, m.body::json
FROM t, unnest($3::text[], $4::text[], $5::text[], $6::integer[], $7::boolean[], $8::timestamptz[], $9::text[])
	WITH ORDINALITY AS m(id, role, tool_call_id, depth, silent, created_at, body, ord)
RETURNING seq`

// AppendMessages implements toolrun.MessageStore.
func (s *Store) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	if len(msgs) == 1 {
		return s.appendSingle(ctx, threadID, msgs[0])
	}
	n := len(msgs)
	ids, roles, callIDs, bodies := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	depths, silent, created := make([]int32, n), make([]bool, n), make([]time.Time, n)
	for i, m := range msgs {
		if err := checkMessage(i, m); err != nil {
			return fmt.Errorf("postgres: append to thread %q: %w", threadID, err)
		}
		ids[i], created[i] = m.ID, m.CreatedAt
		b, err := encodeBody(m, threadID)
		if err != nil {
			return fmt.Errorf("postgres: append to thread %q: encode message %d (%s): %w", threadID, i, m.ID, err)
		}
		roles[i], callIDs[i], depths[i], silent[i], bodies[i] = string(m.Role), m.ToolCallID, int32(m.Depth), m.Silent, b
	}
	var base int64 = -1
	got := 0
	var err error
	if n == 0 {
		var one int
		err = s.pool.QueryRow(ctx, `SELECT 1 FROM threads WHERE id = $1`, threadID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			err = toolrun.ErrNotFound
		}
	} else {
		err = s.writeQuery(ctx, threadID, appendSQL, []any{threadID, n, ids, roles, callIDs, depths, silent, created, bodies},
			func(r pgx.Rows) error {
				var seq int64
				if err := r.Scan(&seq); err != nil {
					return err
				}
				if base < 0 || seq-1 < base {
					base = seq - 1
				}
				got++
				return nil
			})
		if err == nil && got == 0 {
			err = toolrun.ErrNotFound
		}
		if err == nil && got != n {
			err = fmt.Errorf("inserted %d of %d messages", got, n)
		}
	}
	if err != nil {
		return fmt.Errorf("postgres: append to thread %q: %w", threadID, err)
	}
	for i, m := range msgs {
		m.Seq = base + int64(i) + 1
	}
	return nil
}

// checkMessage refuses the i-th message of an append when it lacks what a
// store keeps but does not make (its ID and CreatedAt) or has a depth the
// depth column cannot hold.
func checkMessage(i int, m *toolrun.Message) error {
	if m.ID == "" {
		return fmt.Errorf("message %d has no ID", i)
	}
	if m.CreatedAt.IsZero() {
		return fmt.Errorf("message %d (%s) has no CreatedAt", i, m.ID)
	}
	if err := checkTime("CreatedAt", m.CreatedAt); err != nil {
		return fmt.Errorf("message %d (%s): %w", i, m.ID, err)
	}
	if m.Depth < 0 || m.Depth > math.MaxInt32 {
		return fmt.Errorf("message %d (%s) has depth %d, outside 0 to %d", i, m.ID, m.Depth, math.MaxInt32)
	}
	return nil
}

// appendSingle appends one message through the group committer.
func (s *Store) appendSingle(ctx context.Context, threadID string, m *toolrun.Message) error {
	if err := checkMessage(0, m); err != nil {
		return fmt.Errorf("postgres: append to thread %q: %w", threadID, err)
	}
	p := &pending{ctx: ctx, thread: threadID, token: s.token(threadID), id: m.ID, role: string(m.Role), callID: m.ToolCallID,
		depth: int32(m.Depth), silent: m.Silent, created: m.CreatedAt, done: make(chan struct{})}
	var err error
	if p.body, err = encodeBody(m, threadID); err != nil {
		return fmt.Errorf("postgres: append to thread %q: encode message 0 (%s): %w", threadID, m.ID, err)
	}
	if err := s.group.append(p); err != nil {
		return fmt.Errorf("postgres: append to thread %q: %w", threadID, err)
	}
	m.Seq = p.seq
	return nil
}

func decodeMessage(threadID string, seq int64, id string, created time.Time, body []byte) (toolrun.Message, error) {
	var m toolrun.Message
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("decode message %d: %w", seq, err)
	}
	m.ThreadID, m.Seq, m.ID, m.CreatedAt = threadID, seq, id, created.UTC()
	return m, nil
}

// ListMessages implements toolrun.MessageStore. Total comes from the
// message_counts table, in the same statement as the page.
//
// A query with After reads the rows after it through the primary key
// (thread_id, seq): an index range from After, or from the thread's end
// back to After, so the rows read are the rows returned, the rows the
// offset skips and the rows the filters leave out (TestListAfterPlan).
// message_counts cannot count part of a thread, so Total is then taken
// from the page when the page runs to the end of the range (a query
// without Limit) and otherwise counted over the same index range, in the
// same statement.
func (s *Store) ListMessages(ctx context.Context, threadID string, q toolrun.MessageQuery) (toolrun.MessagePage, error) {
	query, qargs, count, args := listSQL(threadID, q)
	after, limited := q.After > 0, q.Limit > 0
	off := int64(max(q.Offset, 0))
	// Room for the rows a page with a limit can return, so that a window's
	// page is allocated once instead of growing row by row.
	room := 0
	if limited {
		room = min(q.Limit, 256)
	}
	page := toolrun.MessagePage{Messages: make([]toolrun.Message, 0, room)}
	rows, err := s.pool.Query(ctx, query, qargs...)
	if err == nil {
		err = drain(rows, func(r pgx.Rows) error {
			var (
				seq     int64
				id      string
				created time.Time
				body    []byte
				total   int64
			)
			if err := r.Scan(&seq, &id, &created, &body, &total); err != nil {
				return err
			}
			page.Total = int(total)
			m, err := decodeMessage(threadID, seq, id, created, body)
			page.Messages = append(page.Messages, m)
			return err
		})
	}
	switch {
	case err != nil:
	case after && !limited && (len(page.Messages) > 0 || off == 0):
		page.Total = int(off) + len(page.Messages)
	case len(page.Messages) == 0:
		var total int64
		err = s.pool.QueryRow(ctx, count, args...).Scan(&total)
		page.Total = int(total)
	}
	if err != nil {
		return toolrun.MessagePage{}, fmt.Errorf("postgres: list messages of thread %q: %w", threadID, err)
	}
	page.HasMore = int(off)+len(page.Messages) < page.Total
	if q.Order == toolrun.OrderDefault {
		slices.Reverse(page.Messages)
	}
	return page, nil
}

// listSQL returns the page statement of q and its arguments (each row
// carries Total, but for a query with After and no Limit, whose Total is
// the page's own count), and the statement that counts q's rows and its
// arguments.
func listSQL(threadID string, q toolrun.MessageQuery) (query string, qargs []any, count string, args []any) {
	filter := ``
	args = []any{threadID}
	if !q.IncludeSilent {
		filter += ` AND NOT silent`
	}
	if q.MaxDepth >= 0 {
		// The integer depth column holds no value above math.MaxInt32 and
		// pgx cannot bind one to it: a larger MaxDepth selects the rows
		// math.MaxInt32 does.
		filter += ` AND depth <= $2`
		args = append(args, min(q.MaxDepth, math.MaxInt32))
	}
	count = `SELECT coalesce(sum(n), 0) FROM message_counts WHERE thread_id = $1` + filter
	after := q.After > 0
	if after {
		args = append(args, q.After)
		filter += fmt.Sprintf(` AND seq > $%d`, len(args))
		count = `SELECT count(*) FROM messages WHERE thread_id = $1` + filter
	}
	dir := "DESC"
	if q.Order == toolrun.OrderAsc {
		dir = "ASC"
	}
	var limit *int64
	if q.Limit > 0 {
		l := int64(q.Limit)
		limit = &l
	}
	off := int64(max(q.Offset, 0))
	na := len(args)
	total := `(` + count + `)`
	if after && limit == nil {
		total = `0` // from the page
	}
	query = fmt.Sprintf(`SELECT seq, id, created_at, body::text, %s FROM messages WHERE thread_id = $1%s ORDER BY seq %s LIMIT $%d OFFSET $%d`,
		total, filter, dir, na+1, na+2)
	return query, append(slices.Clip(args), limit, off), count, args
}

// ToolResult implements toolrun.MessageStore.
func (s *Store) ToolResult(ctx context.Context, threadID, toolCallID string) (*toolrun.Message, error) {
	var (
		seq     int64
		id      string
		created time.Time
		body    []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT seq, id, created_at, body::text FROM messages
		WHERE thread_id = $1 AND tool_call_id = $2 AND role = 'tool' AND tool_call_id <> ''`, threadID, toolCallID).
		Scan(&seq, &id, &created, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	var m toolrun.Message
	if err == nil {
		m, err = decodeMessage(threadID, seq, id, created, body)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: tool result %q of thread %q: %w", toolCallID, threadID, err)
	}
	return &m, nil
}

// ---- values ----

// GetValue implements toolrun.ValueStore.
func (s *Store) GetValue(ctx context.Context, threadID, key string) (json.RawMessage, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value::text FROM thread_values WHERE thread_id = $1 AND key = $2`, threadID, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: get value %q of thread %q: %w", key, threadID, err)
	}
	return json.RawMessage(v), nil
}

// SetValue implements toolrun.ValueStore.
func (s *Store) SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error {
	var err error
	switch {
	case len(value) == 0 || strings.TrimSpace(string(value)) == "null":
		_, err = s.writeExec(ctx, threadID, `DELETE FROM thread_values WHERE thread_id = $1 AND key = $2`, threadID, key)
	case !json.Valid(value):
		err = errors.New("not valid JSON")
	default:
		_, err = s.writeExec(ctx, threadID, `INSERT INTO thread_values (thread_id, key, value) VALUES ($1, $2, $3::text::json)
			ON CONFLICT (thread_id, key) DO UPDATE SET value = EXCLUDED.value`, threadID, key, string(value))
	}
	if err != nil {
		return fmt.Errorf("postgres: set value %q of thread %q: %w", key, threadID, err)
	}
	return nil
}

// ---- env ----

// fenceOwner is the thread an env write is fenced on: the owner of a
// thread-scope value; user values belong to no thread.
func fenceOwner(scope toolrun.EnvScope, owner string) string {
	if scope == toolrun.ScopeThread {
		return owner
	}
	return ""
}

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
		return toolrun.EnvValue{}, fmt.Errorf("postgres: get env: %w", err)
	}
	var stored, typ string
	err := s.pool.QueryRow(ctx, `SELECT value, type FROM env WHERE scope = $1 AND owner_id = $2 AND name = $3`,
		string(scope), ownerID, name).Scan(&stored, &typ)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	var v toolrun.EnvValue
	if err == nil {
		v.Value, err = s.env.Open(scope, ownerID, name, stored, typ)
	}
	if err != nil {
		return toolrun.EnvValue{}, fmt.Errorf("postgres: get env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	v.Type = toolrun.VarType(typ)
	return v, nil
}

// SetEnv implements toolrun.EnvStore. A secret value is encrypted with the
// first key of Options.Keys; without keys it is refused (an error wrapping
// keyring.ErrNoKey) unless Options.PlaintextSecrets is set.
func (s *Store) SetEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string, v toolrun.EnvValue) error {
	if err := checkScope(scope); err != nil {
		return fmt.Errorf("postgres: set env: %w", err)
	}
	value, err := s.env.Seal(scope, ownerID, name, v)
	if err == nil {
		_, err = s.writeExec(ctx, fenceOwner(scope, ownerID), `INSERT INTO env (scope, owner_id, name, value, type) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (scope, owner_id, name) DO UPDATE SET value = EXCLUDED.value, type = EXCLUDED.type`,
			string(scope), ownerID, name, value, string(v.Type))
	}
	if err != nil {
		return fmt.Errorf("postgres: set env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	return nil
}

// DeleteEnv implements toolrun.EnvStore.
func (s *Store) DeleteEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string) error {
	if err := checkScope(scope); err != nil {
		return fmt.Errorf("postgres: delete env: %w", err)
	}
	_, err := s.writeExec(ctx, fenceOwner(scope, ownerID), `DELETE FROM env WHERE scope = $1 AND owner_id = $2 AND name = $3`,
		string(scope), ownerID, name)
	if err != nil {
		return fmt.Errorf("postgres: delete env %s/%s/%s: %w", scope, ownerID, name, err)
	}
	return nil
}

// ListEnv implements toolrun.EnvStore. Secret values are decrypted; when
// one cannot be, the call fails with that variable's error (wrapping
// keyring.ErrDecrypt) rather than return the env without it, which would
// let the variable resolve from further down the env chain.
func (s *Store) ListEnv(ctx context.Context, scope toolrun.EnvScope, ownerID string) (map[string]toolrun.EnvValue, error) {
	if err := checkScope(scope); err != nil {
		return nil, fmt.Errorf("postgres: list env: %w", err)
	}
	out := map[string]toolrun.EnvValue{}
	var failed string // the variable that failed to decrypt
	rows, err := s.pool.Query(ctx, `SELECT name, value, type FROM env WHERE scope = $1 AND owner_id = $2`, string(scope), ownerID)
	if err == nil {
		err = drain(rows, func(r pgx.Rows) error {
			var name, stored, typ string
			if err := r.Scan(&name, &stored, &typ); err != nil {
				return err
			}
			value, err := s.env.Open(scope, ownerID, name, stored, typ)
			if err != nil {
				failed = name
				return err
			}
			out[name] = toolrun.EnvValue{Value: value, Type: toolrun.VarType(typ)}
			return nil
		})
	}
	if failed != "" {
		return nil, fmt.Errorf("postgres: list env %s/%s/%s: %w", scope, ownerID, failed, err)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: list env %s/%s: %w", scope, ownerID, err)
	}
	return out, nil
}

// reencryptBatch is how many env rows ReencryptSecrets reads at a time.
const reencryptBatch = 256

// ReencryptSecrets encrypts with the first key of Options.Keys every
// secret env value that is not yet encrypted with it: secrets stored in
// plain text (by a build before encryption, or with PlaintextSecrets) and
// values sealed with an older key of the ring. It returns how many values
// it rewrote. Run it (on one instance) once every instance has the new
// ring, and drop the old keys only once it has returned without error and
// no instance still seals with them.
//
// It walks the env table in batches; each value is replaced only if its
// row is unchanged since it was read, so a concurrent SetEnv is never
// undone, and a run that stops part way (an error, ctx cancelled) can be
// run again. Its writes are not fenced by the store's lease: they change
// no value's meaning. A value that cannot be decrypted stops it with that
// variable's error, wrapping keyring.ErrDecrypt. Without keys it fails
// with an error wrapping keyring.ErrNoKey.
//
// The replaced row versions stay in the table's files until VACUUM
// reclaims their space, and in the server's WAL, archives and backups: run
// VACUUM FULL env once after the first ReencryptSecrets of a database that
// held plaintext secrets, and treat secrets that were ever stored in plain
// text as exposed.
func (s *Store) ReencryptSecrets(ctx context.Context) (int, error) {
	if s.env.Keys() == nil {
		return 0, fmt.Errorf("postgres: reencrypt secrets: %w", envcrypt.ErrNoKeyToReencrypt)
	}
	stale, staleArgs := s.env.Stale("$4", "$5")
	query := `SELECT scope, owner_id, name, value, type FROM env
		WHERE (scope, owner_id, name) > ($1, $2, $3) AND ` + stale + `
		ORDER BY scope, owner_id, name LIMIT ` + fmt.Sprint(reencryptBatch)
	type row struct{ scope, owner, name, value, typ string }
	n := 0
	var after row
	for {
		rows, err := s.pool.Query(ctx, query, append([]any{after.scope, after.owner, after.name}, staleArgs...)...)
		var batch []row
		if err == nil {
			err = drain(rows, func(r pgx.Rows) error {
				var x row
				if err := r.Scan(&x.scope, &x.owner, &x.name, &x.value, &x.typ); err != nil {
					return err
				}
				batch = append(batch, x)
				return nil
			})
		}
		if err != nil {
			return n, fmt.Errorf("postgres: reencrypt secrets: %w", err)
		}
		b := &pgx.Batch{}
		var updated []row
		for _, r := range batch {
			sealed, ok, err := s.env.Reseal(r.scope, r.owner, r.name, r.value, r.typ)
			if err != nil {
				return n, fmt.Errorf("postgres: reencrypt secrets: env %s/%s/%s: %w", r.scope, r.owner, r.name, err)
			}
			if ok {
				b.Queue(`UPDATE env SET value = $1 WHERE scope = $2 AND owner_id = $3 AND name = $4 AND value = $5 AND type = $6`,
					sealed, r.scope, r.owner, r.name, r.value, r.typ)
				updated = append(updated, r)
			}
		}
		if len(updated) > 0 {
			// The batch is one implicit transaction: its updates count
			// once it has committed.
			br := s.pool.SendBatch(ctx, b)
			k := 0
			for _, r := range updated {
				tag, err := br.Exec()
				if err != nil {
					br.Close()
					return n, fmt.Errorf("postgres: reencrypt secrets: env %s/%s/%s: %w", r.scope, r.owner, r.name, err)
				}
				k += int(tag.RowsAffected())
			}
			if err := br.Close(); err != nil {
				return n, fmt.Errorf("postgres: reencrypt secrets: %w", err)
			}
			n += k
		}
		if len(batch) < reencryptBatch {
			return n, nil
		}
		after = batch[len(batch)-1]
	}
}

// ---- files ----

// WriteFile implements toolrun.FileStore.
func (s *Store) WriteFile(ctx context.Context, threadID string, f toolrun.FileInfo, data []byte) (toolrun.FileInfo, error) {
	if data == nil {
		data = []byte{}
	}
	path, mimeType := f.Path, f.MimeType
	if err := errors.Join(checkTime("CreatedAt", f.CreatedAt), checkTime("UpdatedAt", f.UpdatedAt)); err != nil {
		return toolrun.FileInfo{}, fmt.Errorf("postgres: write file %q of thread %q: %w", path, threadID, err)
	}
	info := toolrun.FileInfo{Path: path, MimeType: mimeType, Size: int64(len(data)), UpdatedAt: f.UpdatedAt}
	err := s.writeQuery(ctx, threadID, `INSERT INTO files AS f (thread_id, path, mime_type, size, created_at, updated_at, data)
		VALUES ($1, $2, $3, $4, $7, $5, $6)
		ON CONFLICT (thread_id, path) DO UPDATE SET mime_type = EXCLUDED.mime_type, size = EXCLUDED.size,
			updated_at = EXCLUDED.updated_at, data = EXCLUDED.data
		RETURNING f.created_at`, []any{threadID, path, mimeType, info.Size, info.UpdatedAt, data, f.CreatedAt},
		func(r pgx.Rows) error { return r.Scan(&info.CreatedAt) })
	if err != nil {
		return toolrun.FileInfo{}, fmt.Errorf("postgres: write file %q of thread %q: %w", path, threadID, err)
	}
	info.CreatedAt = info.CreatedAt.UTC()
	return info, nil
}

// ReadFile implements toolrun.FileStore.
func (s *Store) ReadFile(ctx context.Context, threadID, path string) ([]byte, toolrun.FileInfo, error) {
	info := toolrun.FileInfo{Path: path}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT mime_type, size, created_at, updated_at, data FROM files WHERE thread_id = $1 AND path = $2`,
		threadID, path).Scan(&info.MimeType, &info.Size, &info.CreatedAt, &info.UpdatedAt, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return nil, toolrun.FileInfo{}, fmt.Errorf("postgres: read file %q of thread %q: %w", path, threadID, err)
	}
	if data == nil {
		data = []byte{}
	}
	info.CreatedAt, info.UpdatedAt = info.CreatedAt.UTC(), info.UpdatedAt.UTC()
	return data, info, nil
}

// StatFile implements toolrun.FileStore.
func (s *Store) StatFile(ctx context.Context, threadID, path string) (toolrun.FileInfo, error) {
	info := toolrun.FileInfo{Path: path}
	err := s.pool.QueryRow(ctx, `SELECT mime_type, size, created_at, updated_at FROM files WHERE thread_id = $1 AND path = $2`,
		threadID, path).Scan(&info.MimeType, &info.Size, &info.CreatedAt, &info.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return toolrun.FileInfo{}, fmt.Errorf("postgres: stat file %q of thread %q: %w", path, threadID, err)
	}
	info.CreatedAt, info.UpdatedAt = info.CreatedAt.UTC(), info.UpdatedAt.UTC()
	return info, nil
}

// ListFiles implements toolrun.FileStore. Paths compare in byte order (the
// column's collation is "C"): the files strictly below dir are those in
// [dir+"/", dir+"0"), as '0' follows '/'.
func (s *Store) ListFiles(ctx context.Context, threadID, dir string) ([]toolrun.FileInfo, error) {
	q := `SELECT path, mime_type, size, created_at, updated_at FROM files WHERE thread_id = $1`
	args := []any{threadID}
	if d := strings.TrimSuffix(dir, "/"); d != "" {
		q += ` AND (path = $2 OR (path >= $3 AND path < $4))`
		args = append(args, d, d+"/", d+"0")
	}
	out := []toolrun.FileInfo{}
	rows, err := s.pool.Query(ctx, q+` ORDER BY path`, args...)
	if err == nil {
		err = drain(rows, func(r pgx.Rows) error {
			var f toolrun.FileInfo
			if err := r.Scan(&f.Path, &f.MimeType, &f.Size, &f.CreatedAt, &f.UpdatedAt); err != nil {
				return err
			}
			f.CreatedAt, f.UpdatedAt = f.CreatedAt.UTC(), f.UpdatedAt.UTC()
			out = append(out, f)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: list files %q of thread %q: %w", dir, threadID, err)
	}
	return out, nil
}

// DeleteFile implements toolrun.FileStore.
func (s *Store) DeleteFile(ctx context.Context, threadID, path string) error {
	n, err := s.writeExec(ctx, threadID, `DELETE FROM files WHERE thread_id = $1 AND path = $2`, threadID, path)
	if err == nil && n == 0 {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("postgres: delete file %q of thread %q: %w", path, threadID, err)
	}
	return nil
}

// ---- children ----

// PutChild implements toolrun.ChildStore. It is fenced on the parent
// thread. It refuses an entry nested too deeply to decode (see jsondepth.TooDeep).
func (s *Store) PutChild(ctx context.Context, e toolrun.ChildEntry) error {
	created, updated := e.CreatedAt, e.UpdatedAt
	e.CreatedAt, e.UpdatedAt = time.Time{}, time.Time{}
	body, err := json.Marshal(&e)
	if member, deep := jsondepth.TooDeep(body); deep {
		err = fmt.Errorf("%s: %w", member, jsondepth.ErrTooDeep)
	}
	if err == nil {
		err = errors.Join(checkTime("CreatedAt", created), checkTime("UpdatedAt", updated))
	}
	if err == nil {
		_, err = s.writeExec(ctx, e.ParentID, `INSERT INTO children (parent_id, reference, created_at, updated_at, body)
			VALUES ($1, $2, $3, $4, $5::text::json)
			ON CONFLICT (parent_id, reference) DO UPDATE SET updated_at = EXCLUDED.updated_at, body = EXCLUDED.body`,
			e.ParentID, e.Reference, created, updated, string(body))
	}
	if err != nil {
		return fmt.Errorf("postgres: put child %q of %q: %w", e.Reference, e.ParentID, err)
	}
	return nil
}

// scanChild decodes a child entry from its row: its key columns, its times
// and its body, which holds the other fields (the key and times in it are
// not read: the columns are the entry's).
func scanChild(r pgx.Row) (toolrun.ChildEntry, error) {
	var parent, ref string
	var created, updated time.Time
	var body []byte
	if err := r.Scan(&parent, &ref, &created, &updated, &body); err != nil {
		return toolrun.ChildEntry{}, err
	}
	var e toolrun.ChildEntry
	if err := json.Unmarshal(body, &e); err != nil {
		return toolrun.ChildEntry{}, fmt.Errorf("decode entry %q: %w", ref, err)
	}
	e.ParentID, e.Reference = parent, ref
	e.CreatedAt, e.UpdatedAt = created.UTC(), updated.UTC()
	return e, nil
}

// Child implements toolrun.ChildStore.
func (s *Store) Child(ctx context.Context, parentID, reference string) (toolrun.ChildEntry, error) {
	e, err := scanChild(s.pool.QueryRow(ctx, `SELECT parent_id, reference, created_at, updated_at, body::text FROM children
		WHERE parent_id = $1 AND reference = $2`, parentID, reference))
	if errors.Is(err, pgx.ErrNoRows) {
		err = toolrun.ErrNotFound
	}
	if err != nil {
		return toolrun.ChildEntry{}, fmt.Errorf("postgres: child %q of %q: %w", reference, parentID, err)
	}
	return e, nil
}

// Children implements toolrun.ChildStore.
func (s *Store) Children(ctx context.Context, parentID string) ([]toolrun.ChildEntry, error) {
	out := []toolrun.ChildEntry{}
	rows, err := s.pool.Query(ctx, `SELECT parent_id, reference, created_at, updated_at, body::text FROM children
		WHERE parent_id = $1 ORDER BY ord`, parentID)
	if err == nil {
		err = drain(rows, func(r pgx.Rows) error {
			e, err := scanChild(r)
			out = append(out, e)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: children of %q: %w", parentID, err)
	}
	return out, nil
}
