// Package streamcheck checks a provider's response parser against what the
// runtime relies on, for the providers' fuzz tests.
package streamcheck

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
)

// Parser reads a response body of the named provider and yields its
// chunks, as the providers' stream and whole-response parsers do.
type Parser func(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error

// Fuzz fuzzes parse, for provider, with Check, seeded with the files that
// match pattern (recorded response bodies).
func Fuzz(f *testing.F, provider, pattern string, parse Parser) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds match %s: %v", pattern, err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) { Check(t, provider, parse, body) })
}

// Check runs parse over body twice, and fails t where it breaks what the
// runtime relies on: its error is nil or a *toolrun.ProviderError of the
// provider that says what was wrong; a parse without error ends with
// exactly one ChunkFinish; and once yield returns false, parse yields no
// more and returns nil.
func Check(t *testing.T, provider string, parse Parser, body []byte) {
	t.Helper()
	var chunks []toolrun.Chunk
	err := parse(provider, bytes.NewReader(body), func(c toolrun.Chunk) bool {
		chunks = append(chunks, c)
		return true
	})
	if err != nil {
		var pe *toolrun.ProviderError
		if !errors.As(err, &pe) {
			t.Fatalf("the error is a %T, not a *toolrun.ProviderError: %v", err, err)
		}
		if pe.Provider != provider || strings.TrimSpace(pe.Message) == "" {
			t.Fatalf("the error names provider %q (want %q) and says %q", pe.Provider, provider, pe.Message)
		}
	} else {
		finishes, last := 0, toolrun.ChunkType("none")
		for _, c := range chunks {
			if c.Type == toolrun.ChunkFinish {
				finishes++
			}
			last = c.Type
		}
		if finishes != 1 || last != toolrun.ChunkFinish {
			t.Fatalf("a parse without error yielded %d finish chunks, the last chunk being %q", finishes, last)
		}
	}
	if len(chunks) == 0 {
		return
	}
	// Stopped at its first chunk, it yields no more.
	yields := 0
	err = parse(provider, bytes.NewReader(body), func(toolrun.Chunk) bool {
		yields++
		return false
	})
	if yields != 1 {
		t.Fatalf("parse yielded %d chunks after yield returned false", yields-1)
	}
	if err != nil {
		t.Fatalf("parse stopped by its consumer returned %v", err)
	}
}
