package storetest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
)

// Bench measures the store operations the executor and runtime use most,
// one sub-benchmark each:
//
//   - AppendToolResult: one AppendMessages call with one tool result as the
//     executor stores it (id, time, call digest and side set; the executor
//     persists every result before the next call starts);
//   - AppendToolResultParallel: the same from 4×GOMAXPROCS goroutines, each
//     on its own thread (several runs in one process);
//   - AppendToolResultConcurrent/goroutines=N: the same from exactly N
//     goroutines (1, 2, 8, 32, 64, 4096), each on its own thread, as a
//     service running that many threads at once would; b.N appends in all,
//     each goroutine making its share (no counter shared between them) with
//     one message it reuses, and moving to a new thread of its own after
//     every 1,000, so that threads are as long whatever b.N and N.
//     Besides appends/s each reports x-one-goroutine, its appends/s over
//     those of goroutines=1 in the same run of Bench: how the store scales
//     with threads;
//   - AppendStep5: one AppendMessages call with 5 messages (an assistant
//     message with 4 calls' results);
//   - ReadLast100Of10k: ListMessages with the default query and Limit 100 on
//     a thread of 10,000 messages (building a model request);
//   - ReadNew10Of10k: ListMessages of the 10 messages after a Seq (After)
//     on a thread of 10,000 messages, oldest first (reading what a turn
//     appended);
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
			if err := st.AppendMessages(b.Context(), thread, benchResult(thread, i)); err != nil {
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
				if err := st.AppendMessages(b.Context(), thread, benchResult(thread, i)); err != nil {
					b.Error(err)
					return
				}
				n.Add(1)
			}
		})
		b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "appends/s")
	})
	var one float64 // appends/s of one goroutine, in this run
	for _, n := range []int{1, 2, 8, 32, 64, 4096} {
		b.Run(fmt.Sprintf("AppendToolResultConcurrent/goroutines=%d", n), func(b *testing.B) {
			rate := benchConcurrentAppends(b, newStore(b), n)
			if n == 1 {
				one = rate
			} else if one > 0 {
				b.ReportMetric(rate/one, "x-one-goroutine")
			}
		})
	}
	b.Run("AppendStep5", func(b *testing.B) {
		st := newStore(b)
		thread := benchThread(b, st)
		i := 0
		for b.Loop() {
			i++
			step := []*toolrun.Message{{ID: fmt.Sprintf("msg_%d", i), ThreadID: thread, Role: toolrun.RoleAssistant, Content: "calling tools",
				Side: "a", CreatedAt: benchTime}}
			for j := range 4 {
				id := fmt.Sprintf("call_%d_%d", i, j)
				step[0].ToolCalls = append(step[0].ToolCalls, toolrun.ToolCall{ID: id, Name: "search", Arguments: `{"q":"x"}`})
				step = append(step, &toolrun.Message{ID: fmt.Sprintf("msg_%d_%d", i, j), ThreadID: thread, Role: toolrun.RoleTool, ToolCallID: id,
					Name: "search", ToolStatus: toolrun.StatusSuccess, Content: "result", CallDigest: "q2Vf0n1Kp8sWb3Jd5Lx7aA", Side: "a", CreatedAt: benchTime})
			}
			if err := st.AppendMessages(b.Context(), thread, step...); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	})
	b.Run("ReadLast100Of10k", func(b *testing.B) {
		st := newStore(b)
		thread, _ := benchLongThread(b, st)
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
	b.Run("ReadNew10Of10k", func(b *testing.B) {
		st := newStore(b)
		thread, last := benchLongThread(b, st)
		q := toolrun.MessageQuery{After: last - 10, Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1}
		for b.Loop() {
			p, err := st.ListMessages(b.Context(), thread, q)
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Messages) != 10 || p.Total != 10 {
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

// benchTime is the creation time of the benchmarks' messages.
var benchTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// benchResult returns the i-th tool result of a benchmark, as the executor
// stores one: with an id, a time, the call's digest and the acting side.
func benchResult(thread string, i int) *toolrun.Message {
	return &toolrun.Message{ID: "msg_" + strconv.Itoa(i), ThreadID: thread, Role: toolrun.RoleTool, ToolCallID: "call_" + strconv.Itoa(i),
		Name: "search", ToolStatus: toolrun.StatusSuccess, Content: `{"results":["a","b","c"]}`,
		CallDigest: "q2Vf0n1Kp8sWb3Jd5Lx7aA", Side: "a", CreatedAt: benchTime}
}

func benchThread(b *testing.B, st toolrun.Store) string {
	id := uid("bench")
	if err := st.CreateThread(b.Context(), &toolrun.Thread{ID: id, CreatedAt: benchTime}); err != nil {
		b.Fatal(err)
	}
	return id
}

// benchLongThread creates a thread of 10,000 user messages, every tenth
// silent, and returns it and its last Seq.
func benchLongThread(b *testing.B, st toolrun.Store) (string, int64) {
	thread := benchThread(b, st)
	var last int64
	for i := 0; i < 10000; i += 100 {
		batch := make([]*toolrun.Message, 100)
		for j := range batch {
			batch[j] = &toolrun.Message{ID: fmt.Sprintf("msg_%d", i+j), ThreadID: thread, Role: toolrun.RoleUser,
				Content: fmt.Sprintf("message %d: some ordinary text of a conversation", i+j), Side: "b", CreatedAt: benchTime}
			if j%10 == 9 {
				batch[j].Silent = true
			}
		}
		if err := st.AppendMessages(b.Context(), thread, batch...); err != nil {
			b.Fatal(err)
		}
		last = batch[len(batch)-1].Seq
	}
	return thread, last
}

// benchThreadLen is the number of messages after which a goroutine of
// benchConcurrentAppends goes on on a new thread of its own.
const benchThreadLen = 1000

// benchConcurrentAppends runs b.N single tool-result appends from n
// goroutines, each appending to its own thread (a new one after every
// benchThreadLen appends), reports appends/s and returns it.
func benchConcurrentAppends(b *testing.B, st toolrun.Store, n int) float64 {
	threads := make([]string, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(n, 16) { // create the threads in parallel: 4096 are slow to make one by one on a remote store
		wg.Go(func() {
			for k := next.Add(1) - 1; k < int64(n); k = next.Add(1) - 1 {
				threads[k] = benchThread(b, st)
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	for g, thread := range threads {
		// Each goroutine makes its share of the b.N appends: no counter
		// shared between them, whose cache line would travel between cores
		// on every append.
		quota := b.N / n
		if g < b.N%n {
			quota++
		}
		wg.Go(func() {
			// One message, reused: the store copies what it keeps, and the
			// benchmark measures the store, not the allocation of messages.
			m := benchResult(thread, 0)
			var buf []byte
			for i, done := 1, 0; done < quota; i, done = i+1, done+1 {
				if i > benchThreadLen {
					// A new thread: threads stay as long as real ones, whatever
					// b.N and the number of goroutines.
					thread, i = benchThread(b, st), 1
					m.ThreadID = thread
				}
				buf = strconv.AppendInt(append(buf[:0], "msg_"...), int64(i), 10)
				m.ID = string(buf)
				m.ToolCallID = "call_" + m.ID[len("msg_"):]
				if err := st.AppendMessages(b.Context(), thread, m); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	rate := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "appends/s")
	return rate
}
