package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/sqlite"
)

// utf8Stores are the stores the UTF-8 tests of this file run on (the
// PostgreSQL store's are in its package).
var utf8Stores = []struct {
	name string
	open func(t *testing.T) toolrun.Store
}{
	{"memory", func(*testing.T) toolrun.Store { return toolrun.NewMemoryStore() }},
	{"sqlite", func(t *testing.T) toolrun.Store {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "t.db"), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
}

// TestInvalidUTF8IsStoredAsItIsSent: text holding bytes that are not
// UTF-8 (a tool's output, its error, a user's message, a model's tool-call
// arguments) is stored with each such byte replaced by U+FFFD, the text
// encoding/json sends the model, and every store keeps that same text: the
// memory store used to keep the bytes, SQLite kept them outside JSON and
// PostgreSQL replaced them its own way.
func TestInvalidUTF8IsStoredAsItIsSent(t *testing.T) {
	// Two bytes that are not UTF-8 and a truncated sequence: each byte
	// becomes one U+FFFD.
	const bad, fixed = "a\xff\xfeb\xe2\x82", "a\ufffd\ufffdb\ufffd\ufffd"
	// The bytes are in the call's JSON arguments too: the tool decodes each
	// as U+FFFD, which is what the stored call's text says.
	for _, sc := range utf8Stores {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			p := scripted.New()
			reg := toolrun.NewRegistry(nil)
			require.NoError(t, reg.Register(
				&toolrun.Model{Name: "m", Provider: p},
				&toolrun.Prompt{Name: "pr", Model: "m", IncludeChat: true, IncludePastTools: true,
					Tools: []toolrun.PromptTool{toolrun.Use("read"), toolrun.Use("fail")}},
				&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "pr"}, SideB: toolrun.Side{Human: true}},
				&toolrun.Func[noteArgs]{Name: "read", Execute: func(_ context.Context, _ toolrun.ThreadState, a noteArgs) (toolrun.Result, error) {
					return toolrun.Text("read " + bad + " for " + a.Note), nil
				}},
				fn("fail", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
					return toolrun.Result{}, errors.New("failed " + bad)
				}),
			))
			rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: st})
			th, err := rt.NewThread(ctx, "agent", nil)
			require.NoError(t, err)
			p.Add(scripted.Calls(
				scripted.ToolCall{ID: "c1", Name: "read", Arguments: `{"note":"` + bad + `"}`},
				scripted.ToolCall{ID: "c2", Name: "fail"},
			), scripted.Text("done"))
			reply, err := rt.Send(ctx, th.ID, "user "+bad)
			require.NoError(t, err)

			page, err := st.ListMessages(ctx, th.ID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
			require.NoError(t, err)
			require.Equal(t, "user assistant+calls tool:read tool:fail assistant", roles(page.Messages))
			assert.Equal(t, "user "+fixed, page.Messages[0].Content)
			require.Len(t, page.Messages[1].ToolCalls, 2)
			assert.Equal(t, `{"note":"`+fixed+`"}`, page.Messages[1].ToolCalls[0].Arguments)
			assert.Equal(t, "read "+fixed+" for "+fixed, page.Messages[2].Content)
			assert.Contains(t, page.Messages[3].Content, "failed "+fixed)
			assert.NotContains(t, page.Messages[3].Content, "\xff")
			for i := range reply.Messages {
				assert.Equal(t, page.Messages[i].Content, reply.Messages[i].Content, "the Reply holds what was stored")
			}

			// The model's second request carries the same texts.
			reqs := p.Requests()
			require.Len(t, reqs, 2)
			sent := reqs[1].Messages
			require.Len(t, sent, 4)
			assert.Equal(t, "user "+fixed, sent[0].Content)
			assert.Equal(t, "read "+fixed+" for "+fixed, sent[2].Content)
		})
	}
}

type noteArgs struct {
	Note string `json:"note"`
}

// TestInjectedInvalidUTF8IsStoredAsItIsSent: a message a tool injects has
// its text fixed the same way, its name and call id included.
func TestInjectedInvalidUTF8IsStoredAsItIsSent(t *testing.T) {
	const bad, fixed = "n\xc3", "n\ufffd"
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("ok"), s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleTool, Content: "c " + bad, Name: bad, ToolCallID: "id " + bad, ToolStatus: toolrun.StatusSuccess})
	})))
	st := toolrun.NewMemoryStore()
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st})
	_, err := ex.Run(context.Background(), "t", []toolrun.ToolCall{{ID: "c1", Name: "inject", Arguments: "{}"}})
	require.NoError(t, err)
	page, err := st.ListMessages(context.Background(), "t", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	var injected *toolrun.Message
	for i := range page.Messages {
		if page.Messages[i].Content == "c "+fixed {
			injected = &page.Messages[i]
		}
	}
	require.NotNil(t, injected, "the injected message is stored with its content fixed: %+v", page.Messages)
	assert.Equal(t, fixed, injected.Name)
	assert.Equal(t, "id "+fixed, injected.ToolCallID)
}

// TestInvalidUTF8InAValueIsStoredAsItIsSent: a tool's value whose JSON
// holds bytes that are not UTF-8 (a json.RawMessage, or a type that
// marshals itself) is stored with each such byte a U+FFFD, on every store.
// encoding/json keeps such bytes of a raw value as they are, so the memory
// and SQLite stores used to keep them and PostgreSQL refused the value.
func TestInvalidUTF8InAValueIsStoredAsItIsSent(t *testing.T) {
	const bad, fixed = `{"t":"a` + "\xff\xe2\x82" + `b"}`, `{"t":"a` + "\ufffd\ufffd\ufffd" + `b"}`
	for _, sc := range utf8Stores {
		t.Run(sc.name, func(t *testing.T) {
			ctx := context.Background()
			st := sc.open(t)
			var read json.RawMessage
			reg := toolrun.NewRegistry(nil)
			require.NoError(t, reg.Register(fn("keep", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
				if err := s.SetValue(ctx, "raw", json.RawMessage(bad)); err != nil {
					return toolrun.Result{}, err
				}
				if _, err := s.Value(ctx, "raw", &read); err != nil {
					return toolrun.Result{}, err
				}
				return toolrun.Text("kept"), nil
			})))
			ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st})
			out, err := ex.Run(ctx, "t", []toolrun.ToolCall{{ID: "c1", Name: "keep", Arguments: "{}"}})
			require.NoError(t, err)
			require.Equal(t, "kept", out[0].Message.Content, "the tool's SetValue succeeded")
			stored, err := st.GetValue(ctx, "t", "raw")
			require.NoError(t, err)
			assert.Equal(t, fixed, string(stored))
			assert.Equal(t, fixed, string(read), "the tool reads back what was stored")
		})
	}
}
