package storetest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/storetest"
)

func newMem(t *testing.T) toolrun.Store { return toolrun.NewMemoryStore() }

// at is the creation time of the tests' messages.
var at = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// The memory store conforms; the FailingStore around it with no failure
// configured conforms too (it must be transparent).
func TestRunMemory(t *testing.T) {
	storetest.Run(t, newMem, nil)
}

func TestRunFailingStoreTransparent(t *testing.T) {
	storetest.Run(t, func(t *testing.T) toolrun.Store {
		return &storetest.FailingStore{Store: toolrun.NewMemoryStore()}
	}, &storetest.Options{Goroutines: 4})
}

// Each broken store below breaks one rule; Check must report it in the case
// that checks that rule, and only the cases that depend on it.
func TestCheckFindsBrokenStores(t *testing.T) {
	tests := []struct {
		name     string
		wrap     func(toolrun.Store) toolrun.Store
		wantCase string
	}{
		{"no duplicate check", func(s toolrun.Store) toolrun.Store { return &noDupCheck{Store: s} }, "Messages/DuplicateToolResult"},
		{"wrong not-found error", func(s toolrun.Store) toolrun.Store { return &plainNotFound{Store: s} }, "Thread/NotFound"},
		{"default order reversed", func(s toolrun.Store) toolrun.Store { return &reversedDefault{Store: s} }, "Messages/List"},
		{"unsorted files", func(s toolrun.Store) toolrun.Store { return &unsortedFiles{Store: s} }, "Files/List"},
		{"lossy values", func(s toolrun.Store) toolrun.Store { return &lossyValues{Store: s} }, "Values/RoundTrip"},
		{"children sorted by reference", func(s toolrun.Store) toolrun.Store { return &sortedChildren{Store: s} }, "Children/Order"},
		{"threads stamped with the store's clock", func(s toolrun.Store) toolrun.Store { return &clockThreads{Store: s} }, "Thread/AsGiven"},
		{"message ids made up", func(s toolrun.Store) toolrun.Store { return &madeUpIDs{Store: s} }, "Messages/Incomplete"},
		{"ids and times written back", func(s toolrun.Store) toolrun.Store { return &writesBack{Store: s} }, "Messages/AsGiven"},
		{"After ignored", func(s toolrun.Store) toolrun.Store { return &ignoresAfter{Store: s} }, "Messages/ListAfter"},
		{"child times from the store's clock", func(s toolrun.Store) toolrun.Store { return &clockChildren{Store: s} }, "Children/PutGet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := storetest.Check(context.Background(), func() (toolrun.Store, error) {
				return tt.wrap(toolrun.NewMemoryStore()), nil
			}, nil)
			if err == nil {
				t.Fatalf("Check passed a store with %s", tt.name)
			}
			if !strings.Contains(err.Error(), tt.wantCase+" (rule: ") {
				t.Errorf("Check did not report case %s; got:\n%v", tt.wantCase, err)
			}
		})
	}
}

// Reopen is exercised with a fake reopen that keeps the same memory store.
func TestCheckReopen(t *testing.T) {
	reopened := 0
	err := storetest.Check(context.Background(), func() (toolrun.Store, error) { return toolrun.NewMemoryStore(), nil },
		&storetest.Options{Reopen: func(old toolrun.Store) (toolrun.Store, error) { reopened++; return old, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if reopened != 1 {
		t.Errorf("Reopen called %d times, want 1", reopened)
	}
	// A reopen that loses the data is caught.
	err = storetest.Check(context.Background(), func() (toolrun.Store, error) { return toolrun.NewMemoryStore(), nil },
		&storetest.Options{Reopen: func(toolrun.Store) (toolrun.Store, error) { return toolrun.NewMemoryStore(), nil }})
	if err == nil || !strings.Contains(err.Error(), "Reopen (rule: ") {
		t.Errorf("Check with a data-losing reopen = %v, want a Reopen failure", err)
	}
}

func TestNames(t *testing.T) {
	names := storetest.Names()
	for _, want := range []string{"Messages/List", "Messages/ConcurrentAppends", "Files/List", "Reopen"} {
		if !slices.Contains(names, want) {
			t.Errorf("Names() lacks %q", want)
		}
	}
}

func TestFailingStoreFailsNthWrite(t *testing.T) {
	ctx := context.Background()
	mem := toolrun.NewMemoryStore()
	fs := &storetest.FailingStore{Store: mem, FailAt: 3, Err: syscall.ENOSPC}
	if err := fs.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil { // write 1
		t.Fatal(err)
	}
	if err := fs.AppendMessages(ctx, "t", &toolrun.Message{ID: "m1", Role: toolrun.RoleUser, Content: "1", CreatedAt: at}); err != nil { // write 2
		t.Fatal(err)
	}
	err := fs.AppendMessages(ctx, "t", &toolrun.Message{ID: "m2", Role: toolrun.RoleUser, Content: "2", CreatedAt: at}) // write 3 fails
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("third write: got %v, want ENOSPC", err)
	}
	if !strings.Contains(err.Error(), storetest.OpAppendMessages) {
		t.Errorf("error %q does not name the operation", err)
	}
	// The failed write did not reach the store.
	p, _ := mem.ListMessages(ctx, "t", toolrun.MessageQuery{MaxDepth: -1})
	if p.Total != 1 {
		t.Errorf("store has %d messages, want 1 (the failed append must store nothing)", p.Total)
	}
	// Not sticky: the next write works again; reads were never counted.
	if _, err := fs.ListMessages(ctx, "t", toolrun.MessageQuery{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.SetValue(ctx, "t", "k", json.RawMessage(`1`)); err != nil {
		t.Fatalf("fourth write: %v", err)
	}
	if fs.Writes() != 4 || fs.Failures() != 1 {
		t.Errorf("Writes, Failures = %d, %d; want 4, 1", fs.Writes(), fs.Failures())
	}
}

func TestFailingStoreStickyAndMatch(t *testing.T) {
	ctx := context.Background()
	fs := &storetest.FailingStore{
		Store:  toolrun.NewMemoryStore(),
		FailAt: 2,
		Sticky: true,
		Match:  func(op string) bool { return op == storetest.OpAppendMessages },
	}
	if err := fs.CreateThread(ctx, &toolrun.Thread{ID: "t"}); err != nil { // not counted
		t.Fatal(err)
	}
	n := 0
	msg := func() *toolrun.Message {
		n++
		return &toolrun.Message{ID: fmt.Sprint("m", n), Role: toolrun.RoleUser, CreatedAt: at}
	}
	if err := fs.AppendMessages(ctx, "t", msg()); err != nil { // append 1
		t.Fatal(err)
	}
	for i := range 3 { // appends 2, 3, 4 all fail
		if err := fs.AppendMessages(ctx, "t", msg()); !errors.Is(err, storetest.ErrInjected) {
			t.Errorf("append %d: got %v, want ErrInjected", i+2, err)
		}
	}
	if _, err := fs.WriteFile(ctx, "t", toolrun.FileInfo{Path: "/f", MimeType: "text/plain"}, []byte("x")); err != nil {
		t.Errorf("an unmatched write failed: %v", err)
	}
	if fs.Writes() != 4 || fs.Failures() != 3 {
		t.Errorf("Writes, Failures = %d, %d; want 4, 3", fs.Writes(), fs.Failures())
	}
}

// BenchmarkMemoryStore is the baseline the durable stores are compared with.
func BenchmarkMemoryStore(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) toolrun.Store { return toolrun.NewMemoryStore() })
}

// ---- deliberately broken stores ----

// noDupCheck stores a second result for a tool call as a plain tool message.
type noDupCheck struct{ toolrun.Store }

func (s *noDupCheck) AppendMessages(ctx context.Context, thread string, msgs ...*toolrun.Message) error {
	err := s.Store.AppendMessages(ctx, thread, msgs...)
	if errors.Is(err, toolrun.ErrDuplicateToolResult) {
		for _, m := range msgs {
			if m.Role == toolrun.RoleTool {
				m.ToolCallID = ""
			}
		}
		return s.Store.AppendMessages(ctx, thread, msgs...)
	}
	return err
}

// plainNotFound returns an error that does not wrap ErrNotFound.
type plainNotFound struct{ toolrun.Store }

func (s *plainNotFound) GetThread(ctx context.Context, id string) (*toolrun.Thread, error) {
	t, err := s.Store.GetThread(ctx, id)
	if err != nil {
		return nil, errors.New("no such thread")
	}
	return t, nil
}

// reversedDefault returns OrderDefault pages newest first.
type reversedDefault struct{ toolrun.Store }

func (s *reversedDefault) ListMessages(ctx context.Context, thread string, q toolrun.MessageQuery) (toolrun.MessagePage, error) {
	p, err := s.Store.ListMessages(ctx, thread, q)
	if q.Order == toolrun.OrderDefault {
		slices.Reverse(p.Messages)
	}
	return p, err
}

// unsortedFiles returns files in reverse order.
type unsortedFiles struct{ toolrun.Store }

func (s *unsortedFiles) ListFiles(ctx context.Context, thread, dir string) ([]toolrun.FileInfo, error) {
	l, err := s.Store.ListFiles(ctx, thread, dir)
	slices.Reverse(l)
	return l, err
}

// lossyValues drops JSON nulls inside arrays.
type lossyValues struct{ toolrun.Store }

func (s *lossyValues) SetValue(ctx context.Context, thread, key string, v json.RawMessage) error {
	return s.Store.SetValue(ctx, thread, key, json.RawMessage(strings.ReplaceAll(string(v), ", null", "")))
}

// sortedChildren returns children sorted by reference, not creation order.
type sortedChildren struct{ toolrun.Store }

func (s *sortedChildren) Children(ctx context.Context, parent string) ([]toolrun.ChildEntry, error) {
	l, err := s.Store.Children(ctx, parent)
	slices.SortFunc(l, func(a, b toolrun.ChildEntry) int { return strings.Compare(a.Reference, b.Reference) })
	return l, err
}

// clockThreads sets a zero CreatedAt to the current time, as stores did
// before the front layer.
type clockThreads struct{ toolrun.Store }

func (s *clockThreads) CreateThread(ctx context.Context, t *toolrun.Thread) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	return s.Store.CreateThread(ctx, t)
}

// madeUpIDs gives messages without an ID one instead of refusing them.
type madeUpIDs struct{ toolrun.Store }

func (s *madeUpIDs) AppendMessages(ctx context.Context, thread string, msgs ...*toolrun.Message) error {
	for i, m := range msgs {
		if m.ID == "" {
			m.ID = fmt.Sprint("made-up-", i)
		}
	}
	return s.Store.AppendMessages(ctx, thread, msgs...)
}

// writesBack writes the message's thread id and a UTC time back into the
// appended messages.
type writesBack struct{ toolrun.Store }

func (s *writesBack) AppendMessages(ctx context.Context, thread string, msgs ...*toolrun.Message) error {
	err := s.Store.AppendMessages(ctx, thread, msgs...)
	for _, m := range msgs {
		m.ThreadID, m.CreatedAt = thread, m.CreatedAt.UTC()
	}
	return err
}

// ignoresAfter answers every query as if After were 0.
type ignoresAfter struct{ toolrun.Store }

func (s *ignoresAfter) ListMessages(ctx context.Context, thread string, q toolrun.MessageQuery) (toolrun.MessagePage, error) {
	q.After = 0
	return s.Store.ListMessages(ctx, thread, q)
}

// clockChildren stamps UpdatedAt with the current time.
type clockChildren struct{ toolrun.Store }

func (s *clockChildren) PutChild(ctx context.Context, e toolrun.ChildEntry) error {
	e.UpdatedAt = time.Now()
	return s.Store.PutChild(ctx, e)
}
