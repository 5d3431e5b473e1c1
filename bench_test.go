package toolrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// benchArgs has 5 fields: an enum, a nested object and a default.
type benchArgs struct {
	Query  string      `json:"query" jsonschema:"description=Search query"`
	Format string      `json:"format" jsonschema:"enum=json,enum=text,enum=markdown"`
	Limit  int         `json:"limit,omitempty" jsonschema:"default=10,minimum=1"`
	Filter benchFilter `json:"filter"`
	Tags   []string    `json:"tags,omitempty"`
}

type benchFilter struct {
	Category string  `json:"category"`
	MinPrice float64 `json:"minPrice,omitempty"`
}

const benchArgsJSON = `{"query":"golang generics","format":"json","filter":{"category":"books","minPrice":5},"tags":["a","b"]}`

func benchExecute(ctx context.Context, s toolrun.ThreadState, a benchArgs) (toolrun.Result, error) {
	return toolrun.Text(a.Query), nil
}

func benchTypedWith(b *testing.B, extra int) {
	reg := toolrun.NewRegistry(nil)
	defs := []toolrun.Definition{&toolrun.Func[benchArgs]{Name: "search", Execute: benchExecute}}
	for i := 0; i < extra; i++ {
		defs = append(defs, &toolrun.RawFunc{Name: "tool_" + strconv.Itoa(i), Execute: func(context.Context, toolrun.ThreadState, json.RawMessage) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}})
	}
	if err := reg.Register(defs...); err != nil {
		b.Fatal(err)
	}
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: toolrun.NewMemoryStore()})
	ctx := context.Background()
	calls := make([][]toolrun.ToolCall, b.N)
	for i := range calls {
		calls[i] = []toolrun.ToolCall{{ID: "call_" + strconv.Itoa(i), Name: "search", Arguments: benchArgsJSON}}
	}
	threads := benchThreads(b.N)
	if _, err := ex.Run(ctx, "bench", []toolrun.ToolCall{{ID: "warm", Name: "search", Arguments: benchArgsJSON}}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := ex.Run(ctx, threads[i/1000], calls[i])
		if err != nil || out[0].Message.Content != "golang generics" {
			b.Fatalf("unexpected outcome: %v %+v", err, out)
		}
	}
}

// BenchmarkExecuteTyped runs one typed call through the executor — parse,
// validate, default, decode, execute, shape, persist in the memory store.
func BenchmarkExecuteTyped(b *testing.B) { benchTypedWith(b, 0) }

// BenchmarkExecuteTypedRegistry compares registry sizes: lookup cost must
// not grow with the number of registered tools.
func BenchmarkExecuteTypedRegistry(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprintf("tools=%d", n), func(b *testing.B) { benchTypedWith(b, n-1) })
	}
}

// BenchmarkBaselineJSON is the floor the executor is compared with: plain
// unmarshal of the same arguments, the call, and marshal of the result.
func BenchmarkBaselineJSON(b *testing.B) {
	ctx := context.Background()
	raw := []byte(benchArgsJSON)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var a benchArgs
		if err := json.Unmarshal(raw, &a); err != nil {
			b.Fatal(err)
		}
		res, _ := benchExecute(ctx, nil, a)
		if _, err := json.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}

// weatherArgs is the 3-field struct of the performance issue's figures.
type weatherArgs struct {
	City  string `json:"city"`
	Days  int    `json:"days"`
	Units string `json:"units"`
}

const weatherJSON = `{"city":"Berlin","days":3,"units":"metric"}`

func weather(ctx context.Context, s toolrun.ThreadState, a weatherArgs) (toolrun.Result, error) {
	return toolrun.Text(a.City), nil
}

// BenchmarkCall3 is one validated call of a 3-field typed tool through
// Executor.Run on the memory store: the figure the performance targets
// compare with BenchmarkCall3Baseline, measured in the same run. Calls go to
// a new thread every 1,000 calls, so that the cost per call does not depend
// on b.N through the size of one ever-growing thread.
func BenchmarkCall3(b *testing.B) {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(&toolrun.Func[weatherArgs]{Name: "weather", Execute: weather}); err != nil {
		b.Fatal(err)
	}
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: toolrun.NewMemoryStore()})
	ctx := context.Background()
	calls := make([][]toolrun.ToolCall, b.N)
	for i := range calls {
		calls[i] = []toolrun.ToolCall{{ID: "call_" + strconv.Itoa(i), Name: "weather", Arguments: weatherJSON}}
	}
	threads := benchThreads(b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := ex.Run(ctx, threads[i/1000], calls[i])
		if err != nil || out[0].Message.Content != "Berlin" {
			b.Fatalf("unexpected outcome: %v %+v", err, out)
		}
	}
}

// BenchmarkCall3Baseline is what the call costs with plain encoding/json:
// unmarshal the arguments, call the tool, marshal the result.
func BenchmarkCall3Baseline(b *testing.B) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var a weatherArgs
		if err := json.Unmarshal([]byte(weatherJSON), &a); err != nil {
			b.Fatal(err)
		}
		res, _ := weather(ctx, nil, a)
		if _, err := json.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}

// benchThreads names a thread for every 1,000 of n calls: the benchmarks of
// one call spread their calls so, and cost what a call costs on a thread of
// a realistic size, whatever b.N is.
func benchThreads(n int) []string {
	threads := make([]string, n/1000+1)
	for i := range threads {
		threads[i] = "bench-" + strconv.Itoa(i)
	}
	return threads
}

// BenchmarkCall3Ratio alternates rounds of 1,000 calls of BenchmarkCall3
// with rounds of 1,000 of BenchmarkCall3Baseline and reports the ratio of
// their times (x_baseline): alternating keeps a change in the machine's
// load from falling on one side only. ns/op is the call's.
func BenchmarkCall3Ratio(b *testing.B) {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(&toolrun.Func[weatherArgs]{Name: "weather", Execute: weather}); err != nil {
		b.Fatal(err)
	}
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: toolrun.NewMemoryStore()})
	ctx := context.Background()
	const round = 1000
	ids := make([]string, round)
	for i := range ids {
		ids[i] = "call_" + strconv.Itoa(i)
	}
	var base time.Duration
	batch := []toolrun.ToolCall{{Name: "weather", Arguments: weatherJSON}}
	b.ReportAllocs()
	b.ResetTimer()
	for r, left := 0, b.N; left > 0; r++ {
		n := min(left, round)
		thread := "ratio-" + strconv.Itoa(r)
		for i := 0; i < n; i++ {
			batch[0].ID = ids[i]
			out, err := ex.Run(ctx, thread, batch)
			if err != nil || out[0].Message.Content != "Berlin" {
				b.Fatalf("unexpected outcome: %v %+v", err, out)
			}
		}
		b.StopTimer()
		start := time.Now()
		for i := 0; i < n; i++ {
			var a weatherArgs
			if err := json.Unmarshal([]byte(weatherJSON), &a); err != nil {
				b.Fatal(err)
			}
			res, _ := weather(ctx, nil, a)
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
		base += time.Since(start)
		b.StartTimer()
		left -= n
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_baseline")
}
