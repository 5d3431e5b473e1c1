package sandbox

import (
	"bufio"
	"bytes"
	"math"
	"math/big"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrameRoundTrip(t *testing.T) {
	n, _ := new(big.Int).SetString("-98765432109876543210", 10)
	val := []any{nil, Undefined, true, false, 2.5, "s", []any{1.0}, map[string]any{"k": Set{"a"}},
		time.UnixMilli(1234).UTC(), Map{{Key: 1.0, Value: "x"}}, n, ArrayBuffer{1}, []byte{2}, TypedArray{Type: "Int16Array", Data: []byte{1, 0}}}
	e := &Error{Name: "N", Message: "M", Stack: "S", Line: 3, Column: 4, Filename: "f", Specifier: "sp"}
	frames := []*frame{
		{T: frCompile, ID: 8, Comp: &compileSpec{Hash: "h", Source: "s", Filename: "f.ts", Lang: "typescript", Modules: map[string]string{"./a.ts": "x"}, Imports: map[string][]string{"fs": {"read"}}, Memory: 5}},
		{T: frCompiled, ID: 8, Bund: &bundleSpec{Code: "c", Map: []byte("{}"), Sources: []string{"a"}, Exports: []string{"default"}}},
		{T: frCompiled, ID: 8, Err: e},
		{T: frNeed, ID: 8},
		{T: frRun, ID: 1, Run: &runSpec{Hash: "h", Bundle: &bundleSpec{Code: "c", Map: []byte("{}"), Sources: []string{"a"}, Exports: []string{"default"}}, Entry: "default",
			Args: val, Globals: map[string]any{"f": &funcRef{id: 3}}, Imports: map[string]map[string]any{"fs": {"read": &funcRef{id: 0}}}, Report: true, MaxStack: 7, Memory: 1 << 20}},
		{T: frRet, ID: 2, C: 9, V: val},
		{T: frRet, ID: 2, C: 9, Err: e},
		{T: frTerm, ID: 3, Err: e},
		{T: frCall, ID: 4, C: 5, Fn: 6, Args: val},
		{T: frReport, ID: 5, V: map[string]any{"x": 1.0}},
		{T: frLog, ID: 6, Lvl: "warn", TS: 42, Args: []any{"a"}},
		{T: frDone, ID: 7, St: StatusSuccess, V: val},
		{T: frDone, ID: 7, St: StatusError, Err: e},
	}
	var buf bytes.Buffer
	for _, f := range frames {
		require.NoError(t, writeFrame(&buf, f))
	}
	r := bufio.NewReader(&buf)
	for _, want := range frames {
		got, err := readFrame(r, maxFrameToWorker, maxTransferBytes)
		require.NoError(t, err)
		if want.Run != nil {
			assert.Equal(t, want.Run.Globals["f"].(*funcRef).id, got.Run.Globals["f"].(*funcRef).id)
			want.Run.Globals, got.Run.Globals = nil, nil
			want.Run.Imports, got.Run.Imports = nil, nil
		}
		if want.T == frRet || want.T == frDone || want.T == frCall {
			if vs, ok := got.V.([]any); ok {
				assert.Equal(t, 0, n.Cmp(vs[10].(*big.Int)))
			}
		}
		assert.Equal(t, want, got)
	}
}

func TestDecodeFrameTakesNumbersPastMaxInt32AsMaxInt32(t *testing.T) {
	// Masking the high bits instead would make 1<<32+1 a 1.
	for _, n := range []int{1<<32 + 1, 1 << 31, math.MaxInt64} {
		run, err := decodeFrame(encodeFrame(&frame{T: frRun, ID: 1, Run: &runSpec{MaxStack: n}})[4:], maxTransferBytes)
		require.NoError(t, err)
		assert.Equal(t, math.MaxInt32, run.Run.MaxStack, "MaxStack %d", n)
		call, err := decodeFrame(encodeFrame(&frame{T: frCall, ID: 1, C: 2, Fn: n})[4:], maxTransferBytes)
		require.NoError(t, err)
		assert.Equal(t, math.MaxInt32, call.Fn, "Fn %d: past the host's functions, not another one", n)
	}
}

func TestDecodeFrameRejectsGarbage(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	good := encodeFrame(&frame{T: frCall, ID: 1, C: 2, Args: []any{"abc", []any{1.0, map[string]any{"k": "v"}}}})[4:]
	for i := 0; i < 20000; i++ {
		data := append([]byte{}, good...)
		for j := 0; j < 1+rng.Intn(4); j++ {
			data[rng.Intn(len(data))] = byte(rng.Intn(256))
		}
		data = data[:rng.Intn(len(data)+1)]
		assert.NotPanics(t, func() { _, _ = decodeFrame(data, maxTransferBytes) })
	}
	_, err := decodeFrame([]byte{99}, maxTransferBytes)
	assert.Error(t, err)
}

// FuzzDecodeFrame feeds arbitrary frame bodies to the decoder, as a
// compromised or broken worker could send them: it never panics, and a
// frame it accepts encodes to a body that decodes to the same encoding.
func FuzzDecodeFrame(f *testing.F) {
	e := &Error{Name: "N", Message: "M", Stack: "S", Line: 3, Column: 4, Filename: "f"}
	val := []any{nil, Undefined, true, 2.5, "s", []any{1.0}, map[string]any{"k": Set{"a"}}, time.UnixMilli(1234).UTC(),
		Map{{Key: 1.0, Value: "x"}}, big.NewInt(-7), ArrayBuffer{1}, TypedArray{Type: "Int16Array", Data: []byte{1, 0}}}
	for _, fr := range []*frame{
		{T: frCompiled, ID: 8, Bund: &bundleSpec{Code: "c", Map: []byte("{}"), Sources: []string{"a"}, Exports: []string{"default"}}},
		{T: frCompiled, ID: 8, Err: e},
		{T: frNeed, ID: 8},
		{T: frCall, ID: 4, C: 5, Fn: 6, Args: val},
		{T: frReport, ID: 5, V: map[string]any{"x": 1.0}},
		{T: frLog, ID: 6, Lvl: "warn", TS: 42, Args: []any{"a"}},
		{T: frDone, ID: 7, St: StatusSuccess, V: val},
		{T: frDone, ID: 7, St: StatusError, Err: e},
	} {
		f.Add(encodeFrame(fr)[4:])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fr, err := decodeFrame(body, maxTransferBytes)
		if err != nil {
			return
		}
		once := encodeFrame(fr)
		again, err := decodeFrame(once[4:], maxTransferBytes)
		if err != nil {
			t.Fatalf("a frame's own encoding does not decode: %v", err)
		}
		if twice := encodeFrame(again); !bytes.Equal(once, twice) {
			t.Fatalf("a frame decoded from its own encoding encodes differently:\n%x\n%x", once, twice)
		}
	})
}
