package anthropic

import (
	"testing"

	"github.com/toolrun/toolrun/internal/streamcheck"
)

// FuzzParseStream feeds arbitrary bytes to the event-stream parser: it
// never panics, fails only with a ProviderError that says what was wrong,
// ends a stream it accepts with one finish, and yields nothing after its
// consumer stopped (streamcheck.Check).
func FuzzParseStream(f *testing.F) {
	streamcheck.Fuzz(f, "anthropic", "testdata/*.sse", parseStream)
}

// FuzzParseWhole does the same for the parser of a whole (non-streamed)
// response body.
func FuzzParseWhole(f *testing.F) {
	streamcheck.Fuzz(f, "anthropic", "testdata/*.json", parseMessage)
}
