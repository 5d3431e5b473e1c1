package openai

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/provhttp"
)

// A delta whose "content" is an array of many small parts (as Mistral
// sends it) costs memory in proportion to its size: the parts are joined
// in one pass, not by copying the text so far for each part.
func TestManyContentPartsCostMemoryInProportionToTheirSize(t *testing.T) {
	const parts = 20000
	part := strings.Repeat("x", 24)
	var ev bytes.Buffer
	ev.WriteString(`data: {"choices":[{"index":0,"delta":{"content":[`)
	for i := range parts {
		if i > 0 {
			ev.WriteByte(',')
		}
		if i%2 == 0 {
			ev.WriteString(`{"type":"text","text":"` + part + `"}`)
		} else {
			ev.WriteString(`{"type":"thinking","thinking":[{"type":"text","text":"` + part + `"}]}`)
		}
	}
	ev.WriteString("]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	body := ev.Bytes()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var text, reasoning int
	err := parseStream("openai", bytes.NewReader(body), func(c toolrun.Chunk) bool {
		switch c.Type {
		case toolrun.ChunkText:
			text += len(c.Text)
		case toolrun.ChunkReasoning:
			reasoning += len(c.Text)
		}
		return true
	})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, parts/2*len(part), text, "bytes of text")
	assert.Equal(t, parts/2*len(part), reasoning, "bytes of reasoning")
	// Joining by copying would allocate about parts²/2·24 bytes (2.4 GB
	// here); one pass allocates a small multiple of the body.
	alloc := after.TotalAlloc - before.TotalAlloc
	assert.Less(t, alloc, 32*uint64(len(body)), "bytes allocated to parse a %d-byte body", len(body))
}

// fill is an endless reader of 'x' bytes.
type fill struct{}

func (fill) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'x'
	}
	return len(b), nil
}

// A whole completion larger than the limit is reported as too large, not
// as a body that is not JSON.
func TestOversizedCompletionIsReportedAsTooLarge(t *testing.T) {
	body := io.MultiReader(strings.NewReader(`{"choices":[{"index":0,"message":{"content":"`),
		io.LimitReader(fill{}, provhttp.MaxResponse), strings.NewReader(`"},"finish_reason":"stop"}]}`))
	err := parseCompletion("openai", body, func(toolrun.Chunk) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Equal(t, "response larger than 64 MiB", pe.Message)
}
