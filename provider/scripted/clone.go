package scripted

import (
	"encoding/json"

	"github.com/toolrun/toolrun"
)

// cloneRequest copies a request deeply: messages, their tool calls,
// attachments and metadata, tools and their parameters.
func cloneRequest(r *toolrun.Request) *toolrun.Request {
	if r == nil {
		return &toolrun.Request{}
	}
	c := *r
	if r.Messages != nil {
		c.Messages = make([]toolrun.Message, len(r.Messages))
		for i, m := range r.Messages {
			if m.ToolCalls != nil {
				m.ToolCalls = append([]toolrun.ToolCall(nil), m.ToolCalls...)
			}
			if m.Attachments != nil {
				m.Attachments = append([]toolrun.AttachmentRef(nil), m.Attachments...)
			}
			if m.Metadata != nil {
				m.Metadata = cloneMap(m.Metadata)
			}
			c.Messages[i] = m
		}
	}
	c.Tools = cloneSpecs(r.Tools)
	if r.ParallelToolCalls != nil {
		b := *r.ParallelToolCalls
		c.ParallelToolCalls = &b
	}
	return &c
}

func cloneSpecs(specs []toolrun.ToolSpec) []toolrun.ToolSpec {
	if specs == nil {
		return nil
	}
	out := make([]toolrun.ToolSpec, len(specs))
	for i, t := range specs {
		if t.Parameters != nil {
			t.Parameters = append(json.RawMessage(nil), t.Parameters...)
		}
		out[i] = t
	}
	return out
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

// cloneValue copies the mutable containers JSON-like values are built from.
func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case []string:
		return append([]string(nil), x...)
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out
	case json.RawMessage:
		return append(json.RawMessage(nil), x...)
	case []byte:
		return append([]byte(nil), x...)
	}
	return v
}
