// Package proccpu reads the CPU time the process has used, for benchmarks
// that report what an operation cost in CPU beside how long it took.
package proccpu
