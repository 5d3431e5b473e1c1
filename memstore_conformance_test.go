package toolrun_test

import (
	"context"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/storetest"
)

// TestMemoryStoreConformance runs the Store conformance suite against the
// in-memory store.
func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store { return toolrun.NewMemoryStore() }, nil)
}

// TestMemoryStoreCheck runs the same suite through the error-returning entry point.
func TestMemoryStoreCheck(t *testing.T) {
	err := storetest.Check(context.Background(), func() (toolrun.Store, error) { return toolrun.NewMemoryStore(), nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
}
