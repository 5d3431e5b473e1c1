package postgres_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/postgres"
)

type stepArgs struct {
	N int `json:"n"`
}

// twoRuntimes builds runtimes that share one database, each with its own
// scripted model; busy tracks how many turns of the thread run at once.
func twoRuntimes(t *testing.T, ttl time.Duration, busy *atomic.Int32, overlap *atomic.Bool) ([]*toolrun.Runtime, []*scripted.Provider, []*postgres.Store) {
	t.Helper()
	url, schema := dbURL(t), newSchema(t)
	var rts []*toolrun.Runtime
	var ps []*scripted.Provider
	var sts []*postgres.Store
	for i := 0; i < 2; i++ {
		st, err := postgres.Open(t.Context(), url, &postgres.Options{Schema: schema, MaxConns: 4, LeaseTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		p := scripted.New()
		reg := toolrun.NewRegistry(nil)
		err = reg.Register(
			&toolrun.Model{Name: "m", Provider: p},
			&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("step")}},
			&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
			&toolrun.Func[stepArgs]{Name: "step", Execute: func(ctx context.Context, s toolrun.ThreadState, a stepArgs) (toolrun.Result, error) {
				if busy.Add(1) > 1 {
					overlap.Store(true)
				}
				time.Sleep(20 * time.Millisecond)
				busy.Add(-1)
				return toolrun.Text("stepped"), nil
			}},
		)
		if err != nil {
			t.Fatal(err)
		}
		rts = append(rts, toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st, Owner: []string{"instance-a", "instance-b"}[i]}))
		ps = append(ps, p)
		sts = append(sts, st)
	}
	return rts, ps, sts
}

// TestTwoRuntimesNeverRunOneThreadAtOnce: two runtime instances on one
// database send to the same thread concurrently; the thread lease makes
// their turns take turns.
func TestTwoRuntimesNeverRunOneThreadAtOnce(t *testing.T) {
	var busy atomic.Int32
	var overlap atomic.Bool
	rts, ps, _ := twoRuntimes(t, 5*time.Second, &busy, &overlap)
	th, err := rts[0].NewThread(t.Context(), "agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	const sends = 4
	for _, p := range ps {
		for i := 0; i < sends; i++ {
			p.Add(scripted.Calls(scripted.Call("step", map[string]any{"n": 1}), scripted.Call("step", map[string]any{"n": 2})), scripted.Text("done"))
		}
	}
	var wg sync.WaitGroup
	for i := range rts {
		for j := 0; j < sends; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := rts[i].Send(context.Background(), th.ID, "go"); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	if overlap.Load() {
		t.Fatal("two instances ran turns of one thread at the same time")
	}
	page, err := rts[1].Store().ListMessages(t.Context(), th.ID, toolrun.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	// Each Send stores: user, assistant with 2 calls, 2 results, answer.
	if got, want := len(page.Messages), 2*sends*5; got != want {
		t.Fatalf("stored %d messages, want %d", got, want)
	}
}

// TestRuntimeTakesOverAThreadWhoseOwnerDied: an owner that took the lease
// and died (never released nor renewed) blocks the thread only until its
// lease expires; then the other instance runs the turn, and the dead
// owner's late writes are refused.
func TestRuntimeTakesOverAThreadWhoseOwnerDied(t *testing.T) {
	var busy atomic.Int32
	var overlap atomic.Bool
	rts, ps, sts := twoRuntimes(t, 300*time.Millisecond, &busy, &overlap)
	th, err := rts[0].NewThread(t.Context(), "agent", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The "dead" instance: holds the lease, never renews it.
	dead, err := sts[0].AcquireLease(t.Context(), th.ID, "instance-a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ps[1].Add(scripted.Text("taken over"))
	start := time.Now()
	reply, err := rts[1].Send(t.Context(), th.ID, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "taken over" {
		t.Fatalf("reply %q", reply.Text)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("the turn ran after %v, before the dead owner's lease expired", waited)
	}
	late := sts[0].WithLease(dead)
	err = late.AppendMessages(t.Context(), th.ID, &toolrun.Message{ID: testID(), CreatedAt: testTime, Role: toolrun.RoleAssistant, Content: "late write"})
	if err == nil {
		t.Fatal("the stale owner's late write was accepted")
	}
	page, _ := rts[1].Store().ListMessages(t.Context(), th.ID, toolrun.MessageQuery{})
	for _, m := range page.Messages {
		if m.Content == "late write" {
			t.Fatal("late write stored")
		}
	}
}
