package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestBridgedCallsAroundSpin checks that bridged calls and results come
// through whether the side waiting for them polls and the answer comes at
// once, the answer comes after the budget is spent (a host function that
// sleeps, code that computes between calls), the budget is spent before
// the first poll, or polling is off.
func TestBridgedCallsAroundSpin(t *testing.T) {
	const slow = 40 * DefaultSpinWait // far past any budget below
	src := `import {twice} from 'h';
export default async (n: number, busyMs: number) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(await twice(i) as number);
    const until = Date.now() + busyMs;
    while (Date.now() < until) {}
    if (i % 2 == 0) report(i);
  }
  const both = await Promise.all([twice(100), twice(200)]) as number[];
  return [out, both];
}`
	for _, tc := range []struct {
		name  string
		spin  time.Duration
		delay time.Duration // the host function's sleep
		busy  int           // the code's milliseconds of computing after each call
	}{
		{"default", 0, 0, 0},
		{"host answers after the budget", 0, slow, 0},
		{"code computes past the budget", 0, 0, 2},
		{"budget spent at once", time.Nanosecond, 0, 0},
		{"budget spent at once, slow answers", time.Nanosecond, slow, 1},
		{"off", -1, 0, 0},
		{"off, slow answers", -1, slow, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(&RunnerOptions{PoolSize: 1, SpinWait: tc.spin})
			defer r.Close()
			twice := HostFunc(func(ctx context.Context, args []any) (any, error) {
				time.Sleep(tc.delay)
				return args[0].(float64) * 2, nil
			})
			// Several runs, so that they share a worker and its pipes.
			for run := 0; run < 3; run++ {
				var reports []any
				res := runCode(t, r, src, &Options{
					Execute: &Execute{Args: []any{5, tc.busy}},
					Imports: map[string]map[string]any{"h": {"twice": twice}},
					Report:  func(v any) { reports = append(reports, v) },
				})
				requireStatus(t, res, StatusSuccess)
				assert.Equal(t, []any{[]any{0.0, 2.0, 4.0, 6.0, 8.0}, []any{200.0, 400.0}}, res.Value)
				assert.Equal(t, []any{0.0, 2.0, 4.0}, reports)
			}
		})
	}
}

// TestTerminateWhileHostSpins checks that a run whose worker is busy in
// a bridged-call loop (the host polling for its next frame) is still
// terminated, and that the worker is still used or replaced after it.
func TestTerminateWhileHostSpins(t *testing.T) {
	r := New(&RunnerOptions{PoolSize: 1})
	defer r.Close()
	echo := HostFunc(func(ctx context.Context, args []any) (any, error) { return args[0], nil })
	started := make(chan struct{}, 1)
	run := r.Start(testCtx, `import {echo} from 'h';
export default async () => { for (let i = 0; ; i++) { await echo(i); if (i == 10) report(i); } }`, &Options{
		Imports: map[string]map[string]any{"h": {"echo": echo}},
		Report: func(any) {
			select {
			case started <- struct{}{}:
			default:
			}
		},
	})
	<-started
	run.Terminate("stop")
	res := wait(t, run)
	requireStatus(t, res, StatusTerminated)

	res = runCode(t, r, "import {echo} from 'h'; export default async () => await echo(7);",
		&Options{Imports: map[string]map[string]any{"h": {"echo": echo}}})
	requireStatus(t, res, StatusSuccess)
	assert.Equal(t, 7.0, res.Value)
}

// TestSpinRulePauses checks the policy that stops polling after groups
// of polls that mostly ran out of budget: pauses double while groups keep
// failing and halve as groups pass.
func TestSpinRulePauses(t *testing.T) {
	r := &spinRule{}
	group := func(misses int) {
		r.skip = 0 // the pause is over
		for i := 0; i < spinGroup; i++ {
			r.count(i >= misses)
		}
	}
	group(spinGroupMisses)
	assert.Zero(t, r.skip, "a group with few misses")
	group(spinGroupMisses + 1)
	assert.Equal(t, spinPauseMin, r.skip)
	group(spinGroup)
	assert.Equal(t, 2*spinPauseMin, r.skip, "a second bad group doubles the pause")
	for i := 0; i < 20; i++ {
		group(spinGroup)
	}
	assert.Equal(t, spinPauseMax, r.skip)
	group(0)
	assert.Zero(t, r.skip)
	group(0)
	group(spinGroup)
	assert.Equal(t, spinPauseMax/2, r.skip, "two good groups halve the pause twice, a bad one doubles it")
	for i := 0; i < 20; i++ {
		group(0)
	}
	group(spinGroup)
	assert.Equal(t, spinPauseMin, r.skip, "after many good groups the pause starts short again")
}
