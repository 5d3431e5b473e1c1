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

// TestSpinReaderPauses checks the policy that stops polling after groups
// of polls that mostly ran out of budget: pauses double while groups keep
// failing and halve as groups pass.
func TestSpinReaderPauses(t *testing.T) {
	r := &spinReader{}
	group := func(misses int) {
		r.skip = 0 // the pause is over
		for i := 0; i < spinGroup; i++ {
			r.ready = i >= misses
			r.judge()
		}
	}
	group(spinGroupMisses)
	assert.Zero(t, r.skip, "a group with few misses")
	group(spinGroupMisses + 1)
	assert.Equal(t, spinPauseMin, r.skip)
	group(spinGroup)
	assert.Equal(t, 2*spinPauseMin, r.skip, "a second bad group doubles the pause")
	for i := 0; i < 20; i++ {
		group(spinGroup)
	}
	assert.Equal(t, spinPauseMax, r.skip)
	group(0)
	assert.Zero(t, r.skip)
	group(0)
	group(spinGroup)
	assert.Equal(t, spinPauseMax/2, r.skip, "two good groups halve the pause twice, a bad one doubles it")
	for i := 0; i < 20; i++ {
		group(0)
	}
	group(spinGroup)
	assert.Equal(t, spinPauseMin, r.skip, "after many good groups the pause starts short again")
}
