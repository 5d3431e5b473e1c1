package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema versions in order: migrations[i] takes the
// database from version i to version i+1. Released entries never change;
// new versions are appended. They run in the schema first on the
// connection's search_path.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE threads (
	id            text PRIMARY KEY,
	agent_id      text NOT NULL DEFAULT '',
	user_id       text NOT NULL DEFAULT '',
	parent_id     text NOT NULL DEFAULT '',
	properties    jsonb,
	tags          jsonb,
	created_at    timestamptz NOT NULL,
	terminated_at timestamptz,
	next_seq      bigint NOT NULL DEFAULT 0 -- the last Seq handed out; its row lock orders appends
);

CREATE TABLE messages (
	thread_id    text    NOT NULL,
	seq          bigint  NOT NULL,
	id           text    NOT NULL,
	role         text    NOT NULL,
	tool_call_id text    NOT NULL DEFAULT '',
	depth        integer NOT NULL DEFAULT 0,
	silent       boolean NOT NULL DEFAULT false,
	created_at   timestamptz NOT NULL,
	body         json    NOT NULL, -- the whole message
	PRIMARY KEY (thread_id, seq)
);

-- One stored result per tool call and thread, enforced by the database.
CREATE UNIQUE INDEX messages_tool_result ON messages (thread_id, tool_call_id)
	WHERE role = 'tool' AND tool_call_id <> '';

-- The number of messages per thread, silence and depth, kept by a trigger,
-- so ListMessages finds Total without counting rows.
CREATE TABLE message_counts (
	thread_id text    NOT NULL,
	silent    boolean NOT NULL,
	depth     integer NOT NULL,
	n         bigint  NOT NULL,
	PRIMARY KEY (thread_id, silent, depth)
);

CREATE FUNCTION toolrun_count_message() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	INSERT INTO message_counts AS c (thread_id, silent, depth, n) VALUES (NEW.thread_id, NEW.silent, NEW.depth, 1)
		ON CONFLICT (thread_id, silent, depth) DO UPDATE SET n = c.n + 1;
	RETURN NULL;
END $$;

CREATE TRIGGER messages_count AFTER INSERT ON messages
	FOR EACH ROW EXECUTE FUNCTION toolrun_count_message();

CREATE TABLE thread_values (
	thread_id text NOT NULL,
	key       text NOT NULL,
	value     json NOT NULL,
	PRIMARY KEY (thread_id, key)
);

CREATE TABLE env (
	scope    text NOT NULL,
	owner_id text NOT NULL,
	name     text NOT NULL,
	value    text NOT NULL,
	type     text NOT NULL,
	PRIMARY KEY (scope, owner_id, name)
);

CREATE TABLE files (
	thread_id  text COLLATE "C" NOT NULL,
	path       text COLLATE "C" NOT NULL, -- byte order, as ListFiles sorts
	mime_type  text NOT NULL,
	size       bigint NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	data       bytea NOT NULL,
	PRIMARY KEY (thread_id, path)
);

CREATE TABLE children (
	ord        bigint GENERATED ALWAYS AS IDENTITY, -- creation order
	parent_id  text NOT NULL,
	reference  text NOT NULL,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	body       json NOT NULL,
	PRIMARY KEY (parent_id, reference)
);

-- Thread ownership: one lease per thread; token grows on every takeover.
CREATE TABLE thread_leases (
	thread_id  text PRIMARY KEY,
	owner      text NOT NULL,
	token      bigint NOT NULL,
	expires_at timestamptz NOT NULL
);

-- Fails with SQLSTATE TRL01 unless the lease (thread, token) is current;
-- holds a share lock on the lease row until the transaction ends, so no
-- takeover commits in between.
CREATE FUNCTION toolrun_check_lease(p_thread text, p_token bigint) RETURNS void LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
	PERFORM 1 FROM thread_leases WHERE thread_id = p_thread AND token = p_token AND expires_at > now() FOR SHARE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'lease on thread % with token % is no longer held', p_thread, p_token USING ERRCODE = 'TRL01';
	END IF;
END $$;
`,
	// 2: toolrun_append_batch, the statement of group commit.
	`
-- Appends one message to each of several threads in one transaction, as
-- that many single-message appends would, and returns one row per append:
-- its position in the arrays (1-based), its Seq, and its outcome: 'ok', or
-- 'stale' (p_token > 0 and that lease is no longer current), 'notfound'
-- (no such thread) or 'duplicate' (the thread already has a result for
-- the tool call), in which case nothing of it is stored. The appends run
-- in the order of their threads, so concurrent batches lock thread rows
-- in one order and cannot deadlock; appends to one thread keep their order
-- in the arrays.
CREATE FUNCTION toolrun_append_batch(p_thread text[], p_token bigint[], p_id text[], p_role text[], p_call text[],
	p_depth integer[], p_silent boolean[], p_created timestamptz[], p_body text[])
RETURNS TABLE (out_idx integer, out_seq bigint, out_outcome text) LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
	k integer;
	s bigint;
BEGIN
	FOR k IN SELECT o FROM generate_subscripts(p_thread, 1) AS o ORDER BY p_thread[o], o LOOP
		out_idx := k;
		out_seq := NULL;
		IF p_token[k] > 0 THEN
			PERFORM 1 FROM thread_leases l
				WHERE l.thread_id = p_thread[k] AND l.token = p_token[k] AND l.expires_at > now() FOR SHARE;
			IF NOT FOUND THEN
				out_outcome := 'stale';
				RETURN NEXT;
				CONTINUE;
			END IF;
		END IF;
		UPDATE threads t SET next_seq = t.next_seq + 1 WHERE t.id = p_thread[k] RETURNING t.next_seq INTO s;
		IF NOT FOUND THEN
			out_outcome := 'notfound';
			RETURN NEXT;
			CONTINUE;
		END IF;
		INSERT INTO messages (thread_id, seq, id, role, tool_call_id, depth, silent, created_at, body)
			VALUES (p_thread[k], s, p_id[k], p_role[k], p_call[k], p_depth[k], p_silent[k], p_created[k], p_body[k]::json)
			ON CONFLICT (thread_id, tool_call_id) WHERE role = 'tool' AND tool_call_id <> '' DO NOTHING;
		IF FOUND THEN
			out_seq := s;
			out_outcome := 'ok';
		ELSE
			out_outcome := 'duplicate';
		END IF;
		RETURN NEXT;
	END LOOP;
END $$;
`,
	// 3: secret env values are sealed by store/keyring
	// ("toolrun:sealed:v1:…" in env.value). The tables do not change; the
	// version keeps builds before encryption, which would take the sealed
	// text for the value, from opening the database.
	`SELECT 1`,
	// 4: typed fields. Thread.Arguments and SessionTurns get columns. A
	// message's body already holds every field, so no message column is
	// added; the facts that travelled in maps move into the fields that now
	// hold them. Only values of toolrun's own form move (a string error
	// code, an object of error data, and so on, on the roles that had
	// them), and a typed field already set wins, so a caller's own metadata
	// and property keys stay where they are. Only rows with such keys are
	// rewritten.
	`
ALTER TABLE threads ADD COLUMN arguments jsonb;
ALTER TABLE threads ADD COLUMN session_turns integer NOT NULL DEFAULT 0;

UPDATE threads SET session_turns = (properties ->> 'session_turns')::numeric::integer,
		properties = nullif(properties - 'session_turns', '{}'::jsonb)
	WHERE jsonb_typeof(properties -> 'session_turns') = 'number';
UPDATE threads SET arguments = properties -> 'arguments',
		properties = nullif(properties - 'arguments', '{}'::jsonb)
	WHERE jsonb_typeof(properties -> 'arguments') = 'object';

CREATE FUNCTION toolrun_typed_message(b jsonb, r text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
	md jsonb := b -> 'metadata';
BEGIN
	IF jsonb_typeof(md) IS DISTINCT FROM 'object' THEN
		RETURN b;
	END IF;
	IF jsonb_typeof(md -> 'side') = 'string' AND coalesce(b ->> 'side', '') = '' THEN
		b := b || jsonb_build_object('side', md -> 'side');
		md := md - 'side';
	END IF;
	IF jsonb_typeof(md -> 'error_code') = 'string' AND r IN ('tool', 'assistant') AND NOT b ? 'error_code' THEN
		b := b || jsonb_build_object('error_code', md -> 'error_code');
		md := md - 'error_code';
	END IF;
	IF jsonb_typeof(md -> 'error_data') = 'object' AND r = 'tool' AND NOT b ? 'error_data' THEN
		b := b || jsonb_build_object('error_data', md -> 'error_data');
		md := md - 'error_data';
	END IF;
	IF jsonb_typeof(md -> 'stack') = 'string' AND r = 'tool' AND NOT b ? 'stack' THEN
		b := b || jsonb_build_object('stack', md -> 'stack');
		md := md - 'stack';
	END IF;
	IF md -> 'queued' = 'true'::jsonb AND r = 'tool' AND NOT b ? 'queued' THEN
		b := b || jsonb_build_object('queued', true);
		md := md - 'queued';
	END IF;
	IF jsonb_typeof(md -> 'arguments') = 'string' AND b -> 'queued' = 'true'::jsonb AND NOT b ? 'arguments' THEN
		b := b || jsonb_build_object('arguments', md -> 'arguments');
		md := md - 'arguments';
	END IF;
	IF jsonb_typeof(md -> 'queued_calls') = 'array' AND r = 'tool' AND NOT b ? 'queued_calls' THEN
		b := b || jsonb_build_object('queued_calls', (
			SELECT coalesce(jsonb_agg(CASE WHEN c -> 'arguments_redacted' = 'true'::jsonb
					THEN (c - 'arguments_redacted') || '{"redacted": true}'::jsonb
					ELSE c - 'arguments_redacted' END ORDER BY i), '[]'::jsonb)
			FROM jsonb_array_elements(md -> 'queued_calls') WITH ORDINALITY AS q(c, i)));
		md := md - 'queued_calls';
	END IF;
	IF md = '{}'::jsonb THEN
		RETURN b - 'metadata';
	END IF;
	RETURN jsonb_set(b, '{metadata}', md);
END $$;

UPDATE messages SET body = toolrun_typed_message(body::jsonb, role)::json
	WHERE (body::jsonb -> 'metadata') ?| ARRAY['side', 'error_code', 'error_data', 'stack', 'queued', 'arguments', 'queued_calls'];

DROP FUNCTION toolrun_typed_message(jsonb, text);

-- A child status that is not a state was the child's report.
UPDATE children SET body = (body::jsonb || jsonb_build_object('report', body ->> 'status', 'status', 'running'))::json
	WHERE json_typeof(body -> 'status') = 'string'
		AND body ->> 'status' NOT IN ('', 'running', 'idle', 'failed', 'awaiting_human', 'terminated');
`,
}

// SchemaVersion is the schema version this package writes and reads.
const SchemaVersion = 4

// migrate brings the schema to SchemaVersion in one transaction, holding a
// transaction-level advisory lock keyed on the schema name, so several
// instances starting at once apply each version exactly once.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('toolrun.migrate:' || current_schema()))`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var cur int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_version`).Scan(&cur); err != nil {
			return err
		}
		if cur > len(migrations) {
			return fmt.Errorf("database schema version %d is newer than this build supports (%d)", cur, len(migrations))
		}
		for v := cur; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migration to version %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
}
