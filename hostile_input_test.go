package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/sqlite"
)

// The catalogue of attacks on the host from a tool or a model. Each case
// says what it attacks and what must hold. Cases marked child would kill or
// hang the whole test binary on a regression (Go's fatal errors cannot be
// recovered), so they run in a child process: the test binary runs itself
// with one case selected, and a regression fails that case instead.

type hostileCase struct {
	name    string
	attacks string
	holds   string
	child   bool
	run     func(t *testing.T)
}

const hostileCaseEnv = "TOOLRUN_HOSTILE_CASE"

func hostileCases() []hostileCase {
	return []hostileCase{
		{
			name:    "panic value whose String panics",
			attacks: "a tool panics with a value whose String method panics with itself, so formatting the recovered value panics again inside the recover",
			holds:   "the call gets an error result naming the value's type, and the batch goes on",
			child:   true,
			run: func(t *testing.T) {
				ex := newExec(t, nil,
					fn("boom", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { panic(selfPanicker{}) }),
					fn("next", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ran"), nil }))
				out := run(t, ex, "t", call("1", "boom", ""), call("2", "next", ""))
				require.Len(t, out, 2)
				assert.True(t, out[0].Result.IsError())
				assert.Contains(t, out[0].Result.Error, "tool panicked: value of type toolrun_test.selfPanicker")
				assert.Equal(t, "ran", out[1].Message.Content)
			},
		},
		{
			name:    "returned error whose Error method panics",
			attacks: "a tool returns an error whose Error method panics",
			holds:   "the call gets an error result naming the error's type",
			child:   true,
			run: func(t *testing.T) {
				ex := newExec(t, nil, fn("bad", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
					return toolrun.Result{}, panickyError{}
				}))
				out := run(t, ex, "t", call("1", "bad", ""))
				assert.Contains(t, out[0].Message.Content, "toolrun_test.panickyError")
			},
		},
		{
			name:    "runtime.Goexit in a tool",
			attacks: "a tool calls runtime.Goexit, as t.FailNow does inside a require assertion, which ends the goroutine that called Run",
			holds:   "before that goroutine ends the call's error result is stored and the thread's lock released: the next Run on the thread goes on with the next call and does not run the first again",
			child:   true,
			run: func(t *testing.T) {
				var runs atomic.Int32
				ex := newExec(t, nil,
					fn("fails_now", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
						runs.Add(1)
						runtimeGoexit()
						return toolrun.Text("unreachable"), nil
					}),
					fn("next", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ran"), nil }))
				calls := []toolrun.ToolCall{call("1", "fails_now", ""), call("2", "next", "")}
				returned := make(chan bool, 1)
				go func() {
					ended := true
					defer func() { returned <- !ended }()
					_, _ = ex.Run(context.Background(), "t", calls)
					ended = false
				}()
				select {
				case r := <-returned:
					assert.False(t, r, "Run returned, yet runtime.Goexit cannot be stopped")
				case <-time.After(20 * time.Second):
					t.Fatal("the goroutine that called Run neither returned nor ended")
				}
				out := runAgainWithin(t, ex, calls) // the batch again, as a resume would
				require.Len(t, out, 2)
				assert.True(t, out[0].Resumed, "the call's result was stored on the way out")
				assert.Contains(t, out[0].Message.Content, "runtime.Goexit")
				assert.Equal(t, "tool_goexit", out[0].Message.ErrorCode)
				assert.Equal(t, "ran", out[1].Message.Content)
				assert.Equal(t, int32(1), runs.Load(), "the tool ran once")
			},
		},
		{
			name:    "runtime.Goexit in a tool_call_done hook or subscriber",
			attacks: "a ToolCallDone hook, or a thread event subscriber, calls runtime.Goexit (t.FailNow in a test's hook) after the tool ran and before its result was stored",
			holds:   "the result is stored on the goroutine's way out: the batch run again goes on with the next call and does not run the tool a second time",
			child:   true,
			run: func(t *testing.T) {
				for _, via := range []string{"hook", "subscriber"} {
					var runs atomic.Int32
					var opts toolrun.ExecutorOptions
					if via == "hook" {
						opts.Hooks.ToolCallDone = func(_ context.Context, _ string, ev toolrun.ToolCallDone) {
							if ev.Name == "once" {
								runtimeGoexit()
							}
						}
					}
					ex := newExec(t, &opts,
						fn("once", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
							runs.Add(1)
							return toolrun.Text("did it"), nil
						}),
						fn("next", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ran"), nil }))
					if via == "subscriber" {
						unsubscribe := ex.Subscribe("t", func(ev toolrun.Event) {
							if d, ok := ev.Data.(toolrun.ToolCallDone); ok && d.Name == "once" {
								runtimeGoexit()
							}
						})
						defer unsubscribe()
					}
					calls := []toolrun.ToolCall{call("1", "once", ""), call("2", "next", "")}
					ended := make(chan struct{})
					go func() {
						defer close(ended)
						_, _ = ex.Run(context.Background(), "t", calls)
					}()
					select {
					case <-ended:
					case <-time.After(20 * time.Second):
						t.Fatalf("%s: the goroutine that called Run neither returned nor ended", via)
					}
					out := runAgainWithin(t, ex, calls) // the batch again, as a resume would
					require.Len(t, out, 2, via)
					assert.True(t, out[0].Resumed, "%s: the call's result was stored on the way out", via)
					assert.Equal(t, "did it", out[0].Message.Content, via)
					assert.Equal(t, "ran", out[1].Message.Content, via)
					assert.Equal(t, int32(1), runs.Load(), "%s: the tool ran once", via)
				}
			},
		},
		{
			name:    "a tool that queues itself without end",
			attacks: "a tool queues a call of itself every time it runs, which kept its batch, and the Run or turn that ran it, going for ever",
			holds:   "QueueTool refuses past the batch's bound with an error naming it, and Run returns every outcome up to there, stored",
			run: func(t *testing.T) {
				for _, limit := range []int{0, 5} {
					want := limit
					if want == 0 {
						want = toolrun.DefaultMaxQueued
					}
					var refusal atomic.Value
					ex := newExec(t, &toolrun.ExecutorOptions{MaxQueued: limit},
						fn("again", func(_ context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
							if err := s.QueueTool("again", nil); err != nil {
								refusal.Store(err.Error())
								return toolrun.Result{}, err
							}
							return toolrun.Text("queued myself"), nil
						}))
					done := make(chan []toolrun.Outcome, 1)
					go func() {
						out, err := ex.Run(context.Background(), "t", []toolrun.ToolCall{call("1", "again", "")})
						assert.NoError(t, err)
						done <- out
					}()
					select {
					case out := <-done:
						require.Len(t, out, want+1, "limit %d", limit)
						assert.Equal(t, "queued myself", out[want-1].Message.Content)
						last := out[want].Message
						assert.Equal(t, toolrun.StatusError, last.ToolStatus)
						assert.Contains(t, last.Content, fmt.Sprintf("the batch already queued %d calls, the most one batch may queue (MaxQueued)", want))
						assert.Equal(t, "Failed to execute tool: "+refusal.Load().(string), last.Content)
						stored, err := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{Limit: 2 * want})
						require.NoError(t, err)
						assert.Len(t, stored.Messages, want+1, "every result is stored")
					case <-time.After(60 * time.Second):
						t.Fatalf("limit %d: Run did not return", limit)
					}
				}
			},
		},
		{
			name:    "InvokeTool recursion without end",
			attacks: "a tool invokes itself through InvokeTool forever, which overflowed the goroutine stack (fatal, not recoverable)",
			holds:   "the innermost call past the nesting limit gets an error result naming the limit, and every level returns",
			child:   true,
			run: func(t *testing.T) {
				var depth atomic.Int32
				recurse := fn("recurse", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
					depth.Add(1)
					return s.InvokeTool(ctx, "recurse", nil), nil
				})
				out := run(t, newExec(t, nil, recurse), "t", call("1", "recurse", ""))
				assert.Equal(t, int32(toolrun.DefaultMaxNesting+1), depth.Load(), "levels 0 … limit run")
				assert.Contains(t, out[0].Message.Content, "past the limit of 32")
				out = run(t, newExec(t, &toolrun.ExecutorOptions{MaxNesting: 3}, recurse), "t2", call("1", "recurse", ""))
				assert.Contains(t, out[0].Message.Content, "past the limit of 3")
			},
		},
		{
			name:    "prompt tool that calls itself",
			attacks: "a model keeps calling a prompt tool from inside that prompt tool's own sub-prompt",
			holds:   "sub-prompts nest up to the limit and no further, each level's request counts against the run's request ceiling, and Send returns",
			child:   true,
			run: func(t *testing.T) {
				loop := &loopProvider{call: "again"}
				reg := toolrun.NewRegistry(nil)
				require.NoError(t, reg.Register(
					&toolrun.Model{Name: "m", Provider: loop, ID: "loop"},
					&toolrun.Prompt{Name: "again", Model: "m", ToolDescription: "again", Tools: []toolrun.PromptTool{toolrun.Use("again")}},
					&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "again", MaxSteps: 1}, SideB: toolrun.Side{Human: true}},
				))
				rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxNesting: 4})
				th, err := rt.NewThread(context.Background(), "a", nil)
				require.NoError(t, err)
				_, err = rt.Send(context.Background(), th.ID, "go")
				require.NoError(t, err)
				assert.Equal(t, int32(5), loop.requests.Load(), "the turn's request and one per nesting level 1 … 4")

				loop = &loopProvider{call: "again"}
				reg = toolrun.NewRegistry(nil)
				require.NoError(t, reg.Register(
					&toolrun.Model{Name: "m", Provider: loop, ID: "loop"},
					&toolrun.Prompt{Name: "again", Model: "m", ToolDescription: "again", Tools: []toolrun.PromptTool{toolrun.Use("again")}},
					&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "again", MaxSteps: 1}, SideB: toolrun.Side{Human: true}},
				))
				rt = toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxTotalSteps: 3})
				th, err = rt.NewThread(context.Background(), "a", nil)
				require.NoError(t, err)
				reply, err := rt.Send(context.Background(), th.ID, "go")
				require.NoError(t, err)
				assert.Equal(t, int32(3), loop.requests.Load(), "sub-prompt requests stop at the ceiling")
				var refused bool
				for _, m := range reply.Messages {
					refused = refused || strings.Contains(m.Content, "reached its limit of 3 model requests")
				}
				assert.True(t, refused, "the sub-prompt past the ceiling is refused with a result saying so")
			},
		},
		{
			name:    "cyclic error_data",
			attacks: "a tool returns error_data that contains itself, which overflowed the stack of the memory store's clone and the redactor",
			holds:   "the call gets an error result naming the cycle's path, and the batch goes on",
			child:   true,
			run: func(t *testing.T) {
				ex := secretExec(t, nil, fn("cyclic", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
					m := map[string]any{"a": 1}
					m["self"] = m
					return toolrun.Result{Status: toolrun.StatusError, Error: "failed", ErrorData: map[string]any{"inner": m}}, nil
				}), fn("next", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ran"), nil }))
				out := run(t, ex, "t", call("1", "cyclic", ""), call("2", "next", ""))
				require.Len(t, out, 2)
				assert.Contains(t, out[0].Message.Content, "failed (its error_data could not be stored: error_data.inner.self")
				assert.Contains(t, out[0].Message.Content, "cycle")
				assert.Nil(t, out[0].Message.ErrorData)
				assert.Equal(t, "ran", out[1].Message.Content)
			},
		},
		{
			name:    "cyclic metadata and event data",
			attacks: "a tool injects a message whose metadata contains itself, and emits event data that contains itself",
			holds:   "InjectMessage returns an error naming the cycle, nothing is stored for it; subscribers get a text saying why instead of the data",
			child:   true,
			run: func(t *testing.T) {
				var injectErr error
				var events []toolrun.Event
				ex := secretExec(t, nil, fn("cyclic", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
					m := map[string]any{}
					m["loop"] = []any{m}
					injectErr = s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleSystem, Content: "x", Metadata: m})
					s.Emit("progress", m)
					return toolrun.Text("ok"), nil
				}))
				ex.Subscribe("t", func(ev toolrun.Event) { events = append(events, ev) })
				out := run(t, ex, "t", call("1", "cyclic", ""))
				require.Error(t, injectErr)
				assert.Contains(t, injectErr.Error(), "metadata.loop[0]")
				require.Len(t, events, 3, "started, progress, done")
				assert.Contains(t, events[1].Data, "event data not sent: data.loop[0]")
				page, _ := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{IncludeSilent: true})
				assert.Equal(t, "ok", out[0].Message.Content)
				assert.Len(t, page.Messages, 1, "the injected message was refused, not stored")
			},
		},
		{
			name:    "error_data nested a million levels",
			attacks: "a tool returns error_data nested 10⁶ levels deep (built without recursion)",
			holds:   "the call gets an error result saying the value is nested too deeply",
			child:   true,
			run: func(t *testing.T) {
				ex := newExec(t, nil, fn("deep", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
					v := map[string]any{}
					for range 1_000_000 {
						v = map[string]any{"d": v}
					}
					return toolrun.Result{Status: toolrun.StatusError, Error: "deep", ErrorData: v}, nil
				}))
				out := run(t, ex, "t", call("1", "deep", ""))
				assert.Contains(t, out[0].Message.Content, "could not be stored")
				assert.Contains(t, out[0].Message.Content, "deep")
			},
		},
		{
			name:    "NaN in error_data on SQLite",
			attacks: "a tool returns error_data holding NaN, which the SQLite store cannot encode, so every retry failed and ran the tool again",
			holds:   "the result is stored as an error result saying why, Run succeeds, and a retry does not run the tool again",
			run: func(t *testing.T) {
				st, err := sqlite.Open(filepath.Join(t.TempDir(), "t.db"), nil)
				require.NoError(t, err)
				defer st.Close()
				runs := 0
				tool := fn("score", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
					runs++
					return toolrun.Result{Status: toolrun.StatusError, Error: "no score", ErrorData: map[string]any{"score": math.NaN()}}, nil
				})
				ex := newExec(t, &toolrun.ExecutorOptions{Store: st}, tool)
				for range 3 {
					out, err := ex.Run(context.Background(), "t", []toolrun.ToolCall{call("1", "score", "")})
					require.NoError(t, err)
					assert.Contains(t, out[0].Message.Content, "error_data.score")
				}
				assert.Equal(t, 1, runs, "3 attempts, 1 execution")
			},
		},
		{
			name:    "a store that refuses a value",
			attacks: "a tool returns a result a store cannot hold (here: a store refusing any text with a NUL byte, as PostgreSQL's text columns do)",
			holds:   "an error result saying so is stored in its place, the batch goes on, and the tool never runs again",
			run: func(t *testing.T) {
				st := &refusingStore{Store: toolrun.NewMemoryStore()}
				runs := 0
				ex := newExec(t, &toolrun.ExecutorOptions{Store: st},
					fn("nul", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
						runs++
						return toolrun.Text("a\x00b"), nil
					}),
					fn("next", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) { return toolrun.Text("ran"), nil }))
				out := run(t, ex, "t", call("1", "nul", ""), call("2", "next", ""))
				require.Len(t, out, 2)
				assert.Contains(t, out[0].Message.Content, "Tool result could not be stored: ")
				assert.Equal(t, "unstorable_result", out[0].Message.ErrorCode)
				assert.Equal(t, "ran", out[1].Message.Content)
				out = run(t, ex, "t", call("1", "nul", ""))
				assert.True(t, out[0].Resumed)
				assert.Equal(t, 1, runs)
			},
		},
		{
			name:    "integer out of its Go type's range",
			attacks: "a model sends 300 for an int8 field, inside the advertised schema, so decoding failed with Go's type names",
			holds:   "validation refuses it in the contract's form, naming the field",
			run: func(t *testing.T) {
				type sized struct {
					Small int8   `json:"small"`
					Count uint32 `json:"count"`
				}
				ex := newExec(t, nil, &toolrun.Func[sized]{Name: "sized", Execute: func(context.Context, toolrun.ThreadState, sized) (toolrun.Result, error) {
					return toolrun.Text("ran"), nil
				}})
				out := run(t, ex, "t", call("1", "sized", `{"small":300,"count":-1}`))
				c := out[0].Message.Content
				assert.True(t, strings.HasPrefix(c, "Failed to execute tool: Tool argument validation failed: [count] "), c)
				assert.Contains(t, c, "; [small] ")
				assert.NotContains(t, c, "int8")
				assert.NotContains(t, c, "Go struct")
			},
		},
		{
			name:    "integer one past a 64-bit limit",
			attacks: "a model sends 2⁶³ for an int64 field and 2⁶⁴ for a uint64 one: float64 rounds them onto the limits, so the check let them through and decoding failed with Go's type names",
			holds:   "validation refuses both in the contract's form, and the limits themselves pass",
			run: func(t *testing.T) {
				type wide struct {
					Big  int64  `json:"big"`
					Huge uint64 `json:"huge"`
				}
				var got wide
				ex := newExec(t, nil, &toolrun.Func[wide]{Name: "wide", Execute: func(_ context.Context, _ toolrun.ThreadState, a wide) (toolrun.Result, error) {
					got = a
					return toolrun.Text("ran"), nil
				}})
				out := run(t, ex, "t", call("1", "wide", `{"big":9223372036854775808,"huge":18446744073709551616}`))
				c := out[0].Message.Content
				assert.True(t, strings.HasPrefix(c, "Failed to execute tool: Tool argument validation failed: [big] "), c)
				assert.Contains(t, c, "; [huge] ")
				assert.NotContains(t, c, "Go struct")
				out = run(t, ex, "t", call("2", "wide", `{"big":9223372036854775807,"huge":18446744073709551615}`))
				assert.Equal(t, "ran", out[0].Message.Content)
				assert.Equal(t, wide{Big: math.MaxInt64, Huge: math.MaxUint64}, got)
			},
		},
	}
}

// TestHostileInput runs the catalogue; child cases run in a child process.
func TestHostileInput(t *testing.T) {
	if name := os.Getenv(hostileCaseEnv); name != "" {
		for _, c := range hostileCases() {
			if c.name == name {
				c.run(t)
				return
			}
		}
		t.Fatalf("no hostile case %q", name)
	}
	for _, c := range hostileCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Logf("attacks: %s; must hold: %s", c.attacks, c.holds)
			if !c.child {
				c.run(t)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHostileInput$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), hostileCaseEnv+"="+c.name)
			out, err := cmd.CombinedOutput()
			text := string(out)
			if len(text) > 4000 {
				text = text[:2000] + "\n…\n" + text[len(text)-2000:]
			}
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				t.Fatalf("the child process failed (%v): the attack got through\n%s", err, text)
			case err != nil:
				t.Fatalf("running the child: %v\n%s", err, text)
			}
			require.Contains(t, string(out), "--- PASS: TestHostileInput", text)
		})
	}
}

// refusingStore refuses, as a value it cannot hold, any message whose
// content has a NUL byte.
type refusingStore struct{ toolrun.Store }

func (s *refusingStore) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	for _, m := range msgs {
		if strings.IndexByte(m.Content, 0) >= 0 {
			return fmt.Errorf("refusing store: content of %s: NUL byte: %w", m.ID, toolrun.ErrUnstorable)
		}
	}
	return s.Store.AppendMessages(ctx, threadID, msgs...)
}

type selfPanicker struct{}

func (selfPanicker) String() string { panic(selfPanicker{}) }

type panickyError struct{}

func (panickyError) Error() string { panic(panickyError{}) }

// loopProvider answers every request with one call of the same tool.
type loopProvider struct {
	call     string
	requests atomic.Int32
}

func (p *loopProvider) Name() string { return "loop" }

func (p *loopProvider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	n := p.requests.Add(1)
	return func(yield func(toolrun.Chunk, error) bool) {
		c := toolrun.ToolCall{ID: "call_" + string(rune('a'+n%26)) + strings.Repeat("x", int(n)), Name: p.call, Arguments: "{}"}
		if !yield(toolrun.Chunk{Type: toolrun.ChunkToolCall, ToolCall: c}, nil) {
			return
		}
		yield(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: "tool_calls"}, nil)
	}
}

// runAgainWithin runs the batch of calls on thread "t" from a goroutine of
// its own and returns its outcomes; it fails the test when Run has not
// returned within 20 seconds (the thread's lock was left held).
func runAgainWithin(t *testing.T, ex *toolrun.Executor, calls []toolrun.ToolCall) []toolrun.Outcome {
	t.Helper()
	done := make(chan []toolrun.Outcome, 1)
	go func() {
		out, err := ex.Run(context.Background(), "t", calls)
		assert.NoError(t, err)
		done <- out
	}()
	select {
	case out := <-done:
		return out
	case <-time.After(20 * time.Second):
		t.Fatal("the thread's lock was not released")
		return nil
	}
}

// runtimeGoexit is runtime.Goexit, kept apart so the cases read plainly.
func runtimeGoexit() { runtime.Goexit() }
