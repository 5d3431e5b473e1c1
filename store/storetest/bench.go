package storetest

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolrun/toolrun"
)

// Bench measures the store operations the executor and runtime use most,
// one sub-benchmark each:
//
//   - AppendToolResult: one AppendMessages call with one tool result (the
//     executor persists every result before the next call starts);
//   - AppendToolResultParallel: the same from 4×GOMAXPROCS goroutines, each
//     on its own thread (several runs in one process);
//   - AppendToolResultConcurrent/goroutines=N: the same from exactly N
//     goroutines (8, 32, 64), each on its own thread, as a service running
//     that many threads at once would; b.N appends in all;
//   - AppendStep5: one AppendMessages call with 5 messages (an assistant
//     message with 4 calls' results);
//   - ReadLast100Of10k: ListMessages with the default query and Limit 100 on
//     a thread of 10,000 messages (building a model request);
//   - SetValue and GetValue: one small JSON value.
//
// Each appends sub-benchmark also reports appends/s. newStore is called once
// per sub-benchmark and must return an empty store; it should register any
// cleanup with b.Cleanup.
func Bench(b *testing.B, newStore func(b *testing.B) toolrun.Store) {
	b.Run("AppendToolResult", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		i := 0
		for b.Loop() {
			i++
			m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), Name: "search",
				ToolStatus: toolrun.StatusSuccess, Content: `{"results":["a","b","c"]}`}
			if err := st.AppendMessages(b.Context(), thread, m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
	b.Run("AppendToolResultParallel", func(b *testing.B) {
		st := newStore(b)
		var n atomic.Int64
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			thread := benchThread(b, st)
			i := 0
			for pb.Next() {
				i++
				m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), Name: "search",
					ToolStatus: toolrun.StatusSuccess, Content: `{"results":["a","b","c"]}`}
				if err := st.AppendMessages(b.Context(), thread, m); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
		b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "appends/s")
	})
	for _, n := range []int{8, 32, 64} {
		b.Run(fmt.Sprintf("AppendToolResultConcurrent/goroutines=%d", n), func(b *testing.B) {
			benchConcurrentAppends(b, newStore(b), n)
		})
	}
	b.Run("AppendStep5", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		i := 0
		for b.Loop() {
			i++
			step := []*toolrun.Message{{Role: toolrun.RoleAssistant, Content: "calling tools"}}
			for j := range 4 {
				id := fmt.Sprintf("call_%d_%d", i, j)
				step[0].ToolCalls = append(step[0].ToolCalls, toolrun.ToolCall{ID: id, Name: "search", Arguments: `{"q":"x"}`})
				step = append(step, &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: id, Name: "search",
					ToolStatus: toolrun.StatusSuccess, Content: "result"})
			}
			if err := st.AppendMessages(b.Context(), thread, step...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
	b.Run("ReadLast100Of10k", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		for i := 0; i < 10000; i += 100 {
			batch := make([]*toolrun.Message, 100)
			for j := range batch {
				batch[j] = &toolrun.Message{Role: toolrun.RoleUser, Content: fmt.Sprintf("message %d: some ordinary text of a conversation", i+j)}
				if j%10 == 9 {
					batch[j].Silent = true
				}
			}
			if err := st.AppendMessages(b.Context(), thread, batch...); err != nil {
				b.Fatal(err)
			}
		}
		q := toolrun.MessageQuery{Limit: 100}
		for b.Loop() {
			p, err := st.ListMessages(b.Context(), thread, q)
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Messages) != 100 || p.Total != 9000 {
				b.Fatalf("got %d messages, Total %d", len(p.Messages), p.Total)
			}
		}
	})
	b.Run("SetValue", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		v := json.RawMessage(`{"step":3,"notes":["a","b"],"done":false}`)
		for b.Loop() {
			if err := st.SetValue(b.Context(), thread, "state", v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("GetValue", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		if err := st.SetValue(b.Context(), thread, "state", json.RawMessage(`{"step":3,"notes":["a","b"],"done":false}`)); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := st.GetValue(b.Context(), thread, "state"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchThread(b *testing.B, st toolrun.Store) string {
	id := uid("bench")
	if err := st.CreateThread(b.Context(), &toolrun.Thread{ID: id}); err != nil {
		b.Fatal(err)
	}
	return id
}

// benchConcurrentAppends runs b.N single tool-result appends from n
// goroutines, each appending to its own thread, and reports appends/s.
func benchConcurrentAppends(b *testing.B, st toolrun.Store, n int) {
	threads := make([]string, n)
	for i := range threads {
		threads[i] = benchThread(b, st)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for _, thread := range threads {
		wg.Go(func() {
			for i := 1; next.Add(1) <= int64(b.N); i++ {
				m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), Name: "search",
					ToolStatus: toolrun.StatusSuccess, Content: `{"results":["a","b","c"]}`}
				if err := st.AppendMessages(b.Context(), thread, m); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}
