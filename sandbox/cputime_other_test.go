//go:build !unix

package sandbox

import "time"

// processCPU returns 0: the platform's CPU time is not read.
func processCPU() time.Duration { return 0 }
