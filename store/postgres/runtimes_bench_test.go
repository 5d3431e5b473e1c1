package postgres_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/postgres"
)

// turnCounter watches the turns of threads from the model's side: a turn's
// first request (the model calls a tool) opens it, its second (the model
// answers) closes it. A first request on a thread whose turn is open is an
// overlapping turn.
type turnCounter struct {
	open     sync.Map // thread id → struct{}
	overlaps atomic.Int64
	turns    atomic.Int64
}

func (c *turnCounter) respond(ctx context.Context, req *toolrun.Request) *scripted.Response {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == toolrun.RoleTool {
		c.open.Delete(req.ThreadID)
		c.turns.Add(1)
		return scripted.Text("done")
	}
	if _, open := c.open.LoadOrStore(req.ThreadID, struct{}{}); open {
		c.overlaps.Add(1)
	}
	return scripted.Calls(scripted.Call("lookup", map[string]any{"key": "build"}))
}

type lookupArgs struct {
	Key string `json:"key"`
}

// newLeasedRuntime is a runtime on st whose model is c's responder: a turn
// is two model requests around one tool call, and stores four messages.
func newLeasedRuntime(b *testing.B, st toolrun.Store, c *turnCounter, owner string) *toolrun.Runtime {
	quiet := slog.New(slog.DiscardHandler)
	reg := toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: quiet})
	if err := reg.Register(
		&toolrun.Model{Name: "m", Provider: scripted.NewFunc(nil, c.respond)},
		&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true, History: toolrun.Window{Messages: 20},
			Tools: []toolrun.PromptTool{toolrun.Use("lookup")}},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr", MaxSteps: 4}, SideB: toolrun.Side{Human: true}},
		&toolrun.Func[lookupArgs]{Name: "lookup", Execute: func(ctx context.Context, s toolrun.ThreadState, a lookupArgs) (toolrun.Result, error) {
			return toolrun.Text("the build is green"), nil
		}},
	); err != nil {
		b.Fatal(err)
	}
	return toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st, Owner: owner, Logger: quiet})
}

// runTurns sends turns from len(senders) goroutines, goroutine k on
// runtime senders[k] and on the threads pick(k, i) gives for its turn i,
// until n turns ran; it returns the time they took.
func runTurns(b *testing.B, senders []*toolrun.Runtime, threads []string, n int, pick func(k, i int) int) time.Duration {
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	for k, rt := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; next.Add(1) <= int64(n); i++ {
				reply, err := rt.Send(context.Background(), threads[pick(k, i)], "and now?")
				if err != nil || reply.Text != "done" {
					b.Errorf("turn: %v %+v", err, reply)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkTwoRuntimes runs turns on 64 threads from 64 goroutines: through
// one runtime, and through two runtimes of 32 goroutines each (two service
// instances sharing the database and coordinating through its thread
// leases), in alternating rounds. The one runtime's pool has 32
// connections, each of the two has 16: the same concurrency on both sides,
// goroutines and connections. x_one_runtime is the two runtimes' total turns/s over the one
// runtime's; overlaps counts turns of one thread that ran at once (it must
// be 0). In "own_threads" each goroutine keeps to a thread of its own; in
// "shared_threads" goroutine k takes thread (k+i) mod 64 for its turn i, so
// both runtimes take turns on every thread.
func BenchmarkTwoRuntimes(b *testing.B) {
	const threadsN, goroutines = 64, 64
	for _, v := range []struct {
		name string
		pick func(k, i int) int
	}{
		{"own_threads", func(k, i int) int { return k }},
		{"shared_threads", func(k, i int) int { return (k + i) % threadsN }},
	} {
		b.Run(v.name, func(b *testing.B) {
			url := dbURL(b)
			schema := newSchema(b)
			open := func(conns int32) *postgres.Store {
				st, err := postgres.Open(context.Background(), url, &postgres.Options{Schema: schema, MaxConns: conns, Keys: testKeys})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = st.Close() })
				return st
			}
			var counter turnCounter
			one := newLeasedRuntime(b, open(32), &counter, "one")
			a := newLeasedRuntime(b, open(16), &counter, "a")
			c := newLeasedRuntime(b, open(16), &counter, "b")
			threads := make([]string, threadsN)
			for i := range threads {
				th, err := one.NewThread(context.Background(), "agent", nil)
				if err != nil {
					b.Fatal(err)
				}
				threads[i] = th.ID
			}
			oneSenders, twoSenders := make([]*toolrun.Runtime, goroutines), make([]*toolrun.Runtime, goroutines)
			for k := range goroutines {
				oneSenders[k], twoSenders[k] = one, a
				if k >= goroutines/2 {
					twoSenders[k] = c
				}
			}
			const round = 4 * goroutines
			var tOne, tTwo time.Duration
			b.ResetTimer()
			for r, left := 0, b.N; left > 0; r, left = r+1, left-round {
				n := min(left, round)
				one := func() {
					b.StopTimer()
					tOne += runTurns(b, oneSenders, threads, n, v.pick)
					b.StartTimer()
				}
				two := func() { tTwo += runTurns(b, twoSenders, threads, n, v.pick) }
				// The sides take turns going first, so that neither always
				// finds the tables as the other left them.
				if r%2 == 0 {
					one()
					two()
				} else {
					two()
					one()
				}
			}
			b.ReportMetric(float64(b.N)/tTwo.Seconds(), "turns/s")
			b.ReportMetric(float64(b.N)/tOne.Seconds(), "turns/s_one_runtime")
			b.ReportMetric(tOne.Seconds()/tTwo.Seconds(), "x_one_runtime")
			b.ReportMetric(float64(counter.overlaps.Load()), "overlaps")
			if got := counter.overlaps.Load(); got != 0 {
				b.Errorf("%d turns of one thread overlapped", got)
			}
			if got, want := counter.turns.Load(), int64(2*b.N); got != want {
				b.Errorf("%d turns finished; want %d", got, want)
			}
		})
	}
}
