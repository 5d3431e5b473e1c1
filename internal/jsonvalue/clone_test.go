package jsonvalue

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

func TestCloneCopiesEveryContainer(t *testing.T) {
	in := map[string]any{
		"m":   map[string]any{"a": 1.0, "l": []any{"x", map[string]any{"deep": true}}},
		"s":   []any{nil, json.Number("12345678901234567890")},
		"raw": json.RawMessage(`{"r":1}`),
		"nil": map[string]any(nil),
		"e":   []any{},
	}
	c := Clone(in).(map[string]any)
	if !reflect.DeepEqual(c, in) {
		t.Fatalf("Clone = %v, want %v", c, in)
	}
	c["m"].(map[string]any)["l"].([]any)[1].(map[string]any)["deep"] = false
	c["s"].([]any)[0] = "changed"
	c["raw"].(json.RawMessage)[2] = 'X'
	c["e"] = append(c["e"].([]any), 1)
	if in["m"].(map[string]any)["l"].([]any)[1].(map[string]any)["deep"] != true ||
		in["s"].([]any)[0] != nil || string(in["raw"].(json.RawMessage)) != `{"r":1}` || len(in["e"].([]any)) != 0 {
		t.Fatal("changing the clone changed the original")
	}
	if c["nil"].(map[string]any) != nil {
		t.Error("a nil map was cloned into a non-nil one")
	}
	for _, v := range []any{nil, "s", 1.5, true, json.Number("1")} {
		if Clone(v) != v {
			t.Errorf("Clone(%v) = %v", v, Clone(v))
		}
	}
}

func TestCloneOfDeepTrees(t *testing.T) {
	const million = 1000000
	in := nest(million)
	out := Clone(in)
	a, b := in, out
	for i := 0; i < million; i++ {
		sa, sb := a.([]any), b.([]any)
		if unsafe.SliceData(sa) == unsafe.SliceData(sb) {
			t.Fatalf("level %d is shared", i)
		}
		a, b = sa[0], sb[0]
	}
	if b != 1 {
		t.Fatalf("the innermost value is %v", b)
	}
}

func TestCloneKeepsSharingAndCycles(t *testing.T) {
	shared := map[string]any{"x": 1.0}
	m := map[string]any{"a": shared, "b": shared}
	m["self"] = m
	c := Clone(m).(map[string]any)
	if reflect.ValueOf(c).UnsafePointer() == reflect.ValueOf(m).UnsafePointer() {
		t.Fatal("the map was not copied")
	}
	if ptr(c["self"]) != ptr(c) {
		t.Error("the copy of a map that contains itself does not contain the copy")
	}
	if ptr(c["a"]) != ptr(c["b"]) || ptr(c["a"]) == ptr(shared) {
		t.Error("a subtree reached twice was not copied once")
	}
}

func ptr(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }

func TestCloneOfAFlatMapCostsOnlyTheCopy(t *testing.T) {
	m := map[string]any{"a": "x", "b": 1.5, "c": true, "d": nil}
	copyAllocs := testing.AllocsPerRun(100, func() {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		sink = out
	})
	if got := testing.AllocsPerRun(100, func() { sink = Clone(m) }); got > copyAllocs {
		t.Errorf("Clone of a flat map allocates %v times, copying it %v", got, copyAllocs)
	}
}
