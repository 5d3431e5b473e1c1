package sqlite

import (
	"runtime"
	"strings"
	"sync"

	"github.com/ncruces/go-sqlite3/vfs"
)

// walVFS is the operating-system VFS of the driver with one change to WAL
// files: a WAL frame is written with one system call instead of two.
//
// SQLite writes each frame of the WAL as two writes at adjacent offsets:
// the 24-byte frame header, then the page. On this project's development
// VM a pwrite costs about 3–4 µs, and a tool-result append writes two
// frames (the message's page and the tool-result index's page), so the
// second write of each frame is a tenth of the append. walFile holds a
// small write back and sends it with the write that continues it.
//
// What reaches the file, and in what order relative to every sync, read
// and size query, is unchanged: a held write is sent before any other
// operation on the file, and SQLite writes the page right after its
// header, before it updates the WAL index that makes a frame visible to
// readers. The one place where SQLite writes a header without the page
// after it (rewriting the checksums of frames it overwrote within a
// transaction, each header written after reading its frame back) is
// recognised by that read and written through at once. The WAL file's
// format is SQLite's own: other processes and connections with the plain
// VFS share the database as before.
type walVFS struct{ vfs.VFSFilename }

// walVFSName is the name walVFS is registered under.
const walVFSName = "toolrun-wal"

var registerVFS = sync.OnceValue(func() bool {
	os, ok := vfs.Find("").(vfs.VFSFilename)
	if !ok {
		return false
	}
	vfs.Register(walVFSName, walVFS{os})
	return true
})

// OpenFilename implements vfs.VFSFilename: WAL files are wrapped, every
// other file is the operating-system VFS's own.
func (v walVFS) OpenFilename(name *vfs.Filename, flags vfs.OpenFlag) (vfs.File, vfs.OpenFlag, error) {
	f, out, err := v.VFSFilename.OpenFilename(name, flags)
	if err != nil || flags&vfs.OPEN_WAL == 0 {
		return f, out, err
	}
	if f.DeviceCharacteristics()&vfs.IOCAP_POWERSAFE_OVERWRITE == 0 {
		// Without power-safe overwrite SQLite pads and splits commit
		// frames at sync points; walFile assumes whole frames.
		return f, out, nil
	}
	return &walFile{File: f, readOff: -1}, out, nil
}

// walURI returns the database name that opens path with walVFS, or path
// unchanged where walVFS is not used (in-memory databases, a URI naming its
// own VFS, Windows paths).
func walURI(path string) string {
	if path == ":memory:" || runtime.GOOS == "windows" || !registerVFS() {
		return path
	}
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		query, frag := rest, ""
		if i := strings.IndexByte(query, '#'); i >= 0 {
			query, frag = query[:i], query[i:]
		}
		i := strings.IndexByte(query, '?')
		if i < 0 {
			return "file:" + query + "?vfs=" + walVFSName + frag
		}
		for _, kv := range strings.Split(query[i+1:], "&") {
			if strings.HasPrefix(kv, "vfs=") || kv == "vfs" {
				return path
			}
		}
		return "file:" + query + "&vfs=" + walVFSName + frag
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	if strings.HasPrefix(esc, "/") {
		esc = "//" + esc // an empty authority, so "//x" stays a path
	}
	return "file:" + esc + "?vfs=" + walVFSName
}

// walHeldMax is the largest write walFile holds back: a frame header (24
// bytes) or the WAL header (32).
const walHeldMax = 32

// walFile is a WAL file that sends a frame header together with its page.
type walFile struct {
	vfs.File
	held    []byte // a write not yet sent, at heldOff
	heldOff int64
	readOff int64 // offset of the last read, -1 after any other operation
	buf     []byte
}

// send writes the held write, if any.
func (f *walFile) send() error {
	if len(f.held) == 0 {
		return nil
	}
	_, err := f.File.WriteAt(f.held, f.heldOff)
	f.held = f.held[:0]
	return err
}

// WriteAt implements vfs.File.
func (f *walFile) WriteAt(p []byte, off int64) (int, error) {
	readOff := f.readOff
	f.readOff = -1
	if len(f.held) > 0 {
		if off == f.heldOff+int64(len(f.held)) {
			f.buf = append(append(f.buf[:0], f.held...), p...)
			f.held = f.held[:0]
			if _, err := f.File.WriteAt(f.buf, f.heldOff); err != nil {
				return 0, err
			}
			return len(p), nil
		}
		if err := f.send(); err != nil {
			return 0, err
		}
	}
	if len(p) <= walHeldMax && off != readOff {
		f.held = append(f.held[:0], p...)
		f.heldOff = off
		return len(p), nil
	}
	return f.File.WriteAt(p, off)
}

// ReadAt implements vfs.File.
func (f *walFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.send(); err != nil {
		return 0, err
	}
	f.readOff = off
	return f.File.ReadAt(p, off)
}

// Sync implements vfs.File.
func (f *walFile) Sync(flags vfs.SyncFlag) error {
	f.readOff = -1
	if err := f.send(); err != nil {
		return err
	}
	return f.File.Sync(flags)
}

// Truncate implements vfs.File.
func (f *walFile) Truncate(size int64) error {
	f.readOff = -1
	if err := f.send(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Size implements vfs.File.
func (f *walFile) Size() (int64, error) {
	f.readOff = -1
	if err := f.send(); err != nil {
		return 0, err
	}
	return f.File.Size()
}

// Lock implements vfs.File.
func (f *walFile) Lock(lock vfs.LockLevel) error {
	f.readOff = -1
	if err := f.send(); err != nil {
		return err
	}
	return f.File.Lock(lock)
}

// Unlock implements vfs.File.
func (f *walFile) Unlock(lock vfs.LockLevel) error {
	f.readOff = -1
	if err := f.send(); err != nil {
		return err
	}
	return f.File.Unlock(lock)
}

// Close implements vfs.File.
func (f *walFile) Close() error {
	err := f.send()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
