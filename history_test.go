package toolrun_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// seedHistory stores n exchanges on a thread: a user message, then either
// an assistant answer or (every third one) an assistant call of get_issue
// with its result.
func seedHistory(t *testing.T, st toolrun.Store, thread string, n int) {
	t.Helper()
	ctx := context.Background()
	var msgs []*toolrun.Message
	at := time.Now().UTC().Truncate(time.Microsecond)
	add := func(m toolrun.Message) {
		m.ID = fmt.Sprintf("seed_%d", len(msgs))
		m.CreatedAt = at
		msgs = append(msgs, &m)
	}
	for i := range n {
		add(toolrun.Message{Role: toolrun.RoleUser, Content: fmt.Sprintf("question %d", i), Side: "b"})
		if i%3 == 2 {
			id := fmt.Sprintf("seedcall_%d", i)
			add(toolrun.Message{Role: toolrun.RoleAssistant, Side: "a", ToolCalls: []toolrun.ToolCall{{ID: id, Name: "get_issue", Arguments: `{"number":1}`}}})
			add(toolrun.Message{Role: toolrun.RoleTool, Side: "a", ToolCallID: id, Name: "get_issue", ToolStatus: toolrun.StatusSuccess, Content: fmt.Sprintf("issue for %d", i)})
			continue
		}
		add(toolrun.Message{Role: toolrun.RoleAssistant, Side: "a", Content: fmt.Sprintf("answer %d", i)})
	}
	require.NoError(t, st.AppendMessages(ctx, thread, msgs...))
}

func windowWorld(t *testing.T, w toolrun.Window) (*world, string) {
	p := triagePrompt()
	p.History = w
	wd := newWorld(t, p, toolrun.Side{})
	id := wd.thread(t)
	seedHistory(t, wd.rt.Store(), id, 30)
	return wd, id
}

func TestWindowKeepsTheNewestMessagesAndNeverPartsCallsFromResults(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 10} {
		w, id := windowWorld(t, toolrun.Window{Messages: n})
		w.p.Add(scripted.Text("ok"))
		_, err := w.rt.Send(context.Background(), id, "latest")
		require.NoError(t, err)
		msgs := w.p.LastRequest().Messages
		require.NotEmpty(t, msgs, "n=%d", n)
		assert.LessOrEqual(t, len(msgs), n, "n=%d: at most the window", n)
		assert.Equal(t, "latest", msgs[len(msgs)-1].Content, "n=%d: the newest message is always sent", n)
		for i, m := range msgs {
			if m.Role == toolrun.RoleTool {
				require.Greater(t, i, 0, "n=%d: a result without its call", n)
				prev := msgs[i-1]
				assert.True(t, prev.Role == toolrun.RoleTool || prev.Role == toolrun.RoleAssistant && len(prev.ToolCalls) > 0, "n=%d: result %d not after its call: %s", n, i, roles(msgs))
			}
			if m.Role == toolrun.RoleAssistant && len(m.ToolCalls) > 0 {
				require.Less(t, i+1, len(msgs), "n=%d: a call without its result", n)
				assert.Equal(t, toolrun.RoleTool, msgs[i+1].Role, "n=%d", n)
			}
		}
	}
}

func TestWindowOfMessagesCountsWholeGroups(t *testing.T) {
	// The seeded history ends: user "question 28", "answer 28", user
	// "question 29", a call of get_issue, its result "issue for 29"; then
	// the new message.
	for n, want := range map[int][]string{
		1: {"latest"},
		2: {"latest"}, // the call and its result would be 3: they stay out whole
		3: {"", "issue for 29", "latest"},
		4: {"question 29", "", "issue for 29", "latest"},
		5: {"answer 28", "question 29", "", "issue for 29", "latest"},
	} {
		w, id := windowWorld(t, toolrun.Window{Messages: n})
		w.p.Add(scripted.Text("ok"))
		_, err := w.rt.Send(context.Background(), id, "latest")
		require.NoError(t, err)
		assert.Equal(t, want, contents(w.p.LastRequest().Messages), "window of %d", n)
	}
}

func TestWindowOfTokens(t *testing.T) {
	w, id := windowWorld(t, toolrun.Window{Tokens: 30})
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(context.Background(), id, "latest")
	require.NoError(t, err)
	msgs := w.p.LastRequest().Messages
	total := 0
	for _, m := range msgs {
		total += toolrun.EstimateTokens(m)
	}
	assert.LessOrEqual(t, total, 30)
	assert.Equal(t, "latest", msgs[len(msgs)-1].Content)
	assert.Greater(t, len(msgs), 1)

	// A newest message larger than the budget is sent anyway.
	w2, id2 := windowWorld(t, toolrun.Window{Tokens: 5})
	w2.p.Add(scripted.Text("ok"))
	_, err = w2.rt.Send(context.Background(), id2, strings.Repeat("long ", 40))
	require.NoError(t, err)
	assert.Len(t, w2.p.LastRequest().Messages, 1)
}

func TestEstimateTokens(t *testing.T) {
	assert.Equal(t, 4+2, toolrun.EstimateTokens(toolrun.Message{Content: "12345678"}))
	assert.Equal(t, 4+3, toolrun.EstimateTokens(toolrun.Message{Content: "123456789"}), "rounded up")
	assert.Equal(t, 4+2+256, toolrun.EstimateTokens(toolrun.Message{ToolCalls: []toolrun.ToolCall{{Name: "abcd", Arguments: "{\"\"}"}},
		Attachments: []toolrun.AttachmentRef{{Path: "/attachments/a.png"}}}))
}

func TestWindowFilterSeesTheWindowAndDecidesWhatIsSent(t *testing.T) {
	var seen []string
	w, id := windowWorld(t, toolrun.Window{Messages: 3, Filter: func(ctx context.Context, threadID string, h []toolrun.Message) ([]toolrun.Message, error) {
		seen = contents(h)
		summary := toolrun.Message{Role: toolrun.RoleSystem, Content: fmt.Sprintf("(summary of earlier messages on %s)", threadID)}
		return append([]toolrun.Message{summary}, h[len(h)-1]), nil
	}})
	w.p.Add(scripted.Text("ok"))
	_, err := w.rt.Send(context.Background(), id, "latest")
	require.NoError(t, err)
	assert.Equal(t, []string{"", "issue for 29", "latest"}, seen)
	assert.Equal(t, []string{"(summary of earlier messages on " + id + ")", "latest"}, contents(w.p.LastRequest().Messages))

	failing, id2 := windowWorld(t, toolrun.Window{Filter: func(context.Context, string, []toolrun.Message) ([]toolrun.Message, error) {
		return nil, errors.New("summariser down")
	}})
	_, err = failing.rt.Send(context.Background(), id2, "latest")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "history filter: summariser down")
	assert.Empty(t, failing.p.Requests(), "no request is made")
}

// countingStore counts the rows ListMessages returns.
type countingStore struct {
	toolrun.Store
	rows int
}

func (s *countingStore) ListMessages(ctx context.Context, threadID string, q toolrun.MessageQuery) (toolrun.MessagePage, error) {
	p, err := s.Store.ListMessages(ctx, threadID, q)
	s.rows += len(p.Messages)
	return p, err
}

// A turn reads what its requests and reply need, not the whole thread.
func TestTurnReadsOnlyWhatItSends(t *testing.T) {
	// A turn here is two requests (a call, then the answer), and stores
	// four messages. What it reads besides its requests: the newest row,
	// before and after it stores the user's message, and the four rows it
	// stored, for its Reply.
	for _, c := range []struct {
		name    string
		chat    bool
		window  int
		maxRead func(thread int) int
	}{
		// Each request reads the rows of the turn so far (1, then 3).
		{"without chat", false, 0, func(int) int { return 1 + 3 + 2 + 4 }},
		// The first request reads the window and a margin (10 + 4), the
		// second only the two rows stored since.
		{"with chat and a window of 10", true, 10, func(int) int { return 14 + 2 + 2 + 4 }},
		// The first request reads the thread, the second only the new rows.
		{"with the whole chat", true, 0, func(n int) int { return n + 1 + 2 + 2 + 4 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := triagePrompt()
			p.IncludeChat, p.History = c.chat, toolrun.Window{Messages: c.window}
			w := newWorld(t, p, toolrun.Side{})
			cs := &countingStore{Store: toolrun.NewMemoryStore()}
			w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{Store: cs})
			id := w.thread(t)
			seedHistory(t, cs, id, 1000)
			all, err := cs.ListMessages(context.Background(), id, toolrun.MessageQuery{IncludeSilent: true})
			require.NoError(t, err)
			w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1})), scripted.Text("ok"))
			cs.rows = 0
			reply, err := w.rt.Send(context.Background(), id, "latest")
			require.NoError(t, err)
			assert.Equal(t, "user assistant+calls tool:get_issue assistant", roles(reply.Messages), "the reply holds what the turn stored")
			assert.LessOrEqual(t, cs.rows, c.maxRead(len(all.Messages)), "rows read for a turn on a %d-message thread", len(all.Messages))
		})
	}
}

// TestPromptWithoutChatSeesOnlyItsTurnsContext: a prompt without chat is
// sent the system and user messages stored during the turn (here a tool's
// injected context), each once and in order, growing request by request,
// and none of the thread's history: not the human's message, not an
// earlier turn's context, not the turn's tool calls and results. It runs
// on the memory store, which reads into the turn's buffers, and on SQLite,
// which returns pages of its own, with more rows than the turn's first
// buffer holds.
func TestPromptWithoutChatSeesOnlyItsTurnsContext(t *testing.T) {
	for _, s := range utf8Stores {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			p := scripted.New()
			note := &toolrun.Func[issueArgs]{Name: "note", Execute: func(ctx context.Context, st toolrun.ThreadState, a issueArgs) (toolrun.Result, error) {
				// Several rows a step, so that a step's rows outgrow a small buffer.
				for k := range a.Number {
					role := toolrun.RoleSystem
					if k%2 == 1 {
						role = toolrun.RoleUser
					}
					if err := st.InjectMessage(ctx, toolrun.Message{Role: role, Content: fmt.Sprintf("context %d.%d", a.Number, k)}); err != nil {
						return toolrun.Result{}, err
					}
				}
				return toolrun.Text("noted"), nil
			}}
			reg := toolrun.NewRegistry(&toolrun.RegistryOptions{Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, reg.Register(note,
				&toolrun.Model{Name: "m", Provider: p},
				&toolrun.Prompt{Name: "pr", Model: "m", Tools: []toolrun.PromptTool{toolrun.Use("note")}},
				&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}}))
			rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: s.open(t)})
			th, err := rt.NewThread(ctx, "agent", nil)
			require.NoError(t, err)
			call := func(n int) *scripted.Response {
				return scripted.Calls(scripted.Call("note", map[string]any{"number": n}))
			}

			contents := func(req *toolrun.Request) []string {
				var out []string
				for _, m := range req.Messages {
					out = append(out, string(m.Role)+": "+m.Content)
				}
				return out
			}
			texts := func(n int) []string {
				var out []string
				for k := range n {
					role := "system"
					if k%2 == 1 {
						role = "user"
					}
					out = append(out, fmt.Sprintf("%s: context %d.%d", role, n, k))
				}
				return out
			}

			p.Add(call(1), call(12), scripted.Text("done"))
			_, err = rt.Send(ctx, th.ID, "hello")
			require.NoError(t, err)
			p.Add(call(2), scripted.Text("done again"))
			_, err = rt.Send(ctx, th.ID, "once more")
			require.NoError(t, err)

			reqs := p.Requests()
			require.Len(t, reqs, 5)
			assert.Empty(t, contents(reqs[0]), "the turn's first request")
			assert.Equal(t, texts(1), contents(reqs[1]), "after one step")
			assert.Equal(t, append(texts(1), texts(12)...), contents(reqs[2]), "after two steps")
			assert.Empty(t, contents(reqs[3]), "the next turn's first request")
			assert.Equal(t, texts(2), contents(reqs[4]), "the next turn, after one step")
		})
	}
}
