package toolrun_test

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/proccpu"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/sqlite"
)

// Benchmarks of the costs that grow with scale: many goroutines, many
// concurrent turns, long threads, many idle threads. Each compares with a
// baseline measured in the same run, in alternating rounds, and reports the
// ratio as a metric, since the machines they run on are shared and noisy.

// newWeatherExecutor is an executor of the 3-field weather tool on a
// memory store.
func newWeatherExecutor(b *testing.B) *toolrun.Executor {
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(&toolrun.Func[weatherArgs]{Name: "weather", Execute: weather}); err != nil {
		b.Fatal(err)
	}
	return toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: toolrun.NewMemoryStore()})
}

// callWorkers are g goroutines making typed calls through an executor,
// each on threads of its own (a new one every perThread of its calls).
// They live until stop or the benchmark's end: a round hands each its
// share of calls.
type callWorkers struct {
	work    []chan int
	done    sync.WaitGroup
	stopped sync.Once
}

// newCallWorkers starts g workers, worker k calling through executor(k).
func newCallWorkers(b *testing.B, executor func(k int) *toolrun.Executor, prefix string, g, perThread int) *callWorkers {
	w := &callWorkers{work: make([]chan int, g)}
	for k := range w.work {
		w.work[k] = make(chan int, 1)
		ex := executor(k)
		go func() {
			batch := []toolrun.ToolCall{{Name: "weather", Arguments: weatherJSON}}
			made := 0
			for n := range w.work[k] {
				for range n {
					thread := prefix + strconv.Itoa(k) + "-" + strconv.Itoa(made/perThread)
					batch[0].ID = "call_" + strconv.Itoa(made)
					made++
					out, err := ex.Run(context.Background(), thread, batch)
					if err != nil || out[0].Message.Content != "Berlin" {
						b.Errorf("unexpected outcome: %v %+v", err, out)
						break
					}
				}
				w.done.Done()
			}
		}()
	}
	b.Cleanup(w.stop)
	return w
}

// stop ends the workers' goroutines.
func (w *callWorkers) stop() {
	w.stopped.Do(func() {
		for _, c := range w.work {
			close(c)
		}
	})
}

// round makes n calls, shared among the workers, and returns the time they
// took.
func (w *callWorkers) round(n int) time.Duration {
	g := len(w.work)
	w.done.Add(g)
	start := time.Now()
	for k, c := range w.work {
		share := n / g
		if k < n%g {
			share++
		}
		c <- share
	}
	w.done.Wait()
	return time.Since(start)
}

// BenchmarkCallsParallel makes typed calls through Executor.Run on the
// memory store from 1, 2, 64 and 4,096 goroutines, each on threads of its
// own. Every round of the g goroutines alternates with a round of the same
// number of calls from one goroutine, on threads of the same sizes; ns/op
// and calls/s are those of the g goroutines, x_one_goroutine their rate over
// the one goroutine's. x_unshared is the ceiling, measured after: the same
// rounds, alternating in the same way with a new one goroutine, from g
// goroutines that each have an executor and a memory store of their own, so
// that they share nothing but the process. It runs once the measured
// workers have ended, so that its goroutines and stores are not in the
// process the measured rounds run in.
func BenchmarkCallsParallel(b *testing.B) {
	for _, g := range []int{1, 2, 64, 4096} {
		b.Run("goroutines="+strconv.Itoa(g), func(b *testing.B) {
			round := max(2048, 256*g)
			// alternate runs b.N calls in rounds of each side in turn. In
			// the measured rounds the timer runs for the g goroutines
			// alone: ns/op is theirs.
			alternate := func(one, many *callWorkers, timed bool) (tOne, tMany time.Duration) {
				for left := b.N; left > 0; left -= round {
					n := min(left, round)
					if timed {
						b.StopTimer()
					}
					tOne += one.round(n)
					if timed {
						b.StartTimer()
					}
					tMany += many.round(n)
				}
				return tOne, tMany
			}
			// Every goroutine keeps to a thread of its own, and moves to a
			// new one after 1,000 calls (the one goroutine too), so that no
			// thread grows with b.N.
			ex := newWeatherExecutor(b)
			shared := func(int) *toolrun.Executor { return ex }
			many := newCallWorkers(b, shared, "many-", g, 1000)
			one := newCallWorkers(b, shared, "one-", 1, 1000)
			b.ReportAllocs()
			b.ResetTimer()
			tOne, tMany := alternate(one, many, true)
			b.StopTimer()
			many.stop()
			one.stop()
			apart := func(int) *toolrun.Executor { return newWeatherExecutor(b) }
			tOneAfter, tApart := alternate(newCallWorkers(b, apart, "one-after-", 1, 1000), newCallWorkers(b, apart, "apart-", g, 1000), false)
			b.ReportMetric(float64(b.N)/tMany.Seconds(), "calls/s")
			b.ReportMetric(tOne.Seconds()/tMany.Seconds(), "x_one_goroutine")
			b.ReportMetric(tOneAfter.Seconds()/tApart.Seconds(), "x_unshared")
		})
	}
}

// turnWorld is a runtime whose model asks for one tool call when the last
// message is the user's and answers with text after the result: a turn is
// two model requests, one call and four stored messages.
type turnWorld struct {
	rt    *toolrun.Runtime
	store toolrun.Store
}

// turnMarks remembers the threads whose turn made its first request, in
// shards, so that 10,000 concurrent turns do not contend on it.
type turnMarks struct {
	seed   maphash.Seed
	once   sync.Once
	shards [256]struct {
		mu sync.Mutex
		m  map[string]bool
	}
}

// flip reports whether thread had no mark, and flips it.
func (t *turnMarks) flip(thread string) bool {
	t.once.Do(func() { t.seed = maphash.MakeSeed() })
	sh := &t.shards[maphash.String(t.seed, thread)%uint64(len(t.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[thread] {
		delete(sh.m, thread)
		return false
	}
	if sh.m == nil {
		sh.m = map[string]bool{}
	}
	sh.m[thread] = true
	return true
}

// historyPrompts are the prompts the history benchmarks compare.
var historyPrompts = []struct {
	name   string
	prompt toolrun.Prompt
}{
	{"no_chat", toolrun.Prompt{}},
	{"chat", toolrun.Prompt{IncludeChat: true, IncludePastTools: true}},
	{"chat_window50", toolrun.Prompt{IncludeChat: true, IncludePastTools: true, History: toolrun.Window{Messages: 50}}},
}

func newTurnWorld(b testing.TB, st toolrun.Store, prompt toolrun.Prompt) *turnWorld {
	// The model calls a tool on a turn's first request and answers on its
	// second, whatever the prompt lets it see.
	// A prompt that sends the chat and past tools shows the result to the
	// model; one that does not needs the turns marked.
	var requests turnMarks
	sees := prompt.IncludeChat && prompt.IncludePastTools
	p := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		if sees {
			if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == toolrun.RoleTool {
				return scripted.Text("done")
			}
			return scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 7}))
		}
		if requests.flip(req.ThreadID) {
			return scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 7}))
		}
		return scripted.Text("done")
	})
	prompt.Name, prompt.Model = "pr", "m"
	prompt.Tools = []toolrun.PromptTool{toolrun.Use("get_issue")}
	reg := toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
	if err := reg.Register(
		&toolrun.Model{Name: "m", Provider: p},
		&prompt,
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr", MaxSteps: 2}, SideB: toolrun.Side{Human: true}},
		&toolrun.Func[issueArgs]{Name: "get_issue", Execute: func(ctx context.Context, s toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
			return toolrun.Text("issue 7: the build is red"), nil
		}},
	); err != nil {
		b.Fatal(err)
	}
	return &turnWorld{rt: toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st, Logger: slog.New(slog.DiscardHandler)}), store: st}
}

// thread makes a thread with n prior messages: user questions and
// assistant answers, appended in one write.
func (w *turnWorld) thread(b testing.TB, n int) string {
	ctx := context.Background()
	th, err := w.rt.NewThread(ctx, "agent", nil)
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]*toolrun.Message, n)
	at := time.Now().UTC().Truncate(time.Microsecond)
	for i := range msgs {
		m := &toolrun.Message{ID: th.ID + "-h" + strconv.Itoa(i), Role: toolrun.RoleUser, Content: "question " + strconv.Itoa(i) + ": what is the state of the build?", CreatedAt: at}
		if i%2 == 1 {
			m.Role, m.Content = toolrun.RoleAssistant, "answer "+strconv.Itoa(i)+": the build is green again."
		}
		msgs[i] = m
	}
	for len(msgs) > 0 {
		k := min(len(msgs), 1000)
		if err := w.store.AppendMessages(ctx, th.ID, msgs[:k]...); err != nil {
			b.Fatal(err)
		}
		msgs = msgs[k:]
	}
	return th.ID
}

func (w *turnWorld) turn(b testing.TB, thread string) {
	reply, err := w.rt.Send(context.Background(), thread, "and now?")
	if err != nil || reply.Text != "done" {
		b.Fatalf("turn: %v %+v", err, reply)
	}
}

// historyStores are the stores the history benchmarks run on.
func historyStores(b *testing.B) []struct {
	name string
	open func(b *testing.B) toolrun.Store
} {
	return []struct {
		name string
		open func(b *testing.B) toolrun.Store
	}{
		{"memory", func(*testing.B) toolrun.Store { return toolrun.NewMemoryStore() }},
		{"sqlite", func(b *testing.B) toolrun.Store {
			st, err := sqlite.Open(filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = st.Close() })
			return st
		}},
	}
}

// BenchmarkTurnHistory runs one turn (two model requests, one tool call)
// on threads with 10, 1,000 and 10,000 prior messages, for a prompt
// without chat, with the whole chat, and with a window of 50 messages, on
// the memory and the SQLite store. Each turn alternates with a turn on a
// thread of 10 messages, measured apart: x_history10 is the turn's time
// over that one's. A thread takes few enough turns that its history grows
// by at most a tenth.
func BenchmarkTurnHistory(b *testing.B) {
	for _, s := range historyStores(b) {
		for _, p := range historyPrompts {
			for _, n := range []int{10, 1000, 10000} {
				b.Run(fmt.Sprintf("%s/%s/history=%d", s.name, p.name, n), func(b *testing.B) {
					w := newTurnWorld(b, s.open(b), p.prompt)
					uses := max(1, n/40) // four messages a turn: a tenth of n
					threads, small := make([]string, 0, b.N/uses+1), make([]string, b.N)
					for i := 0; i < b.N; i += uses {
						threads = append(threads, w.thread(b, n))
					}
					for i := range small {
						small[i] = w.thread(b, 10)
					}
					var base time.Duration
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						w.turn(b, threads[i/uses])
						b.StopTimer()
						start := time.Now()
						w.turn(b, small[i])
						base += time.Since(start)
						b.StartTimer()
					}
					b.ReportMetric(float64(b.Elapsed())/float64(base), "x_history10")
				})
			}
		}
	}
}

// BenchmarkConcurrentTurns runs 10,000 turns, each on a thread of its own,
// from 10,000 goroutines at once, alternating with the same number of
// turns one after another on one goroutine; one op is the 10,000 turns at
// once, and x_sequential is their rate over the sequential one's. The
// sequential side goes first in even ops, the concurrent side in odd ones:
// run an even number of ops (-benchtime 4x). Each op has a store of its
// own, holding the 20,000 threads of its two sides, so that the figure
// does not depend on b.N through a store growing with it.
//
// Where the process's CPU time can be read, seq_cpus and conc_cpus are the
// CPUs each side kept busy on average (the sequential side's goroutine,
// plus the collector on the other CPUs), and seq_cpu_ns/turn and
// conc_cpu_ns/turn the CPU time a turn cost on each side, collector
// included: x_sequential is conc_cpus/seq_cpus times the ratio of the two
// costs per turn.
//
// x_unshared is the ceiling measured alongside: the same number of turns
// on as many goroutines as there are CPUs, each goroutine with a runtime,
// registry, provider and store of its own, so that the turns share nothing
// but the process (its heap, collector and scheduler), over the sequential
// rate. It is what the CPUs give turns of this cost when nothing of the
// library is shared and no goroutine waits to run; x_sequential can only
// come near it.
func BenchmarkConcurrentTurns(b *testing.B) {
	const turns = 10000
	procs := runtime.GOMAXPROCS(0)
	var seq, conc, unshared, seqCPU, concCPU time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		w := newTurnWorld(b, toolrun.NewMemoryStore(), historyPrompts[1].prompt)
		threads := make([]string, 2*turns)
		for k := range threads {
			threads[k] = w.thread(b, 2)
		}
		sequential := func() {
			runtime.GC() // each side starts from a collected heap
			start, cpu := time.Now(), proccpu.Used()
			for _, th := range threads[:turns] {
				w.turn(b, th)
			}
			seq += time.Since(start)
			seqCPU += proccpu.Used() - cpu
		}
		concurrent := func() {
			runtime.GC()
			b.StartTimer()
			start, cpu := time.Now(), proccpu.Used()
			var wg sync.WaitGroup
			for _, th := range threads[turns:] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.turn(b, th)
				}()
			}
			wg.Wait()
			conc += time.Since(start)
			concCPU += proccpu.Used() - cpu
			b.StopTimer()
		}
		// The sides take turns going first, op by op: the second finds
		// the heap and the caches as the first left them.
		if i%2 == 0 {
			sequential()
			concurrent()
		} else {
			concurrent()
			sequential()
		}
		// The ceiling, last: its worlds' threads are made after the
		// measured sides ran, so that the heap they grow does not change
		// what those sides find. They hold as many threads as w did, half
		// of them run, so that the collector finds the heap it found for
		// the side that went first.
		w, threads = nil, nil
		apart := make([]*turnWorld, procs)
		apartThreads := make([][]string, procs)
		for k := range apart {
			apart[k] = newTurnWorld(b, toolrun.NewMemoryStore(), historyPrompts[1].prompt)
			for n := range 2 * (turns / procs) {
				th := apart[k].thread(b, 2)
				if n%2 == 0 {
					apartThreads[k] = append(apartThreads[k], th)
				}
			}
		}
		runtime.GC()
		start := time.Now()
		var apartDone sync.WaitGroup
		for k := range apart {
			apartDone.Go(func() {
				for _, th := range apartThreads[k] {
					apart[k].turn(b, th)
				}
			})
		}
		apartDone.Wait()
		unshared += time.Since(start) * time.Duration(turns) / time.Duration(turns/procs*procs)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*turns)/conc.Seconds(), "turns/s")
	b.ReportMetric(seq.Seconds()/conc.Seconds(), "x_sequential")
	b.ReportMetric(seq.Seconds()/unshared.Seconds(), "x_unshared")
	if seqCPU > 0 && concCPU > 0 {
		b.ReportMetric(seqCPU.Seconds()/seq.Seconds(), "seq_cpus")
		b.ReportMetric(concCPU.Seconds()/conc.Seconds(), "conc_cpus")
		b.ReportMetric(float64(seqCPU.Nanoseconds())/float64(b.N*turns), "seq_cpu_ns/turn")
		b.ReportMetric(float64(concCPU.Nanoseconds())/float64(b.N*turns), "conc_cpu_ns/turn")
	}
}

// BenchmarkTurnsByGoroutines runs ConcurrentTurns' 10,000 turns on as
// many goroutines as its name says, each taking an equal share in order:
// with one goroutine they are the sequential side, with 10,000 the
// concurrent one. cpu_ns/turn is the process's CPU time a turn cost, the
// collector's included, and cpus the CPUs kept busy. Comparing the shapes
// tells what running turns at once costs from what many goroutines cost.
func BenchmarkTurnsByGoroutines(b *testing.B) {
	const turns = 10000
	for _, goroutines := range []int{1, 2, 64, turns} {
		b.Run(fmt.Sprintf("goroutines=%d", goroutines), func(b *testing.B) {
			var wall, cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				w := newTurnWorld(b, toolrun.NewMemoryStore(), historyPrompts[1].prompt)
				threads := make([]string, turns)
				for k := range threads {
					threads[k] = w.thread(b, 2)
				}
				runtime.GC()
				b.StartTimer()
				start, c := time.Now(), proccpu.Used()
				var wg sync.WaitGroup
				share := turns / goroutines
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for _, th := range threads[g*share : (g+1)*share] {
							w.turn(b, th)
						}
					}()
				}
				wg.Wait()
				wall += time.Since(start)
				cpu += proccpu.Used() - c
			}
			b.ReportMetric(float64(b.N*turns)/wall.Seconds(), "turns/s")
			if cpu > 0 {
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*turns), "cpu_ns/turn")
				b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpus")
			}
		})
	}
}

// BenchmarkCollectIdleThreads measures one full collection while the
// memory store holds 40,000 threads that each took a turn (six messages
// each): what every cycle of the collector pays to mark a store of idle
// threads, which a turn pays in proportion to what it allocates. objects
// is the number of objects on the heap.
func BenchmarkCollectIdleThreads(b *testing.B) {
	const threads = 40000
	w := newTurnWorld(b, toolrun.NewMemoryStore(), historyPrompts[1].prompt)
	for range threads {
		w.turn(b, w.thread(b, 2))
	}
	runtime.GC()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapObjects), "objects")
	runtime.KeepAlive(w)
}

// BenchmarkIdleThreadHeap measures the heap a thread holds once its turn is
// over, on the memory store: B/thread is the growth of the live heap over
// 1,000 threads that each took one turn (a user message, the model's call,
// the result, the answer), divided by their number. It counts everything
// the thread keeps: its record, its four stored messages and whatever the
// runtime keeps for it.
func BenchmarkIdleThreadHeap(b *testing.B) {
	const threads = 1000
	var per float64
	for i := 0; i < b.N; i++ {
		w := newTurnWorld(b, toolrun.NewMemoryStore(), historyPrompts[1].prompt)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var first string // only one id is kept: the harness's own strings are not the threads'
		for k := range threads {
			th, err := w.rt.NewThread(context.Background(), "agent", nil)
			if err != nil {
				b.Fatal(err)
			}
			if k == 0 {
				first = th.ID
			}
			w.turn(b, th.ID)
		}
		// Twice: pools (the turns' message buffers) keep what they hold
		// for one collection more, and they are not the threads'.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		page, err := w.store.ListMessages(context.Background(), first, toolrun.MessageQuery{IncludeSilent: true})
		if err != nil || len(page.Messages) != 4 {
			b.Fatalf("thread after a turn: %v, %d messages", err, len(page.Messages))
		}
		per += held / threads
		runtime.KeepAlive(w)
	}
	b.ReportMetric(per/float64(b.N), "B/thread")
}
