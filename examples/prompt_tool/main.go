// Command prompt_tool shows a prompt used as a tool: the support_router
// prompt lists the summarizer prompt (with a RequiredSchema) through a
// SubpromptConfig entry, so its model can call "summarizer" like any other
// tool. The call runs summarizer as a one-shot sub-prompt on its own model,
// and its answer (with the sub-prompt's own tool calls) becomes the tool
// result the router reads. Both models are scripted, so it runs offline:
//
//	go run ./examples/prompt_tool
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// SummarizeArgs is the RequiredSchema of the summarizer prompt: what a
// caller must pass when it calls the prompt as a tool.
type SummarizeArgs struct {
	Text     string `json:"text" jsonschema:"description=Text to summarize,minLength=1"`
	Audience string `json:"audience" jsonschema:"description=Who reads the summary"`
}

// CountArgs are the arguments of count_words.
type CountArgs struct {
	Text string `json:"text" jsonschema:"description=Text whose words are counted"`
}

// CountWords counts the words of a text. Only the summarizer offers it:
// the router reaches it through the sub-prompt.
var CountWords = &toolrun.Func[CountArgs]{
	Name:        "count_words",
	Description: "Count the words of a text.",
	Execute: func(ctx context.Context, s toolrun.ThreadState, a CountArgs) (toolrun.Result, error) {
		return toolrun.Textf("%d words", len(strings.Fields(a.Text))), nil
	},
}

// Ticket is the long text the person pastes.
const Ticket = `Since the upgrade to 3.2 on Monday our nightly export has failed three times.
The job log shows "connection reset by peer" after about 40 minutes, always while
uploading the largest file (about 6 GB). Smaller exports still work. We retried by
hand twice and it failed the same way. Our finance team needs the export by Friday.`

// definitions returns the summarizer prompt, the router prompt that calls
// it as a tool, and the agent, with each prompt on its own model.
func definitions(routerModel, summaryModel toolrun.Provider) []toolrun.Definition {
	return []toolrun.Definition{
		&toolrun.Model{Name: "router_model", Provider: routerModel, ID: "scripted-router"},
		&toolrun.Model{Name: "summary_model", Provider: summaryModel, ID: "scripted-summarizer"},
		CountWords,
		&toolrun.Prompt{
			Name:            "summarizer",
			ToolDescription: "Summarize text into key points",
			Model:           "summary_model",
			// {{audience}} is replaced by the call's argument.
			Text:           "You are an expert summarizer. Write at most three key points for {{audience}}.",
			RequiredSchema: toolrun.SchemaFrom[SummarizeArgs](),
			Tools:          []toolrun.PromptTool{toolrun.Use("count_words")},
		},
		&toolrun.Prompt{
			Name:             "support_router",
			Model:            "router_model",
			Text:             "You answer support requests. Summarize long tickets with the summarizer tool first.",
			IncludeChat:      true,
			IncludePastTools: true,
			Tools: []toolrun.PromptTool{&toolrun.SubpromptConfig{
				Name: "summarizer",
				// The text argument becomes the sub-prompt's user message.
				InitUserMessageProperty: "text",
			}},
		},
		&toolrun.Agent{Name: "support", SideA: toolrun.Side{Prompt: "support_router"}, SideB: toolrun.Side{Human: true}},
	}
}

// scripts returns the two scripted models: the router calls summarizer
// twice (once without the required text, once properly) and then answers;
// the summarizer counts the words and answers in one response.
func scripts() (router, summarizer *scripted.Provider) {
	router = scripted.New(
		scripted.Calls(
			scripted.Call("summarizer", map[string]any{"audience": "the on-call engineer"}),
			scripted.Call("summarizer", map[string]any{"text": Ticket, "audience": "the on-call engineer"}),
		).WithText("Let me summarize the ticket."),
		scripted.Text("Summary for on-call: the nightly export of the 6 GB file fails after 40 minutes since 3.2; due Friday. Escalating to the storage team."),
	)
	summarizer = scripted.New(
		scripted.Calls(scripted.Call("count_words", map[string]any{"text": Ticket})).
			WithText("- Nightly export fails since 3.2 (connection reset after ~40 min)\n- Only the largest file (~6 GB) is affected\n- Needed by Friday"),
	)
	return router, summarizer
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run sends the ticket to the support agent and prints what the
// summarizer was asked, what the router got back, and the final reply.
func run(ctx context.Context, out io.Writer) error {
	router, summarizer := scripts()
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(definitions(router, summarizer)...); err != nil {
		return err
	}
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(ctx, "support", nil)
	if err != nil {
		return err
	}
	reply, err := rt.Send(ctx, th.ID, "Please look at this ticket:\n"+Ticket)
	if err != nil {
		return err
	}

	for _, spec := range router.Requests()[0].Tools {
		fmt.Fprintf(out, "the router is offered %q: %s\n  parameters: %s\n", spec.Name, spec.Description, spec.Parameters)
	}
	if reqs := summarizer.Requests(); len(reqs) > 0 {
		sub := reqs[0]
		fmt.Fprintf(out, "\nthe summarizer sub-prompt ran with\n  system: %s\n", sub.System)
		for _, m := range sub.Messages {
			fmt.Fprintf(out, "  %s: %s\n", m.Role, indent(m.Content))
		}
	}
	fmt.Fprintln(out, "\nwhat the caller got:")
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool && m.Depth == 0 {
			fmt.Fprintf(out, "  %s [%s]:\n    %s\n", m.Name, m.ToolStatus, indent(m.Content))
		}
	}
	fmt.Fprintf(out, "\nfinal reply: %s\n", reply.Text)
	return nil
}

// indent indents the lines after the first by four spaces (blank lines stay empty).
func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = "    " + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}
