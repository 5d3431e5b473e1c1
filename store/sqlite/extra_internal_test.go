package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// encodeExtra's zero check gives what encoding and comparing with the
// empty encoding gives.
func TestEncodeExtra(t *testing.T) {
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
		if (got == nil) != wantNil || got != nil && *got != string(b) {
			t.Errorf("message %d: encodeExtra = %v, want nil=%v (%s)", i, got, wantNil, b)
		}
	}
}
