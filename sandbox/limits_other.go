//go:build !linux

package sandbox

import "syscall"

// setDataLimit is a no-op where RLIMIT_DATA does not cover heap mappings;
// the Go memory limit and the heap watchdog still apply.
func setDataLimit(limit int64) func() { return func() {} }

func workerSysProcAttr() *syscall.SysProcAttr { return nil }

// oomKills returns -1: the kernel's count of out-of-memory kills is read
// on Linux only.
func oomKills() int64 { return -1 }
