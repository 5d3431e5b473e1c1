package sandbox

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// A spinReader judges its polls in groups of spinGroup: when more than
// spinGroupMisses of a group ran out of budget, it reads without polling
// for a pause of at least spinPauseMin reads, twice the last pause (up to
// spinPauseMax); a group that passes halves the last pause. So a reader
// whose polls fail now and then pauses briefly, and one that keeps
// failing (on a machine whose CPUs are taken) seldom polls.
const (
	spinGroup       = 16
	spinGroupMisses = 4
	spinPauseMin    = 16
	spinPauseMax    = 4096
)

// spinReader reads a pipe, polling it before it waits (see newSpinReader).
// It is used by one goroutine at a time.
type spinReader struct {
	f      *os.File
	rc     syscall.RawConn
	budget time.Duration
	want   func() bool
	poll   func(fd uintptr) // r.wait, bound once so a read allocates nothing

	ready     bool // the last poll saw data (or could not ask)
	polls     int  // polls in the current group
	misses    int  // of which ran out of budget
	skip      int  // reads left without polling
	lastPause int  // the last pause, halved by each group that passes
}

// spinReaderFor makes a spinReader of f.
func spinReaderFor(f *os.File, budget time.Duration, want func() bool) io.Reader {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	r := &spinReader{f: f, rc: rc, budget: budget, want: want}
	r.poll = r.wait
	return r
}

func (r *spinReader) Read(p []byte) (int, error) {
	if len(p) > 0 && r.want() {
		if r.skip > 0 {
			r.skip--
		} else {
			r.ready = false
			if err := r.rc.Control(r.poll); err == nil {
				r.judge()
			}
		}
	}
	return r.f.Read(p)
}

// judge counts the last poll in its group and starts a pause after a group
// with too many misses.
func (r *spinReader) judge() {
	r.polls++
	if !r.ready {
		r.misses++
	}
	if r.polls < spinGroup {
		return
	}
	if r.misses > spinGroupMisses {
		r.lastPause = min(max(2*r.lastPause, spinPauseMin), spinPauseMax)
		r.skip = r.lastPause
	} else {
		r.lastPause /= 2
	}
	r.polls, r.misses = 0, 0
}

// wait returns when the pipe fd holds data, when the kernel cannot tell,
// or when the budget is spent, yielding between asks.
func (r *spinReader) wait(fd uintptr) {
	start := time.Now()
	for {
		var n int32
		_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		if errno != 0 || n > 0 {
			r.ready = true
			return
		}
		if time.Since(start) >= r.budget {
			return
		}
		runtime.Gosched()
	}
}
