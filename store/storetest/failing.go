package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/toolrun/toolrun"
)

// ErrInjected is the error a [FailingStore] returns when its Err is nil.
var ErrInjected = errors.New("storetest: injected store failure")

// The write operations a [FailingStore] counts, as passed to its Match
// function and named in its errors.
const (
	OpCreateThread   = "CreateThread"
	OpUpdateThread   = "UpdateThread"
	OpAppendMessages = "AppendMessages"
	OpSetValue       = "SetValue"
	OpSetEnv         = "SetEnv"
	OpDeleteEnv      = "DeleteEnv"
	OpWriteFile      = "WriteFile"
	OpDeleteFile     = "DeleteFile"
	OpPutChild       = "PutChild"
)

// FailingStore wraps a Store and makes chosen writes fail, to test how code
// copes with a store that breaks mid-run: a full disk, a dropped database
// connection. Reads always pass through to the wrapped store; a write that
// fails does not reach it, so nothing of it is stored.
//
//	fs := &storetest.FailingStore{Store: toolrun.NewMemoryStore(), FailAt: 3, Err: syscall.ENOSPC}
//
// makes the third write (of any kind) fail with an error that wraps
// syscall.ENOSPC, and every later write succeed; set Sticky to make the store
// stay broken after the first failure.
//
// Set the fields before first use and do not change them afterwards. A
// FailingStore is then safe for concurrent use if the wrapped store is.
type FailingStore struct {
	// Store is the wrapped store.
	toolrun.Store

	// FailAt is the 1-based number of the counted write that fails; 0 means
	// no write fails.
	FailAt int
	// Err is the error a failing write returns (wrapped, with the
	// operation's name); nil means ErrInjected.
	Err error
	// Sticky makes every counted write after the FailAt-th fail too.
	Sticky bool
	// Match, when set, restricts counting (and failing) to the writes whose
	// operation name (OpAppendMessages and so on) it accepts. Writes it
	// rejects pass through uncounted.
	Match func(op string) bool

	mu       sync.Mutex
	writes   int
	failures int
}

// Writes returns the number of counted writes attempted so far, failed
// ones included.
func (f *FailingStore) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// Failures returns the number of writes that were made to fail.
func (f *FailingStore) Failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures
}

// check counts a write of op and returns the injected error if it must fail.
func (f *FailingStore) check(op string) error {
	if f.Match != nil && !f.Match(op) {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.FailAt <= 0 || f.writes < f.FailAt || (f.writes > f.FailAt && !f.Sticky) {
		return nil
	}
	f.failures++
	err := f.Err
	if err == nil {
		err = ErrInjected
	}
	return fmt.Errorf("storetest: %s (write %d): %w", op, f.writes, err)
}

// CreateThread implements toolrun.ThreadStore.
func (f *FailingStore) CreateThread(ctx context.Context, t *toolrun.Thread) error {
	if err := f.check(OpCreateThread); err != nil {
		return err
	}
	return f.Store.CreateThread(ctx, t)
}

// UpdateThread implements toolrun.ThreadStore.
func (f *FailingStore) UpdateThread(ctx context.Context, t *toolrun.Thread) error {
	if err := f.check(OpUpdateThread); err != nil {
		return err
	}
	return f.Store.UpdateThread(ctx, t)
}

// AppendMessages implements toolrun.MessageStore.
func (f *FailingStore) AppendMessages(ctx context.Context, threadID string, msgs ...*toolrun.Message) error {
	if err := f.check(OpAppendMessages); err != nil {
		return err
	}
	return f.Store.AppendMessages(ctx, threadID, msgs...)
}

// SetValue implements toolrun.ValueStore.
func (f *FailingStore) SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error {
	if err := f.check(OpSetValue); err != nil {
		return err
	}
	return f.Store.SetValue(ctx, threadID, key, value)
}

// SetEnv implements toolrun.EnvStore.
func (f *FailingStore) SetEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string, v toolrun.EnvValue) error {
	if err := f.check(OpSetEnv); err != nil {
		return err
	}
	return f.Store.SetEnv(ctx, scope, ownerID, name, v)
}

// DeleteEnv implements toolrun.EnvStore.
func (f *FailingStore) DeleteEnv(ctx context.Context, scope toolrun.EnvScope, ownerID, name string) error {
	if err := f.check(OpDeleteEnv); err != nil {
		return err
	}
	return f.Store.DeleteEnv(ctx, scope, ownerID, name)
}

// WriteFile implements toolrun.FileStore.
func (f *FailingStore) WriteFile(ctx context.Context, threadID string, fi toolrun.FileInfo, data []byte) (toolrun.FileInfo, error) {
	if err := f.check(OpWriteFile); err != nil {
		return toolrun.FileInfo{}, err
	}
	return f.Store.WriteFile(ctx, threadID, fi, data)
}

// DeleteFile implements toolrun.FileStore.
func (f *FailingStore) DeleteFile(ctx context.Context, threadID, path string) error {
	if err := f.check(OpDeleteFile); err != nil {
		return err
	}
	return f.Store.DeleteFile(ctx, threadID, path)
}

// PutChild implements toolrun.ChildStore.
func (f *FailingStore) PutChild(ctx context.Context, e toolrun.ChildEntry) error {
	if err := f.check(OpPutChild); err != nil {
		return err
	}
	return f.Store.PutChild(ctx, e)
}

var _ toolrun.Store = (*FailingStore)(nil)
