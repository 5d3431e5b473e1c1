package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"sync"
	"time"
)

// The worker protocol: frames over the worker's stdin (parent to worker)
// and stdout (worker to parent), each a 4-byte big-endian length followed
// by a compact binary body: a type byte, the run id, and type-specific
// fields. Values use a tagged binary encoding of the canonical value types
// (see encodeValue), so Dates, Maps, Sets, typed arrays, bigint and
// undefined survive the trip and no reflection is involved.
//
//	parent -> worker: compile {id, request}; run {id, spec}; ret {id, c, value | error};
//	                  term {id, error}
//	worker -> parent: ready {}; compiled {id, bundle | error}; need {id};
//	                  call {id, c, fn, args}; report {id, value}; log {id, level, ts, args};
//	                  done {id, status, value | error}
//
// A worker sends ready once, when it is set up to serve, before it reads
// anything. The host hands out no worker before its ready frame and kills
// one that has not sent it within RunnerOptions.WorkerStartTimeout, so a
// worker command that starts but never serves cannot hold a run.
//
// A run whose bundle is not in the host's cache starts with a compile
// frame: the worker compiles the source under the run's limits and sends
// the bundle back for the host's cache. A run frame carries the bundle's
// code only when the host does not know the worker to hold it; a worker
// that does not answers need, and the host sends the run again with code.
//
// Frames are queued and written together (see frameWriter): the calls,
// reports and logs of one turn of the code go out in one write when the
// engine waits (or after 1 ms of computing), and results of calls that
// finish together go back in one write.
//
// A worker runs one run at a time, on the goroutine that reads stdin: while
// the run waits for bridged results it reads them itself. The reader that
// expects a frame soon (the worker awaiting results, the host while a run
// executes) polls its pipe briefly before it sleeps (see spin.go). Terminate frames
// are sent twice: on a control pipe (file descriptor 3, announced by
// TOOLRUN_SANDBOX_CTRL_FD=3), read by a goroutine that interrupts running
// JavaScript, and on stdin, which wakes a run that is waiting.
//
// The host does not trust what a worker sends: it refuses a frame longer
// than its limit before allocating it, charges every value it decodes
// against a budget (see valueCost) and cuts error texts to their limits.
type frame struct {
	T    byte
	ID   uint64
	C    uint64
	Fn   int
	Args []any
	V    any
	Err  *Error
	Lvl  string
	TS   int64
	St   Status
	Run  *runSpec
	Comp *compileSpec // compile: the request
	Bund *bundleSpec  // compiled: the bundle, unless Err is set
}

// wireVersion is the version of the frames host and worker exchange. A
// worker says it in its ready frame's ID, and the host refuses a worker
// that says another (a worker binary built from another toolrun release,
// or one from before versions, which says 0). Any change to the frames'
// encoding or meaning raises it.
const wireVersion = 1

// Frame types.
const (
	frRun byte = iota + 1
	frRet
	frTerm
	frCall
	frReport
	frLog
	frDone
	frCompile
	frCompiled
	frNeed
	frReady
)

// runSpec is what a worker needs to execute one run. Bundle is nil when
// the host expects the worker to hold the bundle of Hash already.
type runSpec struct {
	Hash     string
	Bundle   *bundleSpec
	Entry    string
	Args     []any
	Globals  map[string]any
	Imports  map[string]map[string]any
	Report   bool
	MaxStack int // at most math.MaxInt32: the decoder takes more as that
	Memory   int64
}

// compileSpec asks a worker to compile a source.
type compileSpec struct {
	Hash     string
	Source   string
	Filename string
	Lang     string
	Modules  map[string]string
	Imports  map[string][]string // specifier -> member names
	Memory   int64
}

// bundleSpec is a compiled bundle as it crosses the pipe.
type bundleSpec struct {
	Code    string
	Map     []byte
	Sources []string
	Exports []string
}

// maxFrameToWorker bounds frames a worker reads (the host is trusted; this
// only catches corruption).
const maxFrameToWorker = 1 << 30

// maxFrameFromWorker is the longest frame the host reads from a worker
// whose sources are limited to maxSource bytes: a result or a call's
// arguments at their limit, or a bundle, which esbuild makes no more than
// a few times larger than its sources.
func maxFrameFromWorker(maxSource int) int {
	n := maxTransferBytes + frameSlack
	if b := 8*maxSource + frameSlack; b > n {
		n = b
	}
	return n
}

// Value tags.
const (
	tagNull byte = iota
	tagUndefined
	tagFalse
	tagTrue
	tagNumber
	tagString
	tagArray
	tagObject
	tagDate
	tagMap
	tagSet
	tagBigInt
	tagArrayBuffer
	tagTypedArray
	tagBytes
	tagFunc
)

type encoder struct{ b []byte }

func (e *encoder) byte(c byte)      { e.b = append(e.b, c) }
func (e *encoder) uvarint(u uint64) { e.b = binary.AppendUvarint(e.b, u) }
func (e *encoder) varint(i int64)   { e.b = binary.AppendVarint(e.b, i) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

func (e *encoder) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *encoder) values(vs []any) {
	e.uvarint(uint64(len(vs)))
	for _, v := range vs {
		e.value(v)
	}
}

func (e *encoder) object(m map[string]any) {
	e.uvarint(uint64(len(m)))
	for k, v := range m {
		e.str(k)
		e.value(v)
	}
}

// value encodes a canonical value (see normalize).
func (e *encoder) value(v any) {
	switch x := v.(type) {
	case nil:
		e.byte(tagNull)
	case UndefinedValue:
		e.byte(tagUndefined)
	case bool:
		if x {
			e.byte(tagTrue)
		} else {
			e.byte(tagFalse)
		}
	case float64:
		e.byte(tagNumber)
		e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(x))
	case string:
		e.byte(tagString)
		e.str(x)
	case []any:
		e.byte(tagArray)
		e.values(x)
	case map[string]any:
		e.byte(tagObject)
		e.object(x)
	case time.Time:
		e.byte(tagDate)
		e.varint(x.UnixMilli())
	case Map:
		e.byte(tagMap)
		e.uvarint(uint64(len(x)))
		for _, en := range x {
			e.value(en.Key)
			e.value(en.Value)
		}
	case Set:
		e.byte(tagSet)
		e.values(x)
	case *big.Int:
		e.byte(tagBigInt)
		e.bool(x.Sign() < 0)
		e.bytes(x.Bytes())
	case ArrayBuffer:
		e.byte(tagArrayBuffer)
		e.bytes(x)
	case []byte:
		e.byte(tagBytes)
		e.bytes(x)
	case TypedArray:
		e.byte(tagTypedArray)
		e.str(x.Type)
		e.bytes(x.Data)
	case *funcRef:
		e.byte(tagFunc)
		e.uvarint(uint64(x.id))
	default:
		panic(fmt.Sprintf("sandbox: encoding unexpected %T", v))
	}
}

func (e *encoder) err(x *Error) {
	if x == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	e.str(x.Name)
	e.str(x.Message)
	e.str(x.Stack)
	e.uvarint(uint64(x.Line))
	e.uvarint(uint64(x.Column))
	e.str(x.Filename)
	e.str(x.Specifier)
}

var (
	errBadFrame      = errors.New("sandbox: malformed frame")
	errFrameTooLarge = errors.New("sandbox: frame too large")
	errFrameBudget   = errors.New("sandbox: frame holds values costing more than allowed")
)

// decoder reads a frame body. Every value it builds is charged against
// budget first (the costs of valueCost), so a frame cannot make the reader
// allocate much more than its limit allows; a frame over budget fails.
type decoder struct {
	b      []byte
	bad    bool
	budget int64
	over   bool // the failure was the budget
}

func (d *decoder) fail() { d.bad = true; d.b = nil }

// charge takes n from the budget; false (and a failed decoder) when the
// budget does not cover it.
func (d *decoder) charge(n int64) bool {
	if n > d.budget {
		d.over = true
		d.fail()
		return false
	}
	d.budget -= n
	return true
}

// afford reports whether n more is within the budget, without taking it.
func (d *decoder) afford(n int64) bool {
	if n > d.budget {
		d.over = true
		d.fail()
		return false
	}
	return true
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	u, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return u
}

func (d *decoder) varint() int64 {
	i, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return i
}

// count reads a length and checks it against the bytes left (each element
// takes at least one byte), so a corrupt length cannot force a huge
// allocation.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

// raw returns the next length-prefixed bytes, still in the frame buffer.
func (d *decoder) raw() []byte {
	n := d.count()
	if d.bad {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// str and bytes copy; they are charged by their callers where the
// value's cost applies.
func (d *decoder) str() string   { return string(d.raw()) }
func (d *decoder) bytes() []byte { return append([]byte{}, d.raw()...) }
func (d *decoder) bool() bool    { return d.byte() == 1 }

// text reads a string cut to max bytes; only the kept part is copied.
func (d *decoder) text(max int) string {
	p := d.raw()
	if len(p) <= max {
		return string(p)
	}
	return string(p[:cutPoint(p, max)]) + cutMarker
}

// strs reads a list of strings, charged as their cost.
func (d *decoder) strs() []string {
	n := d.count()
	if !d.charge(costSlice + int64(n)*costString) {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		p := d.raw()
		if !d.charge(int64(len(p))) {
			return nil
		}
		out[i] = string(p)
	}
	return out
}

func (d *decoder) values(depth int) []any {
	n := d.count()
	if !d.charge(costSlice) || !d.afford(int64(n)*costScalar) {
		return nil
	}
	out := make([]any, n)
	for i := range out {
		out[i] = d.value(depth + 1)
	}
	return out
}

func (d *decoder) object(depth int) map[string]any {
	n := d.count()
	if !d.charge(costObject) || !d.afford(int64(n)*(costMember+costScalar)) {
		return nil
	}
	out := make(map[string]any, n)
	for i := 0; i < n && !d.bad; i++ {
		p := d.raw()
		if !d.charge(costMember + int64(len(p))) {
			return nil
		}
		out[string(p)] = d.value(depth + 1)
	}
	return out
}

func (d *decoder) value(depth int) any {
	if depth > maxDepth+8 {
		d.fail()
		return nil
	}
	switch d.byte() {
	case tagNull:
		d.charge(costScalar)
		return nil
	case tagUndefined:
		d.charge(costScalar)
		return Undefined
	case tagFalse:
		d.charge(costScalar)
		return false
	case tagTrue:
		d.charge(costScalar)
		return true
	case tagNumber:
		if len(d.b) < 8 || !d.charge(costScalar) {
			d.fail()
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
		return f
	case tagString:
		p := d.raw()
		if !d.charge(costString + int64(len(p))) {
			return nil
		}
		return string(p)
	case tagArray:
		return d.values(depth)
	case tagObject:
		return d.object(depth)
	case tagDate:
		if !d.charge(costDate) {
			return nil
		}
		return time.UnixMilli(d.varint()).UTC()
	case tagMap:
		n := d.count()
		if !d.charge(costSlice) || !d.afford(int64(n)*2*costScalar) {
			return nil
		}
		out := make(Map, n)
		for i := range out {
			out[i].Key = d.value(depth + 1)
			out[i].Value = d.value(depth + 1)
		}
		return out
	case tagSet:
		return Set(d.values(depth))
	case tagBigInt:
		neg := d.bool()
		p := d.raw()
		if !d.charge(costBigInt + int64(len(p))) {
			return nil
		}
		b := new(big.Int).SetBytes(p)
		if neg {
			b.Neg(b)
		}
		return b
	case tagArrayBuffer:
		p := d.raw()
		if !d.charge(costBytes + int64(len(p))) {
			return nil
		}
		return ArrayBuffer(append([]byte{}, p...))
	case tagBytes:
		p := d.raw()
		if !d.charge(costBytes + int64(len(p))) {
			return nil
		}
		return append([]byte{}, p...)
	case tagTypedArray:
		t := d.raw()
		p := d.raw()
		if !d.charge(costTyped + int64(len(t)) + int64(len(p))) {
			return nil
		}
		return TypedArray{Type: string(t), Data: append([]byte{}, p...)}
	case tagFunc:
		if !d.charge(costFuncRef) {
			return nil
		}
		return &funcRef{id: int(d.uvarint())}
	}
	d.fail()
	return nil
}

// err reads an error, its texts cut to their limits.
func (d *decoder) err() *Error {
	if d.byte() == 0 {
		return nil
	}
	return &Error{Name: d.text(maxErrorName), Message: d.text(maxErrorMessage), Stack: d.text(maxErrorStack),
		Line: int(d.uvarint() & math.MaxInt32), Column: int(d.uvarint() & math.MaxInt32),
		Filename: d.text(maxErrorFilename), Specifier: d.text(maxErrorFilename)}
}

func (e *encoder) bundle(b *bundleSpec) {
	e.str(b.Code)
	e.bytes(b.Map)
	e.strs(b.Sources)
	e.strs(b.Exports)
}

func (d *decoder) bundle() *bundleSpec {
	// Code and map are copied once each, so the frame's length bounds
	// them; the lists are charged, as an empty string costs more than
	// its one byte on the wire.
	b := &bundleSpec{}
	b.Code = d.str()
	b.Map = d.bytes()
	b.Sources = d.strs()
	b.Exports = d.strs()
	return b
}

func encodeFrame(f *frame) []byte { return appendFrame(make([]byte, 0, 64), f) }

// appendFrame appends f, with its length prefix, to dst.
func appendFrame(dst []byte, f *frame) []byte {
	start := len(dst)
	e := &encoder{b: append(dst, 0, 0, 0, 0)}
	e.byte(f.T)
	e.uvarint(f.ID)
	switch f.T {
	case frCompile:
		c := f.Comp
		e.str(c.Hash)
		e.str(c.Source)
		e.str(c.Filename)
		e.str(c.Lang)
		e.uvarint(uint64(len(c.Modules)))
		for k, v := range c.Modules {
			e.str(k)
			e.str(v)
		}
		e.uvarint(uint64(len(c.Imports)))
		for k, ms := range c.Imports {
			e.str(k)
			e.strs(ms)
		}
		e.varint(c.Memory)
	case frCompiled:
		e.err(f.Err)
		if f.Err == nil {
			e.bundle(f.Bund)
		}
	case frNeed, frReady:
	case frRun:
		s := f.Run
		e.str(s.Hash)
		e.bool(s.Bundle != nil)
		if s.Bundle != nil {
			e.bundle(s.Bundle)
		}
		e.str(s.Entry)
		e.values(s.Args)
		e.object(s.Globals)
		e.uvarint(uint64(len(s.Imports)))
		for k, ns := range s.Imports {
			e.str(k)
			e.object(ns)
		}
		e.bool(s.Report)
		e.uvarint(uint64(s.MaxStack))
		e.varint(s.Memory)
	case frRet:
		e.uvarint(f.C)
		e.err(f.Err)
		if f.Err == nil {
			e.value(f.V)
		}
	case frTerm:
		e.err(f.Err)
	case frCall:
		e.uvarint(f.C)
		e.uvarint(uint64(f.Fn))
		e.values(f.Args)
	case frReport:
		e.value(f.V)
	case frLog:
		e.str(f.Lvl)
		e.varint(f.TS)
		e.values(f.Args)
	case frDone:
		e.str(string(f.St))
		e.err(f.Err)
		if f.Err == nil {
			e.value(f.V)
		}
	}
	binary.BigEndian.PutUint32(e.b[start:], uint32(len(e.b)-start-4))
	return e.b
}

// decodeFrame decodes a frame body, charging its values against budget.
func decodeFrame(data []byte, budget int64) (*frame, error) {
	d := &decoder{b: data, budget: budget}
	f := &frame{T: d.byte(), ID: d.uvarint()}
	switch f.T {
	case frCompile:
		c := &compileSpec{}
		c.Hash = d.str()
		c.Source = d.str()
		c.Filename = d.str()
		c.Lang = d.str()
		n := d.count()
		c.Modules = make(map[string]string, n)
		for i := 0; i < n && !d.bad; i++ {
			k := d.str()
			c.Modules[k] = d.str()
		}
		n = d.count()
		c.Imports = make(map[string][]string, n)
		for i := 0; i < n && !d.bad; i++ {
			k := d.str()
			c.Imports[k] = d.strs()
		}
		c.Memory = d.varint()
		f.Comp = c
	case frCompiled:
		f.Err = d.err()
		if f.Err == nil {
			f.Bund = d.bundle()
		}
	case frNeed, frReady:
	case frRun:
		s := &runSpec{}
		s.Hash = d.str()
		if d.bool() {
			s.Bundle = d.bundle()
		}
		s.Entry = d.str()
		s.Args = d.values(0)
		s.Globals = d.object(0)
		n := d.count()
		s.Imports = make(map[string]map[string]any, n)
		for i := 0; i < n && !d.bad; i++ {
			k := d.str()
			s.Imports[k] = d.object(0)
		}
		s.Report = d.bool()
		s.MaxStack = int(min(d.uvarint(), math.MaxInt32))
		s.Memory = d.varint()
		f.Run = s
	case frRet:
		f.C = d.uvarint()
		f.Err = d.err()
		if f.Err == nil {
			f.V = d.value(0)
		}
	case frTerm:
		f.Err = d.err()
	case frCall:
		f.C = d.uvarint()
		f.Fn = int(min(d.uvarint(), math.MaxInt32))
		f.Args = d.values(0)
	case frReport:
		f.V = d.value(0)
	case frLog:
		f.Lvl = d.text(16)
		f.TS = d.varint()
		f.Args = d.values(0)
	case frDone:
		f.St = Status(d.text(16))
		f.Err = d.err()
		if f.Err == nil {
			f.V = d.value(0)
		}
	default:
		return nil, errBadFrame
	}
	if d.over {
		return nil, errFrameBudget
	}
	if d.bad {
		return nil, errBadFrame
	}
	return f, nil
}

func writeFrame(w io.Writer, f *frame) error {
	_, err := w.Write(encodeFrame(f))
	return err
}

// frameWriter writes frames to a pipe, joining frames queued by several
// goroutines into one write: queue adds a frame, flush writes what is
// queued. While one goroutine writes, others only queue (their frames go
// out with the next write of that goroutine), so concurrent results of
// bridged calls, or the calls of one turn of the code, cost one system
// call. It is safe for concurrent use.
type frameWriter struct {
	w io.Writer

	mu       sync.Mutex
	buf      []byte // queued frames
	spare    []byte // the buffer of the last write, for reuse
	flushing bool
	err      error // the first write error; later writes are not tried
	queuedAt time.Time
}

// keepWriteBuffer is the largest buffer a frameWriter reuses.
const keepWriteBuffer = 256 << 10

// queue adds f to the frames to write; it reports how long the oldest
// queued frame has been waiting and how many bytes are queued.
func (fw *frameWriter) queue(f *frame) (age time.Duration, queued int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if len(fw.buf) == 0 {
		fw.queuedAt = time.Now()
	} else {
		age = time.Since(fw.queuedAt)
	}
	fw.buf = appendFrame(fw.buf, f)
	return age, len(fw.buf)
}

// flush writes the queued frames, unless another goroutine is writing
// (it writes them). It returns the first write error of the writer.
func (fw *frameWriter) flush() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.flushing {
		return fw.err
	}
	for len(fw.buf) > 0 && fw.err == nil {
		b := fw.buf
		fw.buf, fw.spare = fw.spare[:0], nil
		fw.flushing = true
		fw.mu.Unlock()
		_, err := fw.w.Write(b)
		fw.mu.Lock()
		fw.flushing = false
		if err != nil {
			fw.err = err
		}
		if cap(b) <= keepWriteBuffer {
			fw.spare = b[:0]
		}
	}
	return fw.err
}

// flushIfOlder flushes when the oldest queued frame has waited longer
// than d.
func (fw *frameWriter) flushIfOlder(d time.Duration) {
	fw.mu.Lock()
	old := len(fw.buf) > 0 && time.Since(fw.queuedAt) > d
	fw.mu.Unlock()
	if old {
		_ = fw.flush()
	}
}

// send queues f and flushes.
func (fw *frameWriter) send(f *frame) error {
	fw.queue(f)
	return fw.flush()
}

// frameReader reads frames from a pipe, one goroutine at a time, reusing
// one buffer for frames up to keepReadBuffer bytes (decoded values never
// point into it).
type frameReader struct {
	r      *bufio.Reader
	max    int   // longest frame accepted
	budget int64 // value budget per frame
	reuse  bool  // keep a buffer for small frames
	buf    []byte
}

const keepReadBuffer = 64 << 10

func newFrameReader(r io.Reader, max int, budget int64) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max, budget: budget, reuse: true}
}

// buffered reports whether more bytes are already read from the pipe.
func (fr *frameReader) buffered() bool { return fr.r.Buffered() > 0 }

// next reads one frame, refusing one longer than fr.max before allocating
// it.
func (fr *frameReader) next() (*frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(fr.max) {
		return nil, fmt.Errorf("%w (%d bytes, limit %d)", errFrameTooLarge, n, fr.max)
	}
	var data []byte
	if n <= keepReadBuffer && fr.reuse {
		if fr.buf == nil {
			fr.buf = make([]byte, keepReadBuffer)
		}
		data = fr.buf[:n]
	} else {
		data = make([]byte, n)
	}
	if _, err := io.ReadFull(fr.r, data); err != nil {
		return nil, err
	}
	return decodeFrame(data, fr.budget)
}

// readFrame reads one frame of at most max bytes, refusing a longer one
// before allocating it, and decodes it with a value budget of budget.
func readFrame(r *bufio.Reader, max int, budget int64) (*frame, error) {
	fr := &frameReader{r: r, max: max, budget: budget}
	return fr.next()
}
