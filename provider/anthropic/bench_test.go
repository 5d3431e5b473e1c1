package anthropic

import (
	"bytes"
	"os"
	"testing"

	"github.com/toolrun/toolrun"
)

// BenchmarkParseStream parses a recorded stream with a text block and three
// tool calls (testdata/parallel_tools.sse, 20 events) from memory.
func BenchmarkParseStream(b *testing.B) {
	payload, err := os.ReadFile("testdata/parallel_tools.sse")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		calls := 0
		err := parseStream("anthropic", bytes.NewReader(payload), func(c toolrun.Chunk) bool {
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
