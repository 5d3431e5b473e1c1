package toolruntest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// LabelArgs are the arguments of label_issue.
type LabelArgs struct {
	Number   int    `json:"number" jsonschema:"minimum=1"`
	Category string `json:"category" jsonschema:"enum=bug,enum=feature,enum=question,enum=docs"`
}

// LabelIssue labels an issue with a token from the thread env, and queues
// a notification.
var LabelIssue = &toolrun.Func[LabelArgs]{
	Name:        "label_issue",
	Description: "Add a category label to an issue.",
	Variables:   []toolrun.Variable{{Name: "GITHUB_TOKEN", Type: toolrun.VarSecret, Required: true}},
	Uses:        []string{"notify_owner"},
	Execute: func(ctx context.Context, s toolrun.ThreadState, a LabelArgs) (toolrun.Result, error) {
		token, err := s.Env(ctx, "GITHUB_TOKEN")
		if err != nil {
			return toolrun.Result{}, err
		}
		if err := s.QueueTool("notify_owner", map[string]any{"number": a.Number}); err != nil {
			return toolrun.Result{}, err
		}
		return toolrun.Textf("labelled #%d %s (as %s)", a.Number, a.Category, token), nil
	},
}

// NotifyArgs are the arguments of notify_owner.
type NotifyArgs struct {
	Number int `json:"number"`
}

// NotifyOwner is the tool LabelIssue queues.
var NotifyOwner = &toolrun.Func[NotifyArgs]{
	Name: "notify_owner", Description: "Tell the issue's owner.",
	Execute: func(ctx context.Context, s toolrun.ThreadState, a NotifyArgs) (toolrun.Result, error) {
		return toolrun.Textf("owner of #%d notified", a.Number), nil
	},
}

// Call runs a tool as production runs a model's call: the required variable
// is checked, the arguments are validated and defaulted, the secret is
// redacted from what is stored, and the call it queues runs after it. In a
// test, t is the test's *testing.T; this example, which runs as a program,
// passes a stand-in.
func ExampleCall() {
	var t testing.TB = exampleT{}

	st := toolruntest.NewState(t, &toolruntest.Options{
		Env:   map[string]toolrun.EnvValue{"GITHUB_TOKEN": toolruntest.SecretValue("ghp_test_token")},
		Tools: []toolrun.Tool{NotifyOwner},
	})
	res := toolruntest.Call(t, LabelIssue, st, `{"number":3,"category":"bug"}`)
	fmt.Println(res.Status, res.Content)
	for _, q := range st.Queued() {
		fmt.Println("queued:", q.Name, q.Arguments)
	}
	for _, o := range res.Outcomes[1:] {
		fmt.Println("then:", o.Message.Content)
	}

	// Arguments the schema refuses never reach Execute.
	res = toolruntest.Call(t, LabelIssue, st, `{"number":0,"category":"urgent"}`)
	fmt.Println(res.Status, res.Content)
	// Output:
	// success labelled #3 bug (as [REDACTED:GITHUB_TOKEN])
	// queued: notify_owner {"number":3}
	// then: owner of #3 notified
	// error Failed to execute tool: Tool argument validation failed: [category] value must be one of 'bug', 'feature', 'question', 'docs'; [number] minimum: got 0, want 1
}

// exampleT stands in for a test's *testing.T when the example runs: a
// set-up failure panics with its message.
type exampleT struct{ testing.TB }

func (exampleT) Helper() {}

func (exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
