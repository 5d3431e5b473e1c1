package sandbox

import (
	"io"
	"os"
	"sync"
	"time"
)

// DefaultSpinWait is the default of RunnerOptions.SpinWait: how long a
// side that expects an answer shortly (a frame on a worker's pipe, an
// in-process run's settlement, the next run) polls for it before it
// sleeps.
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
// each time one passes (spinRule).
//
// In-process runs poll the same way, with the same budget and rule, where
// a goroutine would otherwise be parked and woken: see goEngine and
// Run.Wait.

// A spinRule judges polls in groups of spinGroup: when more than
// spinGroupMisses of a group ran out of budget, the waits that follow do
// not poll, for a pause of at least spinPauseMin waits, twice the last
// pause (up to spinPauseMax); a group that passes halves the last pause.
// So a waiter whose polls fail now and then pauses briefly, and one that
// keeps failing (on a machine whose CPUs are taken) seldom polls.
const (
	spinGroup       = 16
	spinGroupMisses = 4
	spinPauseMin    = 16
	spinPauseMax    = 4096
)

// spinRule is the state of that judgement. Its zero value polls.
type spinRule struct {
	polls     int // polls in the current group
	misses    int // of which ran out of budget
	skip      int // waits left without polling
	lastPause int // the last pause, halved by each group that passes
}

// poll reports whether the next wait should poll; a wait that should not
// counts toward the pause.
func (s *spinRule) poll() bool {
	if s.skip > 0 {
		s.skip--
		return false
	}
	return true
}

// count counts a poll that found what it waited for (hit) or ran out of
// budget, and starts a pause after a group with too many misses.
func (s *spinRule) count(hit bool) {
	s.polls++
	if !hit {
		s.misses++
	}
	if s.polls < spinGroup {
		return
	}
	if s.misses > spinGroupMisses {
		s.lastPause = min(max(2*s.lastPause, spinPauseMin), spinPauseMax)
		s.skip = s.lastPause
	} else {
		s.lastPause /= 2
	}
	s.polls, s.misses = 0, 0
}

// sharedSpinRule is a spinRule for waiters on several goroutines.
type sharedSpinRule struct {
	mu   sync.Mutex
	rule spinRule
}

func (s *sharedSpinRule) poll() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rule.poll()
}

func (s *sharedSpinRule) count(hit bool) {
	s.mu.Lock()
	s.rule.count(hit)
	s.mu.Unlock()
}

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
