//go:build !linux

package sandbox

import (
	"os"
	"syscall"
)

// setDataLimit is a no-op where RLIMIT_DATA does not cover heap mappings;
// the Go memory limit and the heap watchdog still apply.
func setDataLimit(limit int64) func() { return func() {} }

func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// peakRSS returns -1: where the unit of the rusage's maxrss is not known
// here, a worker's peak memory is not used to explain its death.
func peakRSS(*os.ProcessState) int64 { return -1 }
