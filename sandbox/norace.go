//go:build !race

package sandbox

// raceDetector reports whether the program was built with the race
// detector, whose shadow memory, several times the size of the heap, is
// private writable memory that RLIMIT_DATA counts.
const raceDetector = false
