package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
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
	// A store keeps messages as given: ids and times are the caller's (the
	// executor and the runtime set them before they store a message).
	now := time.Now().UTC()
	err = st.AppendMessages(ctx, "thread-1",
		&toolrun.Message{ID: "msg-1", Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "call-1", Name: "lookup", Arguments: `{"q":"go"}`}}, CreatedAt: now},
		&toolrun.Message{ID: "msg-2", Role: toolrun.RoleTool, ToolCallID: "call-1", Name: "lookup", ToolStatus: toolrun.StatusSuccess, Content: "found it", CreatedAt: now})
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
	err = st.AppendMessages(ctx, "thread-1", &toolrun.Message{ID: "msg-3", Role: toolrun.RoleTool, ToolCallID: "call-1", Content: "again", CreatedAt: now})
	fmt.Println(err)
	// Output:
	// 1 assistant ""
	// 2 tool "found it"
	// sqlite: append to thread "thread-1": toolrun: a result for this tool call is already stored
}

// Encrypt secret env values at rest, then rotate the key: a new key goes
// first in the ring, the old one stays to read what it sealed until
// ReencryptSecrets has sealed everything again.
func Example_secrets() {
	dir, err := os.MkdirTemp("", "toolrun-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "toolrun.db")
	ctx := context.Background()

	// In a program the ring usually comes from the environment:
	// keyring.Parse(os.Getenv("TOOLRUN_SECRET_KEYS")).
	oldKey, err := keyring.Generate("2025-01")
	if err != nil {
		log.Fatal(err)
	}
	ring, err := keyring.New(oldKey)
	if err != nil {
		log.Fatal(err)
	}
	st, err := sqlite.Open(path, &sqlite.Options{Keys: ring})
	if err != nil {
		log.Fatal(err)
	}
	err = st.SetEnv(ctx, toolrun.ScopeThread, "thread-1", "GITHUB_TOKEN", toolrun.EnvValue{Value: "ghp_example", Type: toolrun.VarSecret})
	if err != nil {
		log.Fatal(err)
	}
	st.Close()

	newKey, err := keyring.Generate("2025-07")
	if err != nil {
		log.Fatal(err)
	}
	rotated, err := keyring.New(newKey, oldKey)
	if err != nil {
		log.Fatal(err)
	}
	st, err = sqlite.Open(path, &sqlite.Options{Keys: rotated})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	n, err := st.ReencryptSecrets(ctx)
	if err != nil {
		log.Fatal(err)
	}
	v, err := st.GetEnv(ctx, toolrun.ScopeThread, "thread-1", "GITHUB_TOKEN")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("re-encrypted:", n, "value:", v.Value)

	// A store without keys refuses to write a secret in plain text.
	plain, err := sqlite.Open(":memory:", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer plain.Close()
	err = plain.SetEnv(ctx, toolrun.ScopeThread, "thread-1", "GITHUB_TOKEN", toolrun.EnvValue{Value: "ghp_example", Type: toolrun.VarSecret})
	fmt.Println(errors.Is(err, keyring.ErrNoKey))
	// Output:
	// re-encrypted: 1 value: ghp_example
	// true
}
