package sandbox_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun/sandbox"
)

func Example() {
	r := sandbox.New(nil) // worker mode
	defer r.Close()
	run := r.Start(context.Background(), `
import {upper} from "text";
export async function main(name: string) {
  report("greeting " + name);
  return await upper("hello, " + name);
}`, &sandbox.Options{
		Execute: &sandbox.Execute{Fn: "main", Args: []any{"gopher"}},
		Imports: map[string]map[string]any{"text": {
			"upper": sandbox.HostFunc(func(ctx context.Context, args []any) (any, error) {
				return strings.ToUpper(args[0].(string)), nil
			}),
		}},
		Report: func(v any) { fmt.Println("report:", v) },
	})
	res, _ := run.Wait(context.Background())
	fmt.Println(res.Status, res.Value)
	// Output:
	// report: greeting gopher
	// success HELLO, GOPHER
}

func ExampleRunner_Start_error() {
	r := sandbox.New(&sandbox.RunnerOptions{Mode: sandbox.ModeInProcess})
	res, _ := r.Start(context.Background(), "type N = number;\nexport default (n: N) => {\n  throw new RangeError('n too big: ' + n);\n};",
		&sandbox.Options{Execute: &sandbox.Execute{Args: []any{7}}, Filename: "calc.ts"}).Wait(context.Background())
	fmt.Println(res.Status, res.Error.Name, res.Error.Line)
	fmt.Println(res.Error.Message)
	// Output:
	// error RangeError 3
	// Line 3 of calc.ts: n too big: 7
}

func ExampleRunner_StartMap() {
	r := sandbox.New(&sandbox.RunnerOptions{Mode: sandbox.ModeInProcess})
	res, _ := r.StartMap(context.Background(), "export default () => 1;", map[string]any{"timeout": 5}).Wait(context.Background())
	fmt.Println(res.Status, res.Error)
	// Output:
	// link_error InvalidCodeExecutionOptions: Unknown runCode option: timeout
}
