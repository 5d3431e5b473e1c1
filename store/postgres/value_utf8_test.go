package postgres_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/toolrun/toolrun"
)

// TestAToolsValueWithInvalidUTF8IsStored: a tool's raw JSON value holding
// bytes that are not UTF-8 is stored with each such byte a U+FFFD, as on
// the other stores, where PostgreSQL used to refuse it as unstorable and
// fail the tool's SetValue.
func TestAToolsValueWithInvalidUTF8IsStored(t *testing.T) {
	const bad, fixed = `["x` + "\xc3" + `"]`, `["x` + "\ufffd" + `"]`
	st := openTemp(t)
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(&toolrun.Func[struct{}]{Name: "keep", Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
		return toolrun.Text("kept"), s.SetValue(ctx, "raw", json.RawMessage(bad))
	}}); err != nil {
		t.Fatal(err)
	}
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: st})
	out, err := ex.Run(t.Context(), "t-utf8", []toolrun.ToolCall{{ID: "c1", Name: "keep", Arguments: "{}"}})
	if err != nil {
		t.Fatal(err)
	}
	if out[0].Message.ToolStatus != toolrun.StatusSuccess {
		t.Fatalf("the tool's SetValue failed: %+v", out[0].Message)
	}
	got, err := st.GetValue(t.Context(), "t-utf8", "raw")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != fixed {
		t.Fatalf("stored %q, want %q", got, fixed)
	}
}
