package anthropic

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/streamcheck"
)

// fuzzSeeds adds the recorded bodies of testdata whose names end in ext.
func fuzzSeeds(f *testing.F, ext string) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"+ext))
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata/*%s: %v", ext, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseStream feeds arbitrary bytes to the event-stream parser: it
// never panics, fails only with a ProviderError that says what was wrong,
// ends a stream it accepts with one finish, and yields nothing after its
// consumer stopped.
func FuzzParseStream(f *testing.F) {
	fuzzSeeds(f, ".sse")
	f.Fuzz(func(t *testing.T, body []byte) {
		streamcheck.Check(t, "anthropic", func(r io.Reader, yield func(toolrun.Chunk) bool) error {
			return parseStream("anthropic", r, yield)
		}, body)
	})
}

// FuzzParseWhole does the same for the parser of a whole (non-streamed)
// response body.
func FuzzParseWhole(f *testing.F) {
	fuzzSeeds(f, ".json")
	f.Fuzz(func(t *testing.T, body []byte) {
		streamcheck.Check(t, "anthropic", func(r io.Reader, yield func(toolrun.Chunk) bool) error {
			return parseMessage("anthropic", r, yield)
		}, body)
	})
}
