// Package storetest checks implementations of [toolrun.Store] against the
// rules documented on the Store interfaces, the way testing/fstest checks an
// fs.FS and testing/slogtest checks a slog.Handler.
//
// A store's tests run the whole suite in a few lines:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) toolrun.Store {
//			st, err := mystore.Open(filepath.Join(t.TempDir(), "db"))
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { st.Close() })
//			return st
//		}, nil)
//	}
//
// Every case runs as its own subtest on a fresh store and names the rule it
// checks. [Check] runs the same cases without the testing package and returns
// every failure joined into one error.
//
// The package also has tools for users of stores: [FailingStore] wraps a
// Store and fails chosen writes, to test how code copes with a full disk or a
// dropped connection, and [Bench] measures the operations the executor uses
// most.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"

	"github.com/toolrun/toolrun"
)

// Options adjust a conformance run. A nil *Options means defaults. Do not
// change an Options while a run uses it.
type Options struct {
	// Reopen, when set, closes old and returns a new store opened on the same
	// data, as a process restart would. The suite then also checks that
	// everything written before the reopen is still there and that the rules
	// (Seq order, duplicate tool results) survive it. Stores that cannot be
	// reopened, such as the memory store, leave it nil.
	Reopen func(old toolrun.Store) (toolrun.Store, error)

	// Goroutines is the number of goroutines of the concurrent-append case;
	// 0 means 8.
	Goroutines int

	// LargeSize is the size in bytes of the payloads of the large-data case
	// (message content, value, file); 0 means 3 MiB.
	LargeSize int
}

func (o *Options) goroutines() int {
	if o == nil || o.Goroutines <= 0 {
		return 8
	}
	return o.Goroutines
}

func (o *Options) largeSize() int {
	if o == nil || o.LargeSize <= 0 {
		return 3 << 20
	}
	return o.LargeSize
}

// reporter is the part of *testing.T the cases use; Check supplies its own.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// env is what one case runs with.
type env struct {
	reporter
	ctx      context.Context
	opts     *Options
	newStore func() toolrun.Store
	// reopen is nil when the store cannot be reopened.
	reopen func(old toolrun.Store) toolrun.Store
}

// testCase is one rule of the Store contract and the check for it.
type testCase struct {
	name string
	rule string // the rule, printed when the case fails
	// needsReopen cases are skipped when Options.Reopen is nil.
	needsReopen bool
	fn          func(e *env)
}

// Run checks the store returned by newStore against every rule of the Store
// contract, one subtest per rule. newStore is called once per subtest with
// that subtest's *testing.T and must return an empty store; it should
// register any cleanup (such as closing the store) with t.Cleanup. opts may
// be nil.
func Run(t *testing.T, newStore func(t *testing.T) toolrun.Store, opts *Options) {
	t.Helper()
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needsReopen && (opts == nil || opts.Reopen == nil) {
				t.Skip("storetest: Options.Reopen is not set")
			}
			e := &env{
				reporter: t,
				ctx:      t.Context(),
				opts:     opts,
				newStore: func() toolrun.Store { return newStore(t) },
			}
			if opts != nil && opts.Reopen != nil {
				e.reopen = func(old toolrun.Store) toolrun.Store {
					t.Helper()
					st, err := opts.Reopen(old)
					if err != nil {
						t.Fatalf("reopen: %v", err)
					}
					if c, ok := st.(io.Closer); ok {
						t.Cleanup(func() { _ = c.Close() })
					}
					return st
				}
			}
			tc.fn(e)
			if t.Failed() {
				t.Logf("rule: %s", tc.rule)
			}
		})
	}
}

// Check runs every case of [Run] without the testing package and returns
// all failures joined with errors.Join, each naming its case and rule, or
// nil when the store conforms. newStore must return a new empty store on
// each call; stores that implement io.Closer are closed after their case.
// opts may be nil.
func Check(ctx context.Context, newStore func() (toolrun.Store, error), opts *Options) error {
	var errs []error
	for _, tc := range cases() {
		if tc.needsReopen && (opts == nil || opts.Reopen == nil) {
			continue
		}
		r := &recorder{}
		var closers []io.Closer
		track := func(st toolrun.Store) {
			if c, ok := st.(io.Closer); ok {
				closers = append(closers, c)
			}
		}
		e := &env{
			reporter: r,
			ctx:      ctx,
			opts:     opts,
			newStore: func() toolrun.Store {
				st, err := newStore()
				if err != nil {
					r.Fatalf("new store: %v", err)
				}
				track(st)
				return st
			},
		}
		if opts != nil && opts.Reopen != nil {
			e.reopen = func(old toolrun.Store) toolrun.Store {
				st, err := opts.Reopen(old)
				if err != nil {
					r.Fatalf("reopen: %v", err)
				}
				track(st)
				return st
			}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				if p := recover(); p != nil {
					r.Errorf("panic: %v", p)
				}
			}()
			tc.fn(e)
		}()
		<-done
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
		for _, err := range r.errs {
			errs = append(errs, fmt.Errorf("%s (rule: %s): %w", tc.name, tc.rule, err))
		}
	}
	return errors.Join(errs...)
}

// recorder collects the failures of one case run by Check. Fatalf ends the
// case's goroutine, as testing.T.FailNow does.
type recorder struct {
	mu   sync.Mutex
	errs []error
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// Names returns the names of the conformance cases, in the order Run runs
// them, for documentation and for selecting cases with go test -run.
func Names() []string {
	var out []string
	for _, tc := range cases() {
		out = append(out, tc.name)
	}
	return out
}

// short shortens s for failure messages.
func short(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	return s[:max] + fmt.Sprintf("…(%d bytes)", len(s))
}

// must fails the case when err is not nil.
func (e *env) must(err error, what string, args ...any) {
	e.Helper()
	if err != nil {
		e.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// wantErr checks that err matches target with errors.Is.
func (e *env) wantErr(err, target error, what string, args ...any) {
	e.Helper()
	if !errors.Is(err, target) {
		e.Errorf("%s: got error %v, want one that errors.Is %v", fmt.Sprintf(what, args...), err, target)
	}
}
