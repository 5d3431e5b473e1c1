package toolrun

import "sync/atomic"

// Execution describes the active run of a thread, as seen by a tool
// (ThreadState.Execution). It is safe for concurrent use.
type Execution struct {
	// StepCount is the number of completed model steps of this execution (0
	// while the first response's tools run).
	StepCount int
	// Side is the acting side, "a" or "b" ("" for a bare executor run).
	Side string

	stopped atomic.Bool
	// stopStored says the stop record was stored with the result of the
	// call during which Stop was called.
	stopStored atomic.Bool
}

// Stop ends the execution: the calls still queued in the running batch are
// dropped without results, and no further model step starts. A runtime
// turn ended so answers StopStopped, and stores a silent system message
// (ErrorCode StopStopped, never sent to a model) after the batch's results
// that records the end, so that Runtime.Resume does not run the dropped
// calls or ask the model again. When Stop is called while a call runs (the
// usual case: the tool calls it), the record is stored with that call's
// result, in one append, so that no crash can keep one without the other.
// Stop inside a prompt tool's sub-prompt ends only the sub-prompt.
func (e *Execution) Stop() { e.stopped.Store(true) }

// Stopped reports whether Stop was called.
func (e *Execution) Stopped() bool { return e != nil && e.stopped.Load() }
