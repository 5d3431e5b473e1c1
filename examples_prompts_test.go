package toolrun_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// A prompt with a ToolDescription is also a tool. Listed in another
// prompt's tools through a SubpromptConfig, a call of it runs the prompt as
// a one-shot sub-prompt on its own model: the call's arguments fill the
// {{placeholders}} of its system prompt, InitUserMessageProperty names the
// argument that becomes its user message, and its answer becomes the
// caller's tool result.
func ExamplePrompt() {
	type SummarizeArgs struct {
		Text     string `json:"text" jsonschema:"description=Text to summarize"`
		Audience string `json:"audience" jsonschema:"description=Who reads the summary"`
	}
	router := scripted.New(
		scripted.Calls(scripted.Call("summarizer", map[string]any{
			"text":     "The nightly export fails after 40 minutes since the upgrade to 3.2. Finance needs it by Friday.",
			"audience": "the on-call engineer",
		}).WithID("call_1")),
		scripted.Text("Escalated: the nightly export has failed since 3.2 and is due Friday."),
	)
	summarizer := scripted.New(scripted.Text("- Nightly export fails since 3.2\n- Due Friday"))
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		&toolrun.Model{Name: "router_model", Provider: router, ID: "any-model"},
		&toolrun.Model{Name: "summary_model", Provider: summarizer, ID: "any-model"},
		&toolrun.Prompt{
			Name:            "summarizer",
			ToolDescription: "Summarize text into key points",
			Model:           "summary_model",
			Text:            "Write at most three key points for {{audience}}.",
			RequiredSchema:  toolrun.SchemaFrom[SummarizeArgs](),
		},
		&toolrun.Prompt{
			Name: "support_router", Model: "router_model", Text: "You answer support requests.",
			IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{&toolrun.SubpromptConfig{Name: "summarizer", InitUserMessageProperty: "text"}},
		},
		&toolrun.Agent{Name: "support", SideA: toolrun.Side{Prompt: "support_router"}, SideB: toolrun.Side{Human: true}},
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
	reply, err := rt.Send(ctx, th.ID, "Our nightly export keeps failing, see the ticket.")
	if err != nil {
		panic(err)
	}

	sub := summarizer.LastRequest()
	fmt.Println("sub-prompt system:", sub.System)
	for _, m := range sub.Messages {
		fmt.Printf("sub-prompt %s: %s\n", m.Role, m.Content)
	}
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool {
			fmt.Printf("the router's tool result:\n%s\n", m.Content)
		}
	}
	fmt.Println("reply:", reply.Text)
	// Output:
	// sub-prompt system: Write at most three key points for the on-call engineer.
	// sub-prompt user: The nightly export fails after 40 minutes since the upgrade to 3.2. Finance needs it by Friday.
	// the router's tool result:
	// - Nightly export fails since 3.2
	// - Due Friday
	// reply: Escalated: the nightly export has failed since 3.2 and is due Friday.
}

// A side's Subagents relationships give its model the lifecycle tools:
// subagent_create starts a child thread running the related agent. A
// blocking relationship makes the call wait for the child's session to
// end and return its answer, with the child's reference; the child stays in
// the parent's registry, ready for subagent_message.
func ExampleSubagentRelationship() {
	lead := scripted.New(
		scripted.Calls(scripted.Call(toolrun.ToolSubagentCreate, map[string]any{
			"agent": "fact_checker", "name": "legacy-check",
			"message": "Did v2.0 remove the --legacy flag?", "attachments": []string{},
		}).WithID("call_1")),
		scripted.Text("Confirmed: --legacy is gone in v2.0."),
	)
	checker := scripted.New(scripted.Text(`Yes: the v2.0 changelog lists "removed --legacy".`))
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(
		&toolrun.Model{Name: "lead_model", Provider: lead, ID: "any-model"},
		&toolrun.Model{Name: "checker_model", Provider: checker, ID: "any-model"},
		&toolrun.Prompt{Name: "lead_prompt", Model: "lead_model", Text: "You coordinate a release.",
			IncludeChat: true, IncludePastTools: true},
		&toolrun.Prompt{Name: "checker_prompt", Model: "checker_model", Text: "You check one claim against the changelog.",
			IncludeChat: true},
		&toolrun.Agent{Name: "fact_checker", ExposeAsTool: true,
			SideA: toolrun.Side{Prompt: "checker_prompt"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead",
			SideA: toolrun.Side{Prompt: "lead_prompt", Subagents: []toolrun.SubagentRelationship{
				{Agent: "fact_checker", Blocking: true, Description: "Checks one claim"},
			}},
			SideB: toolrun.Side{Human: true}},
	)
	if err != nil {
		panic(err)
	}
	rt := toolrun.NewRuntime(reg, nil)
	ctx := context.Background()
	th, err := rt.NewThread(ctx, "lead", nil)
	if err != nil {
		panic(err)
	}
	reply, err := rt.Send(ctx, th.ID, "Check that --legacy is really gone before the release.")
	if err != nil {
		panic(err)
	}

	children, err := rt.Store().Children(ctx, th.ID)
	if err != nil {
		panic(err)
	}
	child := children[0]
	fmt.Printf("child %s: agent=%s status=%s\n", child.Name, child.Agent, child.Status)
	page, err := rt.Store().ListMessages(ctx, child.Reference, toolrun.MessageQuery{})
	if err != nil {
		panic(err)
	}
	for _, m := range page.Messages {
		fmt.Printf("  child thread %s: %s\n", m.Role, m.Content)
	}
	// The child's thread id is generated; it is shown as <child> here.
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool {
			fmt.Printf("%s result:\n%s\n", m.Name, strings.ReplaceAll(m.Content, child.Reference, "<child>"))
		}
	}
	fmt.Println("reply:", reply.Text)
	// Output:
	// child legacy-check: agent=fact_checker status=idle
	//   child thread user: Did v2.0 remove the --legacy flag?
	//   child thread assistant: Yes: the v2.0 changelog lists "removed --legacy".
	// subagent_create result:
	// Yes: the v2.0 changelog lists "removed --legacy".
	//
	// Reference: <child>
	// reply: Confirmed: --legacy is gone in v2.0.
}
