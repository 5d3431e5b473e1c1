package sandbox

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"time"
)

// The worker protocol: frames over the worker's stdin (parent to worker)
// and stdout (worker to parent), each a 4-byte big-endian length followed
// by a compact binary body: a type byte, the run id, and type-specific
// fields. Values use a tagged binary encoding of the canonical value types
// (see encodeValue), so Dates, Maps, Sets, typed arrays, bigint and
// undefined survive the trip and no reflection is involved.
//
//	parent -> worker: run {id, spec}; ret {id, c, value | error}; term {id, error}
//	worker -> parent: call {id, c, fn, args}; report {id, value};
//	                  log {id, level, ts, args}; done {id, status, value | error}
//
// A worker runs one run at a time, on the goroutine that reads stdin: while
// the run waits for bridged results it reads them itself. Terminate frames
// are sent twice: on a control pipe (file descriptor 3, announced by
// TOOLRUN_SANDBOX_CTRL_FD=3), read by a goroutine that interrupts running
// JavaScript, and on stdin, which wakes a run that is waiting.
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
}

// Frame types.
const (
	frRun byte = iota + 1
	frRet
	frTerm
	frCall
	frReport
	frLog
	frDone
)

// runSpec is what a worker needs to execute one run.
type runSpec struct {
	Hash     string
	Code     string
	Map      []byte
	Sources  []string
	Exports  []string
	Entry    string
	Args     []any
	Globals  map[string]any
	Imports  map[string]map[string]any
	Report   bool
	MaxStack int
	Memory   int64
}

const maxFrame = 1 << 30

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
		e.str(x.String())
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

var errBadFrame = errors.New("sandbox: malformed frame")

type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) fail() { d.bad = true; d.b = nil }

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

func (d *decoder) raw() []byte {
	n := d.count()
	if d.bad {
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string   { return string(d.raw()) }
func (d *decoder) bytes() []byte { return append([]byte{}, d.raw()...) }
func (d *decoder) bool() bool    { return d.byte() == 1 }

func (d *decoder) strs() []string {
	n := d.count()
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *decoder) values(depth int) []any {
	n := d.count()
	out := make([]any, n)
	for i := range out {
		out[i] = d.value(depth + 1)
	}
	return out
}

func (d *decoder) object(depth int) map[string]any {
	n := d.count()
	out := make(map[string]any, n)
	for i := 0; i < n && !d.bad; i++ {
		k := d.str()
		out[k] = d.value(depth + 1)
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
		return nil
	case tagUndefined:
		return Undefined
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagNumber:
		if len(d.b) < 8 {
			d.fail()
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
		d.b = d.b[8:]
		return f
	case tagString:
		return d.str()
	case tagArray:
		return d.values(depth)
	case tagObject:
		return d.object(depth)
	case tagDate:
		return time.UnixMilli(d.varint()).UTC()
	case tagMap:
		n := d.count()
		out := make(Map, n)
		for i := range out {
			out[i].Key = d.value(depth + 1)
			out[i].Value = d.value(depth + 1)
		}
		return out
	case tagSet:
		return Set(d.values(depth))
	case tagBigInt:
		b, ok := new(big.Int).SetString(d.str(), 10)
		if !ok {
			d.fail()
			return nil
		}
		return b
	case tagArrayBuffer:
		return ArrayBuffer(d.bytes())
	case tagBytes:
		return d.bytes()
	case tagTypedArray:
		t := d.str()
		return TypedArray{Type: t, Data: d.bytes()}
	case tagFunc:
		return &funcRef{id: int(d.uvarint())}
	}
	d.fail()
	return nil
}

func (d *decoder) err() *Error {
	if d.byte() == 0 {
		return nil
	}
	return &Error{Name: d.str(), Message: d.str(), Stack: d.str(), Line: int(d.uvarint()), Column: int(d.uvarint()),
		Filename: d.str(), Specifier: d.str()}
}

func encodeFrame(f *frame) []byte {
	e := &encoder{b: make([]byte, 4, 64)}
	e.byte(f.T)
	e.uvarint(f.ID)
	switch f.T {
	case frRun:
		s := f.Run
		e.str(s.Hash)
		e.str(s.Code)
		e.bytes(s.Map)
		e.strs(s.Sources)
		e.strs(s.Exports)
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
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

func decodeFrame(data []byte) (*frame, error) {
	d := &decoder{b: data}
	f := &frame{T: d.byte(), ID: d.uvarint()}
	switch f.T {
	case frRun:
		s := &runSpec{}
		s.Hash = d.str()
		s.Code = d.str()
		s.Map = d.bytes()
		s.Sources = d.strs()
		s.Exports = d.strs()
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
		s.MaxStack = int(d.uvarint())
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
		f.Fn = int(d.uvarint())
		f.Args = d.values(0)
	case frReport:
		f.V = d.value(0)
	case frLog:
		f.Lvl = d.str()
		f.TS = d.varint()
		f.Args = d.values(0)
	case frDone:
		f.St = Status(d.str())
		f.Err = d.err()
		if f.Err == nil {
			f.V = d.value(0)
		}
	default:
		return nil, errBadFrame
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

func readFrame(r *bufio.Reader) (*frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrame {
		return nil, fmt.Errorf("sandbox: frame too large (%d bytes)", n)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, err
	}
	return decodeFrame(data)
}
