package toolrun_test

// The golden files of the root package, under testdata/:
//
//   - testdata/schemas/<tool>.json: the JSON Schema a tool advertises to
//     models, for the argument types below (TestGoldenSchemas);
//   - testdata/conversations/<name>.json: scripted conversations run end to
//     end through a Runtime, with the transcripts they must store
//     (TestConversations). testdata/README.md describes their format.
//
// Rewrite them after an intended change with
//
//	go test -run 'TestGoldenSchemas|TestConversations' -update .
//
// and read the diff before committing it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/ instead of comparing with them")

// ---------------------------------------------------------------------------
// Schemas

// GoldenRepo is a nested object.
type GoldenRepo struct {
	Owner string `json:"owner" jsonschema:"description=Repository owner,pattern=^[\\w.-]+$"`
	Name  string `json:"name" jsonschema:"description=Repository name,pattern=^[\\w.-]+$"`
}

// GoldenLabelArgs has a nested object, enums and defaults.
type GoldenLabelArgs struct {
	Repo     GoldenRepo `json:"repo" jsonschema:"description=The repository"`
	Number   int        `json:"number" jsonschema:"description=Issue number,minimum=1"`
	Category string     `json:"category" jsonschema:"enum=bug,enum=feature,enum=question,enum=docs"`
	Priority string     `json:"priority,omitempty" jsonschema:"enum=high,enum=medium,enum=low,default=medium"`
	Notify   bool       `json:"notify,omitempty" jsonschema:"default=true"`
}

// GoldenSizedArgs has one field of each sized number type: integers
// advertise the range of their Go type, tightened by the author's bounds.
type GoldenSizedArgs struct {
	Tiny   int8    `json:"tiny"`
	Small  uint16  `json:"small"`
	Medium int32   `json:"medium" jsonschema:"minimum=0"`
	Large  uint64  `json:"large"`
	Plain  int     `json:"plain"`
	Count  uint8   `json:"count,omitempty" jsonschema:"default=3,maximum=10"`
	Ratio  float32 `json:"ratio"`
	Weight float64 `json:"weight,omitempty"`
}

// GoldenFilter is the object behind an optional pointer.
type GoldenFilter struct {
	Author string   `json:"author,omitempty"`
	Labels []string `json:"labels,omitempty"`
}

// GoldenOptionalArgs has optional pointer fields, and a pointer field
// without omitempty.
type GoldenOptionalArgs struct {
	Query  string        `json:"query"`
	Since  *string       `json:"since,omitempty" jsonschema:"format=date"`
	Limit  *int32        `json:"limit,omitempty"`
	Filter *GoldenFilter `json:"filter,omitempty"`
	Strict *bool         `json:"strict"`
}

// GoldenLabel is an element of slices and maps.
type GoldenLabel struct {
	Name  string `json:"name"`
	Color string `json:"color,omitempty" jsonschema:"pattern=^[0-9a-f]{6}$"`
}

// GoldenCollectionArgs has slices and maps of scalars and objects.
type GoldenCollectionArgs struct {
	Tags    []string               `json:"tags" jsonschema:"minItems=1,uniqueItems=true"`
	Labels  []GoldenLabel          `json:"labels,omitempty"`
	Weights map[string]int16       `json:"weights,omitempty"`
	ByName  map[string]GoldenLabel `json:"byName,omitempty"`
	Matrix  [][]float64            `json:"matrix,omitempty"`
}

// GoldenPaging is embedded: its fields are promoted into the outer object.
type GoldenPaging struct {
	Page    int `json:"page,omitempty" jsonschema:"default=1,minimum=1"`
	PerPage int `json:"perPage,omitempty" jsonschema:"default=20,minimum=1,maximum=100"`
}

// GoldenSort is embedded through a pointer.
type GoldenSort struct {
	SortBy string `json:"sortBy,omitempty" jsonschema:"enum=created,enum=updated,default=created"`
}

// GoldenEmbeddedArgs embeds GoldenPaging and *GoldenSort.
type GoldenEmbeddedArgs struct {
	GoldenPaging
	*GoldenSort
	Query string `json:"query"`
}

// goldenRawSchema is the schema of a RawFunc: a local $ref into $defs.
const goldenRawSchema = `{
	"type": "object",
	"$defs": {"label": {"type": "string", "enum": ["bug", "feature"]}},
	"properties": {
		"labels": {"type": "array", "items": {"$ref": "#/$defs/label"}, "minItems": 1},
		"note": {"type": "string", "maxLength": 200, "default": ""}
	},
	"required": ["labels"],
	"additionalProperties": false
}`

// goldenTools are the tools whose schemas are kept in testdata/schemas,
// one file per tool name.
func goldenTools() []toolrun.Tool {
	ok := toolrun.Text("ok")
	return []toolrun.Tool{
		goldenFunc[GoldenLabelArgs]("label_issue", ok),
		goldenFunc[GoldenSizedArgs]("sized_numbers", ok),
		goldenFunc[GoldenOptionalArgs]("optional_fields", ok),
		goldenFunc[GoldenCollectionArgs]("collections", ok),
		goldenFunc[GoldenEmbeddedArgs]("embedded_structs", ok),
		goldenFunc[struct{}]("no_arguments", ok),
		&toolrun.RawFunc{Name: "raw_schema", Schema: goldenRawSchema,
			Execute: func(ctx context.Context, s toolrun.ThreadState, args json.RawMessage) (toolrun.Result, error) {
				return ok, nil
			}},
	}
}

func goldenFunc[A any](name string, res toolrun.Result) *toolrun.Func[A] {
	return &toolrun.Func[A]{Name: name, Execute: func(context.Context, toolrun.ThreadState, A) (toolrun.Result, error) {
		return res, nil
	}}
}

// TestGoldenSchemas compares the parameters each tool advertises, indented,
// with its file in testdata/schemas. A schema that changes fails with a
// diff; a golden file without a tool fails too, so none goes stale.
func TestGoldenSchemas(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	tools := goldenTools()
	for _, tool := range tools {
		if err := reg.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join("testdata", "schemas")
	want := map[string]bool{}
	for _, spec := range reg.Tools() {
		file := spec.Name + ".json"
		want[file] = true
		t.Run(spec.Name, func(t *testing.T) {
			if len(spec.Parameters) == 0 {
				t.Fatal("the tool advertises no parameters")
			}
			var got bytes.Buffer
			if err := json.Indent(&got, spec.Parameters, "", "  "); err != nil {
				t.Fatalf("the advertised parameters are not JSON: %v", err)
			}
			got.WriteByte('\n')
			compareGolden(t, filepath.Join(dir, file), got.Bytes())
		})
	}
	if len(want) != len(tools) {
		t.Fatalf("%d tools registered, %d listed", len(tools), len(want))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s has no tool in goldenTools: delete it or add the tool", f)
		}
	}
}

// compareGolden compares got with the file at path, or writes it there
// with -update.
func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (-want +got; run with -update to accept):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the lines that differ between a and b, marked - and +,
// with two lines of context around each change.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	// common[i][j] is the length of the longest common subsequence of
	// x[i:] and y[j:].
	common := make([][]int, len(x)+1)
	for i := range common {
		common[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	type op struct {
		mark byte
		text string
	}
	var ops []op
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i++
			j++
		case j == len(y) || i < len(x) && common[i+1][j] >= common[i][j+1]:
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	const context = 2
	var out strings.Builder
	last := -1 // the last op written
	for k, o := range ops {
		if o.mark == ' ' {
			continue
		}
		from := max(k-context, last+1)
		if last >= 0 && from > last+1 {
			out.WriteString("  …\n")
		}
		for c := from; c < k; c++ {
			fmt.Fprintf(&out, "  %s\n", ops[c].text)
		}
		fmt.Fprintf(&out, "%c %s\n", o.mark, o.text)
		last = k
		// The context after a change is written as the context before the
		// next one, or here when no change follows soon.
		next := len(ops)
		for n := k + 1; n < len(ops); n++ {
			if ops[n].mark != ' ' {
				next = n
				break
			}
		}
		if next-k > 2*context {
			for c := k + 1; c <= k+context && c < len(ops); c++ {
				fmt.Fprintf(&out, "  %s\n", ops[c].text)
				last = c
			}
		}
	}
	return out.String()
}

// ---------------------------------------------------------------------------
// Conversations

// conversation is a file of testdata/conversations (see testdata/README.md).
type conversation struct {
	About string `json:"about"`
	Setup string `json:"setup"`
	Turns []turn `json:"turns"`
}

// turn is one Send (or Resume), the responses its model requests get, and
// what it must store.
type turn struct {
	User      string     `json:"user,omitempty"`
	Resume    bool       `json:"resume,omitempty"`
	Responses []response `json:"responses"`
	Want      want       `json:"want"`
}

// response is one scripted model response.
type response struct {
	// Model names the model definition that serves it; "" is the set-up's
	// main model.
	Model string       `json:"model,omitempty"`
	Text  string       `json:"text,omitempty"`
	Calls []scriptCall `json:"calls,omitempty"`
	Error *scriptError `json:"error,omitempty"`
}

type scriptCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Arguments is a JSON value, sent compacted; RawArguments is argument
	// text sent verbatim (for text that is not JSON).
	Arguments    json.RawMessage `json:"arguments,omitempty"`
	RawArguments string          `json:"raw_arguments,omitempty"`
}

type scriptError struct {
	Message   string `json:"message"`
	Code      string `json:"code,omitempty"`
	Status    int    `json:"status,omitempty"`
	Retryable bool   `json:"retryable,omitempty"`
}

// want is what a turn must give: the -update flag rewrites it.
type want struct {
	Error      string `json:"error,omitempty"`
	Stop       string `json:"stop,omitempty"`
	Reply      string `json:"reply,omitempty"`
	Agent      string `json:"agent"`
	Transcript []line `json:"transcript"`
	// Requests, when the file has them, are the model requests of the turn.
	Requests *[]request `json:"requests,omitempty"`
}

// line is a stored message, or a message of a model request.
type line struct {
	Role    string     `json:"role"`
	Name    string     `json:"name,omitempty"`
	ID      string     `json:"id,omitempty"`
	Status  string     `json:"status,omitempty"`
	Content string     `json:"content,omitempty"`
	Calls   []callLine `json:"calls,omitempty"`
	Queued  bool       `json:"queued,omitempty"`
	Depth   int        `json:"depth,omitempty"`
	Silent  bool       `json:"silent,omitempty"`
}

type callLine struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// request is one model request as the provider received it.
type request struct {
	Model    string   `json:"model"`
	System   string   `json:"system,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	Messages []line   `json:"messages"`
}

func messageLine(m toolrun.Message) line {
	l := line{Role: string(m.Role), Content: m.Content, Queued: m.Queued, Depth: m.Depth, Silent: m.Silent}
	if m.Role == toolrun.RoleTool {
		l.Name, l.ID, l.Status = m.Name, m.ToolCallID, string(m.ToolStatus)
	}
	for _, c := range m.ToolCalls {
		l.Calls = append(l.Calls, callLine{ID: c.ID, Name: c.Name, Arguments: argumentsValue(c.Arguments)})
	}
	return l
}

// argumentsValue is argument text as a JSON value: itself when it is JSON,
// else a JSON string holding it.
func argumentsValue(text string) json.RawMessage {
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	b, _ := json.Marshal(text)
	return b
}

// convEnv is what a set-up builds a conversation's agent with.
type convEnv struct {
	reg       *toolrun.Registry
	agent     string // the thread's agent
	main      string // the model definition of responses that name none
	threadEnv map[string]toolrun.EnvValue
	models    map[string]*scripted.Provider

	mu       sync.Mutex
	calls    int // call ids generated so far
	requests []request
	// stop cancels the running turn: what the user's Stop button does.
	stop context.CancelFunc
}

// model returns a model definition served by a fresh scripted provider
// whose requests are recorded.
func (e *convEnv) model(name string) *toolrun.Model {
	p := scripted.NewWithOptions(&scripted.Options{NewCallID: e.newCallID})
	e.models[name] = p
	return &toolrun.Model{Name: name, Provider: &recordingProvider{name: name, p: p, env: e}, ID: "scripted-" + name}
}

func (e *convEnv) newCallID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	return fmt.Sprintf("call_%d", e.calls)
}

// recordingProvider records every request of a model, in the order the
// requests of all models were made.
type recordingProvider struct {
	name string
	p    *scripted.Provider
	env  *convEnv
}

func (r *recordingProvider) Name() string { return r.p.Name() }

func (r *recordingProvider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	rec := request{Model: r.name, System: req.System, Messages: []line{}}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	for _, m := range req.Messages {
		rec.Messages = append(rec.Messages, messageLine(m))
	}
	r.env.mu.Lock()
	r.env.requests = append(r.env.requests, rec)
	r.env.mu.Unlock()
	return r.p.Stream(ctx, req)
}

// conversationSetups build the agents the conversation files run, by the
// name in their "setup" field.
var conversationSetups = map[string]func(t *testing.T, e *convEnv){
	"issue_triage": setupIssueTriage,
	"orders":       setupOrders,
	"no_past_tools": func(t *testing.T, e *convEnv) {
		// A prompt that keeps the chat but not the tool calls and results.
		type CityArgs struct {
			City string `json:"city"`
		}
		weather := &toolrun.Func[CityArgs]{Name: "get_weather", Description: "Current weather of a city.",
			Execute: func(ctx context.Context, s toolrun.ThreadState, a CityArgs) (toolrun.Result, error) {
				return toolrun.Textf("%s: 18°C, light rain", a.City), nil
			}}
		e.register(t, weather, e.model("chat"),
			&toolrun.Prompt{Name: "assistant", Model: "chat", Text: "You answer questions about the weather.",
				IncludeChat: true, IncludePastTools: false, Tools: []toolrun.PromptTool{toolrun.Use("get_weather")}},
			&toolrun.Agent{Name: "weather", SideA: toolrun.Side{Prompt: "assistant", MaxSteps: 3}, SideB: toolrun.Side{Human: true}},
		)
		e.agent, e.main = "weather", "chat"
	},
	"support_handoff": func(t *testing.T, e *convEnv) {
		// A router that hands billing questions to the billing agent, whose
		// side-A prompt requires the customer's id.
		type BillingArgs struct {
			CustomerID string `json:"customerId" jsonschema:"pattern=^c-[0-9]+$"`
			Summary    string `json:"summary" jsonschema:"description=The customer's problem in one sentence"`
		}
		e.register(t, e.model("router_model"), e.model("billing_model"),
			&toolrun.Prompt{Name: "router", Model: "router_model", IncludeChat: true, IncludePastTools: true,
				Text:  "Route the customer: hand billing questions to billing.",
				Tools: []toolrun.PromptTool{&toolrun.SubpromptConfig{Name: "billing", InitUserMessageProperty: "summary"}}},
			&toolrun.Prompt{Name: "billing_expert", Model: "billing_model", IncludeChat: true,
				Text:           "You resolve billing issues of customer {{customerId}}.",
				RequiredSchema: toolrun.SchemaFrom[BillingArgs]()},
			&toolrun.Agent{Name: "support", SideA: toolrun.Side{Prompt: "router"}, SideB: toolrun.Side{Human: true}},
			&toolrun.Agent{Name: "billing", ExposeAsTool: true, ToolDescription: "Hand billing questions to the billing team.",
				SideA: toolrun.Side{Prompt: "billing_expert"}, SideB: toolrun.Side{Human: true}},
		)
		e.agent, e.main = "support", "router_model"
	},
	"release_stop": func(t *testing.T, e *convEnv) {
		// deploy_staging is where the user presses Stop: it finishes, and
		// the calls after it in the batch do not run.
		step := func(name, text string, stop bool) *toolrun.Func[struct{}] {
			return &toolrun.Func[struct{}]{Name: name, Description: "Release step " + name,
				Execute: func(ctx context.Context, s toolrun.ThreadState, _ struct{}) (toolrun.Result, error) {
					if stop {
						e.stop()
					}
					return toolrun.Text(text), nil
				}}
		}
		e.register(t,
			step("run_tests", "412 tests passed", false),
			step("deploy_staging", "staging runs v2.0", true),
			step("deploy_production", "production runs v2.0", false),
			e.model("release_model"),
			&toolrun.Prompt{Name: "releaser", Model: "release_model", IncludeChat: true, IncludePastTools: true,
				Text:  "You release the app: test, deploy to staging, deploy to production.",
				Tools: []toolrun.PromptTool{toolrun.Use("run_tests"), toolrun.Use("deploy_staging"), toolrun.Use("deploy_production")}},
			&toolrun.Agent{Name: "release", SideA: toolrun.Side{Prompt: "releaser"}, SideB: toolrun.Side{Human: true}},
		)
		e.agent, e.main = "release", "release_model"
	},
}

func (e *convEnv) register(t *testing.T, defs ...toolrun.Definition) {
	t.Helper()
	if err := e.reg.Register(defs...); err != nil {
		t.Fatal(err)
	}
	if err := e.reg.Check(); err != nil {
		t.Fatal(err)
	}
}

// fakeGitHub is the GitHub API the triage tools talk to: the issues of
// one repository, and the labels added to them.
type fakeGitHub struct {
	owner, repo, token string
	issues             map[int]*fakeIssue
}

type fakeIssue struct {
	Title  string   `json:"title"`
	State  string   `json:"state"`
	Labels []string `json:"labels"`
	Body   string   `json:"body"`
}

func newFakeGitHub(token string) *fakeGitHub {
	return &fakeGitHub{owner: "acme", repo: "app", token: token, issues: map[int]*fakeIssue{
		12: {Title: "App crashes when opening settings", State: "open", Labels: []string{},
			Body: "Since 2.3 the app crashes as soon as I open Settings. Stack trace: NullPointerException in SettingsView.load."},
		15: {Title: "Settings page is slow to open", State: "open", Labels: []string{},
			Body: "The settings page takes about five seconds to appear."},
		20: {Title: "Add a dark mode", State: "open", Labels: []string{"feature"},
			Body: "Please add a dark theme."},
	}}
}

func (g *fakeGitHub) repoErr(owner, repo string) error {
	if owner != g.owner || repo != g.repo {
		return errors.New("GitHub returned 404")
	}
	return nil
}

// setupIssueTriage is the triage agent of the specification: three tools
// against a fake GitHub, a prompt that includes the chat and past tools,
// at most 5 steps per turn and 6 turns per session.
func setupIssueTriage(t *testing.T, e *convEnv) {
	gh := newFakeGitHub("ghp_conversation_token_1")
	type SearchArgs struct {
		Owner string `json:"owner" jsonschema:"description=Repository owner,pattern=^[\\w.-]+$"`
		Repo  string `json:"repo" jsonschema:"description=Repository name,pattern=^[\\w.-]+$"`
		Query string `json:"query" jsonschema:"description=Words from the issue title or text,minLength=1"`
	}
	type IssueArgs struct {
		Owner  string `json:"owner" jsonschema:"description=Repository owner"`
		Repo   string `json:"repo" jsonschema:"description=Repository name"`
		Number int    `json:"number" jsonschema:"description=Issue number,minimum=1"`
	}
	type LabelArgs struct {
		Owner    string `json:"owner" jsonschema:"description=Repository owner,pattern=^[\\w.-]+$"`
		Repo     string `json:"repo" jsonschema:"description=Repository name,pattern=^[\\w.-]+$"`
		Number   int    `json:"number" jsonschema:"description=Issue number,minimum=1"`
		Category string `json:"category" jsonschema:"description=Issue category,enum=bug,enum=feature,enum=question,enum=docs"`
		Priority string `json:"priority" jsonschema:"description=Issue priority,enum=high,enum=medium,enum=low"`
	}
	search := &toolrun.Func[SearchArgs]{Name: "search_github_issues", Description: "Search the open issues in a public GitHub repository.",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a SearchArgs) (toolrun.Result, error) {
			if err := gh.repoErr(a.Owner, a.Repo); err != nil {
				return toolrun.Errorf("%v", err), nil
			}
			type hit struct {
				Number int    `json:"number"`
				Title  string `json:"title"`
			}
			hits := []hit{}
			numbers := make([]int, 0, len(gh.issues))
			for n := range gh.issues {
				numbers = append(numbers, n)
			}
			sort.Ints(numbers)
			for _, n := range numbers {
				text := strings.ToLower(gh.issues[n].Title + " " + gh.issues[n].Body)
				for _, w := range strings.Fields(strings.ToLower(a.Query)) {
					if strings.Contains(text, w) {
						hits = append(hits, hit{n, gh.issues[n].Title})
						break
					}
				}
			}
			return toolrun.JSON(map[string]any{"issues": hits}), nil
		}}
	get := &toolrun.Func[IssueArgs]{Name: "get_github_issue", Description: "Read a public GitHub issue.",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a IssueArgs) (toolrun.Result, error) {
			if err := gh.repoErr(a.Owner, a.Repo); err != nil {
				return toolrun.Errorf("%v", err), nil
			}
			is, ok := gh.issues[a.Number]
			if !ok {
				return toolrun.Errorf("GitHub returned 404"), nil
			}
			return toolrun.JSON(is), nil
		}}
	label := &toolrun.Func[LabelArgs]{Name: "label_github_issue", Description: "Add a category label and a priority label to one GitHub issue.",
		Variables: []toolrun.Variable{{Name: "GITHUB_TOKEN", Type: toolrun.VarSecret, Required: true,
			Description: "Token that can write issues in the repository"}},
		Execute: func(ctx context.Context, s toolrun.ThreadState, a LabelArgs) (toolrun.Result, error) {
			token, err := s.Env(ctx, "GITHUB_TOKEN")
			if err != nil {
				return toolrun.Result{}, err
			}
			if token != gh.token {
				return toolrun.Errorf("GitHub returned 401"), nil
			}
			if err := gh.repoErr(a.Owner, a.Repo); err != nil {
				return toolrun.Errorf("%v", err), nil
			}
			is, ok := gh.issues[a.Number]
			if !ok {
				// The fake echoes the request's token, as a careless API
				// error might: the runtime must redact it.
				return toolrun.Errorf("GitHub returned 404 for issue %d (authorization: Bearer %s)", a.Number, token), nil
			}
			labels := []string{a.Category, "priority: " + a.Priority}
			is.Labels = append(is.Labels, labels...)
			return toolrun.Textf("Added the labels %s to issue %d.", strings.Join(labels, " and "), a.Number), nil
		}}
	e.register(t, search, get, label, e.model("conversational"),
		&toolrun.Prompt{Name: "issue_triager", Model: "conversational", ToolDescription: "Triages and labels one GitHub issue",
			IncludeChat: true, IncludePastTools: true,
			Text: "You triage one GitHub issue and label it.\n" +
				"If the person gives an issue number, read that issue with get_github_issue.\n" +
				"If the person describes the issue, find it with search_github_issues, then read it.\n" +
				"If the search finds more than one likely issue, ask which one to triage.\n" +
				"Choose a category and a priority, add both labels with label_github_issue,\n" +
				"and reply with the labels you added and a one-sentence reason.",
			Tools: []toolrun.PromptTool{toolrun.Use("search_github_issues"), toolrun.Use("get_github_issue"), toolrun.Use("label_github_issue")}},
		&toolrun.Agent{Name: "issue_triage", MaxSessionTurns: 6,
			SideA: toolrun.Side{Prompt: "issue_triager", StopOnResponse: toolrun.Bool(true), MaxSteps: 5},
			SideB: toolrun.Side{Human: true}},
	)
	e.agent, e.main = "issue_triage", "conversational"
	e.threadEnv = map[string]toolrun.EnvValue{"GITHUB_TOKEN": {Value: gh.token, Type: toolrun.VarSecret}}
}

// setupOrders is the specification's tool chaining: process_order queues
// charge_payment and send_confirmation_email, which run after it. The
// payment service counts charges, so a charge run twice would show.
func setupOrders(t *testing.T, e *convEnv) {
	type OrderArgs struct {
		OrderID string `json:"orderId" jsonschema:"description=Order ID"`
	}
	type ChargeArgs struct {
		OrderID string `json:"orderId"`
		Amount  int    `json:"amount" jsonschema:"description=Amount in cents,minimum=1"`
	}
	type EmailArgs struct {
		UserID  string `json:"userId"`
		OrderID string `json:"orderId"`
	}
	charges := 0
	process := &toolrun.Func[OrderArgs]{Name: "process_order", Description: "Process order and queue follow-up tasks",
		Uses: []string{"charge_payment", "send_confirmation_email"},
		Execute: func(ctx context.Context, s toolrun.ThreadState, a OrderArgs) (toolrun.Result, error) {
			if a.OrderID != "o-7" {
				return toolrun.Errorf("Order validation failed"), nil
			}
			if err := s.QueueTool("charge_payment", ChargeArgs{OrderID: a.OrderID, Amount: 4200}); err != nil {
				return toolrun.Result{}, err
			}
			if err := s.QueueTool("send_confirmation_email", EmailArgs{UserID: "u-3", OrderID: a.OrderID}); err != nil {
				return toolrun.Result{}, err
			}
			return toolrun.Textf("Order %s queued for processing", a.OrderID), nil
		}}
	charge := &toolrun.Func[ChargeArgs]{Name: "charge_payment", Description: "Charge the payment of an order",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a ChargeArgs) (toolrun.Result, error) {
			charges++
			return toolrun.Textf("Charged %d cents for %s (charge #%d)", a.Amount, a.OrderID, charges), nil
		}}
	email := &toolrun.Func[EmailArgs]{Name: "send_confirmation_email", Description: "Send the order confirmation",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a EmailArgs) (toolrun.Result, error) {
			return toolrun.Textf("Confirmation for %s sent to %s", a.OrderID, a.UserID), nil
		}}
	e.register(t, process, charge, email, e.model("shop_model"),
		&toolrun.Prompt{Name: "shop_assistant", Model: "shop_model", IncludeChat: true, IncludePastTools: true,
			Text:  "You process the customer's orders.",
			Tools: []toolrun.PromptTool{toolrun.Use("process_order")}},
		&toolrun.Agent{Name: "shop", SideA: toolrun.Side{Prompt: "shop_assistant"}, SideB: toolrun.Side{Human: true}},
	)
	e.agent, e.main = "shop", "shop_model"
}

// TestConversations runs each file of testdata/conversations through a
// Runtime on scripted models and compares each turn's outcome, stored
// transcript and (when the file has them) model requests with the file.
// With -update it rewrites those parts of the file.
func TestConversations(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "conversations", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no conversations in testdata/conversations")
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) { runConversation(t, file, name) })
	}
}

func runConversation(t *testing.T, file, name string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var conv conversation
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&conv); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	setup, ok := conversationSetups[conv.Setup]
	if !ok {
		t.Fatalf("%s: unknown setup %q", file, conv.Setup)
	}
	e := &convEnv{reg: toolrun.NewRegistry(nil), models: map[string]*scripted.Provider{}}
	setup(t, e)
	rt := toolrun.NewRuntime(e.reg, nil)
	ctx := context.Background()
	th, err := rt.NewThread(ctx, e.agent, &toolrun.ThreadOptions{ID: "thread-" + name, Env: e.threadEnv})
	if err != nil {
		t.Fatal(err)
	}

	failed := false
	for i := range conv.Turns {
		tr := &conv.Turns[i]
		for _, r := range tr.Responses {
			model := r.Model
			if model == "" {
				model = e.main
			}
			p, ok := e.models[model]
			if !ok {
				t.Fatalf("turn %d: no model %q in setup %s", i+1, model, conv.Setup)
			}
			p.Add(r.scripted())
		}
		got := runTurn(t, rt, e, th.ID, tr)
		for model, p := range e.models {
			if n := p.Remaining(); n > 0 {
				t.Errorf("turn %d: %d scripted response(s) of %s were never requested", i+1, n, model)
				failed = true
			}
		}
		if tr.Want.Requests == nil {
			got.Requests = nil
		}
		wantText, gotText := encodeWant(tr.Want, ""), encodeWant(got, "")
		if wantText != gotText {
			if !*updateGolden {
				t.Errorf("turn %d differs (-want +got; run with -update to accept):\n%s", i+1, lineDiff(wantText, gotText))
			}
			failed = true
		}
		tr.Want = got
	}
	if *updateGolden && failed {
		if err := os.WriteFile(file, encodeConversation(&conv), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runTurn runs one turn and returns what it gave.
func runTurn(t *testing.T, rt *toolrun.Runtime, e *convEnv, threadID string, tr *turn) want {
	ctx := context.Background()
	st := rt.Store()
	last, err := st.ListMessages(ctx, threadID, toolrun.MessageQuery{Limit: 1, Order: toolrun.OrderDesc, IncludeSilent: true, MaxDepth: -1})
	if err != nil {
		t.Fatal(err)
	}
	var after int64
	if len(last.Messages) > 0 {
		after = last.Messages[0].Seq
	}
	e.mu.Lock()
	e.requests = nil
	e.mu.Unlock()

	tctx, cancel := context.WithCancel(ctx)
	e.stop = cancel
	var reply *toolrun.Reply
	if tr.Resume {
		reply, err = rt.Resume(tctx, threadID)
	} else {
		reply, err = rt.Send(tctx, threadID, tr.User)
	}
	cancel()

	var got want
	if err != nil {
		got.Error = err.Error()
	}
	if reply != nil {
		got.Stop, got.Reply = reply.StopReason, reply.Text
	}
	thread, err := st.GetThread(ctx, threadID)
	if err != nil {
		t.Fatal(err)
	}
	got.Agent = thread.AgentID
	page, err := st.ListMessages(ctx, threadID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1, After: after})
	if err != nil {
		t.Fatal(err)
	}
	got.Transcript = []line{}
	for _, m := range page.Messages {
		got.Transcript = append(got.Transcript, messageLine(m))
	}
	e.mu.Lock()
	reqs := slices.Clone(e.requests)
	e.mu.Unlock()
	if reqs == nil {
		reqs = []request{}
	}
	got.Requests = &reqs
	return got
}

// scripted is the response as provider/scripted serves it.
func (r response) scripted() *scripted.Response {
	if r.Error != nil {
		res := scripted.Fail(r.Error.Message, &scripted.ErrorOptions{Code: r.Error.Code, Status: r.Error.Status, Retryable: r.Error.Retryable})
		return res.WithText(r.Text)
	}
	var calls []scripted.ToolCall
	for _, c := range r.Calls {
		text := c.RawArguments
		if text == "" {
			var b bytes.Buffer
			if len(c.Arguments) > 0 {
				_ = json.Compact(&b, c.Arguments)
			} else {
				b.WriteString("{}")
			}
			text = b.String()
		}
		calls = append(calls, scripted.RawCall(c.Name, text).WithID(c.ID))
	}
	if len(calls) > 0 {
		return scripted.Calls(calls...).WithText(r.Text)
	}
	return scripted.Text(r.Text)
}

// The encoders below write a conversation file as people read it: the
// structure indented, each response, message and request line on one line.

func encodeConversation(c *conversation) []byte {
	var b strings.Builder
	b.WriteString("{\n")
	fmt.Fprintf(&b, "  \"about\": %s,\n", compactJSON(c.About))
	fmt.Fprintf(&b, "  \"setup\": %s,\n", compactJSON(c.Setup))
	b.WriteString("  \"turns\": [")
	for i, tr := range c.Turns {
		if i > 0 {
			b.WriteString(",")
		}
		const in = "      "
		var fields []string
		if tr.User != "" {
			fields = append(fields, `"user": `+compactJSON(tr.User))
		}
		if tr.Resume {
			fields = append(fields, `"resume": true`)
		}
		fields = append(fields, `"responses": `+compactList(tr.Responses, in))
		fields = append(fields, `"want": `+encodeWant(tr.Want, in))
		b.WriteString("\n    {\n" + in + strings.Join(fields, ",\n"+in) + "\n    }")
	}
	b.WriteString("\n  ]\n}\n")
	return []byte(b.String())
}

// encodeWant writes w as an object whose lines are indented by in.
func encodeWant(w want, in string) string {
	next := in + "  "
	var fields []string
	if w.Error != "" {
		fields = append(fields, `"error": `+compactJSON(w.Error))
	}
	if w.Stop != "" {
		fields = append(fields, `"stop": `+compactJSON(w.Stop))
	}
	if w.Reply != "" {
		fields = append(fields, `"reply": `+compactJSON(w.Reply))
	}
	fields = append(fields, `"agent": `+compactJSON(w.Agent))
	fields = append(fields, `"transcript": `+compactList(w.Transcript, next))
	if w.Requests != nil {
		item, field := next+"  ", next+"    "
		var reqs []string
		for _, r := range *w.Requests {
			f := []string{`"model": ` + compactJSON(r.Model)}
			if r.System != "" {
				f = append(f, `"system": `+compactJSON(r.System))
			}
			if len(r.Tools) > 0 {
				f = append(f, `"tools": `+compactJSON(r.Tools))
			}
			f = append(f, `"messages": `+compactList(r.Messages, field))
			reqs = append(reqs, "{\n"+field+strings.Join(f, ",\n"+field)+"\n"+item+"}")
		}
		if len(reqs) == 0 {
			fields = append(fields, `"requests": []`)
		} else {
			fields = append(fields, "\"requests\": [\n"+item+strings.Join(reqs, ",\n"+item)+"\n"+next+"]")
		}
	}
	return "{\n" + next + strings.Join(fields, ",\n"+next) + "\n" + in + "}"
}

// compactList writes items as a JSON array, one compact item per line,
// the lines indented by in plus two spaces.
func compactList[T any](items []T, in string) string {
	if len(items) == 0 {
		return "[]"
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = compactJSON(it)
	}
	return "[\n" + in + "  " + strings.Join(parts, ",\n"+in+"  ") + "\n" + in + "]"
}

// compactJSON encodes v without HTML escaping, so <, > and & stay
// readable.
func compactJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
