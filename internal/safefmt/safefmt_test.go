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
