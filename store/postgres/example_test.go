package postgres_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
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

// Encrypt secret env values with a key ring every instance reads from its
// environment, and after a rotation seal the stored values again from one
// instance.
func Example_secrets() {
	ctx := context.Background()
	// "2025-07:base64…,2025-01:base64…": the new key first, the old one
	// still there to read the values it sealed.
	ring, err := keyring.Parse(os.Getenv("TOOLRUN_SECRET_KEYS"))
	if err != nil {
		log.Fatal(err)
	}
	st, err := postgres.Open(ctx, "postgres://app@db.internal/toolrun", &postgres.Options{Keys: ring})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	// Once every instance runs with the new ring:
	n, err := st.ReencryptSecrets(ctx)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d secrets sealed again with key %s; the old key can go", n, ring.Primary())
}
