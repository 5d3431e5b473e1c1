//go:build unix

package postgres_test

import (
	"context"
	"os"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/postgres"
	"github.com/toolrun/toolrun/store/storetest"
)

func openCrashStore(ctx context.Context, schema string) (toolrun.Store, error) {
	return postgres.Open(ctx, os.Getenv("TOOLRUN_POSTGRES_URL"), &postgres.Options{Schema: schema})
}

// TestCrashHelper is the child process of TestCrashResume.
func TestCrashHelper(t *testing.T) { storetest.CrashHelper(t, openCrashStore) }

// TestCrashResume: SIGKILL mid-batch loses no stored result, stores none
// twice, the store opens cleanly, and a rerun executes only the calls
// without a stored result.
func TestCrashResume(t *testing.T) {
	dbURL(t) // skips without TOOLRUN_POSTGRES_URL
	storetest.Crash(t, func(t *testing.T) string { return newSchema(t) }, &storetest.CrashOptions{Open: openCrashStore, HelperTest: "TestCrashHelper"})
}
