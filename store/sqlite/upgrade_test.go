package sqlite_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ncruces/go-sqlite3/driver"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/sqlite"
)

// A database as schema version 2 leaves it, with rows written the way
// builds before typed fields wrote them (toolrun's facts in message
// metadata, thread properties and free child statuses), opens with every
// fact in its typed field, and the caller's own metadata and property keys
// where they were.
func TestUpgradeToTypedFields(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := driver.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	const zero = `"id":"","thread_id":"","seq":0,"role":"","content":"","created_at":"0001-01-01T00:00:00Z"`
	msg := `INSERT INTO messages (thread_id, seq, id, role, tool_call_id, created_at, content, name, tool_status, parent_id, prompt, subagent_id, extra)
		VALUES ('t1', ?, ?, ?, ?, 1735689600000000, ?, '', ?, '', '', '', ?)`
	for _, q := range [][]any{
		{`PRAGMA journal_mode=WAL`},
		{`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`},
		{sqlite.Migration1},
		{sqlite.Migration2},
		{`INSERT INTO schema_version (version, applied_at) VALUES (1, 0), (2, 0)`},
		{`INSERT INTO threads (id, properties, created_at) VALUES ('t1', ?, 1735689600000000)`,
			`{"session_turns":2,"arguments":{"topic":"go","n":1},"mine":"kept"}`},
		{`INSERT INTO threads (id, properties, created_at) VALUES ('t2', ?, 1735689600000000)`, `{"session_turns":1}`},
		{`INSERT INTO threads (id, properties, created_at) VALUES ('t3', ?, 1735689600000000)`, `{"arguments":"not an object"}`},
		// A failed result: error details, side, and the caller's own key.
		{msg, 1, "m1", "tool", "c1", "Error: boom", "error",
			`{` + zero + `,"call_digest":"dig1","metadata":{"error_code":"upstream","error_data":{"status":502,"hosts":["a"]},"stack":"goroutine 1","side":"a","trace":"t-9"}}`},
		// A queued call's result.
		{msg, 2, "m2", "tool", "c1_q1", "sent", "success",
			`{` + zero + `,"call_digest":"dig2","metadata":{"queued":true,"arguments":"{\"to\":\"x\"}","side":"a"}}`},
		// A result whose call queued two more, one with a secret redacted.
		{msg, 3, "m3", "tool", "c2", "queued", "success",
			`{` + zero + `,"metadata":{"queued_calls":[{"id":"q1","name":"notify","arguments":"{\"to\":\"[REDACTED:T]\"}","arguments_redacted":true},{"id":"q2","name":"log","arguments":"{}"}]}}`},
		// The repeated-error breaker's assistant message.
		{msg, 4, "m4", "assistant", "", "stopped", "",
			`{` + zero + `,"tool_calls":[{"id":"c3","name":"search","arguments":"{}"}],"metadata":{"side":"b","error_code":"repeated_tool_error"}}`},
		// A user message: an error_code there was the caller's.
		{msg, 5, "m5", "user", "", "hello", "", `{` + zero + `,"metadata":{"side":"b","error_code":"mine","queued":true}}`},
		// A row written since typed fields, before their columns.
		{msg, 6, "m6", "tool", "c4", "ok", "success", `{` + zero + `,"side":"a","call_digest":"dig6"}`},
		{msg, 7, "m7", "user", "", "plain", "", nil},
		{`INSERT INTO children (parent_id, reference, created_at, updated_at, body) VALUES ('t1', 'kid1', 1, 2, ?)`,
			`{"parent_id":"t1","reference":"kid1","relationship":"r","owner":"a","agent":"x","name":"n","blocking":false,"status":"reading the second source","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`},
		{`INSERT INTO children (parent_id, reference, created_at, updated_at, body) VALUES ('t1', 'kid2', 3, 4, ?)`,
			`{"parent_id":"t1","reference":"kid2","relationship":"r","owner":"a","agent":"x","name":"n","blocking":true,"status":"idle","created_at":"0001-01-01T00:00:00Z","updated_at":"0001-01-01T00:00:00Z"}`},
	} {
		if _, err := db.Exec(q[0].(string), q[1:]...); err != nil {
			t.Fatalf("%s: %v", q[0], err)
		}
	}
	db.Close()

	st, err := sqlite.Open(path, withKeys(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := t.Context()
	var version int
	if err := st.DB().QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != sqlite.SchemaVersion {
		t.Errorf("schema version %d, %v; want %d", version, err, sqlite.SchemaVersion)
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
	}
	if r, err := st.ToolResult(ctx, "t1", "c1"); err != nil || r.ErrorCode != "upstream" || r.Side != "a" {
		t.Errorf("ToolResult(c1) = %+v, %v", r, err)
	}
	// Rows left with nothing outside the columns need no JSON any more.
	var nulls int
	if err := st.DB().QueryRow(`SELECT count(*) FROM messages WHERE extra IS NULL`).Scan(&nulls); err != nil || nulls != 2 {
		t.Errorf("%d rows without extra JSON, %v; want 2 (m6, m7)", nulls, err)
	}

	kids, err := st.Children(ctx, "t1")
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %v, %v", kids, err)
	}
	if kids[0].Status != "running" || kids[0].Report != "reading the second source" || kids[1].Status != "idle" || kids[1].Report != "" || !kids[1].Blocking {
		t.Errorf("children after the upgrade: %+v", kids)
	}

	// The upgraded thread takes appends; the duplicate rule still holds.
	if err := st.AppendMessages(ctx, "t1", &toolrun.Message{ID: testID(), Role: toolrun.RoleTool, ToolCallID: "c1", CreatedAt: testTime}); err == nil {
		t.Error("a second result for c1 was stored after the upgrade")
	}
	m := &toolrun.Message{ID: testID(), Role: toolrun.RoleTool, ToolCallID: "c9", Side: "b", CallDigest: "d9", CreatedAt: testTime}
	if err := st.AppendMessages(ctx, "t1", m); err != nil || m.Seq != 8 {
		t.Errorf("append after the upgrade: Seq %d, %v; want 8", m.Seq, err)
	}
}
