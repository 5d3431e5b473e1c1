package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// A function tool whose arguments are a Go struct. The struct gives the
// JSON Schema the model is offered and every call is validated against:
// fields without omitempty are required, and the defaults fill in what the
// model left out before Execute runs.
func ExampleFunc() {
	type SearchArgs struct {
		Query string `json:"query" jsonschema:"description=Words to search for,minLength=1"`
		State string `json:"state,omitempty" jsonschema:"enum=open,enum=closed,default=open"`
		Limit int8   `json:"limit,omitempty" jsonschema:"default=5,minimum=1"`
	}
	search := &toolrun.Func[SearchArgs]{
		Name:        "search_issues",
		Description: "Search the issues of the repository.",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a SearchArgs) (toolrun.Result, error) {
			return toolrun.Textf("%d %s issues about %q", a.Limit, a.State, a.Query), nil
		},
	}
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(search); err != nil {
		panic(err)
	}

	// What the model is offered: the sized integer type adds its maximum.
	spec, _ := reg.Tool("search_issues")
	var schema bytes.Buffer
	_ = json.Indent(&schema, spec.Parameters, "", "  ")
	fmt.Println(schema.String())

	// A call that leaves out state and limit gets their defaults.
	ex := toolrun.NewExecutor(reg, nil)
	outcomes, err := ex.Run(context.Background(), "thread-1", []toolrun.ToolCall{
		{ID: "call_1", Name: "search_issues", Arguments: `{"query":"crash on start"}`},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(outcomes[0].Message.Content)
	// Output:
	// {
	//   "additionalProperties": false,
	//   "properties": {
	//     "limit": {
	//       "default": 5,
	//       "maximum": 127,
	//       "minimum": 1,
	//       "type": "integer"
	//     },
	//     "query": {
	//       "description": "Words to search for",
	//       "minLength": 1,
	//       "type": "string"
	//     },
	//     "state": {
	//       "default": "open",
	//       "enum": [
	//         "open",
	//         "closed"
	//       ],
	//       "type": "string"
	//     }
	//   },
	//   "required": [
	//     "query"
	//   ],
	//   "type": "object"
	// }
	// 5 open issues about "crash on start"
}

// A raw tool takes a JSON Schema document and receives the validated,
// defaulted arguments as JSON. A call that does not match the schema is not
// run: its result is an error that lists every failing location, for the
// model to read and correct.
func ExampleRawFunc() {
	lookup := &toolrun.RawFunc{
		Name:        "lookup_customer",
		Description: "Look up a customer by id.",
		Schema: `{
			"type": "object",
			"properties": {
				"customerId": {"type": "string", "pattern": "^c-[0-9]+$"},
				"fields": {"type": "array", "items": {"type": "string"}, "default": ["name"]}
			},
			"required": ["customerId"],
			"additionalProperties": false
		}`,
		Execute: func(ctx context.Context, s toolrun.ThreadState, args json.RawMessage) (toolrun.Result, error) {
			return toolrun.Text("called with " + string(args)), nil
		},
	}
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(lookup); err != nil {
		panic(err)
	}
	ex := toolrun.NewExecutor(reg, nil)
	outcomes, err := ex.Run(context.Background(), "thread-1", []toolrun.ToolCall{
		{ID: "call_1", Name: "lookup_customer", Arguments: `{"customerId":"c-42"}`},
		{ID: "call_2", Name: "lookup_customer", Arguments: `{"customerId":"42","limit":3}`},
	})
	if err != nil {
		panic(err)
	}
	for _, o := range outcomes {
		fmt.Printf("%s [%s]: %s\n", o.Call.ID, o.Result.Status, o.Message.Content)
	}
	// Output:
	// call_1 [success]: called with {"customerId":"c-42","fields":["name"]}
	// call_2 [error]: Failed to execute tool: Tool argument validation failed: [customerId] '42' does not match pattern '^c-[0-9]+$'; [root] additional properties 'limit' not allowed
}

// A registry holds tools, prompts, agents and models under one namespace.
// Register checks each definition on its own and adds all of them or none;
// Check, once everything is registered, finds the references that name
// nothing, such as a typo in a prompt's tools.
func ExampleRegistry() {
	type IssueArgs struct {
		Number int `json:"number"`
	}
	getIssue := &toolrun.Func[IssueArgs]{
		Name: "get_issue", Description: "Read an issue",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a IssueArgs) (toolrun.Result, error) {
			return toolrun.Textf("issue %d", a.Number), nil
		},
	}
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		getIssue,
		&toolrun.Model{Name: "conversational", Provider: scripted.New(), ID: "any-model"},
		&toolrun.Prompt{
			Name: "triager", Model: "conversational", Text: "You triage issues.", IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("get_isue")}, // a typo
		},
		&toolrun.Agent{Name: "triage", SideA: toolrun.Side{Prompt: "triager"}, SideB: toolrun.Side{Human: true}},
	)
	fmt.Println("registered:", err == nil, reg.Names())

	// Names are shared by every kind of definition, and a refused
	// definition keeps the others of the same call out too.
	err = reg.Register(
		&toolrun.Func[IssueArgs]{Name: "label_issue", Execute: getIssue.Execute},
		&toolrun.Prompt{Name: "get_issue", Model: "conversational"},
	)
	fmt.Println(err)
	_, found := reg.Tool("label_issue")
	fmt.Println("label_issue registered:", found)

	fmt.Println(reg.Check())

	// A runtime runs the same check and starts nothing while it fails.
	_, err = toolrun.NewRuntime(reg, nil).NewThread(context.Background(), "triage", nil)
	fmt.Println(err)
	// Output:
	// registered: true [conversational get_issue triage triager]
	// toolrun: register "get_issue": name already registered (as a tool)
	// label_issue registered: false
	// toolrun: register "triager": Tools[0] ("get_isue"): no tool, prompt or agent of that name is registered
	// toolrun: new thread of agent "triage" refused: the registry does not check: toolrun: register "triager": Tools[0] ("get_isue"): no tool, prompt or agent of that name is registered
}
