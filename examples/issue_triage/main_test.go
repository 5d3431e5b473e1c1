package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/anthropic"
	"github.com/toolrun/toolrun/provider/openai"
	"github.com/toolrun/toolrun/provider/scripted"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/toolruntest"
)

const testToken = "ghp_test_token_123456"

// triage starts a fake GitHub and a runtime over p, and returns a thread
// that holds the token the fake accepts.
func triage(t *testing.T, p toolrun.Provider, env map[string]toolrun.EnvValue) (*toolrun.Runtime, *fakeGitHub, string) {
	t.Helper()
	gh := newFakeGitHub(testToken, sampleIssues())
	t.Cleanup(gh.Close)
	rt, err := newRuntime(p, "test-model", gh.URL, nil)
	require.NoError(t, err)
	if env == nil {
		env = map[string]toolrun.EnvValue{TokenVar: {Value: testToken}}
	}
	th, err := rt.NewThread(context.Background(), AgentName, &toolrun.ThreadOptions{Env: env})
	require.NoError(t, err)
	return rt, gh, th.ID
}

func TestScriptedTriageLabelsTheIssue(t *testing.T) {
	p := scriptedTriage()
	rt, gh, id := triage(t, p, nil)
	reply, err := rt.Send(context.Background(), id, DefaultMessage)
	require.NoError(t, err)

	assert.Equal(t, ScriptedReply, reply.Text)
	assert.Equal(t, toolrun.StopResponse, reply.StopReason)
	assert.False(t, reply.SessionEnded)
	assert.Equal(t, []string{"bug", "priority: high"}, gh.Labels("acme", "widgets", 42))
	assert.Equal(t, []labelCall{{Repo: "acme/widgets", Number: 42, Labels: []string{"bug", "priority: high"}}}, gh.LabelCalls())
	assert.Empty(t, gh.Labels("acme", "widgets", 44), "no other issue touched")
	assert.True(t, p.Done(), "every scripted step ran (their request checks passed)")

	var results []string
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool {
			assert.Equal(t, toolrun.StatusSuccess, m.ToolStatus, m.Content)
			results = append(results, m.Name)
		}
	}
	assert.Equal(t, []string{"search_github_issues", "get_github_issue", "label_github_issue"}, results)

	reqs := p.Requests()
	require.Len(t, reqs, 4, "search, get, label, reply: within maxSteps 5")
	assert.Equal(t, PromptText, reqs[0].System)
	assert.Equal(t, "test-model", reqs[0].Model)
	var offered []string
	for _, s := range reqs[0].Tools {
		offered = append(offered, s.Name)
	}
	assert.Equal(t, []string{"search_github_issues", "get_github_issue", "label_github_issue"}, offered)
	// includePastTools: the last request still carries every earlier call and result.
	var kinds []string
	for _, m := range reqs[3].Messages {
		kinds = append(kinds, string(m.Role)+":"+m.Name)
	}
	assert.Equal(t, []string{"user:", "assistant:", "tool:search_github_issues", "assistant:", "tool:get_github_issue", "assistant:", "tool:label_github_issue"}, kinds)
	for _, m := range reqs[3].Messages {
		assert.NotContains(t, m.Content, testToken, "the secret never reaches the model")
	}
}

func TestSecondMessageKeepsTheChat(t *testing.T) {
	p := scriptedTriage()
	p.Add(scripted.Text("It is a crash for every new user, so high.").Expect(func(r *toolrun.Request) error {
		if len(r.Messages) != 9 || r.Messages[7].Content != ScriptedReply {
			return assert.AnError
		}
		return nil
	}))
	rt, _, id := triage(t, p, nil)
	_, err := rt.Send(context.Background(), id, DefaultMessage)
	require.NoError(t, err)
	reply, err := rt.Send(context.Background(), id, "Why high?")
	require.NoError(t, err)
	assert.Equal(t, "It is a crash for every new user, so high.", reply.Text, "includeChat: the second turn sees the first")
}

func TestToolSchemasMirrorTheSpec(t *testing.T) {
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(SearchGitHubIssues, LabelGitHubIssue, GetGitHubIssue))
	describe := func(name string) toolrun.ToolSpec {
		info, ok := reg.Tool(name)
		require.True(t, ok, name)
		return info
	}
	schema := func(tool toolrun.Tool) map[string]any {
		info := describe(map[toolrun.Tool]string{SearchGitHubIssues: "search_github_issues", LabelGitHubIssue: "label_github_issue", GetGitHubIssue: "get_github_issue"}[tool])
		var m map[string]any
		require.NoError(t, json.Unmarshal(info.Parameters, &m))
		return m["properties"].(map[string]any)
	}
	search := schema(SearchGitHubIssues)
	assert.Equal(t, `^[\w.-]+$`, search["owner"].(map[string]any)["pattern"])
	assert.Equal(t, `^[\w.-]+$`, search["repo"].(map[string]any)["pattern"])
	assert.EqualValues(t, 1, search["query"].(map[string]any)["minLength"])
	label := schema(LabelGitHubIssue)
	assert.Equal(t, []any{"bug", "feature", "question", "docs"}, label["category"].(map[string]any)["enum"])
	assert.Equal(t, []any{"high", "medium", "low"}, label["priority"].(map[string]any)["enum"])
	assert.Equal(t, "integer", label["number"].(map[string]any)["type"])
	assert.EqualValues(t, 1, label["number"].(map[string]any)["minimum"])
	get := schema(GetGitHubIssue)
	assert.NotContains(t, get["owner"], "pattern", "the spec's get_github_issue escapes instead")
	info := describe("label_github_issue")
	require.NotEmpty(t, info.Variables)
	assert.Equal(t, toolrun.Variable{Name: TokenVar, Type: toolrun.VarSecret, Required: true, Description: "Token that can write issues in the repository"}, info.Variables[0])
}

func TestInvalidArgumentsNeverReachGitHub(t *testing.T) {
	gh := newFakeGitHub(testToken, sampleIssues())
	defer gh.Close()
	st := toolruntest.NewState(t, &toolruntest.Options{Env: map[string]toolrun.EnvValue{
		TokenVar: toolruntest.SecretValue(testToken), APIURLVar: toolruntest.TextValue(gh.URL),
	}})
	for _, c := range []struct {
		tool toolrun.Tool
		args string
		want string
	}{
		{SearchGitHubIssues, `{"owner":"acme/x","repo":"widgets","query":"crash"}`, "owner"},
		{SearchGitHubIssues, `{"owner":"acme","repo":"widgets","query":""}`, "query"},
		{LabelGitHubIssue, `{"owner":"acme","repo":"widgets","number":0,"category":"bug","priority":"high"}`, "number"},
		{LabelGitHubIssue, `{"owner":"acme","repo":"widgets","number":42,"category":"urgent","priority":"high"}`, "category"},
		{LabelGitHubIssue, `{"owner":"acme","repo":"widgets","number":42,"category":"bug","priority":"p0"}`, "priority"},
		{LabelGitHubIssue, `{"owner":"acme","repo":"widgets","number":42,"category":"bug"}`, "priority"},
	} {
		res := toolruntest.Call(t, c.tool, st, c.args)
		assert.Equal(t, toolrun.StatusError, res.Status, c.args)
		assert.Contains(t, res.Error, c.want, c.args)
	}
	assert.Empty(t, gh.LabelCalls())
}

func TestToolResultsFollowTheSpec(t *testing.T) {
	gh := newFakeGitHub(testToken, sampleIssues())
	defer gh.Close()
	env := map[string]toolrun.EnvValue{APIURLVar: toolruntest.TextValue(gh.URL)}
	st := toolruntest.NewState(t, &toolruntest.Options{Env: env})

	res := toolruntest.Call(t, GetGitHubIssue, st, `{"owner":"acme","repo":"widgets","number":41}`)
	require.Equal(t, toolrun.StatusSuccess, res.Status, res.Error)
	assert.JSONEq(t, `{"title":"Typo in the install guide","state":"open","labels":["docs"],"body":"docs/install.md says `+"`widgets instal` instead of `widgets install`"+`."}`, res.Result)

	res = toolruntest.Call(t, GetGitHubIssue, st, `{"owner":"acme","repo":"widgets","number":999}`)
	assert.Equal(t, "GitHub returned 404", res.Error)

	res = toolruntest.Call(t, SearchGitHubIssues, st, `{"owner":"acme","repo":"widgets","query":"crash"}`)
	require.Equal(t, toolrun.StatusSuccess, res.Status, res.Error)
	assert.JSONEq(t, `{"issues":[{"number":42,"title":"App crashes on startup when the config file is empty"}]}`, res.Result, "closed issue 43 is not searched")

	// Required secret missing: the runtime refuses before Execute.
	res = toolruntest.Call(t, LabelGitHubIssue, st, `{"owner":"acme","repo":"widgets","number":42,"category":"bug","priority":"low"}`)
	assert.Equal(t, toolrun.StatusError, res.Status)
	assert.Contains(t, res.Error, TokenVar)
	// A token the fake refuses.
	env[TokenVar] = toolruntest.SecretValue("ghp_wrong_token_0000")
	st = toolruntest.NewState(t, &toolruntest.Options{Env: env})
	res = toolruntest.Call(t, LabelGitHubIssue, st, `{"owner":"acme","repo":"widgets","number":42,"category":"bug","priority":"low"}`)
	assert.Equal(t, "GitHub returned 401", res.Error)
	assert.Empty(t, gh.LabelCalls())
}

func TestLabelFailureIsToldToTheModel(t *testing.T) {
	p := scripted.New(
		scripted.Calls(scripted.Call(LabelGitHubIssue.Name, map[string]any{"owner": "acme", "repo": "widgets", "number": 42, "category": "bug", "priority": "high"})),
		scripted.Text("Triage: bug, high. Labelling failed: GitHub returned 401.").Expect(resultContains(LabelGitHubIssue.Name, "GitHub returned 401")),
	)
	rt, gh, id := triage(t, p, map[string]toolrun.EnvValue{TokenVar: {Value: "ghp_revoked_token_999"}})
	reply, err := rt.Send(context.Background(), id, "Triage acme/widgets#42")
	require.NoError(t, err)
	assert.Equal(t, "Triage: bug, high. Labelling failed: GitHub returned 401.", reply.Text)
	assert.True(t, p.Done())
	assert.Empty(t, gh.LabelCalls())
}

func TestRunPrintsTheConversationAndTheLabels(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), config{Message: DefaultMessage, Getenv: func(string) string { return "" }}, &out)
	require.NoError(t, err)
	s := out.String()
	for _, want := range []string{
		"model:  scripted",
		"store:  memory",
		"user: " + DefaultMessage,
		`assistant → search_github_issues {"owner":"acme","query":"crash empty config file","repo":"widgets"}`,
		`tool get_github_issue [success]: {"body":`,
		"tool label_github_issue [success]: Added the labels bug and priority: high to issue 42.",
		"assistant: " + ScriptedReply,
		"stopped: response",
		"labels set on the fake GitHub:\n  acme/widgets#42: bug, priority: high\n",
	} {
		assert.Contains(t, s, want)
	}
	assert.NotContains(t, s, "ghp_example_", "the token is never printed")
}

func TestChooseModelFromTheEnvironment(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	p, id, label := chooseModel(env("OPENROUTER_API_KEY", "k", "OPENAI_API_KEY", "k"), "")
	assert.IsType(t, &openai.Provider{}, p)
	assert.Equal(t, DefaultModelID, id)
	assert.True(t, strings.HasPrefix(label, "OpenRouter "))
	p, id, _ = chooseModel(env("OPENAI_API_KEY", "k", "ANTHROPIC_API_KEY", "k"), "")
	assert.IsType(t, &openai.Provider{}, p)
	assert.Equal(t, "gpt-4o-mini", id)
	p, id, _ = chooseModel(env("ANTHROPIC_API_KEY", "k"), "claude-x")
	assert.IsType(t, &anthropic.Provider{}, p)
	assert.Equal(t, "claude-x", id)
	p, _, label = chooseModel(env(), "")
	assert.IsType(t, &scripted.Provider{}, p)
	assert.True(t, strings.HasPrefix(label, "scripted"))
}

func TestSQLiteStoreContinuesAThreadAcrossRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "triage.db")
	cfg := config{Message: DefaultMessage, Store: "sqlite:" + path, Thread: "t1"}

	var out bytes.Buffer
	require.NoError(t, runWith(context.Background(), cfg, scriptedTriage(), "m", "scripted", &out))
	assert.Contains(t, out.String(), "store:  sqlite:"+path)
	assert.Contains(t, out.String(), "acme/widgets#42: bug, priority: high")

	// A second process run on the same file and thread: the model sees the
	// first conversation, and labelling works with the new run's token.
	p := scriptedTriage()
	out.Reset()
	cfg.Message = "Triage it again, please."
	require.NoError(t, runWith(context.Background(), cfg, p, "m", "scripted", &out))
	first := p.Requests()[0].Messages
	require.Len(t, first, 9, "the first run's 8 messages and the new one")
	assert.Equal(t, DefaultMessage, first[0].Content)
	assert.Equal(t, "Triage it again, please.", first[8].Content)
	assert.Contains(t, out.String(), "acme/widgets#42: bug, priority: high")

	_, _, _, err := openStore("postgres:x", nil)
	assert.ErrorContains(t, err, `unknown store "postgres:x"`)
}

// The SQLite store keeps the thread's GitHub token encrypted: the first run
// creates a key file beside the database (mode 0600) that later runs read,
// and the database files never hold a token.
func TestSQLiteStoreEncryptsTheToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "triage.db")
	cfg := config{Message: DefaultMessage, Store: "sqlite:" + path, Thread: "t1"}
	var out bytes.Buffer
	require.NoError(t, runWith(context.Background(), cfg, scriptedTriage(), "m", "scripted", &out))
	assert.Contains(t, out.String(), "secrets encrypted with key k")
	assert.Contains(t, out.String(), path+".keys (created now, mode 0600")
	info, err := os.Stat(path + ".keys")
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	}
	keys, err := os.ReadFile(path + ".keys")
	require.NoError(t, err)

	out.Reset()
	cfg.Message = "Triage it again, please."
	require.NoError(t, runWith(context.Background(), cfg, scriptedTriage(), "m", "scripted", &out))
	assert.Contains(t, out.String(), "from "+path+".keys)")
	assert.Contains(t, out.String(), "acme/widgets#42: bug, priority: high", "the second run reads the token it stored")
	again, err := os.ReadFile(path + ".keys")
	require.NoError(t, err)
	assert.Equal(t, keys, again, "the key file is reused, not replaced")

	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		assert.NotContains(t, string(b), "ghp_example_", "%s holds a GitHub token in plain text", f)
	}
}

// TOOLRUN_SECRET_KEYS, when set, is the key ring; no key file is written.
func TestSQLiteStoreKeysFromTheEnvironment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "triage.db")
	k, err := keyring.Generate("ops-1")
	require.NoError(t, err)
	env := map[string]string{SecretKeysVar: keyring.Format(k)}
	cfg := config{Message: DefaultMessage, Store: "sqlite:" + path, Thread: "t1", Getenv: func(k string) string { return env[k] }}
	var out bytes.Buffer
	require.NoError(t, runWith(context.Background(), cfg, scriptedTriage(), "m", "scripted", &out))
	assert.Contains(t, out.String(), "secrets encrypted with key ops-1 from "+SecretKeysVar)
	assert.NoFileExists(t, path+".keys")

	env[SecretKeysVar] = "ops-1:not-base64!"
	err = runWith(context.Background(), cfg, scriptedTriage(), "m", "scripted", &out)
	assert.ErrorContains(t, err, SecretKeysVar)
	assert.NotContains(t, err.Error(), "not-base64!", "the error does not echo the secret")
}
