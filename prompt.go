package toolrun

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/toolrun/toolrun/internal/schema"
)

// Prompt is a prompt definition (spec definePrompt): the system prompt,
// model and tools of an agent side, and — with a ToolDescription — a tool
// other prompts can call (a prompt tool, run as a one-shot sub-prompt).
//
// As a tool a prompt is one-shot: it makes exactly one model request; the
// tools that request calls run and are stored, but the sub-prompt's model
// does not see their results — the caller gets the text and a "Tool
// Executions" summary.
//
// A Prompt must not be modified after it is registered. Its RequiredSchema
// is compiled by the first registration that succeeds; a Prompt may then be
// registered in other registries too, and each uses that compiled schema.
type Prompt struct {
	// Name identifies the prompt; it is also its tool name.
	Name string
	// ToolDescription describes the prompt when it is offered as a tool.
	ToolDescription string
	// Model names a registered Model.
	Model string
	// Text is the system prompt. {{name}} placeholders are replaced by the
	// call's arguments when the prompt runs as a tool or after a handoff
	// (strings verbatim, other values as JSON); unknown names are left as is.
	Text string
	// Tools the prompt offers the model: Use("name") for a function tool,
	// prompt or agent (local or qualified), Use("provider:web_search") for a
	// provider-executed tool, or a SubpromptConfig for a prompt tool with
	// result shaping; any of them wrapped in Optional to depend on an env flag.
	Tools []PromptTool
	// RequiredSchema is the argument schema when the prompt runs as a tool
	// (and of a handoff or subagent whose side A runs it): a JSON Schema
	// document (JSON text or a map) or SchemaFrom[T](). nil: no arguments.
	RequiredSchema any
	// IncludeChat loads the thread's top-level history into requests. When
	// false (the default, as the reference) a request holds only the system
	// prompt and messages injected during the current turn.
	IncludeChat bool
	// History bounds the chat history each request carries when IncludeChat
	// is set: the newest messages within its limits, an assistant message's
	// tool calls never parted from their results, then its Filter. The zero
	// Window sends the whole history.
	History Window
	// IncludePastTools keeps tool calls and results in requests. When false
	// (the default) tool messages are dropped and assistant messages lose
	// their tool calls, those of the current turn included.
	IncludePastTools bool
	// ToolChoice is "auto" (default), "none" or "required".
	ToolChoice string
	// ParallelToolCalls, when set, is passed to the provider.
	ParallelToolCalls *bool
	// Env holds prompt-level default env values (secret, third link of the
	// env chain).
	Env map[string]string
	// Variables the prompt needs; required ones are checked before the
	// prompt runs as a tool.
	Variables []Variable

	// prepared holds the *preparedPrompt of this prompt: set once, by the
	// first registration that succeeds, and never changed after, so that
	// registering the prompt again (in another registry, or by mistake and
	// refused) writes nothing to it. An atomic.Value rather than an
	// atomic.Pointer, which go vet forbids copying: a Prompt may be copied
	// as a value (a template). Its owner field makes such a copy compile a
	// schema of its own rather than use the original's.
	prepared atomic.Value
}

// preparedPrompt is what registration compiles of a prompt.
type preparedPrompt struct {
	owner  *Prompt        // the prompt it was compiled for
	schema *schema.Schema // RequiredSchema compiled; nil: no arguments
	args   *schema.Args   // the argument route of calls of the prompt as a tool
}

// unprepared stands for the compiled form of a prompt never registered.
var unprepared = &preparedPrompt{args: schema.NewArgs(nil, nil)}

// compiled returns the prompt's RequiredSchema as compiled at registration,
// nil when it has none (or is not registered).
func (p *Prompt) compiled() *schema.Schema { return p.prep().schema }

// args returns the argument route of calls of the prompt as a tool.
func (p *Prompt) args() *schema.Args { return p.prep().args }

func (p *Prompt) prep() *preparedPrompt {
	if c := p.ownPrepared(); c != nil {
		return c
	}
	return unprepared
}

// ownPrepared returns what a registration compiled of p, nil before the
// first one succeeded (a copy of a registered prompt has none of its own).
func (p *Prompt) ownPrepared() *preparedPrompt {
	if c, _ := p.prepared.Load().(*preparedPrompt); c != nil && c.owner == p {
		return c
	}
	return nil
}

// setPrepared gives p what a successful registration compiled, unless a
// registration did so first: the registrations compiled the same
// RequiredSchema, and the one set is never replaced.
func (p *Prompt) setPrepared(c *preparedPrompt) {
	for {
		cur := p.prepared.Load()
		if old, _ := cur.(*preparedPrompt); old != nil && old.owner == p {
			return
		}
		if p.prepared.CompareAndSwap(cur, c) {
			return
		}
	}
}

func (p *Prompt) definitionName() string { return p.Name }

// PromptTool is an entry of Prompt.Tools: Use(name), a *SubpromptConfig, or
// either wrapped by Optional.
type PromptTool interface {
	promptToolName() string
}

// Use names a tool, prompt, agent or provider tool ("provider:<name>") in a
// prompt's Tools.
func Use(name string) PromptTool { return toolName(name) }

type toolName string

func (t toolName) promptToolName() string { return string(t) }

// Optional makes a Tools entry depend on an env flag: the entry is offered
// only when the env value named flag resolves, through the turn's env chain,
// to "true", "1" or "yes" (any case). It wraps Use(name) or a
// *SubpromptConfig.
//
//	Tools: []toolrun.PromptTool{
//		toolrun.Use("search_issues"),
//		toolrun.Optional("ENABLE_WEB", toolrun.Use("provider:web_search")),
//	}
func Optional(flag string, entry PromptTool) PromptTool {
	return &optionalEntry{flag: flag, entry: entry}
}

type optionalEntry struct {
	flag  string
	entry PromptTool
}

func (o *optionalEntry) promptToolName() string {
	if o.entry == nil {
		return ""
	}
	return o.entry.promptToolName()
}

// unwrapEntry returns the entry inside any Optional wrappers and the env
// flags it depends on.
func unwrapEntry(t PromptTool) (PromptTool, []string) {
	var flags []string
	for {
		o, ok := t.(*optionalEntry)
		if !ok {
			return t, flags
		}
		flags = append(flags, o.flag)
		t = o.entry
	}
}

// SubpromptConfig names a prompt tool and shapes what its call returns
// (spec section 4). The Include fields default to true; set them through
// the pointer helpers or leave nil.
type SubpromptConfig struct {
	Name                string
	IncludeTextResponse *bool
	IncludeToolCalls    *bool
	IncludeErrors       *bool
	// InitUserMessageProperty names an argument whose value becomes a user
	// message for the sub-prompt (strings verbatim, others as JSON).
	InitUserMessageProperty string
	// InitAttachmentsProperty names an argument holding one path or an array
	// of paths (under /attachments/) attached to that message.
	InitAttachmentsProperty string
}

func (c *SubpromptConfig) promptToolName() string { return c.Name }

func (c *SubpromptConfig) includeText() bool {
	return c == nil || c.IncludeTextResponse == nil || *c.IncludeTextResponse
}
func (c *SubpromptConfig) includeCalls() bool {
	return c == nil || c.IncludeToolCalls == nil || *c.IncludeToolCalls
}
func (c *SubpromptConfig) includeErrors() bool {
	return c == nil || c.IncludeErrors == nil || *c.IncludeErrors
}

// Bool returns a pointer to b, for the optional fields of definitions.
func Bool(b bool) *bool { return &b }

// StructSchema is a RequiredSchema generated from a Go struct type; make it
// with SchemaFrom.
type StructSchema struct{ t reflect.Type }

// SchemaFrom returns the RequiredSchema of the Go struct T (the same
// generation as Func[T]).
func SchemaFrom[T any]() StructSchema { return StructSchema{t: reflect.TypeFor[T]()} }

// legacyRelationshipKeys are the keys that configured subagents on prompt
// tools before relationships moved to agent sides.
var legacyRelationshipKeys = []string{"resumable", "receives_messages", "blocking", "hidden", "immediate"}

// PromptToolFromMap decodes a prompt tools entry loaded from data (JSON or
// YAML decoded into a map). It refuses the legacy subagent keys with an
// error naming them: subagent relationships live on agent sides.
func PromptToolFromMap(m map[string]any) (PromptTool, error) {
	var bad []string
	for _, k := range legacyRelationshipKeys {
		if _, ok := m[k]; ok {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("toolrun: prompt tool entry %v: %s configure a subagent relationship, which belongs on the agent side's Subagents, not on a prompt tool", m["name"], strings.Join(bad, ", "))
	}
	name, _ := m["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("toolrun: prompt tool entry without a name")
	}
	c := &SubpromptConfig{Name: name}
	for k, v := range m {
		switch k {
		case "name":
		case "includeTextResponse", "includeToolCalls", "includeErrors":
			b, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("toolrun: prompt tool %s: %s must be a boolean", name, k)
			}
			switch k {
			case "includeTextResponse":
				c.IncludeTextResponse = &b
			case "includeToolCalls":
				c.IncludeToolCalls = &b
			default:
				c.IncludeErrors = &b
			}
		case "initUserMessageProperty", "initAttachmentsProperty":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("toolrun: prompt tool %s: %s must be a string", name, k)
			}
			if k == "initUserMessageProperty" {
				c.InitUserMessageProperty = s
			} else {
				c.InitAttachmentsProperty = s
			}
		default:
			return nil, fmt.Errorf("toolrun: prompt tool %s: unknown key %q", name, k)
		}
	}
	return c, nil
}

// compileRequiredSchema compiles a RequiredSchema value.
func compileRequiredSchema(name string, s any) (*schema.Schema, error) {
	switch v := s.(type) {
	case nil:
		return nil, nil
	case StructSchema:
		doc, err := schema.ForType(v.t)
		if err != nil {
			return nil, err
		}
		return schema.Compile(name, doc)
	case json.RawMessage, []byte, string, map[string]any:
		return schema.Compile(name, v)
	}
	return nil, fmt.Errorf("RequiredSchema must be a JSON Schema document or SchemaFrom[T](), not %T", s)
}

var placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}`)

// interpolate replaces {{name}} placeholders by argument values.
func interpolate(text string, args map[string]any) string {
	if len(args) == 0 || !strings.Contains(text, "{{") {
		return text
	}
	return placeholderRE.ReplaceAllStringFunc(text, func(m string) string {
		key := placeholderRE.FindStringSubmatch(m)[1]
		v, ok := args[key]
		if !ok {
			return m
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
}
