// Command subagents shows a lead agent that owns two subagent
// relationships: fact_checker is blocking (subagent_create waits for the
// child's session and returns its answer), writer is not (the child works
// in the background and its result is delivered to the lead as a message
// that starts the lead's next turn). All three agents run on scripted
// models, so it runs offline:
//
//	go run ./examples/subagents
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

// WriterArgs are the initial arguments a writer child is created with
// (the RequiredSchema of its prompt, checked by subagent_create).
type WriterArgs struct {
	Version string `json:"version" jsonschema:"description=The release the notes are for"`
}

// models are the scripted models of the three agents.
type models struct {
	lead, checker, writer *scripted.Provider
}

// Request is what the person asks the lead.
const Request = "Prepare the v2.0 release: check that --legacy is really gone, and get release notes drafted."

// definitions returns the lead agent, its two child agents, their prompts
// and models.
func definitions(m models) []toolrun.Definition {
	return []toolrun.Definition{
		&toolrun.Model{Name: "lead_model", Provider: m.lead, ID: "scripted-lead"},
		&toolrun.Model{Name: "checker_model", Provider: m.checker, ID: "scripted-checker"},
		&toolrun.Model{Name: "writer_model", Provider: m.writer, ID: "scripted-writer"},
		&toolrun.Prompt{Name: "lead_prompt", Model: "lead_model", IncludeChat: true, IncludePastTools: true,
			Text: "You coordinate a release. Delegate fact checks and writing to your subagents."},
		&toolrun.Prompt{Name: "checker_prompt", Model: "checker_model", IncludeChat: true,
			Text: "You check one claim against the changelog and answer yes or no with a reason."},
		&toolrun.Prompt{Name: "writer_prompt", Model: "writer_model", IncludeChat: true,
			Text: "You write short release notes for version {{version}}.", RequiredSchema: toolrun.SchemaFrom[WriterArgs]()},
		&toolrun.Agent{Name: "fact_checker", ExposeAsTool: true, ToolDescription: "Checks one claim",
			SideA: toolrun.Side{Prompt: "checker_prompt"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "writer", ExposeAsTool: true, ToolDescription: "Drafts release notes",
			SideA: toolrun.Side{Prompt: "writer_prompt"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead",
			SideA: toolrun.Side{Prompt: "lead_prompt", Subagents: []toolrun.SubagentRelationship{
				{Agent: "fact_checker", Blocking: true, MaxInstances: 1, Description: "Answers at once: the result comes back from subagent_create"},
				{Agent: "writer", Description: "Works in the background and reports when done"},
			}},
			SideB: toolrun.Side{Human: true}},
	}
}

// scripts returns the scripted models. The writer's answer waits for
// release, so the lead's first turn ends while the writer is still working.
func scripts(release <-chan struct{}) models {
	create := func(args map[string]any) scripted.ToolCall {
		args["attachments"] = []any{}
		return scripted.Call(toolrun.ToolSubagentCreate, args)
	}
	return models{
		lead: scripted.New(
			scripted.Calls(create(map[string]any{"agent": "fact_checker", "name": "legacy-check",
				"message": "Did v2.0 remove the --legacy flag?"})),
			scripted.Calls(create(map[string]any{"agent": "writer", "name": "notes-v2",
				"message": "Draft the v2.0 release notes.", "arguments": map[string]any{"version": "2.0"}})),
			scripted.Calls(scripted.Call(toolrun.ToolSubagents, nil)),
			scripted.Text("Confirmed: --legacy is gone in v2.0. The writer is drafting the notes; I will pass them on when they arrive."),
			// The lead's next turn, started by the writer's completion message.
			scripted.Text("The release notes are ready:\n\nv2.0: faster sync, new config format; the --legacy flag is removed."),
		),
		checker: scripted.New(scripted.Text("Yes: the v2.0 changelog lists \"removed --legacy\".")),
		writer:  scripted.New(scripted.Text("v2.0: faster sync, new config format; the --legacy flag is removed.").Wait(release)),
	}
}

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run sends the request to the lead, prints the lifecycle tool results,
// lets the background writer finish, and prints the completion message the
// lead received and the lead's answer to it.
func run(ctx context.Context, out io.Writer) error {
	release := make(chan struct{})
	m := scripts(release)
	reg := toolrun.NewRegistry(nil)
	if err := reg.Register(definitions(m)...); err != nil {
		return err
	}
	rt := toolrun.NewRuntime(reg, nil)
	lead, err := rt.NewThread(ctx, "lead", nil)
	if err != nil {
		return err
	}

	reply, err := rt.Send(ctx, lead.ID, Request)
	if err != nil {
		close(release)
		return err
	}
	fmt.Fprintln(out, "== the lead's first turn")
	printMessages(out, reply.Messages)

	// The writer finishes only now; its completion is delivered to the
	// lead as a message, which starts the lead's next turn.
	close(release)
	rt.Wait()

	fmt.Fprintln(out, "\n== after the background writer finished")
	page, err := rt.Store().ListMessages(ctx, lead.ID, toolrun.MessageQuery{IncludeSilent: true})
	if err != nil {
		return err
	}
	last := reply.Messages[len(reply.Messages)-1].Seq
	var later []toolrun.Message
	for _, msg := range page.Messages {
		if msg.Seq > last {
			later = append(later, msg)
		}
	}
	printMessages(out, later)

	fmt.Fprintln(out, "\n== what the writer's model was sent")
	if req := m.writer.LastRequest(); req != nil {
		fmt.Fprintf(out, "system: %s\n", req.System)
		printMessages(out, req.Messages)
	}

	fmt.Fprintln(out, "\n== the lead's child registry")
	children, err := rt.Store().Children(ctx, lead.ID)
	if err != nil {
		return err
	}
	for _, c := range children {
		fmt.Fprintf(out, "%s  name=%s relationship=%s blocking=%t status=%s\n", c.Reference, c.Name, c.Relationship, c.Blocking, c.Status)
	}
	return nil
}

// printMessages prints messages with their role, tool calls and results;
// silent messages (such as a subagent's completion) are marked.
func printMessages(out io.Writer, msgs []toolrun.Message) {
	for _, m := range msgs {
		if m.Depth > 0 {
			continue
		}
		role := string(m.Role)
		if m.Silent {
			role += " (silent)"
		}
		switch {
		case m.Role == toolrun.RoleTool:
			fmt.Fprintf(out, "tool %s [%s]: %s\n", m.Name, m.ToolStatus, indent(m.Content))
		case len(m.ToolCalls) > 0:
			for _, c := range m.ToolCalls {
				fmt.Fprintf(out, "%s → %s %s\n", role, c.Name, c.Arguments)
			}
		default:
			fmt.Fprintf(out, "%s: %s\n", role, indent(m.Content))
		}
	}
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
