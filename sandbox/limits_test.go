package sandbox

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math/big"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCutText(t *testing.T) {
	assert.Equal(t, "short", cutText("short", 10), "a text within the limit is kept")
	s := cutText(strings.Repeat("x", 1000), 100)
	assert.Len(t, s, 100)
	assert.True(t, strings.HasSuffix(s, cutMarker))
	// Multi-byte characters are never split.
	for max := 20; max < 40; max++ {
		s := cutText(strings.Repeat("é€𝄞", 100), max)
		assert.LessOrEqual(t, len(s), max)
		assert.True(t, utf8.ValidString(s), "cut at %d: %q", max, s)
		assert.True(t, strings.HasSuffix(s, cutMarker))
	}
	e := capError(&Error{Name: strings.Repeat("N", 1e5), Message: strings.Repeat("M", 1e6), Stack: strings.Repeat("S", 1e6),
		Filename: strings.Repeat("F", 1e5), Specifier: strings.Repeat("P", 1e5)})
	assert.LessOrEqual(t, len(e.Name), maxErrorName)
	assert.LessOrEqual(t, len(e.Message), maxErrorMessage)
	assert.LessOrEqual(t, len(e.Stack), maxErrorStack)
	assert.LessOrEqual(t, len(e.Filename), maxErrorFilename)
	assert.LessOrEqual(t, len(e.Specifier), maxErrorFilename)
}

// TestReadFrameRefusesBeforeAllocating feeds the host's frame reader a
// header claiming a frame just under the old 1 GiB limit: it must refuse
// it without allocating.
func TestReadFrameRefusesBeforeAllocating(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 1<<30-16)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	_, err := readFrame(bufio.NewReader(bytes.NewReader(hdr[:])), maxFrameFromWorker(DefaultMaxSourceBytes), maxTransferBytes)
	runtime.ReadMemStats(&ms1)
	require.ErrorIs(t, err, errFrameTooLarge)
	assert.Less(t, ms1.TotalAlloc-ms0.TotalAlloc, uint64(1<<20), "allocated before refusing")
}

func encodeValue(v any) []byte {
	e := &encoder{}
	e.value(v)
	return e.b
}

// TestDecodeBudget checks that values which are small on the wire but
// large as Go values are refused by the decoder's budget before they are
// built.
func TestDecodeBudget(t *testing.T) {
	nulls := make([]any, 1<<20)
	keys := map[string]any{}
	for i := 0; i < 1<<16; i++ {
		keys[string(rune(0x4e00+i))] = nil
	}
	for name, v := range map[string]any{"array of nulls": nulls, "object of nulls": keys} {
		f := encodeFrame(&frame{T: frReport, ID: 1, V: v})[4:]
		cost := valueCost(v)
		require.Greater(t, cost, int64(8*len(f)), "%s: the value costs far more than its frame", name)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		_, err := decodeFrame(f, int64(len(f)))
		runtime.ReadMemStats(&ms1)
		assert.ErrorIs(t, err, errFrameBudget, name)
		assert.Less(t, ms1.TotalAlloc-ms0.TotalAlloc, uint64(2*len(f)), "%s: allocated before refusing", name)
		got, err := decodeFrame(f, cost)
		require.NoError(t, err, "%s: a budget of exactly the value's cost is enough", name)
		assert.Equal(t, v, got.V)
	}
}

// TestDecodeChargesValueCost checks that the decoder charges exactly what
// valueCost says (so a value the engine let through is never refused by
// the host), and that a value's encoding is never longer than its cost
// (so frames of values within the limits fit the frame limit).
func TestDecodeChargesValueCost(t *testing.T) {
	n, _ := new(big.Int).SetString("-98765432109876543210", 10)
	vals := []any{nil, Undefined, true, 2.5, "", "text", []any{}, []any{1.0, "a", nil}, map[string]any{}, map[string]any{"k": []any{"v"}, "": 1.0},
		time.UnixMilli(5).UTC(), Map{{Key: "a", Value: 1.0}}, Set{1.0, "b"}, n, big.NewInt(0), ArrayBuffer{1, 2}, []byte{3}, TypedArray{Type: "Int16Array", Data: []byte{1, 0}},
		&funcRef{id: 7}, []any{map[string]any{"deep": Map{{Key: Set{}, Value: []any{ArrayBuffer{}}}}}}}
	for _, v := range vals {
		enc := encodeValue(v)
		cost := valueCost(v)
		assert.LessOrEqual(t, int64(len(enc)), cost, "%#v: encoding longer than its cost", v)
		d := &decoder{b: enc, budget: 1 << 40}
		got := d.value(0)
		require.False(t, d.bad, "%#v", v)
		assert.Equal(t, cost, 1<<40-d.budget, "%#v: charged", v)
		if b, ok := v.(*big.Int); ok {
			assert.Equal(t, 0, b.Cmp(got.(*big.Int)))
		} else if _, ok := v.(*funcRef); !ok {
			assert.Equal(t, v, got)
		}
	}
}

func TestCompileCacheBytes(t *testing.T) {
	mk := func(i, size int) *compiled {
		return &compiled{hash: string(rune('a' + i)), code: strings.Repeat("x", size), exports: []string{"default"}}
	}
	cc := newCompileCache(100, 10<<20, false)
	for i := 0; i < 8; i++ {
		cc.put(string(rune('a'+i)), mk(i, 3<<20), nil)
		_, b := cc.stats()
		assert.LessOrEqual(t, b, int64(10<<20), "the cache stays within its byte bound")
	}
	n, _ := cc.stats()
	assert.Equal(t, 3, n, "three 3 MiB bundles fit in 10 MiB")
	_, ok := cc.get("h")
	assert.True(t, ok, "the most recent bundle is kept")
	_, ok = cc.get("a")
	assert.False(t, ok, "the oldest were evicted")

	cc.put("big", mk(20, 11<<20), nil)
	_, ok = cc.get("big")
	assert.False(t, ok, "a bundle larger than the bound is not cached")

	// Charged for programs, a bundle whose program does not fit is kept
	// without it.
	pc := newCompileCache(100, 10<<20, true)
	c := mk(0, 1<<20)
	pc.put("p", c, nil)
	_, ok = pc.get("p")
	assert.True(t, ok)
	assert.True(t, c.dropProg.Load(), "its program is not kept")
	_, b := pc.stats()
	assert.Equal(t, c.cost(false), b)
}
