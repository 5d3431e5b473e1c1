//go:build unix

package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/sqlite"
	"github.com/toolrun/toolrun/store/storetest"
)

func openCrashStore(_ context.Context, path string) (toolrun.Store, error) {
	return sqlite.Open(path, nil)
}

// TestCrashHelper is the child process of TestCrashResume.
func TestCrashHelper(t *testing.T) { storetest.CrashHelper(t, openCrashStore) }

// TestCrashResume: SIGKILL mid-batch loses no stored result, stores none
// twice, leaves an intact database, and a rerun executes only the calls
// without a stored result.
func TestCrashResume(t *testing.T) {
	storetest.Crash(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "crash.db") }, &storetest.CrashOptions{
		Open:       openCrashStore,
		HelperTest: "TestCrashHelper",
		AfterReopen: func(t *testing.T, st toolrun.Store) {
			var check string
			if err := st.(*sqlite.Store).DB().QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
				t.Fatalf("integrity_check = %q, %v", check, err)
			}
		},
	})
}
