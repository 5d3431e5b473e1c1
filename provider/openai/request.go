package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/schemadialect"
)

type wireRequest struct {
	Model             string            `json:"model"`
	Messages          []wireMessage     `json:"messages"`
	Tools             []json.RawMessage `json:"tools,omitempty"`
	ToolChoice        string            `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool             `json:"parallel_tool_calls,omitempty"`
	Stream            bool              `json:"stream"`
	StreamOptions     *streamOptions    `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string          `json:"type"`
	Function wireFunctionDef `json:"function"`
}

type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict,omitempty"`
}

// requestBody encodes req as a streaming chat-completions request.
func (p *Provider) requestBody(req *toolrun.Request) ([]byte, error) {
	if req == nil {
		return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request", Message: "nil request"}
	}
	w := wireRequest{
		Model:         req.Model,
		Messages:      mapMessages(req),
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
	}
	extra := map[string]any{}
	for _, spec := range req.Tools {
		if spec.ProviderExecuted {
			pt := p.providerTool(spec.Name)
			if pt == nil {
				return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request",
					Message: fmt.Sprintf("provider tool %q is not configured (Options.ProviderTools)", spec.Name)}
			}
			if len(pt.Tool) > 0 {
				w.Tools = append(w.Tools, pt.Tool)
			}
			for k, v := range pt.Body {
				extra[k] = v
			}
			continue
		}
		t, err := p.tool(spec)
		if err != nil {
			return nil, err
		}
		w.Tools = append(w.Tools, t)
	}
	if len(w.Tools) > 0 {
		w.ToolChoice = req.ToolChoice
		w.ParallelToolCalls = req.ParallelToolCalls
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request", Message: err.Error(), Err: err}
	}
	for k, v := range p.opts.ExtraBody {
		extra[k] = v
	}
	if len(extra) == 0 {
		return b, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		vb, err := json.Marshal(v)
		if err != nil {
			return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request",
				Message: fmt.Sprintf("extra body field %q: %v", k, err), Err: err}
		}
		m[k] = vb
	}
	return json.Marshal(m)
}

func (p *Provider) providerTool(name string) *ProviderTool {
	name = strings.TrimPrefix(name, toolrun.ProviderPrefix)
	for i := range p.opts.ProviderTools {
		if p.opts.ProviderTools[i].Name == name {
			return &p.opts.ProviderTools[i]
		}
	}
	return nil
}

type schemaKey struct {
	name, params string
}

// tool encodes a function tool, its schema rewritten for the dialect in
// use. Rewrites are cached per tool name and schema text.
func (p *Provider) tool(spec toolrun.ToolSpec) (json.RawMessage, error) {
	key := schemaKey{spec.Name, string(spec.Parameters)}
	if v, ok := p.schemas.Load(key); ok {
		return p.encodeTool(spec, v.(schemaEntry))
	}
	d := schemadialect.Dialect{Strict: p.opts.Strict, NoTypeArrays: p.opts.NoTypeArrays}
	params, notes, err := schemadialect.Rewrite(spec.Parameters, d)
	strict := p.opts.Strict
	if err == nil && strict && schemadialect.Incompatible(notes) {
		p.log.Warn("tool schema cannot be expressed in strict mode; sending it non-strict",
			"provider", p.name, "tool", spec.Name)
		strict = false
		d.Strict = false
		params, notes, err = schemadialect.Rewrite(spec.Parameters, d)
	}
	if err != nil {
		return nil, &toolrun.ProviderError{Provider: p.name, Code: "invalid_request",
			Message: fmt.Sprintf("tool %q: %v", spec.Name, err), Err: err}
	}
	schemadialect.LogNotes(p.log, p.name, spec.Name, notes)
	e := schemaEntry{params: params, strict: strict}
	p.schemas.Store(key, e)
	return p.encodeTool(spec, e)
}

type schemaEntry struct {
	params json.RawMessage
	strict bool
}

func (p *Provider) encodeTool(spec toolrun.ToolSpec, e schemaEntry) (json.RawMessage, error) {
	return json.Marshal(wireTool{Type: "function", Function: wireFunctionDef{
		Name: spec.Name, Description: spec.Description, Parameters: e.params, Strict: e.strict,
	}})
}

// mapMessages turns the conversation into chat-completions messages.
func mapMessages(req *toolrun.Request) []wireMessage {
	out := make([]wireMessage, 0, len(req.Messages)+1)
	if req.System != "" {
		out = append(out, wireMessage{Role: "system", Content: ptr(req.System)})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case toolrun.RoleSystem:
			out = append(out, wireMessage{Role: "system", Content: ptr(m.Content)})
		case toolrun.RoleAssistant:
			w := wireMessage{Role: "assistant"}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				w.Content = ptr(m.Content)
			}
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: c.ID, Type: "function",
					Function: wireFunction{Name: c.Name, Arguments: args}})
			}
			out = append(out, w)
		case toolrun.RoleTool:
			out = append(out, wireMessage{Role: "tool", ToolCallID: m.ToolCallID, Content: ptr(m.Content)})
		default: // user, and anything unknown
			out = append(out, wireMessage{Role: "user", Content: ptr(m.Content)})
		}
	}
	return out
}

func ptr(s string) *string { return &s }
