//go:build !unix

package proccpu

import "time"

// Used returns 0: the platform's CPU time is not read.
func Used() time.Duration { return 0 }
