//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
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

// oomKills returns the kernel's count of the processes its out-of-memory
// killer has killed (the oom_kill line of /proc/vmstat, which counts the
// kills of every cgroup too), or -1 when it cannot be read.
func oomKills() int64 {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
