package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/provhttp"
	"github.com/toolrun/toolrun/internal/sse"
)

// wireEvent is one stream event; only the fields of its type are set.
type wireEvent struct {
	Type         string          `json:"type"`
	Index        int             `json:"index"`
	Message      *wireMessageOut `json:"message"`
	ContentBlock *wireBlockOut   `json:"content_block"`
	Delta        *wireDelta      `json:"delta"`
	Usage        *wireUsage      `json:"usage"`
	Error        *wireError      `json:"error"`
}

type wireMessageOut struct {
	Content    []wireBlockOut `json:"content"`
	StopReason string         `json:"stop_reason"`
	Usage      *wireUsage     `json:"usage"`
}

// wireBlockOut is a response content block.
type wireBlockOut struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type wireDelta struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Thinking    string `json:"thinking"`
	PartialJSON string `json:"partial_json"`
	StopReason  string `json:"stop_reason"`
}

type wireUsage struct {
	InputTokens              *int `json:"input_tokens"`
	OutputTokens             *int `json:"output_tokens"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens"`
}

// block is the state of one open content block.
type block struct {
	kind    string // "text", "thinking", "tool_use", "server_tool_use", …
	call    int    // tool call number of a tool_use block
	id      string
	name    string
	input   strings.Builder
	initial json.RawMessage // the input of content_block_start
	started bool
}

type streamState struct {
	provider string
	yield    func(toolrun.Chunk) bool
	blocks   map[int]*block
	calls    int
	serverID map[string]string // server tool use id -> tool name
	usage    toolrun.Usage
	hasUsage bool
	finish   string
	done     bool
}

var errStopped = errors.New("stopped")

func (s *streamState) emit(c toolrun.Chunk) error {
	if !s.yield(c) {
		return errStopped
	}
	return nil
}

func (s *streamState) invalid(format string, args ...any) error {
	return &toolrun.ProviderError{Provider: s.provider, Code: "invalid_response", Message: fmt.Sprintf(format, args...)}
}

func newState(provider string, yield func(toolrun.Chunk) bool) *streamState {
	return &streamState{provider: provider, yield: yield, blocks: map[int]*block{}, serverID: map[string]string{}}
}

// parseStream reads a Messages API event stream and yields its chunks,
// ending with ChunkFinish at message_stop.
func parseStream(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error {
	s := newState(provider, yield)
	r := sse.NewReader(body, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return &toolrun.ProviderError{Provider: provider, Code: "stream_truncated", Retryable: true,
				Message: "the stream ended before message_stop"}
		}
		if err != nil {
			if errors.Is(err, sse.ErrTooLarge) {
				return s.invalid("%v", err)
			}
			return &toolrun.ProviderError{Provider: provider, Code: "network", Retryable: true,
				Message: "reading the stream: " + err.Error(), Err: err}
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		var we wireEvent
		if err := json.Unmarshal(data, &we); err != nil {
			if !ev.Terminated {
				return &toolrun.ProviderError{Provider: provider, Code: "stream_truncated", Retryable: true,
					Message: "the stream ended inside an event", Err: err}
			}
			return &toolrun.ProviderError{Provider: provider, Code: "invalid_response",
				Message: fmt.Sprintf("malformed stream event %s: %v", snippet(data), err), Err: err}
		}
		if err := s.event(&we); err != nil {
			if err == errStopped {
				return nil
			}
			return err
		}
		if s.done {
			return nil
		}
	}
}

// snippet quotes b, or its first 120 bytes and "…", cut as
// provhttp.Truncate cuts.
func snippet(b []byte) string {
	if len(b) > 120 {
		return strconv.Quote(provhttp.Truncate(string(b[:min(len(b), 120+utf8.UTFMax)]), 120)) + "…"
	}
	return strconv.Quote(string(b))
}

func (s *streamState) addUsage(u *wireUsage) {
	if u == nil {
		return
	}
	s.hasUsage = true
	// message_delta repeats cumulative counts: later values replace.
	in := -1
	if u.InputTokens != nil {
		in = *u.InputTokens
	}
	if u.CacheCreationInputTokens != nil || u.CacheReadInputTokens != nil || in >= 0 {
		total := max(in, 0)
		cached := 0
		if u.CacheReadInputTokens != nil {
			cached = *u.CacheReadInputTokens
			total += cached
		}
		if u.CacheCreationInputTokens != nil {
			total += *u.CacheCreationInputTokens
		}
		if in >= 0 {
			s.usage.InputTokens, s.usage.CachedTokens = total, cached
		}
	}
	if u.OutputTokens != nil {
		s.usage.OutputTokens = *u.OutputTokens
	}
}

func (s *streamState) event(ev *wireEvent) error {
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			s.addUsage(ev.Message.Usage)
		}
	case "content_block_start":
		if ev.ContentBlock == nil {
			return s.invalid("content_block_start without content_block")
		}
		return s.blockStart(ev.Index, ev.ContentBlock)
	case "content_block_delta":
		if ev.Delta == nil {
			return s.invalid("content_block_delta without delta")
		}
		return s.blockDelta(ev.Index, ev.Delta)
	case "content_block_stop":
		return s.blockStop(ev.Index)
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			s.finish = mapStop(ev.Delta.StopReason)
		}
		s.addUsage(ev.Usage)
	case "message_stop":
		return s.end()
	case "error":
		if ev.Error == nil {
			return s.invalid("error event without an error object")
		}
		return &toolrun.ProviderError{Provider: s.provider, Code: ev.Error.Type, Message: provhttp.Message(ev.Error.Message),
			Retryable: retryableType(ev.Error.Type)}
	}
	// ping and unknown events are ignored.
	return nil
}

// end yields usage and the finish after message_stop.
func (s *streamState) end() error {
	for idx, b := range s.blocks {
		if b.kind == "tool_use" {
			return s.invalid("message ended while tool_use block %d was open", idx)
		}
	}
	s.done = true
	if s.hasUsage {
		u := s.usage
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkUsage, Usage: &u}); err != nil {
			return err
		}
	}
	if s.finish == "" {
		s.finish = "stop"
	}
	return s.emit(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: s.finish})
}

func mapStop(r string) string {
	switch r {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return r // pause_turn and future reasons
}

func (s *streamState) blockStart(idx int, cb *wireBlockOut) error {
	b := &block{kind: cb.Type, id: cb.ID, name: cb.Name, initial: cb.Input}
	switch {
	case cb.Type == "text":
		if cb.Text != "" {
			if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkText, Text: cb.Text}); err != nil {
				return err
			}
		}
	case cb.Type == "thinking":
		if cb.Thinking != "" {
			if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: cb.Thinking}); err != nil {
				return err
			}
		}
	case cb.Type == "tool_use":
		if cb.Name == "" || cb.ID == "" {
			return s.invalid("tool_use block %d without id or name", idx)
		}
		b.call = s.calls
		s.calls++
		b.started = true
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCallStart, Index: b.call,
			ToolCall: toolrun.ToolCall{ID: cb.ID, Name: cb.Name}}); err != nil {
			return err
		}
	case cb.Type == "server_tool_use":
		s.serverID[cb.ID] = cb.Name
	case strings.HasSuffix(cb.Type, "_tool_result") && cb.ToolUseID != "":
		// A server tool's result arrives whole in the start event.
		if err := s.emitServerResult(cb); err != nil {
			return err
		}
	}
	s.blocks[idx] = b
	return nil
}

func (s *streamState) blockDelta(idx int, d *wireDelta) error {
	b := s.blocks[idx]
	if b == nil {
		return s.invalid("content_block_delta for block %d that was not started", idx)
	}
	switch d.Type {
	case "text_delta":
		if d.Text != "" {
			return s.emit(toolrun.Chunk{Type: toolrun.ChunkText, Text: d.Text})
		}
	case "thinking_delta":
		if d.Thinking != "" {
			return s.emit(toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: d.Thinking})
		}
	case "input_json_delta":
		b.input.WriteString(d.PartialJSON)
		if b.kind == "tool_use" && d.PartialJSON != "" {
			return s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCallDelta, Index: b.call,
				ToolCall: toolrun.ToolCall{ID: b.id, Name: b.name, Arguments: d.PartialJSON}})
		}
	}
	// signature_delta, citations_delta and unknown deltas are ignored.
	return nil
}

func (s *streamState) blockStop(idx int) error {
	b := s.blocks[idx]
	if b == nil {
		return nil
	}
	delete(s.blocks, idx)
	switch b.kind {
	case "tool_use":
		return s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCall, Index: b.call,
			ToolCall: toolrun.ToolCall{ID: b.id, Name: b.name, Arguments: b.arguments()}})
	case "server_tool_use":
		var input map[string]any
		_ = json.Unmarshal([]byte(b.arguments()), &input)
		return s.emit(toolrun.Chunk{Type: toolrun.ChunkProviderTool, ProviderTool: &toolrun.ProviderToolCall{
			ID: b.id, Name: b.name, Type: "server_tool_use", Provider: s.provider, Status: "in_progress",
			Metadata: map[string]any{"input": input},
		}})
	}
	return nil
}

// arguments returns the whole input of a tool block: the streamed
// fragments, else the input of the start event, else {}.
func (b *block) arguments() string {
	if a := strings.TrimSpace(b.input.String()); a != "" {
		return b.input.String()
	}
	if len(b.initial) > 0 && string(b.initial) != "null" {
		return string(b.initial)
	}
	return "{}"
}

// emitServerResult yields the result block of a server tool.
func (s *streamState) emitServerResult(cb *wireBlockOut) error {
	status := "completed"
	var probe struct {
		Type      string `json:"type"`
		ErrorCode string `json:"error_code"`
	}
	if json.Unmarshal(cb.Content, &probe) == nil && (probe.ErrorCode != "" || strings.HasSuffix(probe.Type, "_error")) {
		status = "failed"
	}
	name := s.serverID[cb.ToolUseID]
	if name == "" {
		name = strings.TrimSuffix(cb.Type, "_tool_result")
	}
	pt := &toolrun.ProviderToolCall{ID: cb.ToolUseID, Name: name, Type: cb.Type, Provider: s.provider,
		Status: status, Result: string(cb.Content)}
	if probe.ErrorCode != "" {
		pt.Metadata = map[string]any{"error_code": probe.ErrorCode}
	}
	return s.emit(toolrun.Chunk{Type: toolrun.ChunkProviderTool, ProviderTool: pt})
}

// parseMessage handles a whole (non-streamed) Messages API response, of
// at most provhttp.MaxResponse bytes.
func parseMessage(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error {
	b, err := provhttp.ReadResponse(provider, body)
	if err != nil {
		return err
	}
	var m struct {
		Type string `json:"type"`
		wireMessageOut
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &m); err != nil {
		return &toolrun.ProviderError{Provider: provider, Code: "invalid_response",
			Message: fmt.Sprintf("response is not JSON: %s", snippet(bytes.TrimSpace(b))), Err: err}
	}
	s := newState(provider, yield)
	if m.Error != nil {
		return s.event(&wireEvent{Type: "error", Error: m.Error})
	}
	if m.Type != "message" {
		return s.invalid("response is not a message (type %q)", m.Type)
	}
	s.addUsage(m.Usage)
	for i := range m.Content {
		cb := m.Content[i]
		text, thinking := cb.Text, cb.Thinking
		cb.Text, cb.Thinking = "", ""
		if err := s.blockStart(i, &cb); err != nil {
			return noStop(err)
		}
		switch {
		case text != "":
			err = s.blockDelta(i, &wireDelta{Type: "text_delta", Text: text})
		case thinking != "":
			err = s.blockDelta(i, &wireDelta{Type: "thinking_delta", Thinking: thinking})
		case cb.Type == "tool_use" && len(cb.Input) > 0:
			err = s.blockDelta(i, &wireDelta{Type: "input_json_delta", PartialJSON: string(cb.Input)})
		}
		if err == nil {
			err = s.blockStop(i)
		}
		if err != nil {
			return noStop(err)
		}
	}
	if m.StopReason != "" {
		s.finish = mapStop(m.StopReason)
	}
	return noStop(s.end())
}

func noStop(err error) error {
	if err == errStopped {
		return nil
	}
	return err
}
