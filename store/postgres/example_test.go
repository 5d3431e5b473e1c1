package postgres_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
)

// Run a thread on one of several service instances: own it through a
// lease, write through the lease, give it up when done.
func Example() {
	ctx := context.Background()
	st, err := postgres.Open(ctx, "postgres://app@db.internal/toolrun", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	// Wait until no other instance runs the thread, then keep the lease
	// renewed for as long as this instance works on it.
	leased, release, err := st.LockThread(ctx, "thread-42", "instance-7", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer release(ctx)

	reg := toolrun.NewRegistry(nil)
	ex := toolrun.NewExecutor(reg, &toolrun.ExecutorOptions{Store: leased})
	_, err = ex.Run(ctx, "thread-42", []toolrun.ToolCall{{ID: "call-1", Name: "lookup", Arguments: `{}`}})
	if errors.Is(err, postgres.ErrStaleLease) {
		// Another instance took the thread over (this one stalled past the
		// lease); it resumes the batch, skipping the stored results.
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}
