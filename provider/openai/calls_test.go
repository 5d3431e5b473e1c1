package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

// deltaEvent returns one stream event with the tool call delta d.
func deltaEvent(d map[string]any) string {
	b, err := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{d}}}}})
	if err != nil {
		panic(err)
	}
	return "data: " + string(b) + "\n\n"
}

// toolChunks parses stream and returns its tool call chunks as
// "<type> <index> <id> <arguments>" lines.
func toolChunks(t *testing.T, stream string) []string {
	t.Helper()
	var out []string
	err := parseStream("openai", strings.NewReader(stream), func(c toolrun.Chunk) bool {
		switch c.Type {
		case toolrun.ChunkToolCallStart, toolrun.ChunkToolCallDelta, toolrun.ChunkToolCall:
			out = append(out, fmt.Sprintf("%s %d %s %s", c.Type, c.Index, c.ToolCall.ID, c.ToolCall.Arguments))
		}
		return true
	})
	require.NoError(t, err)
	return out
}

func TestDeltasWithoutIndexContinueTheCallOfTheirIDOrTheLastCall(t *testing.T) {
	fn := func(name, args string) map[string]any { return map[string]any{"name": name, "arguments": args} }
	stream := deltaEvent(map[string]any{"id": "a", "function": fn("f", `{"x":`)}) +
		deltaEvent(map[string]any{"function": fn("", `1}`)}) + // no id: the last call
		deltaEvent(map[string]any{"id": "b", "function": fn("g", `[`)}) +
		deltaEvent(map[string]any{"id": "a", "function": fn("", ``)}) + // complete already: ignored
		deltaEvent(map[string]any{"id": "b", "function": fn("", `]`)}) +
		"data: [DONE]\n\n"
	assert.Equal(t, []string{
		"tool_call_start 0 a ", "tool_call_delta 0 a {\"x\":", "tool_call_delta 0 a 1}",
		"tool_call 0 a {\"x\":1}",
		"tool_call_start 1 b ", "tool_call_delta 1 b [", "tool_call_delta 1 b ]",
		"tool_call 1 b []",
	}, toolChunks(t, stream))
}

func TestIDGivenLaterFindsTheFirstCallWithIt(t *testing.T) {
	fn := func(name, args string) map[string]any { return map[string]any{"name": name, "arguments": args} }
	stream := deltaEvent(map[string]any{"index": 0, "function": fn("", `{`)}) + // no name yet: not started
		deltaEvent(map[string]any{"index": 1, "id": "x", "function": fn("g", `{}`)}) +
		deltaEvent(map[string]any{"index": 0, "id": "x", "function": fn("f", `}`)}) + // call 0 takes id x
		deltaEvent(map[string]any{"id": "x", "function": fn("", ` `)}) + // no index: the first call with id x
		"data: [DONE]\n\n"
	assert.Equal(t, []string{
		"tool_call_start 1 x ", "tool_call_delta 1 x {}",
		"tool_call_start 0 x ", "tool_call_delta 0 x {}", "tool_call_delta 0 x  ",
		"tool_call 0 x {} ", "tool_call 1 x {}",
	}, toolChunks(t, stream))

	// The same after a delta without an index has looked up an id.
	stream = deltaEvent(map[string]any{"index": 0, "function": fn("", `{`)}) +
		deltaEvent(map[string]any{"id": "y", "function": fn("g", `{}`)}) + // no index, a new id: a new call
		deltaEvent(map[string]any{"index": 0, "id": "y", "function": fn("f", `}`)}) +
		deltaEvent(map[string]any{"id": "y", "function": fn("", ` `)}) +
		"data: [DONE]\n\n"
	assert.Equal(t, []string{
		"tool_call_start 1 y ", "tool_call_delta 1 y {}",
		"tool_call_start 0 y ", "tool_call_delta 0 y {}", "tool_call_delta 0 y  ",
		"tool_call 0 y {} ", "tool_call 1 y {}",
	}, toolChunks(t, stream))
}

func TestWorkOnCallsGrowsWithTheirNumberNotItsSquare(t *testing.T) {
	// find runs for each delta, completeCalls at each new call and at
	// each finish reason; if either looked at every call each time, they
	// would make about n*n/2 visits here.
	const n = 3000
	fn := func(args string) map[string]any { return map[string]any{"name": "f", "arguments": args} }
	build := func(event func(i int) string, tail string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(event(i))
		}
		b.WriteString(tail)
		b.WriteString("data: [DONE]\n\n")
		return b.String()
	}
	cases := []struct {
		name, stream string
		events       int
	}{
		{"unfinished calls with an index", build(func(i int) string {
			return deltaEvent(map[string]any{"index": i, "id": fmt.Sprintf("c%d", i), "function": fn("[")})
		}, ""), n},
		{"unfinished calls with an id only", build(func(i int) string {
			return deltaEvent(map[string]any{"id": fmt.Sprintf("c%d", i), "function": fn("[")})
		}, ""), n},
		{"complete calls, then many finish reasons", build(func(i int) string {
			return deltaEvent(map[string]any{"index": i, "function": fn("{}")})
		}, strings.Repeat("data: {\"choices\":[{\"index\":0,\"finish_reason\":\"stop\"}]}\n\n", n)), 2 * n},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			s := &streamState{provider: "openai", yield: func(c toolrun.Chunk) bool {
				if c.Type == toolrun.ChunkToolCall {
					calls++
				}
				return true
			}}
			require.NoError(t, s.parse(strings.NewReader(tc.stream)))
			assert.Equal(t, n, calls)
			assert.LessOrEqual(t, s.visits, 3*tc.events, "calls looked at by find and completeCalls")
		})
	}
}
