//go:build linux

package sandbox

import (
	"bufio"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
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

// dataSize estimates the data segment size without reading
// /proc/self/status on every run (which cost about 8 µs): it reads it
// every 64th call and adds to it how much more memory the Go runtime has
// mapped since, which is where a pure Go process's data grows.
var dataSize struct {
	mu           sync.Mutex
	calls        int
	base, mapped int64
}

var mappedSample = []metrics.Sample{{Name: "/memory/classes/total:bytes"}}

func goMapped() int64 {
	s := []metrics.Sample{{Name: mappedSample[0].Name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

func estimatedVmData() int64 {
	ds := &dataSize
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.calls%64 == 0 {
		ds.base, ds.mapped = vmData(), goMapped()
	}
	ds.calls++
	if grown := goMapped() - ds.mapped; grown > 0 {
		return ds.base + grown
	}
	return ds.base
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
	cur := uint64(estimatedVmData() + limit + 64<<20)
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
