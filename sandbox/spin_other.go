//go:build !linux

package sandbox

import (
	"io"
	"os"
	"time"
)

// spinReaderFor returns f: pipes are not polled on this platform.
func spinReaderFor(f *os.File, _ time.Duration, _ func() bool) io.Reader { return f }
