package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/sqlite"
)

// Open a database file, store a thread's messages, and read them back after
// reopening the file, as a restarted program would.
func Example() {
	dir, err := os.MkdirTemp("", "toolrun-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "toolrun.db")
	ctx := context.Background()

	st, err := sqlite.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: "thread-1"}); err != nil {
		log.Fatal(err)
	}
	err = st.AppendMessages(ctx, "thread-1",
		&toolrun.Message{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "call-1", Name: "lookup", Arguments: `{"q":"go"}`}}},
		&toolrun.Message{Role: toolrun.RoleTool, ToolCallID: "call-1", Name: "lookup", ToolStatus: toolrun.StatusSuccess, Content: "found it"})
	if err != nil {
		log.Fatal(err)
	}
	st.Close()

	st, err = sqlite.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	page, err := st.ListMessages(ctx, "thread-1", toolrun.MessageQuery{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range page.Messages {
		fmt.Printf("%d %s %q\n", m.Seq, m.Role, m.Content)
	}
	// A second result for the same call is refused.
	err = st.AppendMessages(ctx, "thread-1", &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: "call-1", Content: "again"})
	fmt.Println(err)
	// Output:
	// 1 assistant ""
	// 2 tool "found it"
	// sqlite: append to thread "thread-1": toolrun: a result for this tool call is already stored
}
