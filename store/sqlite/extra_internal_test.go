package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// encodeExtra's zero check gives what encoding and comparing with the
// empty encoding gives, and what it stores is the encoding without the zero
// keys of the fields that have columns, decoding to the same message.
func TestEncodeExtra(t *testing.T) {
	// The keys encodeExtra leaves out are those of the empty encoding.
	if want := string(zeroHead[:len(zeroHead)-1]) + string(zeroTail); string(emptyExtra) != want {
		t.Fatalf("a columnless message encodes as %s; encodeExtra strips the keys of %s", emptyExtra, want)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	for i, m := range []*toolrun.Message{
		{},
		{ID: "m", ThreadID: "t", Seq: 3, Role: toolrun.RoleTool, Content: "c", ToolCallID: "x", Name: "n", ToolStatus: toolrun.StatusError,
			ParentID: "p", Depth: 2, Silent: true, Prompt: "pr", SubagentID: "s", Side: "a", CallDigest: "d", CreatedAt: at},
		{ToolCalls: []toolrun.ToolCall{}},          // empty, not nil: encodes as empty
		{Metadata: map[string]any{}},               // likewise
		{ToolCalls: []toolrun.ToolCall{{ID: "c"}}}, // has extra
		{Attachments: []toolrun.AttachmentRef{{}}},
		{Metadata: map[string]any{"k": 1}},
		{ErrorCode: "e"}, // typed fields without a column go to extra
		{QueuedCalls: []toolrun.ToolCall{{ID: "q", Redacted: true}}},
	} {
		got, err := encodeExtra(m)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(columnless(m))
		wantNil := string(b) == string(emptyExtra)
		if (got == nil) != wantNil {
			t.Errorf("message %d: encodeExtra = %v, want nil=%v (%s)", i, got, wantNil, b)
			continue
		}
		if got == nil {
			continue
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(*got), &keys); err != nil {
			t.Fatalf("message %d: encodeExtra = %s: %v", i, *got, err)
		}
		for _, key := range []string{"id", "thread_id", "seq", "role", "content", "created_at"} {
			if _, ok := keys[key]; ok {
				t.Errorf("message %d: encodeExtra = %s, which keeps the zero key %q", i, *got, key)
			}
		}
		var short, full toolrun.Message
		if err := json.Unmarshal([]byte(*got), &short); err != nil {
			t.Fatalf("message %d: encodeExtra = %s: %v", i, *got, err)
		}
		if err := json.Unmarshal(b, &full); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(short, full) {
			t.Errorf("message %d: %s decodes as %+v; the whole encoding %s as %+v", i, *got, short, b, full)
		}
	}
}

// A row whose extra holds the zero keys too, as earlier versions stored
// every row, reads back as the same message as one stored now.
func TestExtraWithZeroKeysReadsTheSame(t *testing.T) {
	st := openTemp(t)
	fillThread(t, st, "t", 0)
	ctx := t.Context()
	at := time.Date(2025, 1, 2, 3, 4, 5, 6000, time.UTC)
	m := &toolrun.Message{ID: "a", Role: toolrun.RoleAssistant, Content: "calling", CreatedAt: at,
		ToolCalls: []toolrun.ToolCall{{ID: "c1", Name: "get", Arguments: `{"x":1}`}}, Metadata: map[string]any{"k": "v"}}
	if err := st.AppendMessages(ctx, "t", m); err != nil {
		t.Fatal(err)
	}
	before, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := st.db.QueryRowContext(ctx, `SELECT extra FROM messages WHERE id = 'a'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	long, _ := json.Marshal(columnless(m))
	if stored == string(long) {
		t.Fatalf("extra stored with its zero keys: %s", stored)
	}
	if _, err := st.db.ExecContext(ctx, `UPDATE messages SET extra = ? WHERE id = 'a'`, string(long)); err != nil {
		t.Fatal(err)
	}
	after, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before.Messages, after.Messages) {
		t.Fatalf("stored as %s, the message reads as\n%+v\nstored as %s, as\n%+v", stored, before.Messages, long, after.Messages)
	}
}
