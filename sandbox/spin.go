package sandbox

import (
	"io"
	"os"
	"time"
)

// DefaultSpinWait is the default of RunnerOptions.SpinWait: how long a
// side of a worker's pipes that expects a frame shortly polls the pipe
// before it sleeps.
const DefaultSpinWait = 50 * time.Microsecond

// spinEnv names the environment variable that gives a worker its spin
// budget (a time.Duration string); absent or not positive, the worker does
// not spin.
const spinEnv = "TOOLRUN_SANDBOX_SPIN_WAIT"

// Polling before sleeping
//
// A reader blocked on an empty pipe sleeps, and the write that wakes it
// pays for the wake-up of a sleeping thread, often on an idle CPU, which
// on a virtual machine means an exit to the hypervisor: tens of
// microseconds, more than the work of a bridged call. A side that expects
// an answer shortly therefore polls the pipe first. spinReader asks the
// kernel how many bytes the pipe holds, yielding to other goroutines
// between asks, until data is there or its budget is spent, and then
// reads as a plain read would (blocking, or parked on the runtime's
// poller), so a closed or failing pipe still ends the read with the same
// error, at the latest one budget later. It polls only while want reports
// that an answer is expected, once per read.
//
// Polling pays only while the other side runs on another CPU. When the
// CPUs are taken (by other processes, or the two sides share one), a
// polling side keeps the CPU from the very process whose answer it waits
// for, and runs out of budget. So a reader judges its polls in groups: when
// more than a quarter of a group ran out, it reads without polling for a
// while, twice as long each time a group fails again and half as long
// each time one passes.

// newSpinReader returns a reader of f that polls for up to budget, while
// want reports true, before it waits for data; it returns f itself when
// budget is not positive or the platform cannot poll f. want is called by
// the reading goroutine before each read of the pipe.
func newSpinReader(f *os.File, budget time.Duration, want func() bool) io.Reader {
	if budget <= 0 {
		return f
	}
	return spinReaderFor(f, budget, want)
}

// spinWaitFromEnv reads a worker's spin budget from its environment.
func spinWaitFromEnv() time.Duration {
	d, err := time.ParseDuration(os.Getenv(spinEnv))
	if err != nil || d < 0 {
		return 0
	}
	return d
}
