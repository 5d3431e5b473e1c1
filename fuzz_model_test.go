package toolrun_test

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// modelChunkTypes are the chunk types a fuzzed response is made of.
var modelChunkTypes = []toolrun.ChunkType{toolrun.ChunkText, toolrun.ChunkReasoning, toolrun.ChunkToolCallStart,
	toolrun.ChunkToolCallDelta, toolrun.ChunkToolCall, toolrun.ChunkProviderTool, toolrun.ChunkUsage, toolrun.ChunkFinish}

// modelNames are the tool names a fuzzed call picks from before its own
// bytes: the two tools offered, a tool not offered, and names no tool may
// have.
var modelNames = []string{"note", "echo", "missing", "", "bad name!", "echo\x00"}

// decodeChunks reads a model response from fuzz bytes. Each chunk is an op
// byte, an index byte (signed) and its strings, each a length byte and that
// many bytes (any bytes: ids, names and text need not be valid UTF-8). The
// op's bits 0–2 pick the type, bits 3–5 a call's name among modelNames, bit
// 6 has the call name itself (a string before its id and arguments), bit 7
// scales the index far out.
func decodeChunks(data []byte) []toolrun.Chunk {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	str := func() string {
		n := min(int(next()%48), len(data))
		s := string(data[:n])
		data = data[n:]
		return s
	}
	var out []toolrun.Chunk
	for len(data) > 0 && len(out) < 64 {
		op := next()
		ch := toolrun.Chunk{Type: modelChunkTypes[int(op)%len(modelChunkTypes)], Index: int(int8(next()))}
		if op&0x80 != 0 {
			ch.Index *= 1 << 20
		}
		switch ch.Type {
		case toolrun.ChunkText, toolrun.ChunkReasoning:
			ch.Text = str()
		case toolrun.ChunkToolCallStart, toolrun.ChunkToolCallDelta, toolrun.ChunkToolCall:
			name := modelNames[int(op>>3&7)%len(modelNames)]
			if op&0x40 != 0 {
				name = str()
			}
			ch.ToolCall = toolrun.ToolCall{ID: str(), Name: name, Arguments: str()}
		case toolrun.ChunkProviderTool:
			ch.ProviderTool = &toolrun.ProviderToolCall{ID: str(), Name: str(), Status: str()}
		case toolrun.ChunkUsage:
			ch.Usage = &toolrun.Usage{InputTokens: int(int8(next())), OutputTokens: int(next())}
		case toolrun.ChunkFinish:
			ch.FinishReason = str()
		}
		out = append(out, ch)
	}
	return out
}

// chunkBytes encodes one chunk as decodeChunks reads it: op (its type, its
// name bits and flags), the index byte and the strings, each after its
// length.
func chunkBytes(op byte, index int8, strs ...string) []byte {
	out := []byte{op, byte(index)}
	for _, s := range strs {
		out = append(out, byte(len(s)))
		out = append(out, s...)
	}
	return out
}

// echoArgs are the arguments of the echo tool FuzzModelResponse offers
// (its note tool takes noteArgs, and streams the note as its progress
// argument).
type echoArgs struct {
	X string `json:"x"`
}

// FuzzModelResponse streams an arbitrary response from the model: chunks
// of any type in any order, with any index, id, name and arguments. Send
// never panics nor hangs, and the thread it leaves holds text that is
// valid UTF-8 and, when Send succeeded, exactly one result for every call
// of every assistant message, under call ids that are neither empty nor
// repeated.
func FuzzModelResponse(f *testing.F) {
	const (
		text, start, delta, call, finish = 0, 2, 3, 4, 7
		nameEcho, nameNote               = 1 << 3, 0 // the name bits of a call's op
	)
	for _, seed := range [][]byte{
		{},
		chunkBytes(text, 0, "hello"),
		// A start, two deltas and the complete call of "echo", then finish.
		slices.Concat(chunkBytes(start|nameEcho, 0, "c1", ""), chunkBytes(delta|nameEcho, 0, "", `{"x":`),
			chunkBytes(delta|nameEcho, 0, "", `"y"}`), chunkBytes(call|nameEcho, 0, "c1", `{"x":"y"}`), chunkBytes(finish, 0, "stop")),
		// Two calls under one id, at indices far apart.
		slices.Concat(chunkBytes(call|nameEcho, 1, "a", "{}"), chunkBytes(call|nameEcho|0x80, 127, "a", "{}")),
		// A call of "note" whose progress argument streams in pieces.
		slices.Concat(chunkBytes(start|nameNote, 0, "n", ""), chunkBytes(delta|nameNote, 0, "", `{"note":"ab`),
			chunkBytes(delta|nameNote, 0, "", `c"}`)),
		// A call named by its own bytes, which are not UTF-8.
		chunkBytes(call|0x40, -1, "\xff\xfe", "\xfd", "{}"),
	} {
		f.Add(seed)
	}
	echo := &toolrun.Func[echoArgs]{Name: "echo", Execute: func(_ context.Context, _ toolrun.ThreadState, a echoArgs) (toolrun.Result, error) {
		return toolrun.Text("echo: " + a.X), nil
	}}
	note := &toolrun.Func[noteArgs]{Name: "note", ProgressArgument: "note", Execute: func(context.Context, toolrun.ThreadState, noteArgs) (toolrun.Result, error) {
		return toolrun.Text("noted"), nil
	}}
	var response []toolrun.Chunk
	prov := funcProvider(func(_ context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
		chunks := response
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role != toolrun.RoleUser {
			chunks = []toolrun.Chunk{{Type: toolrun.ChunkText, Text: "done"}} // after the calls: answer
		}
		return func(yield func(toolrun.Chunk, error) bool) {
			for _, ch := range chunks {
				if !yield(ch, nil) {
					return
				}
			}
		}
	})
	reg := toolrun.NewRegistry(nil)
	err := reg.Register(&toolrun.Model{Name: "m", Provider: prov, ID: "x"},
		&toolrun.Agent{Name: "agent", SideA: toolrun.Side{Prompt: "p", MaxSteps: 4}, SideB: toolrun.Side{Human: true}},
		&toolrun.Prompt{Name: "p", Model: "m", Text: "sys", IncludeChat: true, IncludePastTools: true,
			Tools: []toolrun.PromptTool{toolrun.Use("echo"), toolrun.Use("note")}},
		echo, note)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		response = decodeChunks(data)
		// A store of its own: one kept across the inputs would grow by a
		// thread each, and slow the collector.
		rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{Store: toolrun.NewMemoryStore()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		th, err := rt.NewThread(ctx, "agent", nil)
		if err != nil {
			t.Fatal(err)
		}
		_, sendErr := rt.Send(ctx, th.ID, "go")
		if ctx.Err() != nil {
			t.Fatalf("Send did not end within 10 s: %v", sendErr)
		}
		page, err := rt.Store().ListMessages(context.Background(), th.ID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
		if err != nil {
			t.Fatal(err)
		}
		calls, results := map[string]int{}, map[string]int{}
		for _, m := range page.Messages {
			for _, s := range []string{m.Content, m.Name, m.ToolCallID, m.ID} {
				if !utf8.ValidString(s) {
					t.Fatalf("stored message %s holds text that is not UTF-8: %q", m.ID, s)
				}
			}
			for _, c := range m.ToolCalls {
				if !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) || !utf8.ValidString(c.Arguments) {
					t.Fatalf("stored call holds text that is not UTF-8: %+v", c)
				}
				if m.Role == toolrun.RoleAssistant {
					calls[c.ID]++
				}
			}
			if m.Role == toolrun.RoleTool {
				results[m.ToolCallID]++
			}
		}
		if sendErr != nil {
			return
		}
		for id, n := range calls {
			if id == "" || n != 1 {
				t.Fatalf("call id %q appears in %d calls", id, n)
			}
			if results[id] != 1 {
				t.Fatalf("call %q has %d results", id, results[id])
			}
		}
		for id, n := range results {
			if calls[id] != 1 || n != 1 {
				t.Fatalf("%d results for call %q, which %d assistant calls made", n, id, calls[id])
			}
		}
	})
}
