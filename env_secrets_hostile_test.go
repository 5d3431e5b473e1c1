package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

// oddTypes are env types that are neither text nor secret: the durable
// stores encrypt every type but text, so each must count as secret.
var oddTypes = []toolrun.VarType{"Secret", "SECRET", "password", "Text"}

// An env value whose type is neither text nor secret is redacted as a
// secret, on every link of the chain that can hold it: the instance env
// (which NewExecutor cannot refuse) and thread and user values written to
// the store directly, past the runtime's checks.
func TestEnvOfUnknownTypeIsRedactedAsSecret(t *testing.T) {
	ctx := context.Background()
	for _, typ := range oddTypes {
		t.Run(string(typ), func(t *testing.T) {
			var buf bytes.Buffer
			st := toolrun.NewMemoryStore()
			require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t", UserID: "u"}))
			require.NoError(t, st.SetEnv(ctx, toolrun.ScopeThread, "t", "THREAD_TOKEN", toolrun.EnvValue{Value: "thr-5a4b3c2d1e0f", Type: typ}))
			require.NoError(t, st.SetEnv(ctx, toolrun.ScopeUser, "u", "USER_TOKEN", toolrun.EnvValue{Value: "usr-0f1e2d3c4b5a", Type: typ}))
			var types []toolrun.VarType
			ex := newExec(t, &toolrun.ExecutorOptions{Store: st, Logger: slog.New(slog.NewTextHandler(&buf, nil)), Env: map[string]toolrun.EnvValue{
				"TOKEN": {Value: leakSecret, Type: typ},
			}}, fn("echo", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
				var out string
				for _, n := range []string{"TOKEN", "THREAD_TOKEN", "USER_TOKEN"} {
					v, err := s.Env(ctx, n)
					if err != nil {
						return toolrun.Result{}, err
					}
					vt, _ := s.EnvType(ctx, n)
					types = append(types, vt)
					out += n + "=" + v + " "
				}
				return toolrun.Text(out), nil
			}))
			out := run(t, ex, "t", call("c1", "echo", ""))
			noLeak(t, "the stored result", out[0].Message)
			assert.NotContains(t, out[0].Message.Content, "thr-5a4b3c2d1e0f", "a thread value of type %q leaks", typ)
			assert.NotContains(t, out[0].Message.Content, "usr-0f1e2d3c4b5a", "a user value of type %q leaks", typ)
			assert.Contains(t, out[0].Message.Content, "[REDACTED:TOKEN]")
			assert.Equal(t, []toolrun.VarType{toolrun.VarSecret, toolrun.VarSecret, toolrun.VarSecret}, types, "EnvType reports what the value counts as")

			// NewExecutor cannot refuse it: it logs the variable, never the value.
			assert.Contains(t, buf.String(), "unknown type")
			assert.Contains(t, buf.String(), "name=TOKEN")
			assert.NotContains(t, buf.String(), leakSecret)
		})
	}
}

// A short value of an unknown type is warned about as a short secret.
func TestEnvOfUnknownTypeShortValueIsWarned(t *testing.T) {
	var buf bytes.Buffer
	newExec(t, &toolrun.ExecutorOptions{Logger: slog.New(slog.NewTextHandler(&buf, nil)), Env: map[string]toolrun.EnvValue{
		"PIN": {Value: "42", Type: "password"},
	}})
	assert.Contains(t, buf.String(), "shorter than 4 bytes")
	assert.Contains(t, buf.String(), "name=PIN")
}

// The writes of the runtime refuse a type that is neither text nor secret,
// naming the variable and the type; text, secret and empty still pass.
func TestEnvWriteOfUnknownTypeIsRefused(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	id := w.thread(t)
	for _, typ := range oddTypes {
		err := w.rt.SetEnv(ctx, id, "API_KEY", toolrun.EnvValue{Value: "sk-0123456789", Type: typ})
		require.Error(t, err, "Runtime.SetEnv with type %q", typ)
		assert.Contains(t, err.Error(), `"API_KEY"`)
		assert.Contains(t, err.Error(), `"`+string(typ)+`"`)
		assert.NotContains(t, err.Error(), "sk-0123456789")

		_, err = w.rt.NewThread(ctx, "agent", &toolrun.ThreadOptions{Env: map[string]toolrun.EnvValue{"DB_PASS": {Value: "pw-0123456789", Type: typ}}})
		require.Error(t, err, "NewThread with an env value of type %q", typ)
		assert.Contains(t, err.Error(), `"DB_PASS"`)
		assert.Contains(t, err.Error(), `"`+string(typ)+`"`)
	}
	_, err := w.rt.Store().GetEnv(ctx, toolrun.ScopeThread, id, "API_KEY")
	assert.ErrorIs(t, err, toolrun.ErrNotFound, "a refused value is not stored")
	for _, typ := range []toolrun.VarType{"", toolrun.VarText, toolrun.VarSecret} {
		require.NoError(t, w.rt.SetEnv(ctx, id, "API_KEY", toolrun.EnvValue{Value: "sk-0123456789", Type: typ}))
		v, err := w.rt.Store().GetEnv(ctx, toolrun.ScopeThread, id, "API_KEY")
		require.NoError(t, err)
		want := typ
		if want == "" {
			want = toolrun.VarSecret
		}
		assert.Equal(t, toolrun.EnvValue{Value: "sk-0123456789", Type: want}, v)
	}
}

// A tool's SetEnv with no type keeps the stored type as it counts: a value
// of an unknown type written to the store directly stays secret, and the
// write is not refused.
func TestToolSetEnvKeepsUnknownStoredTypeAsSecret(t *testing.T) {
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t"}))
	require.NoError(t, st.SetEnv(ctx, toolrun.ScopeThread, "t", "TOKEN", toolrun.EnvValue{Value: "old-0123456789", Type: "Secret"}))
	ex := newExec(t, &toolrun.ExecutorOptions{Store: st}, fn("rotate", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		if err := s.SetEnv(ctx, "TOKEN", leakSecret, ""); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("now " + leakSecret), nil
	}))
	out := run(t, ex, "t", call("c1", "rotate", ""))
	assert.Equal(t, toolrun.StatusSuccess, out[0].Message.ToolStatus, out[0].Message.Content)
	noLeak(t, "the stored result", out[0].Message)
	v, err := st.GetEnv(ctx, toolrun.ScopeThread, "t", "TOKEN")
	require.NoError(t, err)
	assert.Equal(t, toolrun.EnvValue{Value: leakSecret, Type: toolrun.VarSecret}, v)
}

// A thread secret a tool replaces (a token it refreshes) stays redacted for
// the rest of the batch: in the call's own result, in its events, in the
// calls it invokes and in the batch's later calls, which may still quote
// the old value. The new value is redacted too.
func TestReplacedSecretStaysRedactedForTheRestOfTheBatch(t *testing.T) {
	const first, second = "tok-new-0011223344", "tok-newer-5566778899"
	var kept string
	var events []string
	ex := newExec(t, nil,
		fn("login", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("logged in"), s.SetEnv(ctx, "TOKEN", leakSecret, toolrun.VarSecret)
		}),
		&toolrun.Func[noArgs]{Name: "refresh", Uses: []string{"quote"}, Execute: func(ctx context.Context, s toolrun.ThreadState, _ noArgs) (toolrun.Result, error) {
			old, _ := s.Env(ctx, "TOKEN")
			kept = old
			// Twice in one call: the value set in between is retired too.
			if err := s.SetEnv(ctx, "TOKEN", first, ""); err != nil {
				return toolrun.Result{}, err
			}
			if err := s.SetEnv(ctx, "TOKEN", second, ""); err != nil {
				return toolrun.Result{}, err
			}
			s.Emit("refreshed", map[string]any{"old": old, "first": first})
			inner := s.InvokeTool(ctx, "quote", nil)
			return toolrun.Text("Bearer " + old + " -> 401; then " + first + ", now " + second + "; inner: " + inner.Result), nil
		}},
		fn("quote", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("quoted " + kept), nil
		}),
		fn("demote", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			// Made text: the value that was secret stays redacted this batch.
			return toolrun.Text("was " + kept), s.SetEnv(ctx, "TOKEN", "now-public-value", toolrun.VarText)
		}),
	)
	ex.Subscribe("", func(ev toolrun.Event) {
		b, _ := json.Marshal(ev.Data)
		events = append(events, string(b))
	})
	run(t, ex, "t", call("c1", "login", ""))
	out := run(t, ex, "t", call("c2", "refresh", ""), call("c3", "quote", ""), call("c4", "demote", ""), call("c5", "quote", ""))
	require.Len(t, out, 4)
	for _, o := range out {
		noLeak(t, "result "+o.Call.ID, o.Message)
		assert.NotContains(t, o.Message.Content, first, "result %s", o.Call.ID)
		assert.NotContains(t, o.Message.Content, "5566778899", "result %s", o.Call.ID)
	}
	assert.Contains(t, out[0].Message.Content, "[REDACTED:TOKEN]")
	noLeak(t, "the events", events)
	assert.NotContains(t, strings.Join(events, " "), first)
}

// A thread secret replaced in one batch is not carried into the next: the
// batch after it redacts the thread's current secrets only.
func TestRetiredSecretEndsWithItsBatch(t *testing.T) {
	ex := newExec(t, nil,
		fn("set", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			v, _ := s.Env(ctx, "MODE")
			next := "alpha-mode-value"
			if v == next {
				next = "beta-mode-value"
			}
			return toolrun.Text("set"), s.SetEnv(ctx, "MODE", next, toolrun.VarSecret)
		}),
		fn("show", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("alpha-mode-value"), nil
		}),
	)
	run(t, ex, "t", call("c1", "set", ""))
	out := run(t, ex, "t", call("c2", "set", ""), call("c3", "show", ""))
	assert.Equal(t, "[REDACTED:MODE]", out[1].Message.Content, "in the batch that replaced it")
	out = run(t, ex, "t", call("c4", "show", ""))
	assert.Equal(t, "alpha-mode-value", out[0].Message.Content, "a later batch redacts only what the thread holds now")
}

// The redactor cache tells apart secret sets whose names and values join
// to the same bytes: {K: "abcd\x00EFGH-1234"} and {"K\x00abcd":
// "EFGH-1234"}, and a value split between two secrets of one name. Each
// executor gets the redactor of its own secrets.
func TestRedactorCacheKeepsLookalikeSecretSetsApart(t *testing.T) {
	echo := func(v string) *toolrun.Func[noArgs] {
		return fn("echo", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("got " + v), nil
		})
	}
	for _, tt := range []struct {
		first, second map[string]toolrun.EnvValue
		shown         string
	}{
		{
			first:  map[string]toolrun.EnvValue{"K": {Value: "abcd\x00EFGH-1234", Type: toolrun.VarSecret}},
			second: map[string]toolrun.EnvValue{"K\x00abcd": {Value: "EFGH-1234", Type: toolrun.VarSecret}},
			shown:  "EFGH-1234",
		},
		{
			first:  map[string]toolrun.EnvValue{"A": {Value: "wxyz\x00B\x00QRST-5678", Type: toolrun.VarSecret}},
			second: map[string]toolrun.EnvValue{"A": {Value: "wxyz", Type: toolrun.VarSecret}, "B": {Value: "QRST-5678", Type: toolrun.VarSecret}},
			shown:  "QRST-5678",
		},
	} {
		run(t, newExec(t, &toolrun.ExecutorOptions{Env: tt.first}, echo("x")), "t", call("c1", "echo", "")) // caches the first set's redactor
		out := run(t, newExec(t, &toolrun.ExecutorOptions{Env: tt.second}, echo(tt.shown)), "t", call("c1", "echo", ""))
		assert.NotContains(t, out[0].Message.Content, tt.shown, "the executor got another secret set's redactor")
	}
}

// NewThread refuses an env value of an unknown type before it creates the
// thread: nothing is left behind, and the error names the bad input, not
// a store failure.
func TestNewThreadWithAnUnknownEnvTypeCreatesNothing(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	_, err := w.rt.NewThread(ctx, "agent", &toolrun.ThreadOptions{ID: "t-bad", Env: map[string]toolrun.EnvValue{
		"A_OK": {Value: "fine-value", Type: toolrun.VarText}, "B_BAD": {Value: "pw-0123456789", Type: "password"}, "C_BAD": {Value: "x", Type: "pin"}}})
	require.Error(t, err)
	assert.Equal(t, `toolrun: new thread: env "B_BAD": unknown type "password" (want "text" or "secret"; empty means "secret")`, err.Error())
	var se *toolrun.StoreError
	assert.False(t, errors.As(err, &se), "bad input is not a store failure: %v", err)
	_, err = w.rt.Store().GetThread(ctx, "t-bad")
	assert.ErrorIs(t, err, toolrun.ErrNotFound, "the refused thread was created")
}
