package toolruntest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

type labelArgs struct {
	Number   int    `json:"number" jsonschema:"minimum=1"`
	Priority string `json:"priority,omitempty" jsonschema:"enum=high,enum=low,default=low"`
}

var label = &toolrun.Func[labelArgs]{
	Name:      "label_issue",
	Variables: []toolrun.Variable{{Name: "GITHUB_TOKEN", Type: toolrun.VarSecret, Required: true}},
	Uses:      []string{"notify"},
	Execute: func(ctx context.Context, s toolrun.ThreadState, a labelArgs) (toolrun.Result, error) {
		tok, err := s.Env(ctx, "GITHUB_TOKEN")
		if err != nil {
			return toolrun.Result{}, err
		}
		if err := s.QueueTool("notify", map[string]any{"number": a.Number}); err != nil {
			return toolrun.Result{}, err
		}
		if err := s.QueueTool("forbidden", nil); err == nil {
			return toolrun.Errorf("uses list not enforced"), nil
		}
		r := s.InvokeTool(ctx, "notify", map[string]any{"number": a.Number})
		s.Emit("labelled", map[string]any{"priority": a.Priority})
		if _, err := s.WriteFile(ctx, "/out/log.txt", []byte(tok[:3]), "text/plain"); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Text("labelled with " + a.Priority + "; " + r.Result), nil
	},
}

var notify = &toolrun.Func[struct {
	Number int `json:"number"`
}]{Name: "notify", Execute: func(ctx context.Context, s toolrun.ThreadState, a struct {
	Number int `json:"number"`
}) (toolrun.Result, error) {
	return toolrun.Text("notified"), nil
}}

func TestCallRecordsWhatTheToolDid(t *testing.T) {
	st := toolruntest.NewState(t, &toolruntest.Options{
		Env:   map[string]toolrun.EnvValue{"GITHUB_TOKEN": toolruntest.SecretValue("ghp_test")},
		Tools: []toolrun.Tool{notify},
	})
	res := toolruntest.Call(t, label, st, `{"number":3}`)
	require.Equal(t, toolrun.StatusSuccess, res.Status, res.Error)
	assert.Equal(t, "labelled with low; notified", res.Result, "defaults applied by the real pipeline")
	assert.Equal(t, "labelled with low; notified", res.Content)
	require.Len(t, st.Queued(), 1)
	assert.Equal(t, "notify", st.Queued()[0].Name)
	assert.JSONEq(t, `{"number":3}`, st.Queued()[0].Arguments)
	require.Len(t, res.Outcomes, 2, "the queued call ran after the tool, as in production")
	assert.Equal(t, "notified", res.Outcomes[1].Message.Content)
	require.Len(t, st.Invoked(), 1)
	assert.Equal(t, "notified", st.Invoked()[0].Result.Result)
	require.Len(t, st.Emitted(), 1)
	assert.Equal(t, "labelled", st.Emitted()[0].Type)
	assert.Equal(t, map[string]any{"priority": "low"}, st.Emitted()[0].Data)
	assert.Equal(t, []string{"/out/log.txt"}, st.Written())
	assert.Equal(t, "ghp", string(st.File("/out/log.txt")))
}

func TestCallUsesTheRealValidationAndVariables(t *testing.T) {
	st := toolruntest.NewState(t, nil)
	res := toolruntest.Call(t, label, st, `{"number":3}`)
	assert.Equal(t, "Missing required variables: GITHUB_TOKEN", res.Error)
	assert.Equal(t, "Failed to execute tool: Missing required variables: GITHUB_TOKEN", res.Content)
	assert.Equal(t, "missing_variables", res.ErrorCode)
	st = toolruntest.NewState(t, &toolruntest.Options{Env: map[string]toolrun.EnvValue{"GITHUB_TOKEN": toolruntest.SecretValue("ghp_test")}})
	res = toolruntest.Call(t, label, st, `{"number":0}`)
	assert.Contains(t, res.Error, "Tool argument validation failed: [number]")
	res = toolruntest.Call(t, label, st, `{`)
	assert.Contains(t, res.Error, "Tool arguments are not valid JSON")
}

// The README's promise, testable in a unit test: what production stores
// and returns has the secret replaced, in every text.
func TestCallReturnsWhatProductionStoresRedacted(t *testing.T) {
	leak := &toolrun.Func[struct{}]{Name: "leak", Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
		tok, _ := s.Env(ctx, "API_KEY")
		s.Emit("debug", map[string]any{"key": tok})
		return toolrun.Result{Status: toolrun.StatusError, Error: "rejected key " + tok, ErrorData: map[string]any{"key": tok},
			Attachments: []toolrun.Attachment{{Name: "dump-" + tok + ".txt", MimeType: "text/plain", Data: []byte("x")}}}, nil
	}}
	st := toolruntest.NewState(t, &toolruntest.Options{Env: map[string]toolrun.EnvValue{"API_KEY": toolruntest.SecretValue("sk-live-123456")}})
	res := toolruntest.Call(t, leak, st, "")
	assert.Equal(t, "rejected key [REDACTED:API_KEY]", res.Error)
	assert.Equal(t, map[string]any{"key": "[REDACTED:API_KEY]"}, res.ErrorData)
	assert.True(t, strings.HasPrefix(res.Content, "Failed to execute tool: rejected key [REDACTED:API_KEY]\n\nAttachment path for \"dump-[REDACTED:API_KEY].txt\": /attachments/"), res.Content)
	require.Len(t, res.Refs, 1)
	assert.Equal(t, "dump-[REDACTED:API_KEY].txt", res.Refs[0].Name)
	stored, err := st.Store().ToolResult(context.Background(), st.ThreadID(), res.Message.ToolCallID)
	require.NoError(t, err)
	assert.Equal(t, res.Content, stored.Content, "the stored message is what Call returns")
	assert.NotContains(t, stored.Content+stored.ErrorData["key"].(string), "sk-live")
	require.Len(t, st.Emitted(), 1)
	assert.Equal(t, map[string]any{"key": "[REDACTED:API_KEY]"}, st.Emitted()[0].Data)
}

func TestStateSetUp(t *testing.T) {
	st := toolruntest.NewState(t, &toolruntest.Options{
		Values:   map[string]any{"k": 1},
		Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}},
		Files:    map[string][]byte{"a.txt": []byte("x")},
	})
	ctx := context.Background()
	var v int
	found, err := st.Value(ctx, "k", &v)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, 1, v)
	p, err := st.Messages(ctx, nil)
	require.NoError(t, err)
	require.Len(t, p.Messages, 1)
	data, err := st.ReadFile(ctx, "/a.txt")
	require.NoError(t, err)
	assert.Equal(t, "x", string(data))
	require.NoError(t, st.SetEnv(ctx, "X", "1", toolrun.VarText))
	typ, _ := st.EnvType(ctx, "X")
	assert.Equal(t, toolrun.VarText, typ)
	got, ok := st.EnvValue("X")
	assert.True(t, ok)
	assert.Equal(t, toolruntest.TextValue("1"), got)
	assert.Error(t, st.QueueTool("anything", nil), "outside a run nothing would run a queued call")
}

// TestSeededValuesAreStoredAsSetValueStoresThem: a seeded raw value holding
// bytes that are not UTF-8 is stored as ThreadState.SetValue would store it,
// each such byte a U+FFFD.
func TestSeededValuesAreStoredAsSetValueStoresThem(t *testing.T) {
	st := toolruntest.NewState(t, &toolruntest.Options{Values: map[string]any{"raw": json.RawMessage("\"a\xffb\"")}})
	raw, err := st.Store().GetValue(context.Background(), st.ThreadID(), "raw")
	require.NoError(t, err)
	assert.Equal(t, "\"a\ufffdb\"", string(raw))
	require.NoError(t, st.SetValue(context.Background(), "set", json.RawMessage("\"a\xffb\"")))
	set, err := st.Store().GetValue(context.Background(), st.ThreadID(), "set")
	require.NoError(t, err)
	assert.Equal(t, raw, set, "SetValue stores the same")
}
