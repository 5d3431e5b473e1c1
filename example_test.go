package toolrun_test

import (
	"context"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// An agent whose side A is a prompt on a (scripted) model and whose side B
// is a human: Send stores the human's message and runs the model/tool loop
// until the model answers with text.
//
// IncludeChat is false by default: a prompt that leaves it out sends its
// model only the system prompt and the messages injected during the turn,
// not the human's message. IncludePastTools keeps tool calls and results in
// later requests, so the model reads the issue before it answers.
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
	fmt.Println("stored:")
	for _, m := range reply.Messages {
		line := string(m.Role) + ": " + m.Content
		for _, c := range m.ToolCalls {
			line += fmt.Sprintf("calls %s(%s)", c.Name, c.Arguments)
		}
		fmt.Println("  " + line)
	}
	fmt.Println("reply:", reply.Text)

	// The model's second request holds the human's message, the call and
	// its result.
	fmt.Println("second request:")
	for _, m := range model.Requests()[1].Messages {
		line := string(m.Role) + ": " + m.Content
		for _, c := range m.ToolCalls {
			line += fmt.Sprintf("calls %s(%s)", c.Name, c.Arguments)
		}
		fmt.Println("  " + line)
	}
	// Output:
	// stored:
	//   user: Please triage issue 7
	//   assistant: calls get_issue({"number":7})
	//   tool: Issue 7: the app crashes on start
	//   assistant: Issue 7 is a crash: category bug, priority high.
	// reply: Issue 7 is a crash: category bug, priority high.
	// second request:
	//   user: Please triage issue 7
	//   assistant: calls get_issue({"number":7})
	//   tool: Issue 7: the app crashes on start
}

// An agent with ExposeAsTool is a handoff target: a prompt lists it in its
// tools, and when the model calls it the thread switches to that agent,
// whose side A takes the turn at once. The call's arguments, validated
// against the target's RequiredSchema, become the thread's arguments and
// fill the {{placeholders}} of its system prompt.
func ExampleAgent() {
	type BillingArgs struct {
		CustomerID string `json:"customerId"`
	}
	router := scripted.New(scripted.Calls(
		scripted.Call("billing", map[string]any{"customerId": "c-42"}).WithID("call_1"),
	))
	billing := scripted.New(scripted.Text("I can see the double charge on your account and have refunded it."))
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		&toolrun.Model{Name: "router_model", Provider: router, ID: "any-model"},
		&toolrun.Model{Name: "billing_model", Provider: billing, ID: "any-model"},
		&toolrun.Prompt{Name: "router", Model: "router_model", Text: "Route the customer to the right team.",
			IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("billing")}},
		&toolrun.Prompt{Name: "billing_expert", Model: "billing_model", Text: "You resolve billing issues of customer {{customerId}}.",
			IncludeChat: true, RequiredSchema: toolrun.SchemaFrom[BillingArgs]()},
		&toolrun.Agent{Name: "support", SideA: toolrun.Side{Prompt: "router"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "billing", ExposeAsTool: true, ToolDescription: "Hand billing issues to the billing team",
			SideA: toolrun.Side{Prompt: "billing_expert"}, SideB: toolrun.Side{Human: true}},
	)
	if err != nil {
		panic(err)
	}
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	th, err := rt.NewThread(ctx, "support", nil)
	if err != nil {
		panic(err)
	}
	reply, err := rt.Send(ctx, th.ID, "I was charged twice this month.")
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
	if th, err = rt.Store().GetThread(ctx, th.ID); err != nil {
		panic(err)
	}
	fmt.Println("agent now:", th.AgentID)
	fmt.Println("billing system prompt:", billing.LastRequest().System)
	// Output:
	// user: I was charged twice this month.
	// assistant: calls billing({"customerId":"c-42"})
	// tool: Handoff complete
	// assistant: I can see the double charge on your account and have refunded it.
	// agent now: billing
	// billing system prompt: You resolve billing issues of customer c-42.
}
