// Package toolrun is an embeddable SDK for defining and running the tools
// that LLM agents call, implementing the Standard Agents "Tools"
// specification.
//
// # Quick start
//
// Define a tool as a Go func with struct arguments, register it, and run
// the calls a model issued on a thread:
//
//	type GetIssueArgs struct {
//		Owner  string `json:"owner"  jsonschema:"description=Repository owner"`
//		Repo   string `json:"repo"   jsonschema:"description=Repository name"`
//		Number int    `json:"number" jsonschema:"description=Issue number,minimum=1"`
//	}
//
//	var GetIssue = &toolrun.Func[GetIssueArgs]{
//		Name:        "get_github_issue",
//		Description: "Read a public GitHub issue.",
//		Execute: func(ctx context.Context, s toolrun.ThreadState, a GetIssueArgs) (toolrun.Result, error) {
//			return toolrun.Text(fmt.Sprintf("issue %s/%s#%d", a.Owner, a.Repo, a.Number)), nil
//		},
//	}
//
//	reg := toolrun.NewRegistry(nil)
//	if err := reg.Register(GetIssue); err != nil { … }
//	ex := toolrun.NewExecutor(reg, nil)
//	outcomes, err := ex.Run(ctx, "thread-1", []toolrun.ToolCall{
//		{ID: "call_1", Name: "get_github_issue", Arguments: `{"owner":"golang","repo":"go","number":1}`},
//	})
//
// # Tools
//
// [Func] defines a function tool whose arguments are a Go struct; its JSON
// Schema is generated from the struct (github.com/invopop/jsonschema tags),
// fully inlined and closed, and compiled once at registration. [RawFunc]
// takes a JSON Schema document and receives the arguments as JSON. A tool
// may declare Variables (required ones are checked before Execute), a Uses
// list (the targets InvokeTool and QueueTool may reach), a
// ProgressArgument and Annotations (returned unchanged, never read).
//
// # Execution
//
// [Executor.Run] runs calls strictly one at a time, in order; tools queued
// with QueueTool go to the tail. For each call: the argument text is parsed
// (empty means {}, anything else that is not JSON is an error result),
// validated against the advertised schema (every failing location is
// listed), defaults are applied, required variables are resolved, Execute
// runs with panics recovered, and the result is stored as a tool message
// before the next call starts. A tool failure is data — an error result the
// model reads — never a Go error from Run; a tool that must stop the run
// returns an error wrapping [ErrAbort].
//
// # Prompts and agents
//
// A [Prompt] is a system prompt, a [Model] and the tools it offers; with a
// ToolDescription it can also run as a tool (a one-shot sub-prompt whose
// result a [SubpromptConfig] shapes). An [Agent] has two sides, each backed
// by a prompt or played by a human; with ExposeAsTool it is a handoff
// target, and a side's Subagents relationships inject the subagent_create,
// subagent_message and subagents lifecycle tools. A [Runtime] runs agents on
// threads: [Runtime.Send] stores the human's message and runs the model/tool
// loop — the assistant message stored before its tools run, history built
// per IncludeChat and IncludePastTools, progress arguments read from the
// stream, loop guards — until the thread waits for the human again.
//
// IncludeChat and IncludePastTools default to false, as in the
// specification: a side's prompt without them sends its model only the
// system prompt and what tools inject during the turn, and never shows it
// what its tools returned; [Registry.Check] warns about both. A prompt's
// History [Window] bounds what each request carries (the zero Window sends
// the whole thread). After a Send that failed or was interrupted,
// [Runtime.Resume] finishes the turn from what is stored.
//
// # Threads
//
// A running tool sees its thread through [ThreadState]: identity, execution
// info, a key-value store, the env chain (thread, agent defaults, prompt
// defaults, user account, runtime instance), other tools, messages, events,
// files and the code sandbox. Secret env values are redacted as
// [REDACTED:<NAME>] from everything that leaves a tool. Package toolruntest
// runs tools in unit tests through the production executor, over a memory
// store, and returns what production would store.
//
// # Stores
//
// A [Store] persists threads, messages, values, env, files and the child
// registry. [NewMemoryStore] is the default; store/sqlite and store/postgres
// are durable; store/storetest checks any implementation.
//
// # Providers
//
// A [Model] names a [Provider] and a model id. provider/scripted is a
// deterministic provider for tests and examples; provider/openai and
// provider/anthropic talk to real APIs over net/http.
//
// # Sandbox
//
// ThreadState.RunCode runs JavaScript or TypeScript through the executor's
// CodeRunner. The sandbox package's Runner is one (set
// ExecutorOptions.CodeRunner to sandbox.Default()): a fresh goja realm per
// run, in warm worker processes with a hard memory cap, terminated on
// request or when the tool's context ends. A program that sets no
// CodeRunner does not link the sandbox, and its runs end with a link_error.
//
// # Errors
//
// Sentinel errors ([ErrNotFound], [ErrDuplicateToolResult],
// [ErrVariableNotFound], [ErrNotDeclared], [ErrAbort], …) are matched with
// errors.Is; [StoreError], [RegistrationError] and [ProviderError] carry
// details.
//
// # Concurrency
//
// Registry, Executor, Runtime and the stores are safe for concurrent use.
// Batches and turns of one thread are serialised (one lock per thread, and a
// lease across instances with a ThreadLocker store such as store/postgres);
// different threads run in parallel.
package toolrun
