//go:build unix

package proccpu

import (
	"testing"
	"time"
)

// TestUsedGrowsWithWork checks that Used reads the process's CPU time: it
// is positive, and a busy loop makes it grow by 10 ms well within the 10 s
// of wall time the loop may take.
func TestUsedGrowsWithWork(t *testing.T) {
	before := Used()
	if before <= 0 {
		t.Fatalf("Used() = %v, want the process's CPU time so far", before)
	}
	for deadline := time.Now().Add(10 * time.Second); Used()-before < 10*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of busy loop added %v of CPU time", Used()-before)
		}
	}
}
