// Command issue_triage runs the spec's "agent with tools" example: the
// issue_triage agent finds a GitHub issue, reads it and adds a category and
// a priority label, through the tools search_github_issues,
// get_github_issue and label_github_issue.
//
// The GitHub API is always a local fake (an httptest server holding a few
// issues of acme/widgets), so labels are never written anywhere real. The
// model is chosen from the environment:
//
//	OPENROUTER_API_KEY  OpenRouter, anthropic/claude-sonnet-5.5 (the spec's model)
//	OPENAI_API_KEY      OpenAI, gpt-4o-mini
//	ANTHROPIC_API_KEY   Anthropic, claude-sonnet-4-5
//	(none)              a scripted model that plays the whole triage offline
//
// Run it with:
//
//	go run ./examples/issue_triage
//	go run ./examples/issue_triage -message "Triage acme/widgets#44"
//	go run ./examples/issue_triage -store sqlite:/tmp/triage.db -thread t1
//
// -model replaces the model id. -store (or TOOLRUN_STORE) picks the store:
// memory (the default) or sqlite:PATH; with a durable store, -thread
// continues a conversation across runs.
//
// The SQLite store encrypts secret env values (the thread's GITHUB_TOKEN)
// at rest. Its key ring comes from TOOLRUN_SECRET_KEYS
// ("id:base64[,id:base64…]", the sealing key first), or else from the key
// file PATH.keys beside the database, which the first run creates with
// mode 0600 and later runs read. Keep that file (without it the stored
// secrets cannot be read), but not in the same backups as the database.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/anthropic"
	"github.com/toolrun/toolrun/provider/openai"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/sqlite"
)

// config is what the flags and the environment decide.
type config struct {
	Message string
	Store   string // "memory", "sqlite:PATH"; "" means memory
	ModelID string // "" means the provider's default
	Thread  string // "" means a new thread
	Getenv  func(string) string
}

func main() {
	cfg := config{Getenv: os.Getenv}
	flag.StringVar(&cfg.Message, "message", DefaultMessage, "the message the person sends to the agent")
	flag.StringVar(&cfg.Store, "store", "", "memory or sqlite:PATH (default $TOOLRUN_STORE, else memory)")
	flag.StringVar(&cfg.ModelID, "model", "", "model id (default: the chosen provider's default)")
	flag.StringVar(&cfg.Thread, "thread", "", "thread id; an existing thread of the store is continued")
	flag.Parse()
	if cfg.Store == "" {
		cfg.Store = os.Getenv("TOOLRUN_STORE")
	}
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// chooseModel picks the provider from the API keys in the environment.
func chooseModel(getenv func(string) string, modelID string) (p toolrun.Provider, id, label string) {
	pick := func(def string) string {
		if modelID != "" {
			return modelID
		}
		return def
	}
	switch {
	case getenv("OPENROUTER_API_KEY") != "":
		id = pick(DefaultModelID)
		return openai.New(openai.OpenRouter(getenv("OPENROUTER_API_KEY"))), id, "OpenRouter " + id
	case getenv("OPENAI_API_KEY") != "":
		id = pick("gpt-4o-mini")
		return openai.New(&openai.Options{APIKey: getenv("OPENAI_API_KEY")}), id, "OpenAI " + id
	case getenv("ANTHROPIC_API_KEY") != "":
		id = pick("claude-sonnet-4-5")
		return anthropic.New(&anthropic.Options{APIKey: getenv("ANTHROPIC_API_KEY")}), id, "Anthropic " + id
	}
	id = pick("scripted-triage")
	return scriptedTriage(), id, "scripted (offline; it plays the triage of the default message — set OPENROUTER_API_KEY, OPENAI_API_KEY or ANTHROPIC_API_KEY for a real model)"
}

// openStore opens the store named by spec: "" or "memory", or
// "sqlite:PATH" with the key ring of secretKeys. note says where the keys
// came from.
func openStore(spec string, getenv func(string) string) (st toolrun.Store, closeStore func(), note string, err error) {
	switch {
	case spec == "" || spec == "memory":
		return toolrun.NewMemoryStore(), func() {}, "", nil
	case strings.HasPrefix(spec, "sqlite:") && len(spec) > len("sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		keys, note, err := secretKeys(path, getenv)
		if err != nil {
			return nil, nil, "", err
		}
		st, err := sqlite.Open(path, &sqlite.Options{Keys: keys})
		if err != nil {
			return nil, nil, "", err
		}
		return st, func() { _ = st.Close() }, note, nil
	}
	return nil, nil, "", fmt.Errorf("unknown store %q: use memory or sqlite:PATH", spec)
}

// SecretKeysVar names the environment variable that holds the key ring of
// the SQLite store.
const SecretKeysVar = "TOOLRUN_SECRET_KEYS"

// secretKeys returns the key ring that encrypts the secrets of the SQLite
// database at path: SecretKeysVar when set, else the key file path+".keys",
// created with a new key (mode 0600) when missing. An in-memory database
// gets a key of its own that ends with it.
func secretKeys(path string, getenv func(string) string) (*keyring.Ring, string, error) {
	if getenv != nil {
		if text := getenv(SecretKeysVar); text != "" {
			r, err := keyring.Parse(text)
			if err != nil {
				return nil, "", fmt.Errorf("%s: %w", SecretKeysVar, err)
			}
			return r, "secrets encrypted with key " + r.Primary() + " from " + SecretKeysVar, nil
		}
	}
	if path == ":memory:" {
		k, err := keyring.Generate("memory")
		if err != nil {
			return nil, "", err
		}
		r, err := keyring.New(k)
		return r, "secrets encrypted with a key that ends with the run", err
	}
	if strings.HasPrefix(path, "file:") {
		return nil, "", fmt.Errorf("sqlite:%s: set %s to the key ring for a database given as a URI", path, SecretKeysVar)
	}
	file := path + ".keys"
	text, err := os.ReadFile(file)
	if err == nil {
		r, err := keyring.Parse(string(text))
		if err != nil {
			return nil, "", fmt.Errorf("key file %s: %w", file, err)
		}
		return r, "secrets encrypted with key " + r.Primary() + " from " + file, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, "", err
	}
	k, err := keyring.Generate("k" + time.Now().UTC().Format("20060102"))
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, "", fmt.Errorf("create key file: %w", err)
	}
	_, err = f.WriteString(keyring.Format(k) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return nil, "", fmt.Errorf("write key file %s: %w", file, err)
	}
	r, err := keyring.New(k)
	return r, "secrets encrypted with key " + k.ID + " from " + file + " (created now, mode 0600; keep it with the database)", err
}

// newToken returns a fresh token for the fake GitHub.
func newToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "ghp_example_" + hex.EncodeToString(b)
}

// run is the whole program: start the fake GitHub, pick the model and the
// store, send the message, print the conversation and the labels.
func run(ctx context.Context, cfg config, out io.Writer) error {
	p, modelID, label := chooseModel(cfg.Getenv, cfg.ModelID)
	return runWith(ctx, cfg, p, modelID, label, out)
}

// runWith is run with the model given.
func runWith(ctx context.Context, cfg config, p toolrun.Provider, modelID, label string, out io.Writer) error {
	token := newToken()
	gh := newFakeGitHub(token, sampleIssues())
	defer gh.Close()

	store, closeStore, keysNote, err := openStore(cfg.Store, cfg.Getenv)
	if err != nil {
		return err
	}
	defer closeStore()
	storeName := cfg.Store
	if storeName == "" {
		storeName = "memory"
	}
	if keysNote != "" {
		storeName += " (" + keysNote + ")"
	}
	fmt.Fprintf(out, "model:  %s\nstore:  %s\ngithub: %s (local fake; %s is a fresh secret it accepts)\n\n", label, storeName, gh.URL, TokenVar)

	rt, err := newRuntime(p, modelID, gh.URL, store)
	if err != nil {
		return err
	}
	threadID, err := openThread(ctx, rt, cfg.Thread, token)
	if err != nil {
		return err
	}
	reply, err := rt.Send(ctx, threadID, cfg.Message)
	if reply != nil {
		printMessages(out, reply.Messages)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nthread %s stopped: %s\n", threadID, reply.StopReason)
	fmt.Fprintln(out, "labels set on the fake GitHub:")
	calls := gh.LabelCalls()
	if len(calls) == 0 {
		fmt.Fprintln(out, "  (none)")
	}
	for _, c := range calls {
		fmt.Fprintf(out, "  %s#%d: %s\n", c.Repo, c.Number, strings.Join(c.Labels, ", "))
	}
	return nil
}

// openThread creates a thread, or continues id when the store has it. The
// thread env holds the GitHub token (secret by default).
func openThread(ctx context.Context, rt *toolrun.Runtime, id, token string) (string, error) {
	env := toolrun.EnvValue{Value: token, Type: toolrun.VarSecret}
	if id != "" {
		if _, err := rt.Store().GetThread(ctx, id); err == nil {
			// This run's fake accepts only this run's token.
			return id, rt.Store().SetEnv(ctx, toolrun.ScopeThread, id, TokenVar, env)
		} else if !errors.Is(err, toolrun.ErrNotFound) {
			return "", err
		}
	}
	th, err := rt.NewThread(ctx, AgentName, &toolrun.ThreadOptions{ID: id, Env: map[string]toolrun.EnvValue{TokenVar: env}})
	if err != nil {
		return "", err
	}
	return th.ID, nil
}

// printMessages prints a conversation: roles, tool calls with their
// arguments, and tool results with their status.
func printMessages(out io.Writer, msgs []toolrun.Message) {
	for _, m := range msgs {
		switch m.Role {
		case toolrun.RoleAssistant:
			if strings.TrimSpace(m.Content) != "" {
				fmt.Fprintf(out, "assistant: %s\n", indent(m.Content))
			}
			for _, c := range m.ToolCalls {
				fmt.Fprintf(out, "assistant → %s %s\n", c.Name, c.Arguments)
			}
		case toolrun.RoleTool:
			fmt.Fprintf(out, "tool %s [%s]: %s\n", m.Name, m.ToolStatus, indent(m.Content))
		default:
			fmt.Fprintf(out, "%s: %s\n", m.Role, indent(m.Content))
		}
	}
}

func indent(s string) string { return strings.ReplaceAll(s, "\n", "\n    ") }
