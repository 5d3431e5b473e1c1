package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations are the schema versions in order: migrations[i] takes the
// database from version i to version i+1. Released entries never change;
// new versions are appended.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE threads (
	id            TEXT PRIMARY KEY,
	agent_id      TEXT NOT NULL DEFAULT '',
	user_id       TEXT NOT NULL DEFAULT '',
	parent_id     TEXT NOT NULL DEFAULT '',
	properties    TEXT,              -- JSON object or NULL
	tags          TEXT,              -- JSON array or NULL
	created_at    INTEGER NOT NULL,  -- Unix microseconds
	terminated_at INTEGER            -- Unix microseconds, NULL while running
);

CREATE TABLE messages (
	thread_id    TEXT    NOT NULL,
	seq          INTEGER NOT NULL,
	id           TEXT    NOT NULL,
	role         TEXT    NOT NULL,
	tool_call_id TEXT    NOT NULL DEFAULT '',
	depth        INTEGER NOT NULL DEFAULT 0,
	silent       INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,  -- Unix microseconds
	content      TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	tool_status  TEXT    NOT NULL,
	parent_id    TEXT    NOT NULL,
	prompt       TEXT    NOT NULL,
	subagent_id  TEXT    NOT NULL,
	extra        TEXT,              -- JSON of the other fields (tool calls, attachments, metadata), NULL when empty
	PRIMARY KEY (thread_id, seq)
) WITHOUT ROWID;

-- One stored result per tool call and thread, enforced by the database.
CREATE UNIQUE INDEX messages_tool_result ON messages (thread_id, tool_call_id)
	WHERE role = 'tool' AND tool_call_id <> '';

CREATE TABLE thread_values (
	thread_id TEXT NOT NULL,
	key       TEXT NOT NULL,
	value     TEXT NOT NULL, -- JSON
	PRIMARY KEY (thread_id, key)
) WITHOUT ROWID;

CREATE TABLE env (
	scope    TEXT NOT NULL,
	owner_id TEXT NOT NULL,
	name     TEXT NOT NULL,
	value    TEXT NOT NULL,
	type     TEXT NOT NULL,
	PRIMARY KEY (scope, owner_id, name)
) WITHOUT ROWID;

CREATE TABLE files (
	thread_id  TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	mime_type  TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	data       BLOB    NOT NULL,
	PRIMARY KEY (thread_id, path)
);

CREATE TABLE children (
	ord        INTEGER PRIMARY KEY AUTOINCREMENT, -- creation order
	parent_id  TEXT    NOT NULL,
	reference  TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	body       TEXT    NOT NULL, -- the whole entry as JSON
	UNIQUE (parent_id, reference)
);
`,
	// 2: secret env values are sealed by store/keyring
	// ("toolrun:sealed:v1:…" in env.value). The tables do not change; the
	// version keeps builds before encryption, which would take the sealed
	// text for the value, from opening the file.
	`SELECT 1`,
}

// SchemaVersion is the schema version this package writes and reads.
const SchemaVersion = 2

// migrate brings the database to SchemaVersion in one IMMEDIATE transaction,
// so two processes opening the same file at once apply each step once.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil) // the driver begins IMMEDIATE: the write lock is taken up front
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return err
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return err
	}
	if cur > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this build supports (%d)", cur, len(migrations))
	}
	for v := cur; v < len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration to version %d: %w", v+1, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v+1, time.Now().UnixMicro()); err != nil {
			return err
		}
	}
	return tx.Commit()
}
