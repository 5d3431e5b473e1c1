package sandbox

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// spinReader reads a pipe, polling it before it waits (see newSpinReader).
// It is used by one goroutine at a time.
type spinReader struct {
	f      *os.File
	rc     syscall.RawConn
	budget time.Duration
	want   func() bool
	poll   func(fd uintptr) // r.wait, bound once so a read allocates nothing

	ready bool // the last poll saw data (or could not ask)
	rule  spinRule
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
	if len(p) > 0 && r.want() && r.rule.poll() {
		r.ready = false
		if err := r.rc.Control(r.poll); err == nil {
			r.rule.count(r.ready)
		}
	}
	return r.f.Read(p)
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
