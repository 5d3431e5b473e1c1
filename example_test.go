package toolrun_test

import (
	"context"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// An agent whose side A is a prompt on a (scripted) model and whose side B
// is a human: Send runs the model/tool loop until the model answers.
func ExampleRuntime() {
	type IssueArgs struct {
		Number int `json:"number" jsonschema:"minimum=1"`
	}
	getIssue := &toolrun.Func[IssueArgs]{
		Name:        "get_issue",
		Description: "Read an issue",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a IssueArgs) (toolrun.Result, error) {
			return toolrun.Textf("Issue %d: the app crashes on start", a.Number), nil
		},
	}
	model := scripted.New(
		scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 7})),
		scripted.Text("Issue 7 is a crash: category bug, priority high."),
	)
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		getIssue,
		&toolrun.Model{Name: "conversational", Provider: model, ID: "any-model"},
		&toolrun.Prompt{
			Name: "triager", Model: "conversational", Text: "You triage issues.",
			IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("get_issue")},
		},
		&toolrun.Agent{
			Name: "triage", MaxSessionTurns: 6,
			SideA: toolrun.Side{Prompt: "triager", MaxSteps: 5},
			SideB: toolrun.Side{Human: true},
		},
	)
	if err != nil {
		panic(err)
	}
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	th, err := rt.NewThread(ctx, "triage", nil)
	if err != nil {
		panic(err)
	}
	reply, err := rt.Send(ctx, th.ID, "Please triage issue 7")
	if err != nil {
		panic(err)
	}
	for _, m := range reply.Messages {
		line := string(m.Role) + ": " + m.Content
		for _, c := range m.ToolCalls {
			line += fmt.Sprintf("calls %s(%s)", c.Name, c.Arguments)
		}
		fmt.Println(line)
	}
	// Output:
	// user: Please triage issue 7
	// assistant: calls get_issue({"number":7})
	// tool: Issue 7: the app crashes on start
	// assistant: Issue 7 is a crash: category bug, priority high.
}
