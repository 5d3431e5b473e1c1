package sandbox

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpinReaderPipes reads through a spinReader from a pipe the runtime's
// poller waits on (the host's end of a worker's stdout) and from a
// blocking one (a worker's stdin): data written after the budget is spent
// is read, and so is the end of the pipe.
func TestSpinReaderPipes(t *testing.T) {
	for _, blocking := range []bool{false, true} {
		pr, pw, err := os.Pipe()
		require.NoError(t, err)
		f := pr
		if blocking {
			fd, err := syscall.Dup(int(pr.Fd())) // Fd makes the pipe blocking
			require.NoError(t, err)
			f = os.NewFile(uintptr(fd), "dup")
			require.NoError(t, pr.Close())
		}
		r := newSpinReader(f, time.Microsecond, func() bool { return true })
		_, ok := r.(*spinReader)
		require.True(t, ok)
		go func() {
			time.Sleep(2 * time.Millisecond)
			_, _ = pw.Write([]byte("late"))
			time.Sleep(2 * time.Millisecond)
			_ = pw.Close()
		}()
		got, err := io.ReadAll(r)
		require.NoError(t, err)
		assert.Equal(t, "late", string(got), "blocking %v", blocking)
		require.NoError(t, f.Close())
	}
}
