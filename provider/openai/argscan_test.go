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

// argTexts are arguments, valid JSON or not, that the argScan tests feed
// in pieces.
var argTexts = []string{
	``, `  `, `{}`, `[]`, ` {"a": 1} `, `{"a":"x\"]}"}`, `{"a":[1,2,{"b":null}]}` + "\n\t",
	`[1,]`, `[}`, `{]`, `]`, `}`, `{} {}`, `{}x`, `[] `, `[[[`, `{"a":`, `{"a":"\`,
	`"abc"`, `"a\\"`, `"a\\\"b"`, `"\u00e9"`, `"\x"`, "\"\x01\"", `"é€"`, "\"\xff\"", `{"é":"€"}`,
	`0`, `-0`, `-0.5e+10`, `12.75E-3 `, `01`, `1.`, `1.e5`, `-`, `--1`, `1e`, `1e+`, `1e+5`,
	`.5`, `+1`, `1 2`, `1x`, `0x10`, `1.5.5`, `1ee5`,
	`true`, `true `, `truex`, `tru`, `t`, `nul`, `null `, `null  x`, `false`, `fals`, `falsey`, `nan`,
	`"a" "b"`, `"a"x`, `"a" `, `[1] 2`,
}

// feedAndCompare feeds text to an argScan in pieces of the given sizes
// (repeated) and requires, after each piece, that isValid agrees with
// json.Valid about the text received so far.
func feedAndCompare(t *testing.T, text string, sizes []int) {
	t.Helper()
	var a argScan
	for i, k := 0, 0; i < len(text); k++ {
		n := max(sizes[k%len(sizes)], 1)
		end := min(i+n, len(text))
		a.feed(text[i:end])
		i = end
		got := text[:i]
		require.Equal(t, json.Valid([]byte(got)), a.isValid(got), "text %q received as %q, pieces of %v", got, text, sizes)
		// A second question without new bytes gets the same answer.
		require.Equal(t, json.Valid([]byte(got)), a.isValid(got), "text %q asked twice", got)
	}
}

func TestArgScanAgreesWithJSONValidOnEveryPrefix(t *testing.T) {
	for _, text := range argTexts {
		for _, sizes := range [][]int{{1}, {2}, {3}, {1, 4}, {len(text)}} {
			feedAndCompare(t, text, sizes)
		}
	}
	var a argScan
	assert.False(t, a.isValid(""), "no arguments at all are not valid JSON")
}

// FuzzArgScan checks that an argScan agrees with json.Valid about every
// text received in pieces, whatever the text and its pieces.
func FuzzArgScan(f *testing.F) {
	for i, text := range argTexts {
		f.Add(text, uint8(i))
	}
	f.Fuzz(func(t *testing.T, text string, cut uint8) {
		feedAndCompare(t, text, []int{int(cut%7) + 1, int(cut/7%5) + 1})
	})
}

// toolEvent returns one stream event with a tool call delta.
func toolEvent(index int, id, name, args string) string {
	d := map[string]any{"index": index, "function": map[string]any{"name": name, "arguments": args}}
	if id != "" {
		d["id"] = id
	}
	b, err := json.Marshal(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{d}}}}})
	if err != nil {
		panic(err)
	}
	return "data: " + string(b) + "\n\n"
}

// parseWork parses stream and returns the complete calls it yielded and
// the bytes its argument scans read: those fed to them and those
// json.Valid read.
func parseWork(t *testing.T, stream string) (calls []toolrun.ToolCall, fed, validated int) {
	t.Helper()
	s := &streamState{provider: "openai", yield: func(c toolrun.Chunk) bool {
		if c.Type == toolrun.ChunkToolCall {
			calls = append(calls, c.ToolCall)
		}
		return true
	}}
	require.NoError(t, s.parse(strings.NewReader(stream)))
	for _, c := range s.calls {
		fed += c.scan.fed
		validated += c.scan.validated
	}
	return calls, fed, validated
}

func TestUnfinishedArgumentsAreNotRescannedForEachNewCall(t *testing.T) {
	const n = 100
	stream := string(unfinishedCallsStream(n))
	calls, fed, validated := parseWork(t, stream)
	require.Len(t, calls, n)
	for i, c := range calls {
		assert.Equal(t, fmt.Sprintf("c%d", i), c.ID)
		assert.Equal(t, strings.Repeat("[", 4096), c.Arguments)
	}
	assert.Equal(t, n*4096, fed, "each byte of the arguments is scanned once")
	assert.Zero(t, validated, "arguments that never close are never given to json.Valid")
}

func TestGrowingCallIsNotRescannedForEachNewCall(t *testing.T) {
	// Call 0 is large; between the calls that follow it, it grows by one
	// byte. A check of call 0 at each new call would read it n times.
	const n = 200
	cases := []struct {
		name, first, grow string
		maxValidated      int // beyond the bytes of the other calls
	}{
		// Never closed: never given to json.Valid.
		{"unfinished", "[" + strings.Repeat("0,", 2000), "0", 0},
		// Closed but invalid: given to json.Valid once; the white space
		// that follows cannot make it valid.
		{"closed but invalid", "[" + strings.Repeat("0,", 2000) + "]", " ", 2 + 4000},
		// In a string: never given to json.Valid.
		{"in a string", `{"a":"` + strings.Repeat("x", 4000), "]", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString(toolEvent(0, "c0", "f", tc.first))
			want := tc.first
			for i := 1; i <= n; i++ {
				b.WriteString(toolEvent(i, fmt.Sprintf("c%d", i), "f", "{}"))
				b.WriteString(toolEvent(0, "", "", tc.grow))
				want += tc.grow
			}
			b.WriteString("data: [DONE]\n\n")
			calls, fed, validated := parseWork(t, b.String())
			require.Len(t, calls, n+1)
			// The calls of "{}" are complete as the next one starts; call 0
			// only at the end, before the last call.
			assert.Equal(t, "c0", calls[n-1].ID)
			assert.Equal(t, want, calls[n-1].Arguments, "the arguments of call 0")
			assert.Equal(t, len(want)+2*n, fed, "each byte of the arguments is scanned once")
			assert.LessOrEqual(t, validated, tc.maxValidated+2*n, "bytes given to json.Valid")
		})
	}
}
