// Package jsonvalue turns any Go value into a generic JSON tree that is safe
// to store, clone, redact and format, or into an error that says what is
// wrong and where.
//
// Tools hand the runtime values of any Go type: error data, message
// metadata, event data. Such a value may contain itself (a map holding
// itself overflows the stack of every recursive walk, and kills the
// process), may be nested arbitrarily deep, or may hold something JSON
// cannot encode (NaN, a func), which makes a store fail on every retry.
// The runtime normalises such values once, with [Normalize], before
// anything else touches them.
//
// # The tree
//
// A normalised value is nil, bool, float64, json.Number, string,
// []any or map[string]any, recursively. It is what encoding/json would
// write for the value and read back into an any, except for numbers that a
// float64 cannot hold: an integer whose magnitude is above 2^53 and a number
// beyond the range of float64 are a json.Number with their exact decimal
// text, and every other number is a float64. So an int64 ID is never
// silently rounded, and 1e400 from a MarshalJSON method is kept. As in the
// round trip, strings and keys are valid UTF-8: each byte that is not part
// of valid UTF-8 is replaced by U+FFFD.
//
// Go values are walked by encoding/json's rules: struct fields by their json
// tags (names, "-", omitempty, omitzero, string), embedded structs promoted
// by Go's visibility rules, maps with string, integer or
// encoding.TextMarshaler keys, []byte as base64, and types with a MarshalJSON
// or MarshalText method encoded by it (with pointer receivers used only on
// addressable values, as encoding/json does). The output of a MarshalJSON
// method is read back within the same limits. Where encoding/json panics,
// on the methods of an unexported embedded struct that has a json tag
// (which reflection will not call), Normalize encodes the value by its kind.
//
// The result shares no map or slice with the input: a tool that keeps
// changing its value after handing it over does not change the tree.
//
// # Errors
//
// Normalize fails with an [*Error] that names the path to the problem, such
// as error_data.a.b[3], and matches one of the Err sentinels with
// errors.Is: a cycle ([ErrCycle]), nesting deeper than [Limits.MaxDepth]
// ([ErrTooDeep]), a number JSON cannot hold ([ErrNumber]), a kind JSON
// cannot hold such as a chan, func or complex number ([ErrUnsupported]), a
// map key type encoding/json cannot encode ([ErrKey]), a MarshalJSON or
// MarshalText method that fails, panics or writes invalid JSON
// ([ErrMarshaler]), and a tree larger than the limits ([ErrTooLarge]).
// Normalize never panics and never overflows the stack, whatever its input.
//
// # Concurrency
//
// Normalize and Clone may be called from any number of goroutines at once.
// Each reads its argument, which must not change while it does.
package jsonvalue

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

// The default limits.
const (
	// DefaultMaxDepth is the default for Limits.MaxDepth: deeper than any
	// reasonable error data, metadata or event data, and shallow enough that
	// every recursive walk of the tree is cheap.
	DefaultMaxDepth = 64
	// HardMaxDepth is the highest Limits.MaxDepth: the walk is recursive,
	// and this bounds the goroutine stack it needs.
	HardMaxDepth = 10000
	// DefaultMaxNodes is the default for Limits.MaxNodes.
	DefaultMaxNodes = 1 << 20
	// DefaultMaxBytes is the default for Limits.MaxBytes.
	DefaultMaxBytes = 16 << 20
	// MaxIndirections is the most pointers and interfaces in a row, without
	// an object or array between them, that Normalize follows.
	MaxIndirections = 16
)

// Limits bounds a normalised tree. A nil *Limits means the defaults.
type Limits struct {
	// MaxDepth is how many objects and arrays may be nested in each other:
	// with 2, [[1]] is allowed and [[[1]]] is not. Zero means
	// DefaultMaxDepth; a negative value or one above HardMaxDepth means
	// HardMaxDepth.
	MaxDepth int
	// MaxNodes bounds the number of values in the tree, counting every
	// object, array, string, number, bool and null. It also stops a value
	// that shares one subtree many times from growing into a huge tree.
	// Zero means DefaultMaxNodes; a negative value means no bound.
	MaxNodes int
	// MaxBytes bounds the total length in bytes of the strings and object
	// keys in the tree. Zero means DefaultMaxBytes; a negative value means
	// no bound.
	MaxBytes int
}

// The kinds of error Normalize returns; an *Error matches its kind with
// errors.Is.
var (
	// ErrCycle: the value contains itself, through a map, slice or pointer.
	ErrCycle = errors.New("jsonvalue: cycle")
	// ErrTooDeep: objects and arrays nested deeper than Limits.MaxDepth, or
	// more than MaxIndirections pointers and interfaces in a row.
	ErrTooDeep = errors.New("jsonvalue: nested too deeply")
	// ErrTooLarge: more values than Limits.MaxNodes, or more bytes of
	// strings and keys than Limits.MaxBytes.
	ErrTooLarge = errors.New("jsonvalue: too large")
	// ErrNumber: NaN, an infinity, or a json.Number that is not a number.
	ErrNumber = errors.New("jsonvalue: not a JSON number")
	// ErrUnsupported: a chan, func, complex number or unsafe.Pointer.
	ErrUnsupported = errors.New("jsonvalue: unsupported type")
	// ErrKey: a map whose key type is not a string, an integer or an
	// encoding.TextMarshaler.
	ErrKey = errors.New("jsonvalue: unsupported map key type")
	// ErrMarshaler: a MarshalJSON, MarshalText or IsZero method returned an
	// error or panicked, or MarshalJSON returned invalid JSON.
	ErrMarshaler = errors.New("jsonvalue: marshaler failed")
)

// Error is the error Normalize returns.
type Error struct {
	// Path is where the problem is: the root name given to Normalize
	// followed by .key for object keys that are identifiers, ["key"] for
	// others and [i] for array elements, as in error_data.a.b[3]. Keys
	// longer than 64 bytes are cut and end with "…".
	Path string
	// Kind is one of the Err variables.
	Kind error
	// Err is the error a MarshalJSON, MarshalText or IsZero method returned,
	// or nil.
	Err error
	// Detail says what is wrong, without the path.
	Detail string
}

// Error returns "<path>: <detail>".
func (e *Error) Error() string { return e.Path + ": " + e.Detail }

// Unwrap returns Kind and, when set, Err.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Normalize returns v as a generic JSON tree (see the package doc), or an
// *Error whose path starts with root ("value" when root is empty). lim may
// be nil for the defaults.
func Normalize(root string, v any, lim *Limits) (any, error) {
	w := walker{maxDepth: DefaultMaxDepth, maxNodes: DefaultMaxNodes, maxBytes: DefaultMaxBytes}
	if lim != nil {
		w.maxDepth = pick(lim.MaxDepth, DefaultMaxDepth, HardMaxDepth)
		w.maxNodes = pick(lim.MaxNodes, DefaultMaxNodes, -1)
		w.maxBytes = pick(lim.MaxBytes, DefaultMaxBytes, -1)
		if lim.MaxDepth > HardMaxDepth {
			w.maxDepth = HardMaxDepth
		}
	}
	out, f := w.any(v, 0, 0)
	if f != nil {
		if root == "" {
			root = "value"
		}
		return nil, f.error(root)
	}
	return out, nil
}

// pick returns v, or def when v is zero, or neg when v is negative.
func pick(v, def, neg int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return neg
	}
	return v
}

// failure is an error on its way up from where it happened. The path is
// collected as the walk unwinds, innermost element first.
type failure struct {
	kind   error
	detail string
	err    error
	elems  []elem // reversed
	// backTo is, for a cycle, how many path elements lead to the container
	// that is met again; -1 otherwise.
	backTo int
}

// elem is one step of a path: an object key, or an array index when isIndex.
type elem struct {
	key     string
	index   int
	isIndex bool
}

func fail(kind error, detail string) *failure {
	return &failure{kind: kind, detail: detail, backTo: -1}
}

// atKey and atIndex add the step to the child where f happened.
func (f *failure) atKey(k string) *failure {
	f.elems = append(f.elems, elem{key: k})
	return f
}

func (f *failure) atIndex(i int) *failure {
	f.elems = append(f.elems, elem{index: i, isIndex: true})
	return f
}

func (f *failure) error(root string) *Error {
	n := len(f.elems)
	path := make([]elem, n)
	for i, e := range f.elems {
		path[n-1-i] = e
	}
	detail := f.detail
	if f.backTo >= 0 {
		detail = "cycle: the value refers back to " + formatPath(root, path[:f.backTo]) + ", which contains it"
	}
	return &Error{Path: formatPath(root, path), Kind: f.kind, Err: f.err, Detail: detail}
}

// maxPathKey is the longest key a path shows whole; a longer one is cut
// and ends with "…".
const maxPathKey = 64

func formatPath(root string, path []elem) string {
	var b strings.Builder
	b.WriteString(root)
	for _, e := range path {
		switch {
		case e.isIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.index))
			b.WriteByte(']')
		case isIdentifier(e.key) && len(e.key) <= maxPathKey:
			b.WriteByte('.')
			b.WriteString(e.key)
		default:
			k := e.key
			if len(k) > maxPathKey {
				k = strings.ToValidUTF8(k[:maxPathKey], "") + "…"
			}
			b.WriteByte('[')
			q, _ := json.Marshal(k)
			b.Write(q)
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Clone returns a deep copy of v, a tree as Normalize returns: maps and
// slices are copied, json.RawMessage bytes too, and every other value is
// shared, being immutable. Clone uses no recursion, so a tree of any depth
// is fine; a map or slice reached twice is copied once and the copy is
// reached twice, so a value that contains itself is copied, not followed
// forever.
func Clone(v any) any {
	var c cloner
	out := c.copy(v)
	for {
		var job cloneJob
		switch {
		case c.one.src != nil:
			job, c.one = c.one, cloneJob{}
		case len(c.work) > 0:
			job = c.work[len(c.work)-1]
			c.work = c.work[:len(c.work)-1]
		default:
			return out
		}
		switch src := job.src.(type) {
		case map[string]any:
			dst := job.dst.(map[string]any)
			for k, e := range src {
				dst[k] = c.copy(e)
			}
		case []any:
			dst := job.dst.([]any)
			for i, e := range src {
				dst[i] = c.copy(e)
			}
		}
	}
}

// cloner copies a tree without recursion: copy makes an empty copy of a
// container and queues it to be filled.
type cloner struct {
	// The containers still to fill: one, then work; a tree with a single
	// container needs no slice.
	one  cloneJob
	work []cloneJob
	// The copies made so far, by original: the first few in few, so that
	// a small tree needs no map, the others in seen.
	few  [8]cloneMade
	nfew int
	seen map[cloneKey]any
}

type cloneMade struct {
	key cloneKey
	dst any
}

type cloneJob struct{ src, dst any }

type cloneKey struct {
	p unsafe.Pointer
	n int // -1 for a map
}

func (c *cloner) copy(v any) any {
	var key cloneKey
	var dst any
	switch x := v.(type) {
	case map[string]any:
		if x == nil {
			return v
		}
		key = cloneKey{reflect.ValueOf(x).UnsafePointer(), -1}
		if d, ok := c.made(key); ok {
			return d
		}
		dst = make(map[string]any, len(x))
	case []any:
		if x == nil {
			return v
		}
		if len(x) == 0 {
			return []any{}
		}
		key = cloneKey{unsafe.Pointer(unsafe.SliceData(x)), len(x)}
		if d, ok := c.made(key); ok {
			return d
		}
		dst = make([]any, len(x))
	case json.RawMessage:
		if x == nil {
			return v
		}
		return append(json.RawMessage{}, x...)
	default:
		return v
	}
	if c.nfew < len(c.few) {
		c.few[c.nfew] = cloneMade{key, dst}
		c.nfew++
	} else {
		if c.seen == nil {
			c.seen = map[cloneKey]any{}
		}
		c.seen[key] = dst
	}
	switch {
	case c.one.src == nil:
		c.one = cloneJob{v, dst}
	case c.work == nil:
		c.work = make([]cloneJob, 1, 16)
		c.work[0] = cloneJob{v, dst}
	default:
		c.work = append(c.work, cloneJob{v, dst})
	}
	return dst
}

// made returns the copy already made of the container key.
func (c *cloner) made(key cloneKey) (any, bool) {
	for _, m := range c.few[:c.nfew] {
		if m.key == key {
			return m.dst, true
		}
	}
	d, ok := c.seen[key]
	return d, ok
}
