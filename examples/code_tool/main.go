// Command code_tool runs model-written TypeScript through a tool: the code
// reads thread files through a bridged fs.readFile, and a timeout
// terminates code that does not finish.
//
//	go run ./examples/code_tool
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/sandbox"
)

// RunArgs are the arguments of run_typescript.
type RunArgs struct {
	Description string `json:"description" jsonschema:"description=What the code does, e.g. counting words in notes.txt"`
	Code        string `json:"code" jsonschema:"description=A TypeScript module whose default export is called"`
}

// RunTypeScript evaluates model-authored code in the sandbox, never in the host.
var RunTypeScript = &toolrun.Func[RunArgs]{
	Name:             "run_typescript",
	Description:      "Run a TypeScript module in a sandbox. import { readFile } from 'fs' reads thread files.",
	ProgressArgument: "description",
	Annotations:      map[string]any{"agentbuilder": map[string]any{"codemode": map[string]any{"codeArgument": "code", "language": "typescript"}}},
	Execute: func(ctx context.Context, s toolrun.ThreadState, a RunArgs) (toolrun.Result, error) {
		readFile := func(ctx context.Context, args []any) (any, error) {
			path, _ := args[0].(string)
			data, err := s.ReadFile(ctx, path)
			if errors.Is(err, toolrun.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return string(data), nil
		}
		run := s.RunCode(ctx, a.Code, &toolrun.CodeOptions{
			Imports: map[string]map[string]any{"fs": {"readFile": readFile}},
			Timeout: 2 * time.Second, // the caller owns the timeout: terminated after 2 s
		})
		res := run.Wait(ctx)
		if res.Status != toolrun.CodeStatusSuccess {
			return toolrun.Errorf("%s: %s", res.Status, res.Error.Message), nil
		}
		return toolrun.JSON(res.Value), nil
	},
}

func main() {
	outcomes, err := run(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range outcomes {
		fmt.Printf("%s (%s): %s\n", o.Call.ID, o.Message.ToolStatus, o.Message.Content)
	}
}

// run makes two calls of run_typescript on a thread with a notes file: one
// counts its words, one loops until its timeout.
func run(ctx context.Context) ([]toolrun.Outcome, error) {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(RunTypeScript); err != nil {
		return nil, err
	}
	store := toolrun.NewMemoryStore()
	if err := store.CreateThread(ctx, &toolrun.Thread{ID: "thread-1"}); err != nil {
		return nil, err
	}
	if _, err := store.WriteFile(ctx, "thread-1", toolrun.FileInfo{Path: "/notes.txt", MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("the quick brown fox jumps over the lazy dog")); err != nil {
		return nil, err
	}
	// The sandbox runs the code: in warm worker processes that re-execute
	// this binary, with a hard memory cap. Programs that set no CodeRunner
	// do not link it.
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: store, CodeRunner: sandbox.Default()})

	wordCount := `import { readFile } from "fs";
const text: string = (await readFile("/notes.txt")) ?? "";
export default function main(): { words: number } {
  return { words: text.split(/\s+/).filter(Boolean).length };
}`
	runaway := `export default function main(): never { for (;;) {} }`
	return ex.Run(ctx, "thread-1", []toolrun.ToolCall{
		{ID: "call_1", Name: "run_typescript", Arguments: jsonArgs("counting words in notes.txt", wordCount)},
		{ID: "call_2", Name: "run_typescript", Arguments: jsonArgs("looping forever", runaway)},
	})
}

func jsonArgs(description, code string) string {
	return toolrun.JSON(RunArgs{Description: description, Code: code}).Result
}

// fileTime is the time the example's file is written at.
func fileTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }
