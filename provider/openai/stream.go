package openai

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/provhttp"
	"github.com/toolrun/toolrun/internal/sse"
)

// wireChunk is one chat.completion.chunk (or, for parseCompletion, a whole
// chat.completion: Message instead of Delta).
type wireChunk struct {
	Choices []wireChoice `json:"choices"`
	Usage   *wireUsage   `json:"usage"`
	Error   *wireError   `json:"error"`
}

type wireChoice struct {
	Index        int        `json:"index"`
	Delta        *wireDelta `json:"delta"`
	Message      *wireDelta `json:"message"`
	FinishReason *string    `json:"finish_reason"`
}

type wireDelta struct {
	Content          content         `json:"content"`
	Reasoning        *string         `json:"reasoning"`
	ReasoningContent *string         `json:"reasoning_content"`
	Refusal          *string         `json:"refusal"`
	ToolCalls        []wireToolDelta `json:"tool_calls"`
	// Annotations are citations of a server-side search (OpenAI search
	// models, OpenRouter's web plugin).
	Annotations []json.RawMessage `json:"annotations"`
}

type wireToolDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *wireUsage) usage() *toolrun.Usage {
	out := &toolrun.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		out.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	if u.CompletionTokensDetails != nil {
		out.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	return out
}

// wireError is the "error" object of an error body or of an in-stream
// error event. OpenAI sends a string code; OpenRouter a number.
type wireError struct {
	Message  string          `json:"message"`
	Type     string          `json:"type"`
	Code     json.RawMessage `json:"code"`
	Param    string          `json:"param"`
	Metadata *struct {
		Raw          string `json:"raw"`
		ProviderName string `json:"provider_name"`
	} `json:"metadata"`
}

// codeAndMessage returns the error's code (its string code, else its
// type) and its message, with an upstream error appended when OpenRouter
// passed one on (at most 500 bytes of it and "…", cut as
// provhttp.Truncate cuts).
func (e *wireError) codeAndMessage() (code, msg string) {
	var s string
	if json.Unmarshal(e.Code, &s) == nil && s != "" {
		code = s
	} else {
		code = e.Type
	}
	msg = provhttp.Message(e.Message)
	if e.Metadata != nil && e.Metadata.Raw != "" {
		raw := e.Metadata.Raw
		if len(raw) > 500 {
			raw = provhttp.Truncate(raw, 500) + "…"
		}
		if e.Metadata.ProviderName != "" {
			msg += " (" + e.Metadata.ProviderName + ": " + raw + ")"
		} else {
			msg += " (" + raw + ")"
		}
	}
	return code, msg
}

// status returns the numeric code OpenRouter puts in "code", or 0.
func (e *wireError) status() int {
	n, err := strconv.Atoi(string(bytes.TrimSpace(e.Code)))
	if err != nil {
		return 0
	}
	return n
}

// content is a delta's "content": a string, null, or (Mistral) an array of
// typed parts whose "thinking" parts are reasoning.
type content struct {
	text, reasoning string
}

// UnmarshalJSON accepts a string, null or an array of typed parts.
func (c *content) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.text)
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking []struct {
				Text string `json:"text"`
			} `json:"thinking"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		// The parts are joined in one pass: adding each to a string would
		// copy all the text before it, quadratic in the number of parts.
		var text, reasoning strings.Builder
		for _, p := range parts {
			switch p.Type {
			case "text":
				text.WriteString(p.Text)
			case "thinking":
				for _, t := range p.Thinking {
					reasoning.WriteString(t.Text)
				}
			}
		}
		c.text, c.reasoning = text.String(), reasoning.String()
	}
	return nil
}

// call is the state of one streamed tool call.
type call struct {
	wireIndex int
	hasIndex  bool
	id, name  string
	args      strings.Builder
	scan      argScan // follows args, to tell when they are valid JSON
	started   bool    // ChunkToolCallStart was yielded
	done      bool    // ChunkToolCall was yielded
	queued    bool    // on streamState.ready
}

// streamState turns chat.completion.chunk payloads into toolrun chunks.
type streamState struct {
	provider string
	yield    func(toolrun.Chunk) bool
	calls    []*call
	// byIndex and byID find a call by its wire index, or (for deltas
	// without an index) by its id, without a search through calls.
	// byIndex holds the position of each call whose wire index is not its
	// position (a call whose index is its position is found at once);
	// byID holds the position of the first call with each id, and is made
	// when a delta without an index first needs it.
	byIndex map[int]int
	byID    map[string]int
	// ready holds the positions of the started calls whose arguments may
	// have become valid JSON since completeCalls last looked: only those
	// can be complete when a new call starts. The calls before position
	// open are all complete.
	ready []int
	open  int
	// visits counts the calls find and completeCalls looked at: the
	// work, which the tests check.
	visits int
	finish string // the finish reason, once seen
	usage  *toolrun.Usage
	// annotations collects delta annotations by their "type".
	annotations map[string][]json.RawMessage
	annTypes    []string
	stopped     bool
}

// errStopped ends parsing when the consumer stops.
var errStopped = errors.New("stopped")

func (s *streamState) emit(c toolrun.Chunk) error {
	if !s.yield(c) {
		s.stopped = true
		return errStopped
	}
	return nil
}

func (s *streamState) invalid(format string, args ...any) error {
	return &toolrun.ProviderError{Provider: s.provider, Code: "invalid_response", Message: fmt.Sprintf(format, args...)}
}

// parseStream reads an SSE body of chat.completion.chunk events and
// yields its chunks, ending with ChunkFinish. It returns nil after the
// finish, or when yield returned false.
func parseStream(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error {
	s := &streamState{provider: provider, yield: yield}
	return s.parse(body)
}

// parse is parseStream with the state made.
func (s *streamState) parse(body io.Reader) error {
	provider := s.provider
	r := sse.NewReader(body, 0)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			if s.finish == "" {
				return &toolrun.ProviderError{Provider: provider, Code: "stream_truncated", Retryable: true,
					Message: "the stream ended before the response finished"}
			}
			return s.end()
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
		if string(data) == "[DONE]" {
			return s.end()
		}
		var ch wireChunk
		if err := json.Unmarshal(data, &ch); err != nil {
			if !ev.Terminated {
				return &toolrun.ProviderError{Provider: provider, Code: "stream_truncated", Retryable: true,
					Message: "the stream ended inside an event", Err: err}
			}
			return &toolrun.ProviderError{Provider: provider, Code: "invalid_response",
				Message: fmt.Sprintf("malformed stream event %s: %v", snippet(data), err), Err: err}
		}
		if ch.Error == nil && ev.Event == "error" {
			return &toolrun.ProviderError{Provider: provider, Code: "server_error",
				Message: "error event: " + snippet(data)}
		}
		if err := s.chunk(&ch); err != nil {
			if err == errStopped {
				return nil
			}
			return err
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

// chunk handles one parsed event.
func (s *streamState) chunk(ch *wireChunk) error {
	if ch.Error != nil {
		code, msg := ch.Error.codeAndMessage()
		st := ch.Error.status()
		if code == "" {
			code = statusCode(st)
		}
		return &toolrun.ProviderError{Provider: s.provider, Code: code, Message: msg,
			Retryable: retryableStatus(st) || retryableCode(code)}
	}
	for i := range ch.Choices {
		c := &ch.Choices[i]
		if c.Index != 0 {
			continue // only the first choice is used
		}
		d := c.Delta
		if d == nil {
			d = c.Message
		}
		if d != nil {
			if err := s.delta(d); err != nil {
				return err
			}
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			if err := s.completeCalls(false); err != nil {
				return err
			}
			s.finish = mapFinish(*c.FinishReason, len(s.calls) > 0)
		}
	}
	if ch.Usage != nil {
		// Some servers repeat running totals on every chunk: the last wins.
		s.usage = ch.Usage.usage()
	}
	return nil
}

func retryableCode(code string) bool {
	switch code {
	case "rate_limit_exceeded", "rate_limit_error", "server_error", "overloaded", "overloaded_error", "api_error", "timeout":
		return true
	}
	return false
}

func mapFinish(r string, calls bool) string {
	switch r {
	case "function_call":
		return "tool_calls"
	case "stop", "end_turn":
		if calls {
			return "tool_calls" // some servers say "stop" after tool calls
		}
		return "stop"
	case "max_tokens":
		return "length"
	}
	return r
}

func (s *streamState) delta(d *wireDelta) error {
	for _, r := range [...]*string{d.ReasoningContent, d.Reasoning} {
		if r != nil && *r != "" {
			if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: *r}); err != nil {
				return err
			}
		}
	}
	if d.Content.reasoning != "" {
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkReasoning, Text: d.Content.reasoning}); err != nil {
			return err
		}
	}
	if d.Content.text != "" {
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkText, Text: d.Content.text}); err != nil {
			return err
		}
	}
	if d.Refusal != nil && *d.Refusal != "" {
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkText, Text: *d.Refusal}); err != nil {
			return err
		}
	}
	for _, a := range d.Annotations {
		var probe struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(a, &probe)
		if s.annotations == nil {
			s.annotations = map[string][]json.RawMessage{}
		}
		if _, seen := s.annotations[probe.Type]; !seen {
			s.annTypes = append(s.annTypes, probe.Type)
		}
		s.annotations[probe.Type] = append(s.annotations[probe.Type], a)
	}
	for i := range d.ToolCalls {
		if err := s.toolDelta(&d.ToolCalls[i]); err != nil {
			return err
		}
	}
	return nil
}

// toolDelta applies one tool_calls entry of a delta.
func (s *streamState) toolDelta(td *wireToolDelta) error {
	c, idx := s.find(td)
	if c == nil {
		// A new call: the calls before it are complete (unless their
		// arguments are still unfinished JSON, as when a server
		// interleaves calls).
		if err := s.completeCalls(true); err != nil {
			return err
		}
		c = &call{}
		s.calls = append(s.calls, c)
		idx = len(s.calls) - 1
		if td.Index != nil {
			c.wireIndex, c.hasIndex = *td.Index, true
			if c.wireIndex != idx {
				if s.byIndex == nil {
					s.byIndex = map[int]int{}
				}
				s.byIndex[c.wireIndex] = idx
			}
		}
		s.setID(c, idx, td.ID)
	}
	if c.done {
		if td.Function.Arguments == "" && td.Function.Name == "" {
			return nil
		}
		return s.invalid("tool call %d received arguments after it was complete", idx)
	}
	if c.id == "" && td.ID != "" {
		s.setID(c, idx, td.ID)
	}
	if c.name == "" && td.Function.Name != "" {
		c.name = td.Function.Name
	}
	frag := td.Function.Arguments
	c.args.WriteString(frag)
	c.scan.feed(frag)
	if !c.started {
		if c.name == "" {
			return nil // arguments are kept until the name arrives
		}
		c.started = true
		if c.id == "" {
			s.setID(c, idx, newCallID())
		}
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCallStart, Index: idx,
			ToolCall: toolrun.ToolCall{ID: c.id, Name: c.name}}); err != nil {
			return err
		}
		frag = c.args.String() // everything received so far
	}
	if !c.queued && c.scan.pending() {
		c.queued = true
		s.ready = append(s.ready, idx)
	}
	if frag == "" {
		return nil
	}
	return s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCallDelta, Index: idx,
		ToolCall: toolrun.ToolCall{ID: c.id, Name: c.name, Arguments: frag}})
}

// setID sets the id of call c, at position i.
func (s *streamState) setID(c *call, i int, id string) {
	c.id = id
	if id == "" || s.byID == nil {
		return
	}
	if j, ok := s.byID[id]; !ok || i < j {
		s.byID[id] = i
	}
}

// find returns the call a delta continues, or nil for a new call.
func (s *streamState) find(td *wireToolDelta) (*call, int) {
	s.visits++
	if td.Index != nil {
		w := *td.Index
		if w >= 0 && w < len(s.calls) && s.calls[w].hasIndex && s.calls[w].wireIndex == w {
			return s.calls[w], w
		}
		if i, ok := s.byIndex[w]; ok {
			return s.calls[i], i
		}
		return nil, 0
	}
	// No index (Mistral): a known id continues its call (the first with
	// that id), a new id starts a call, no id continues the last call.
	if td.ID != "" {
		if s.byID == nil {
			s.byID = make(map[string]int, len(s.calls))
			for i := len(s.calls) - 1; i >= 0; i-- {
				if id := s.calls[i].id; id != "" {
					s.byID[id] = i // the first call with id is written last
				}
			}
			s.visits += len(s.calls)
		}
		if i, ok := s.byID[td.ID]; ok {
			return s.calls[i], i
		}
		return nil, 0
	}
	if n := len(s.calls); n > 0 {
		return s.calls[n-1], n - 1
	}
	return nil, 0
}

// completeCalls yields ChunkToolCall, in order, for every call not yet
// complete; with onlyValid, only for those whose arguments are valid
// JSON. The arguments are not read again to know that: each call's
// argScan has followed them as they arrived. Only the calls on ready can
// have become valid, so with onlyValid only those are looked at; without
// it, the calls from open on.
func (s *streamState) completeCalls(onlyValid bool) error {
	if onlyValid {
		slices.Sort(s.ready)
		for _, i := range s.ready {
			s.visits++
			c := s.calls[i]
			c.queued = false
			if c.done || !c.scan.isValid(c.args.String()) {
				continue
			}
			if err := s.completeCall(i, c); err != nil {
				return err
			}
		}
		s.ready = s.ready[:0]
		for s.open < len(s.calls) && s.calls[s.open].done {
			s.visits++
			s.open++
		}
		return nil
	}
	for ; s.open < len(s.calls); s.open++ {
		s.visits++
		c := s.calls[s.open]
		if c.done {
			continue
		}
		if !c.started {
			return s.invalid("tool call %d has no function name", s.open)
		}
		if err := s.completeCall(s.open, c); err != nil {
			return err
		}
	}
	return nil
}

// completeCall yields ChunkToolCall for call c, at position i.
func (s *streamState) completeCall(i int, c *call) error {
	c.done = true
	args := c.args.String()
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	return s.emit(toolrun.Chunk{Type: toolrun.ChunkToolCall, Index: i,
		ToolCall: toolrun.ToolCall{ID: c.id, Name: c.name, Arguments: args}})
}

// end finishes the response: a [DONE] or the end of the body after a
// finish reason.
func (s *streamState) end() error {
	if s.finish == "" {
		// [DONE] without a finish reason: accept what was received.
		if err := s.completeCalls(false); err != nil {
			return noStop(err)
		}
		s.finish = mapFinish("stop", len(s.calls) > 0)
	}
	for _, typ := range s.annTypes {
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkProviderTool, ProviderTool: annotationTool(s.provider, typ, s.annotations[typ])}); err != nil {
			return noStop(err)
		}
	}
	if s.usage != nil {
		if err := s.emit(toolrun.Chunk{Type: toolrun.ChunkUsage, Usage: s.usage}); err != nil {
			return noStop(err)
		}
	}
	return noStop(s.emit(toolrun.Chunk{Type: toolrun.ChunkFinish, FinishReason: s.finish}))
}

func noStop(err error) error {
	if err == errStopped {
		return nil
	}
	return err
}

// parseCompletion handles a whole (non-streamed) chat.completion body, as
// servers that ignore "stream": true send it, of at most
// provhttp.MaxResponse bytes.
func parseCompletion(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error {
	b, err := provhttp.ReadResponse(provider, body)
	if err != nil {
		return err
	}
	b = bytes.TrimSpace(b) // OpenRouter may send whitespace before the body
	var ch wireChunk
	if err := json.Unmarshal(b, &ch); err != nil {
		return &toolrun.ProviderError{Provider: provider, Code: "invalid_response",
			Message: fmt.Sprintf("response is not JSON: %s", snippet(b)), Err: err}
	}
	s := &streamState{provider: provider, yield: yield}
	if len(ch.Choices) == 0 && ch.Error == nil {
		return s.invalid("response has no choices")
	}
	// A message's tool calls come whole and in order, without indexes.
	for i := range ch.Choices {
		if m := ch.Choices[i].Message; m != nil {
			for j := range m.ToolCalls {
				if m.ToolCalls[j].Index == nil {
					m.ToolCalls[j].Index = ptrInt(j)
				}
			}
		}
	}
	if err := s.chunk(&ch); err != nil {
		return noStop(err)
	}
	if s.finish == "" {
		s.finish = "stop"
	}
	return s.end()
}

func ptrInt(i int) *int { return &i }

// newCallID makes an id for a tool call a server sent without one.
func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// annotationTool reports the annotations of one type as a provider tool
// call: url_citation annotations come from a web search the server ran.
func annotationTool(provider, typ string, anns []json.RawMessage) *toolrun.ProviderToolCall {
	name := typ
	if typ == "url_citation" {
		name = "web_search"
	}
	result, _ := json.Marshal(anns)
	return &toolrun.ProviderToolCall{
		ID: "annotations_" + typ, Name: name, Type: typ, Provider: provider, Status: "completed",
		Result: string(result), Metadata: map[string]any{"count": len(anns)},
	}
}
