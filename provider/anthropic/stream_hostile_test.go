package anthropic

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/provhttp"
)

// fill is an endless reader of 'x' bytes.
type fill struct{}

func (fill) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'x'
	}
	return len(b), nil
}

// A whole message larger than the limit is reported as too large, not as
// a body that is not JSON.
func TestOversizedMessageIsReportedAsTooLarge(t *testing.T) {
	body := io.MultiReader(strings.NewReader(`{"type":"message","content":[{"type":"text","text":"`),
		io.LimitReader(fill{}, provhttp.MaxResponse), strings.NewReader(`"}],"stop_reason":"end_turn"}`))
	err := parseMessage("anthropic", body, func(toolrun.Chunk) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Equal(t, "response larger than 64 MiB", pe.Message)
}
