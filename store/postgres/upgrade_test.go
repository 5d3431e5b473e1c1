package postgres_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
)

// A schema as version 3 leaves it, with rows written the way builds before
// typed fields wrote them (toolrun's facts in message metadata, thread
// properties and free child statuses), opens with every fact in its typed
// field, and the caller's own metadata and property keys where they were.
func TestUpgradeToTypedFields(t *testing.T) {
	url, schema := dbURL(t), newSchema(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	msg := func(seq int, id, role, callID, body string) string {
		b := `{"id":"` + id + `","thread_id":"t1","seq":0,"role":"` + role + `","content":"c` + id + `"`
		if callID != "" {
			b += `,"tool_call_id":"` + callID + `"`
		}
		b += body + `,"created_at":"2025-01-01T00:00:00Z"}`
		return fmt.Sprintf(`INSERT INTO messages (thread_id, seq, id, role, tool_call_id, created_at, body)
			VALUES ('t1', %d, '%s', '%s', '%s', '2025-01-01T00:00:00Z', '%s')`, seq, id, role, callID, b)
	}
	stmts := []string{
		`CREATE SCHEMA ` + pgx.Identifier{schema}.Sanitize(),
		`SET search_path = ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		postgres.Migration1,
		postgres.Migration2,
		postgres.Migration3,
		`INSERT INTO schema_version (version) VALUES (1), (2), (3)`,
		`INSERT INTO threads (id, properties, created_at, next_seq) VALUES
			('t1', '{"session_turns":2,"arguments":{"topic":"go","n":1},"mine":"kept"}', now(), 7),
			('t2', '{"session_turns":1}', now(), 0),
			('t3', '{"arguments":"not an object"}', now(), 0)`,
		// A failed result: error details, side, and the caller's own key.
		msg(1, "m1", "tool", "c1", `,"tool_status":"error","call_digest":"dig1","metadata":{"error_code":"upstream","error_data":{"status":502,"hosts":["a"]},"stack":"goroutine 1","side":"a","trace":"t-9"}`),
		// A queued call's result.
		msg(2, "m2", "tool", "c1_q1", `,"call_digest":"dig2","metadata":{"queued":true,"arguments":"{\"to\":\"x\"}","side":"a"}`),
		// A result whose call queued two more, one with a secret redacted.
		msg(3, "m3", "tool", "c2", `,"metadata":{"queued_calls":[{"id":"q1","name":"notify","arguments":"{\"to\":\"[REDACTED:T]\"}","arguments_redacted":true},{"id":"q2","name":"log","arguments":"{}"}]}`),
		// The repeated-error breaker's assistant message.
		msg(4, "m4", "assistant", "", `,"tool_calls":[{"id":"c3","name":"search","arguments":"{}"}],"metadata":{"side":"b","error_code":"repeated_tool_error"}`),
		// A user message: an error_code there was the caller's.
		msg(5, "m5", "user", "", `,"metadata":{"side":"b","error_code":"mine","queued":true}`),
		// A row written since typed fields.
		msg(6, "m6", "tool", "c4", `,"side":"a","call_digest":"dig6"`),
		msg(7, "m7", "user", "", ``),
		`INSERT INTO children (parent_id, reference, created_at, updated_at, body) VALUES
			('t1', 'kid1', now(), now(), '{"parent_id":"t1","reference":"kid1","relationship":"r","owner":"a","agent":"x","name":"n","blocking":false,"status":"reading the second source"}'),
			('t1', 'kid2', now(), now(), '{"parent_id":"t1","reference":"kid2","relationship":"r","owner":"a","agent":"x","name":"n","blocking":true,"status":"idle"}')`,
	}
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var before string
	if err := conn.QueryRow(ctx, `SELECT body::text FROM messages WHERE id = 'm7'`).Scan(&before); err != nil {
		t.Fatal(err)
	}

	st := openIn(t, schema, postgres.Options{Keys: testKeys})
	var version int
	if err := st.Pool().QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != postgres.SchemaVersion {
		t.Errorf("schema version %d, %v; want %d", version, err, postgres.SchemaVersion)
	}
	threads := map[string]toolrun.Thread{
		"t1": {Arguments: map[string]any{"topic": "go", "n": 1.0}, SessionTurns: 2, Properties: map[string]any{"mine": "kept"}},
		"t2": {SessionTurns: 1},
		"t3": {Properties: map[string]any{"arguments": "not an object"}},
	}
	for id, want := range threads {
		got, err := st.GetThread(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Arguments, want.Arguments) || got.SessionTurns != want.SessionTurns || !reflect.DeepEqual(got.Properties, want.Properties) {
			t.Errorf("thread %s: Arguments %v, SessionTurns %d, Properties %v; want %v, %d, %v",
				id, got.Arguments, got.SessionTurns, got.Properties, want.Arguments, want.SessionTurns, want.Properties)
		}
	}
	p, err := st.ListMessages(ctx, "t1", toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	if err != nil || len(p.Messages) != 7 {
		t.Fatalf("listed %d messages, %v; want 7", len(p.Messages), err)
	}
	wants := []toolrun.Message{
		{ErrorCode: "upstream", ErrorData: map[string]any{"status": 502.0, "hosts": []any{"a"}}, Stack: "goroutine 1", Side: "a", CallDigest: "dig1",
			Metadata: map[string]any{"trace": "t-9"}},
		{Queued: true, Arguments: `{"to":"x"}`, Side: "a", CallDigest: "dig2"},
		{QueuedCalls: []toolrun.ToolCall{{ID: "q1", Name: "notify", Arguments: `{"to":"[REDACTED:T]"}`, Redacted: true}, {ID: "q2", Name: "log", Arguments: "{}"}}},
		{ToolCalls: []toolrun.ToolCall{{ID: "c3", Name: "search", Arguments: "{}"}}, ErrorCode: "repeated_tool_error", Side: "b"},
		{Side: "b", Metadata: map[string]any{"error_code": "mine", "queued": true}},
		{Side: "a", CallDigest: "dig6"},
		{},
	}
	for i, w := range wants {
		g := p.Messages[i]
		got := toolrun.Message{ErrorCode: g.ErrorCode, ErrorData: g.ErrorData, Stack: g.Stack, Queued: g.Queued, Arguments: g.Arguments,
			QueuedCalls: g.QueuedCalls, Side: g.Side, CallDigest: g.CallDigest, ToolCalls: g.ToolCalls, Metadata: g.Metadata}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("message %s after the upgrade:\n got %+v\nwant %+v", g.ID, got, w)
		}
		if g.Content != "c"+g.ID {
			t.Errorf("message %s: content %q", g.ID, g.Content)
		}
	}
	// Rows without toolrun's metadata keys are not rewritten.
	var after string
	if err := st.Pool().QueryRow(ctx, `SELECT body::text FROM messages WHERE id = 'm7'`).Scan(&after); err != nil || after != before {
		t.Errorf("an untouched row's body changed from %s to %s (%v)", before, after, err)
	}
	kids, err := st.Children(ctx, "t1")
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %v, %v", kids, err)
	}
	if kids[0].Status != "running" || kids[0].Report != "reading the second source" || kids[1].Status != "idle" || kids[1].Report != "" || !kids[1].Blocking {
		t.Errorf("children after the upgrade: %+v", kids)
	}
	if err := st.AppendMessages(ctx, "t1", &toolrun.Message{ID: testID(), Role: toolrun.RoleTool, ToolCallID: "c1", CreatedAt: testTime}); err == nil {
		t.Error("a second result for c1 was stored after the upgrade")
	}
	m := &toolrun.Message{ID: testID(), Role: toolrun.RoleTool, ToolCallID: "c9", Side: "b", CallDigest: "d9", CreatedAt: testTime}
	if err := st.AppendMessages(ctx, "t1", m); err != nil || m.Seq <= 7 {
		t.Errorf("append after the upgrade: Seq %d, %v; want above 7", m.Seq, err)
	}
}
