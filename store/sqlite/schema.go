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
	// 3: typed fields. Thread.Arguments and SessionTurns get columns, and
	// so do the hot Message fields Side and CallDigest (every runtime
	// message has a side, every tool result a call digest: with columns
	// such rows need no JSON). The facts that travelled in maps move into
	// the fields that now hold them. Only values of toolrun's own form move
	// (a string error code, an object of error data, and so on, on the
	// roles that had them), and a typed field already set wins, so a
	// caller's own metadata and property keys stay where they are.
	`
ALTER TABLE threads ADD COLUMN arguments TEXT; -- JSON object or NULL
ALTER TABLE threads ADD COLUMN session_turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN side TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN call_digest TEXT NOT NULL DEFAULT '';

-- Thread properties: session_turns and arguments.
UPDATE threads SET session_turns = CAST(properties ->> '$.session_turns' AS INTEGER),
		properties = nullif(json_remove(properties, '$.session_turns'), '{}')
	WHERE json_type(properties, '$.session_turns') IN ('integer', 'real');
UPDATE threads SET arguments = json(properties -> '$.arguments'),
		properties = nullif(json_remove(properties, '$.arguments'), '{}')
	WHERE json_type(properties, '$.arguments') = 'object';

-- Message fields that were JSON in extra and now have columns.
UPDATE messages SET call_digest = extra ->> '$.call_digest', extra = json_remove(extra, '$.call_digest')
	WHERE json_type(extra, '$.call_digest') = 'text';
UPDATE messages SET side = extra ->> '$.side', extra = json_remove(extra, '$.side')
	WHERE json_type(extra, '$.side') = 'text';

-- Message metadata keys toolrun wrote.
UPDATE messages SET side = extra ->> '$.metadata.side', extra = json_remove(extra, '$.metadata.side')
	WHERE json_type(extra, '$.metadata.side') = 'text' AND side = '';
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.error_code'), '$.error_code', extra ->> '$.metadata.error_code')
	WHERE json_type(extra, '$.metadata.error_code') = 'text' AND role IN ('tool', 'assistant') AND json_type(extra, '$.error_code') IS NULL;
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.error_data'), '$.error_data', json(extra -> '$.metadata.error_data'))
	WHERE json_type(extra, '$.metadata.error_data') = 'object' AND role = 'tool' AND json_type(extra, '$.error_data') IS NULL;
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.stack'), '$.stack', extra ->> '$.metadata.stack')
	WHERE json_type(extra, '$.metadata.stack') = 'text' AND role = 'tool' AND json_type(extra, '$.stack') IS NULL;
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.queued'), '$.queued', json('true'))
	WHERE json_type(extra, '$.metadata.queued') = 'true' AND role = 'tool' AND json_type(extra, '$.queued') IS NULL;
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.arguments'), '$.arguments', extra ->> '$.metadata.arguments')
	WHERE json_type(extra, '$.metadata.arguments') = 'text' AND json_type(extra, '$.queued') = 'true' AND json_type(extra, '$.arguments') IS NULL;
UPDATE messages SET extra = json_set(json_remove(extra, '$.metadata.queued_calls'), '$.queued_calls', json(
		(SELECT json_group_array(CASE WHEN json_type(value, '$.arguments_redacted') = 'true'
				THEN json_set(json_remove(value, '$.arguments_redacted'), '$.redacted', json('true'))
				ELSE json_remove(value, '$.arguments_redacted') END ORDER BY key)
			FROM json_each(extra, '$.metadata.queued_calls'))))
	WHERE json_type(extra, '$.metadata.queued_calls') = 'array' AND role = 'tool' AND json_type(extra, '$.queued_calls') IS NULL;

-- A metadata object left empty goes, and so does an extra left with
-- nothing but the zero fields every encoding has.
UPDATE messages SET extra = json_remove(extra, '$.metadata')
	WHERE json_type(extra, '$.metadata') = 'object' AND NOT EXISTS (SELECT 1 FROM json_each(extra, '$.metadata'));
UPDATE messages SET extra = NULL
	WHERE extra IS NOT NULL AND NOT EXISTS (SELECT 1 FROM json_each(extra)
		WHERE key NOT IN ('id', 'thread_id', 'seq', 'role', 'content', 'created_at'));

-- A child status that is not a state was the child's report.
UPDATE children SET body = json_set(body, '$.report', body ->> '$.status', '$.status', 'running')
	WHERE json_type(body, '$.status') = 'text'
		AND body ->> '$.status' NOT IN ('', 'running', 'idle', 'failed', 'awaiting_human', 'terminated');
`,
}

// SchemaVersion is the schema version this package writes and reads.
const SchemaVersion = 3

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
