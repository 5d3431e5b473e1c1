package jsonvalue

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
)

type genStruct struct {
	A int    `json:"a,omitempty"`
	B string `json:"b,string"`
	C any    `json:"c"`
	D *genStruct
	E []byte  `json:",omitempty"`
	F float64 `json:",omitzero"`
	genEmbedded
}

type genEmbedded struct {
	G map[string]any
	H json.Number `json:"h,omitempty"`
}

// generator builds a Go value from fuzz bytes with a small stack machine.
// Each stack entry keeps the size the value has once written out, so that
// shared subtrees cannot make encoding/json's reference run forever.
type generator struct {
	data  []byte
	stack []genValue
}

type genValue struct {
	v    any
	size int
}

func (g *generator) byte() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

func (g *generator) bytes() []byte {
	n := int(g.byte() % 24)
	n = min(n, len(g.data))
	b := g.data[:n]
	g.data = g.data[n:]
	return b
}

func (g *generator) u64() uint64 {
	var b [8]byte
	copy(b[:], g.data)
	g.data = g.data[min(8, len(g.data)):]
	return binary.LittleEndian.Uint64(b[:])
}

func (g *generator) push(v any, size int) { g.stack = append(g.stack, genValue{v, size}) }

// pop returns up to n values from the top of the stack.
func (g *generator) pop(n int) ([]any, int) {
	n = min(n, len(g.stack))
	vals := make([]any, n)
	size := 1
	for i, e := range g.stack[len(g.stack)-n:] {
		vals[i] = e.v
		size += e.size
	}
	g.stack = g.stack[:len(g.stack)-n]
	return vals, size
}

func (g *generator) one() (any, int) {
	v, size := g.pop(1)
	if len(v) == 0 {
		return nil, 1
	}
	return v[0], size
}

const maxGenSize = 5000

// generate returns the value data describes and its size once written out,
// not counting cycles.
func generate(data []byte) (any, int) {
	g := &generator{data: data}
	for steps := 0; len(g.data) > 0 && steps < 200; steps++ {
		switch op := g.byte() % 26; op {
		case 0:
			g.push(nil, 1)
		case 1:
			g.push(g.byte()&1 == 1, 1)
		case 2:
			g.push(int64(g.u64()), 1)
		case 3:
			g.push(g.u64(), 1)
		case 4:
			g.push(math.Float64frombits(g.u64()), 1)
		case 5:
			g.push(math.Float32frombits(uint32(g.u64())), 1)
		case 6:
			g.push(string(g.bytes()), 1)
		case 7:
			g.push(json.Number(g.bytes()), 1)
		case 8, 9, 12, 22:
			vals, size := g.pop(int(g.byte() % 5))
			if size > maxGenSize {
				continue
			}
			switch op {
			case 8:
				g.push(vals, size)
			case 9:
				m := map[string]any{}
				for _, v := range vals {
					m[string(g.bytes())] = v
				}
				g.push(m, size)
			case 12:
				m := map[int16]any{}
				for _, v := range vals {
					m[int16(g.u64())] = v
				}
				g.push(m, size)
			case 22:
				m := map[textKey]any{}
				for _, v := range vals {
					m[textKey{string(g.bytes()), "k"}] = v
				}
				g.push(m, size)
			}
		case 10:
			v, size := g.one()
			g.push(&v, size)
		case 11:
			vals, size := g.pop(2)
			s := genStruct{A: int(int8(g.byte())), B: string(g.bytes()), E: g.bytes(), F: float64(int8(g.byte())) / 4}
			if len(vals) > 0 {
				s.C = vals[0]
			}
			if len(vals) > 1 {
				s.G = map[string]any{"g": vals[1]}
			}
			if g.byte()&1 == 1 {
				s.H = json.Number(g.bytes())
			}
			g.push(s, size)
		case 13:
			g.push(g.bytes(), 1)
		case 14:
			vals, size := g.pop(2)
			var a [2]any
			copy(a[:], vals)
			g.push(a, size)
		case 15:
			v, size := g.one()
			m := map[string]any{"x": v}
			m["self"] = m
			g.push(m, size)
		case 16:
			g.push(rawMarshaler(g.bytes()), 1)
		case 17:
			g.push(json.RawMessage(g.bytes()), 1)
		case 18:
			g.push(func() {}, 1)
		case 19:
			g.push(map[float64]int{1: 1}, 1)
		case 20:
			v, size := g.one()
			s := &genStruct{C: v}
			s.D = &genStruct{D: s}
			g.push(s, size)
		case 21:
			g.push([]ptrMarshaler{{int(g.byte())}}, 1)
		case 23:
			if len(g.stack) > 0 {
				top := g.stack[len(g.stack)-1]
				g.stack = append(g.stack, top)
			}
		case 24:
			v, size := g.one()
			s := []any{v, nil}
			s[1] = s
			g.push(s, size)
		case 25:
			g.push(&genStruct{A: 1, D: &genStruct{B: string(g.bytes())}}, 3)
		}
	}
	vals, size := g.pop(len(g.stack))
	if len(vals) == 1 {
		return vals[0], size
	}
	return vals, size
}

// FuzzNormalize checks Normalize against encoding/json on random values:
// it never panics; it succeeds exactly when json.Marshal does (apart from
// its own limits) and then gives the tree encoding/json reads back; and
// Clone copies that tree.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte{2, 1, 2, 3, 4, 5, 6, 7, 8, 6, 3, 'a', 'b', 'c', 8, 2})
	f.Add([]byte{4, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 9, 1, 1, 'k'})
	f.Add([]byte{6, 2, 0xff, 'x', 15, 11, 3, 'b', 'b', 'b', 2})
	f.Add([]byte{16, 5, '[', '1', ',', '2', ']', 17, 3, '{', '}', ' ', 8, 2})
	f.Add([]byte{20, 24, 23, 8, 3, 21, 7, 22, 3, 2, 'z', 'z'})
	f.Add([]byte{25, 1, 'q', 13, 4, 1, 2, 3, 4, 14, 10, 10, 10})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, size := generate(data)
		got, err := Normalize("v", v, nil)
		if errors.Is(err, ErrCycle) && size > 200 {
			// encoding/json finds a cycle only 1000 levels down, and walks
			// everything on the way there: too slow to run on big values.
			return
		}
		_, merr := json.Marshal(v)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Path == "" || e.Detail == "" {
				t.Fatalf("error %#v is not a complete *Error", err)
			}
			known := false
			for _, k := range []error{ErrCycle, ErrTooDeep, ErrTooLarge, ErrNumber, ErrUnsupported, ErrKey, ErrMarshaler} {
				known = known || errors.Is(err, k)
			}
			if !known {
				t.Fatalf("error %v has no kind", err)
			}
			if merr == nil && !errors.Is(err, ErrTooDeep) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Normalize failed (%v) where json.Marshal succeeds", err)
			}
			return
		}
		if merr != nil {
			t.Fatalf("Normalize succeeded where json.Marshal fails (%v): %#v", merr, got)
		}
		checkTree(t, got)
		if want, err := roundTrip(v); err == nil && !sameTree(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Fatalf("Normalize =\n%s\nencoding/json reads back\n%s", g, w)
		}
		if c := Clone(got); !reflect.DeepEqual(c, got) {
			t.Fatalf("Clone = %#v, want %#v", c, got)
		}
	})
}
