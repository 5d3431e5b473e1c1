package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/postgres"
	"github.com/toolrun/toolrun/store/storetest"
)

var testIDs atomic.Int64

// testID returns a fresh message id, as the front layer would give one.
func testID() string { return fmt.Sprint("msg-", testIDs.Add(1)) }

// testTime is the creation time of the tests' messages.
var testTime = time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)

// dbURL returns TOOLRUN_POSTGRES_URL or skips the test.
func dbURL(t testing.TB) string {
	u := os.Getenv("TOOLRUN_POSTGRES_URL")
	if u == "" {
		t.Skip("TOOLRUN_POSTGRES_URL is not set")
	}
	return u
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB) string {
	url := dbURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "toolrun_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

var schemas sync.Map // *postgres.Store → schema, for reopen

// testKeys is the key ring of the stores the tests open; the conformance
// suite stores secret env values.
var testKeys = func() *keyring.Ring {
	k, err := keyring.Generate("test-1")
	if err != nil {
		panic(err)
	}
	r, err := keyring.New(k)
	if err != nil {
		panic(err)
	}
	return r
}()

// openTemp opens a store in a fresh schema.
func openTemp(t testing.TB) *postgres.Store { return openTempOpts(t, false) }

func openTempOpts(t testing.TB, async bool) *postgres.Store {
	t.Helper()
	schema := newSchema(t)
	st, err := postgres.Open(context.Background(), dbURL(t), &postgres.Options{Schema: schema, MaxConns: 8, AsyncCommit: async, Keys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	schemas.Store(st, schema)
	return st
}

func reopen(old toolrun.Store) (toolrun.Store, error) {
	schema, _ := schemas.Load(old.(*postgres.Store))
	old.(*postgres.Store).Close()
	st, err := postgres.Open(context.Background(), os.Getenv("TOOLRUN_POSTGRES_URL"), &postgres.Options{Schema: schema.(string), MaxConns: 8, Keys: testKeys})
	if err != nil {
		return nil, err
	}
	schemas.Store(st, schema)
	return st, nil
}

func TestConformance(t *testing.T) {
	dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTemp(t) }, &storetest.Options{Reopen: reopen})
}

// A store bound to a current lease behaves like any store, including for
// the leased thread.
func TestConformanceNew(t *testing.T) {
	url := dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store {
		schema := newSchema(t)
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
		conn.Close(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
		pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		st, err := postgres.New(t.Context(), pool, &postgres.Options{Keys: testKeys})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}, nil)
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTemp(b) })
}

func BenchmarkStoreAsyncCommit(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return openTempOpts(b, true) })
}

// AsyncCommit changes durability, not behaviour.
func TestConformanceAsyncCommit(t *testing.T) {
	dbURL(t)
	storetest.Run(t, func(t *testing.T) toolrun.Store { return openTempOpts(t, true) }, nil)
}

// Env scopes other than thread and user are refused, as by the memory store.
func TestUnknownEnvScope(t *testing.T) {
	st := openTemp(t)
	if err := st.SetEnv(t.Context(), "agent", "a", "K", toolrun.EnvValue{Value: "v"}); err == nil {
		t.Error("SetEnv accepted scope \"agent\"")
	}
}
