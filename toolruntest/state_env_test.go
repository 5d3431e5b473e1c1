package toolruntest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestStateSeesTheEnvToolsSet: the State, used as a ThreadState after a
// call, reads the env as the thread has it now, not as NewState found it:
// a value a tool set is what Env returns and what a tool InvokeTool runs
// reads, and a secret among them is redacted from what the State records
// and emits.
func TestStateSeesTheEnvToolsSet(t *testing.T) {
	ctx := context.Background()
	rotate := &toolrun.Func[struct{}]{Name: "rotate", Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
		return toolrun.Text("rotated"), s.SetEnv(ctx, "TOKEN", "tok-rotated-123", toolrun.VarSecret)
	}}
	echo := &toolrun.Func[struct{}]{Name: "echo", Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
		v, err := s.Env(ctx, "TOKEN")
		if err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("token " + v), nil
	}}
	st := toolruntest.NewState(t, &toolruntest.Options{Tools: []toolrun.Tool{echo}})
	require.Equal(t, toolrun.StatusSuccess, toolruntest.Call(t, rotate, st, `{}`).Status)

	v, err := st.Env(ctx, "TOKEN")
	require.NoError(t, err, "the value the tool set is in the env")
	assert.Equal(t, "tok-rotated-123", v)
	typ, err := st.EnvType(ctx, "TOKEN")
	require.NoError(t, err)
	assert.Equal(t, toolrun.VarSecret, typ)

	r := st.InvokeTool(ctx, "echo", nil)
	assert.Equal(t, "token tok-rotated-123", r.Result, "the invoked tool read the value (%s)", r.Error)
	require.Len(t, st.Invoked(), 1)
	assert.Equal(t, "token [REDACTED:TOKEN]", st.Invoked()[0].Result.Result, "the recorded result has the new secret redacted")

	st.Emit("debug", map[string]any{"token": "tok-rotated-123"})
	require.Len(t, st.Emitted(), 1)
	assert.Equal(t, map[string]any{"token": "[REDACTED:TOKEN]"}, st.Emitted()[0].Data)

	require.NoError(t, st.Store().SetEnv(ctx, toolrun.ScopeThread, st.ThreadID(), "MODE", toolruntest.TextValue("fast")))
	v, err = st.Env(ctx, "MODE")
	require.NoError(t, err, "a value set in the store after NewState is seen")
	assert.Equal(t, "fast", v)
}
