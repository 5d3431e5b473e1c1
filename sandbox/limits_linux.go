//go:build linux

package sandbox

import (
	"os"
	"syscall"
)

// vmData returns the process's private writable memory (data and stack,
// the memory RLIMIT_DATA counts) in bytes, from /proc/self/statm, read
// with plain system calls into a fixed buffer (about 2 µs; parsing
// /proc/self/status cost 8).
func vmData() int64 {
	fd, err := syscall.Open("/proc/self/statm", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer syscall.Close(fd)
	var buf [128]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return 0
	}
	// size resident shared text lib data dt, in pages: the sixth.
	field, val := 0, int64(0)
	for _, c := range buf[:n] {
		switch {
		case c == ' ' || c == '\n':
			if field == 5 {
				return val * int64(os.Getpagesize())
			}
			field++
			val = 0
		case c >= '0' && c <= '9':
			val = val*10 + int64(c-'0')
		}
	}
	return 0
}

// setDataLimit lowers the worker's RLIMIT_DATA soft limit to its current
// data size plus limit and some headroom, so that any allocation far past
// the limit fails (and kills the worker) instead of being attempted. It
// returns a func restoring the previous limit.
func setDataLimit(limit int64) func() {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &old); err != nil {
		return func() {}
	}
	cur := uint64(vmData() + limit + 64<<20)
	if old.Max != ^uint64(0) && cur > old.Max {
		cur = old.Max
	}
	nl := syscall.Rlimit{Cur: cur, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, &nl); err != nil {
		return func() {}
	}
	return func() { _ = syscall.Setrlimit(syscall.RLIMIT_DATA, &old) }
}

func workerSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// peakRSS returns the most memory the exited process ps ever had resident,
// in bytes (Linux counts the rusage's maxrss in kibibytes); -1 when ps does
// not say.
func peakRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return -1
	}
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return -1
	}
	return ru.Maxrss * 1024
}
