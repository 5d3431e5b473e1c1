package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/ncruces/go-sqlite3/driver"
	"github.com/ncruces/go-sqlite3/vfs"
)

// opsFile is a vfs.File that records the operations reaching it.
type opsFile struct {
	vfs.File // nil: methods not overridden must not be called
	ops      []string
	data     []byte
}

func (f *opsFile) WriteAt(p []byte, off int64) (int, error) {
	f.ops = append(f.ops, fmt.Sprintf("write %d+%d", off, len(p)))
	if n := int(off) + len(p); n > len(f.data) {
		f.data = append(f.data, make([]byte, n-len(f.data))...)
	}
	copy(f.data[off:], p)
	return len(p), nil
}

func (f *opsFile) ReadAt(p []byte, off int64) (int, error) {
	f.ops = append(f.ops, fmt.Sprintf("read %d+%d", off, len(p)))
	return copy(p, f.data[min(int(off), len(f.data)):]), nil
}

func (f *opsFile) Sync(vfs.SyncFlag) error { f.ops = append(f.ops, "sync"); return nil }
func (f *opsFile) Truncate(n int64) error {
	f.ops = append(f.ops, fmt.Sprint("truncate ", n))
	return nil
}
func (f *opsFile) Size() (int64, error) {
	f.ops = append(f.ops, "size")
	return int64(len(f.data)), nil
}
func (f *opsFile) Lock(vfs.LockLevel) error   { f.ops = append(f.ops, "lock"); return nil }
func (f *opsFile) Unlock(vfs.LockLevel) error { f.ops = append(f.ops, "unlock"); return nil }
func (f *opsFile) Close() error               { f.ops = append(f.ops, "close"); return nil }

// walFile sends a frame header with the page that follows it, and every
// held write before any other operation; a header rewritten after reading
// its frame back goes at once.
func TestWALFileCoalescing(t *testing.T) {
	hdr, page := make([]byte, 24), make([]byte, 4096)
	for i := range page {
		page[i] = byte(i)
	}
	for _, tt := range []struct {
		name string
		do   func(f *walFile)
		want []string
	}{
		{"frames", func(f *walFile) {
			f.WriteAt(hdr, 32)
			f.WriteAt(page, 56)
			f.WriteAt(hdr, 4152)
			f.WriteAt(page, 4176)
		}, []string{"write 32+4120", "write 4152+4120"}},
		{"WAL header then sync", func(f *walFile) {
			f.WriteAt(make([]byte, 32), 0)
			f.Sync(0)
			f.WriteAt(hdr, 32)
			f.WriteAt(page, 56)
		}, []string{"write 0+32", "sync", "write 32+4120"}},
		{"not adjacent", func(f *walFile) {
			f.WriteAt(hdr, 32)
			f.WriteAt(page, 8192)
		}, []string{"write 32+24", "write 8192+4096"}},
		{"held then read", func(f *walFile) {
			f.WriteAt(hdr, 32)
			f.ReadAt(make([]byte, 10), 0)
		}, []string{"write 32+24", "read 0+10"}},
		{"checksum rewrite", func(f *walFile) { // read a frame back, rewrite its header
			f.ReadAt(make([]byte, 4120), 32)
			f.WriteAt(hdr, 32)
			f.ReadAt(make([]byte, 4120), 4152)
			f.WriteAt(hdr, 4152)
		}, []string{"read 32+4120", "write 32+24", "read 4152+4120", "write 4152+24"}},
		{"held then size, truncate, lock, unlock, close", func(f *walFile) {
			for _, op := range []func(){
				func() { f.Size() },
				func() { f.Truncate(0) },
				func() { f.Lock(vfs.LOCK_SHARED) },
				func() { f.Unlock(vfs.LOCK_NONE) },
				func() { f.Close() },
			} {
				f.WriteAt(hdr, 0)
				op()
			}
		}, []string{"write 0+24", "size", "write 0+24", "truncate 0", "write 0+24", "lock", "write 0+24", "unlock", "write 0+24", "close"}},
		{"large writes go through", func(f *walFile) {
			f.WriteAt(page, 32)
			f.WriteAt(page, 4128)
		}, []string{"write 32+4096", "write 4128+4096"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			under := &opsFile{}
			f := &walFile{File: under, readOff: -1}
			tt.do(f)
			if !reflect.DeepEqual(under.ops, tt.want) {
				t.Errorf("ops %q, want %q", under.ops, tt.want)
			}
		})
	}
	// The bytes are the same as without coalescing.
	under := &opsFile{}
	f := &walFile{File: under, readOff: -1}
	h := []byte(strings.Repeat("h", 24))
	f.WriteAt(h, 0)
	f.WriteAt(page, 24)
	if string(under.data[:24]) != string(h) || string(under.data[24:]) != string(page) {
		t.Error("coalesced write changed the bytes")
	}
}

func TestWALURI(t *testing.T) {
	for in, want := range map[string]string{
		":memory:":                    ":memory:",
		"/tmp/a b/x.db":               "file:///tmp/a b/x.db?vfs=toolrun-wal",
		"rel/x.db":                    "file:rel/x.db?vfs=toolrun-wal",
		"/tmp/odd?#%.db":              "file:///tmp/odd%3f%23%25.db?vfs=toolrun-wal",
		"file:x.db":                   "file:x.db?vfs=toolrun-wal",
		"file:x.db?mode=rwc":          "file:x.db?mode=rwc&vfs=toolrun-wal",
		"file:x.db?mode=rwc#frag":     "file:x.db?mode=rwc&vfs=toolrun-wal#frag",
		"file:x.db?vfs=memdb":         "file:x.db?vfs=memdb",
		"file:x.db?cache=shared&vfs=": "file:x.db?cache=shared&vfs=",
	} {
		if got := walURI(in); got != want {
			t.Errorf("walURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// A transaction larger than the page cache spills pages to the WAL and,
// when it changes them again, overwrites those frames and rewrites the
// checksums of every frame from there at commit: the one place SQLite
// writes a frame header without its page. A copy of the files taken after
// the commit, opened with the plain VFS (which rebuilds the WAL index from
// the frames and their checksums, as after a crash), must hold the
// transaction.
func TestWALChecksumRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "spill.db")
	db, err := driver.Open(walURI(path), func(c *sqlite3.Conn) error {
		return c.Exec(`PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=8; PRAGMA wal_autocheckpoint=0`)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if _, err := tx.Exec(`INSERT INTO t VALUES (?, ?)`, i, strings.Repeat("a", 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(`UPDATE t SET v = ? || k`, strings.Repeat("b", 100)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Copy the database and its WAL as a crash would leave them.
	copyPath := filepath.Join(dir, "copy.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(copyPath+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := driver.Open(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	var n, bs int
	var check string
	if err := cp.QueryRow(`SELECT count(*), sum(v LIKE 'b%') FROM t`).Scan(&n, &bs); err != nil || n != 2000 || bs != 2000 {
		t.Errorf("recovered copy: %d rows, %d updated, %v; want 2000, 2000", n, bs, err)
	}
	if err := cp.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v", check, err)
	}
}
