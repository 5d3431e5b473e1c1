package toolrun_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
)

// FuzzExecuteArgs feeds arbitrary bytes as the arguments of a typed tool:
// the executor never panics and stores exactly one result per call.
func FuzzExecuteArgs(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{"query":"q","format":"json"}`,
		`{"query":"q","format":"json","limit":0}`, `{"query":1e400,"format":"json"}`,
		`{"query":"q","format":"json","filters":{"category":"c","minPrice":-1}}`,
		`{"query":"\ud800","format":"text","tags":["a",null]}`, `{"query":"q"`, "\x00\xff",
	} {
		f.Add([]byte(seed))
	}
	ex := newExec(f, nil, searchTool(nil))
	n := 0
	f.Fuzz(func(t *testing.T, args []byte) {
		n++
		thread := fmt.Sprintf("fuzz-%d", n)
		out, err := ex.Run(context.Background(), thread, []toolrun.ToolCall{{ID: "c", Name: "search", Arguments: string(args)}})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		page, err := ex.Store().ListMessages(context.Background(), thread, toolrun.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 || len(page.Messages) != 1 {
			t.Fatalf("want exactly one stored result, got %d outcomes and %d messages", len(out), len(page.Messages))
		}
		m := page.Messages[0]
		if m.ToolCallID != "c" || (m.ToolStatus != toolrun.StatusSuccess && m.ToolStatus != toolrun.StatusError) || m.Content == "" {
			t.Fatalf("bad stored result: %+v", m)
		}
	})
}
