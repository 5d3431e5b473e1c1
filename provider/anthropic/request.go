package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/schemadialect"
)

type wireRequest struct {
	Model      string            `json:"model"`
	MaxTokens  int               `json:"max_tokens"`
	System     string            `json:"system,omitempty"`
	Messages   []wireMessage     `json:"messages"`
	Tools      []json.RawMessage `json:"tools,omitempty"`
	ToolChoice *wireToolChoice   `json:"tool_choice,omitempty"`
	Stream     bool              `json:"stream"`
}

type wireToolChoice struct {
	Type                   string `json:"type"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

// wireBlock is a request content block: text, tool_use or tool_result.
type wireBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   *string         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

func (p *Provider) requestBody(req *toolrun.Request) ([]byte, error) {
	if req == nil {
		return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request_error", Message: "nil request"}
	}
	maxTokens := p.opts.MaxTokens
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	system, msgs := mapMessages(req)
	w := wireRequest{Model: req.Model, MaxTokens: maxTokens, System: system, Messages: msgs, Stream: true}
	for _, spec := range req.Tools {
		if spec.ProviderExecuted {
			name := strings.TrimPrefix(spec.Name, toolrun.ProviderPrefix)
			var found *ProviderTool
			for i := range p.opts.ProviderTools {
				if p.opts.ProviderTools[i].Name == name {
					found = &p.opts.ProviderTools[i]
				}
			}
			if found == nil {
				return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request_error",
					Message: fmt.Sprintf("provider tool %q is not configured (Options.ProviderTools)", spec.Name)}
			}
			w.Tools = append(w.Tools, found.Tool)
			continue
		}
		t, err := p.tool(spec)
		if err != nil {
			return nil, err
		}
		w.Tools = append(w.Tools, t)
	}
	if len(w.Tools) > 0 {
		noParallel := req.ParallelToolCalls != nil && !*req.ParallelToolCalls
		switch req.ToolChoice {
		case "required":
			w.ToolChoice = &wireToolChoice{Type: "any", DisableParallelToolUse: noParallel}
		case "none":
			w.ToolChoice = &wireToolChoice{Type: "none"}
		default:
			if req.ToolChoice == "auto" || noParallel {
				w.ToolChoice = &wireToolChoice{Type: "auto", DisableParallelToolUse: noParallel}
			}
		}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request_error", Message: err.Error(), Err: err}
	}
	if len(p.opts.ExtraBody) == 0 {
		return b, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range p.opts.ExtraBody {
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request_error",
				Message: fmt.Sprintf("extra body field %q: %v", k, err), Err: err}
		}
		m[k] = vb
	}
	return json.Marshal(m)
}

type schemaKey struct{ name, params string }

// tool encodes a function tool with its schema in the Anthropic dialect;
// rewrites are cached per tool name and schema text.
func (p *Provider) tool(spec toolrun.ToolSpec) (json.RawMessage, error) {
	key := schemaKey{spec.Name, string(spec.Parameters)}
	params, ok := p.schemas.Load(key)
	if !ok {
		out, notes, err := schemadialect.Rewrite(spec.Parameters, schemadialect.Anthropic)
		if err != nil {
			return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request_error",
				Message: fmt.Sprintf("tool %q: %v", spec.Name, err), Err: err}
		}
		schemadialect.LogNotes(p.log, p.name, spec.Name, notes)
		p.schemas.Store(key, out)
		params = out
	}
	return json.Marshal(wireTool{Name: spec.Name, Description: spec.Description, InputSchema: params.(json.RawMessage)})
}

// mapMessages returns the system prompt (Request.System and any system
// messages, joined by blank lines) and the messages as content blocks.
// Consecutive messages that map to the same role are merged into one
// message, so the tool results of one turn travel together in one user
// message, as the API requires.
func mapMessages(req *toolrun.Request) (string, []wireMessage) {
	var system []string
	if req.System != "" {
		system = append(system, req.System)
	}
	var out []wireMessage
	add := func(role string, blocks ...wireBlock) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, wireMessage{Role: role, Content: blocks})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case toolrun.RoleSystem:
			if m.Content != "" {
				system = append(system, m.Content)
			}
		case toolrun.RoleAssistant:
			var blocks []wireBlock
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, wireBlock{Type: "text", Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				blocks = append(blocks, wireBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: toolInput(c.Arguments)})
			}
			add("assistant", blocks...)
		case toolrun.RoleTool:
			content := m.Content
			add("user", wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: &content,
				IsError: m.ToolStatus == toolrun.StatusError})
		default:
			if strings.TrimSpace(m.Content) != "" {
				add("user", wireBlock{Type: "text", Text: m.Content})
			}
		}
	}
	if len(out) > 0 && out[0].Role != "user" {
		// The API wants a conversation to open with the user; a history
		// cut by a window may open with the assistant.
		out = append([]wireMessage{{Role: "user", Content: []wireBlock{{Type: "text", Text: earlierNotShown}}}}, out...)
	}
	return strings.Join(system, "\n\n"), out
}

// earlierNotShown opens a conversation whose first message is the
// assistant's.
const earlierNotShown = "(Earlier messages of this conversation are not shown.)"

// toolInput returns a tool call's arguments as the JSON object tool_use
// requires: empty or non-object arguments become {}.
func toolInput(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage("{}")
	}
	return b
}
