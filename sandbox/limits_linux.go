//go:build linux

package sandbox

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// vmData returns the process's data segment size (VmData) in bytes.
func vmData() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmData:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb << 10
			}
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
