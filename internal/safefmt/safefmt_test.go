package safefmt

import (
	"errors"
	"strings"
	"testing"
)

// repanicker panics with itself from String, so fmt's own recovery, which
// formats the panic value, panics again.
type repanicker struct{}

func (repanicker) String() string { panic(repanicker{}) }

type badError struct{}

func (badError) Error() string { panic(badError{}) }

func TestSprintSurvivesAStringMethodThatPanicsWithItself(t *testing.T) {
	got := Sprint(repanicker{})
	if !strings.Contains(got, "safefmt.repanicker") || !strings.Contains(got, "panicked") {
		t.Fatalf("Sprint = %q, want the type named and the panic said", got)
	}
}

func TestSprintFormatsOrdinaryValues(t *testing.T) {
	if got := Sprint(42); got != "42" {
		t.Fatalf("Sprint(42) = %q", got)
	}
	if got := Sprint(errors.New("boom")); got != "boom" {
		t.Fatalf("Sprint(error) = %q", got)
	}
}

func TestErrorSurvivesAnErrorMethodThatPanics(t *testing.T) {
	got := Error(badError{})
	if !strings.Contains(got, "safefmt.badError") {
		t.Fatalf("Error = %q, want the type named", got)
	}
	if Error(nil) != "<nil>" {
		t.Fatal("Error(nil) must be <nil>")
	}
}

func TestSprintCutsHugeTexts(t *testing.T) {
	got := Sprint(strings.Repeat("é", MaxLen))
	if len(got) > MaxLen+len("… (cut)") || !strings.HasSuffix(got, "… (cut)") {
		t.Fatalf("len %d, suffix %q", len(got), got[len(got)-12:])
	}
	if !strings.HasPrefix(got, "é") {
		t.Fatal("cut text lost its start")
	}
}

func TestSprintOfValuesFmtWouldFollowWithoutEnd(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	s := []any{nil}
	s[0] = s
	type holder struct{ M map[string]any }
	deep := map[string]any{}
	for i, cur := 0, deep; i < 100; i++ {
		next := map[string]any{}
		cur["k"] = next
		cur = next
	}
	big := make([]int, 1<<17)
	for name, v := range map[string]any{"map in itself": m, "slice in itself": s, "struct holding one": holder{m},
		"pointer to one": &holder{m}, "100 levels": deep, "131072 values": big} {
		got := Sprint(v)
		if !strings.Contains(got, "cyclic, or too deep or too large to format") {
			t.Errorf("%s: Sprint = %.80q", name, got)
		}
	}
	for v, want := range map[any]string{"text": "text", 42: "42"} {
		if got := Sprint(v); got != want {
			t.Errorf("Sprint(%v) = %q", v, got)
		}
	}
	if got := Sprint(map[string]any{"a": []any{1, "b"}}); got != "map[a:[1 b]]" {
		t.Errorf("a small nested value: %q", got)
	}
	if got := Sprint([]byte("abc")); got != "[97 98 99]" {
		t.Errorf("bytes: %q", got)
	}
}
