package sandbox

import (
	"math/big"
	"time"
	"unicode/utf8"
)

// Limits on what a run may bring into the host. The engine enforces them
// where the values are made (in the worker, or in-process), and the host
// enforces them again on everything it reads from a worker, which it does
// not trust. They are described in the package doc.
const (
	// maxTransferBytes bounds the cost (see valueCost) of a result and of
	// the arguments of one bridged call.
	maxTransferBytes = 64 << 20
	tooLargeMsg      = "Value too large to transfer (limit 64 MiB)"

	// maxPendingCalls and maxPendingCallBytes bound the bridged calls of
	// one run that the host has not answered yet: their number and the
	// total cost of their arguments.
	maxPendingCalls     = 1000
	maxPendingCallBytes = 64 << 20

	// maxReports, maxLogs and maxOutputBytes bound what a run reports and
	// logs: at most maxReports reports and maxLogs log entries, costing at
	// most maxOutputBytes together.
	maxReports     = 10000
	maxLogs        = 1000
	maxOutputBytes = 16 << 20

	// Error texts are cut to these lengths (in bytes, on a UTF-8 boundary,
	// ending with cutMarker).
	maxErrorName     = 256
	maxErrorMessage  = 64 << 10
	maxErrorStack    = 64 << 10
	maxErrorFilename = 4 << 10

	// frameSlack is what a frame may hold besides its values: ids, error
	// texts at their caps, the log level.
	frameSlack = 1 << 20

	// compileMaxStack is the goroutine stack limit while a worker compiles
	// a source (esbuild, then goja's parser and compiler on the bundle). A
	// source nested too deeply for it overflows the worker's stack, which
	// kills only the worker; the host runs goja's parser on an accepted
	// bundle with its own, much larger limit (1 GB by default).
	compileMaxStack = 32 << 20
	// runMaxStack is the worker's goroutine stack limit while code runs.
	runMaxStack = 256 << 20
)

// cutMarker ends a text that was cut to its limit.
const cutMarker = "… [cut]"

// cutText returns s cut to at most max bytes (marker included) on a UTF-8
// boundary, ending with cutMarker, or s itself when it fits.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:cutPoint(s, max)] + cutMarker
}

// cutPoint is where a text longer than max is cut: the last UTF-8 boundary
// that leaves room for cutMarker.
func cutPoint[T string | []byte](s T, max int) int {
	n := max - len(cutMarker)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// capError cuts the texts of e to their limits, in place, and returns e.
func capError(e *Error) *Error {
	if e == nil {
		return nil
	}
	e.Name = cutText(e.Name, maxErrorName)
	e.Message = cutText(e.Message, maxErrorMessage)
	e.Stack = cutText(e.Stack, maxErrorStack)
	e.Filename = cutText(e.Filename, maxErrorFilename)
	e.Specifier = cutText(e.Specifier, maxErrorFilename)
	return e
}

// Costs charged for canonical values: roughly what the Go value occupies,
// so that a budget in cost bounds the memory the host spends on it. The
// wire decoder charges the same costs as it builds values, and a value's
// encoding never takes more bytes than its cost.
const (
	costScalar  = 16 // nil, undefined, bool, number: an interface word pair
	costString  = 16 // plus the bytes
	costSlice   = 40 // []any, Map, Set: interface plus slice header
	costObject  = 64 // map[string]any: interface plus map header
	costMember  = 32 // per object member, plus key bytes and the value
	costBytes   = 40 // []byte, ArrayBuffer, plus the bytes
	costTyped   = 64 // TypedArray, plus the type name and the bytes
	costDate    = 40
	costBigInt  = 48 // plus the magnitude's bytes
	costFuncRef = 32
)

// valueCost is the cost of a canonical value (see the constants above).
func valueCost(v any) int64 {
	switch x := v.(type) {
	case string:
		return costString + int64(len(x))
	case []any:
		n := int64(costSlice)
		for _, e := range x {
			n += valueCost(e)
		}
		return n
	case map[string]any:
		n := int64(costObject)
		for k, e := range x {
			n += costMember + int64(len(k)) + valueCost(e)
		}
		return n
	case Map:
		n := int64(costSlice)
		for _, e := range x {
			n += valueCost(e.Key) + valueCost(e.Value)
		}
		return n
	case Set:
		n := int64(costSlice)
		for _, e := range x {
			n += valueCost(e)
		}
		return n
	case []byte:
		return costBytes + int64(len(x))
	case ArrayBuffer:
		return costBytes + int64(len(x))
	case TypedArray:
		return costTyped + int64(len(x.Type)) + int64(len(x.Data))
	case time.Time:
		return costDate
	case *big.Int:
		return costBigInt + int64((x.BitLen()+7)/8)
	case *funcRef:
		return costFuncRef
	}
	return costScalar
}

// valuesCost is the cost of a list of values (bridged call arguments, log
// arguments).
func valuesCost(vs []any) int64 {
	n := int64(costSlice)
	for _, v := range vs {
		n += valueCost(v)
	}
	return n
}
