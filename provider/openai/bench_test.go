package openai

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
)

// BenchmarkParseStream parses a recorded stream with three tool calls
// (testdata/parallel_tools.sse, 14 events) from memory.
func BenchmarkParseStream(b *testing.B) {
	payload, err := os.ReadFile("testdata/parallel_tools.sse")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		calls := 0
		err := parseStream("openai", bytes.NewReader(payload), func(c toolrun.Chunk) bool {
			if c.Type == toolrun.ChunkToolCall {
				calls++
			}
			return true
		})
		if err != nil || calls != 3 {
			b.Fatalf("err %v, %d calls", err, calls)
		}
	}
}

// unfinishedCallsStream returns a stream of n tool calls whose arguments
// are each 4 KiB of "[", JSON that never ends, as a hostile or broken
// server might send.
func unfinishedCallsStream(n int) []byte {
	var b bytes.Buffer
	args := strings.Repeat("[", 4096)
	for i := range n {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"c%d\",\"function\":{\"name\":\"f\",\"arguments\":%q}}]}}]}\n\n", i, i, args)
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkParseStreamUnfinishedCalls parses a 4 MiB stream of 1000 tool
// calls whose arguments never become valid JSON. Its cost should be in
// proportion to the stream's size, like that of any other stream.
func BenchmarkParseStreamUnfinishedCalls(b *testing.B) {
	payload := unfinishedCallsStream(1000)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		calls := 0
		err := parseStream("openai", bytes.NewReader(payload), func(c toolrun.Chunk) bool {
			if c.Type == toolrun.ChunkToolCall {
				calls++
			}
			return true
		})
		if err != nil || calls != 1000 {
			b.Fatalf("err %v, %d calls", err, calls)
		}
	}
}
