package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/toolrun/toolrun"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrLeaseHeld is returned by [Store.TryAcquireLease], and wrapped by
// [Store.AcquireLease] when its context ends, while another owner holds an
// unexpired lease on the thread.
var ErrLeaseHeld = errors.New("postgres: thread lease is held by another owner")

// ErrStaleLease is returned by writes through a store bound to a lease
// ([Store.WithLease]), and by RenewLease and ReleaseLease, when the lease is
// no longer current: it expired, or another owner took the thread over.
// Nothing of the refused write is stored.
var ErrStaleLease = errors.New("postgres: thread lease is no longer held")

// Lease is one owner's claim on a thread, as granted by the database. It is
// a plain value, safe to copy and to share between goroutines.
type Lease struct {
	ThreadID string
	Owner    string
	// Token fences writes: it grows every time the thread changes hands, and
	// a write made with an older token is refused.
	Token int64
	// ExpiresAt is when the lease lapses unless renewed, by the database's
	// clock.
	ExpiresAt time.Time
}

// TryAcquireLease claims threadID for owner for ttl, if no other claim is
// current: the thread has no lease, or its lease expired or was released.
// A takeover gets a token greater than any earlier one. It fails with
// ErrLeaseHeld while another lease is current, including one held by the
// same owner name (renew that instead). The thread need not exist yet.
func (s *Store) TryAcquireLease(ctx context.Context, threadID, owner string, ttl time.Duration) (Lease, error) {
	if ttl <= 0 {
		return Lease{}, fmt.Errorf("postgres: acquire lease on %q: ttl must be positive", threadID)
	}
	l := Lease{ThreadID: threadID, Owner: owner}
	err := s.pool.QueryRow(ctx, `INSERT INTO thread_leases AS l (thread_id, owner, token, expires_at)
		VALUES ($1, $2, 1, now() + $3 * interval '1 microsecond')
		ON CONFLICT (thread_id) DO UPDATE SET owner = EXCLUDED.owner, token = l.token + 1, expires_at = EXCLUDED.expires_at
			WHERE l.expires_at <= now()
		RETURNING token, expires_at`, threadID, owner, ttl.Microseconds()).Scan(&l.Token, &l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		var holder string
		var until time.Time
		if s.pool.QueryRow(ctx, `SELECT owner, expires_at FROM thread_leases WHERE thread_id = $1`, threadID).Scan(&holder, &until) == nil {
			return Lease{}, fmt.Errorf("%w: thread %q is held by %q until %s", ErrLeaseHeld, threadID, holder, until.UTC().Format(time.RFC3339Nano))
		}
		return Lease{}, fmt.Errorf("%w: thread %q", ErrLeaseHeld, threadID)
	}
	if err != nil {
		return Lease{}, fmt.Errorf("postgres: acquire lease on %q: %w", threadID, err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// AcquireLease is TryAcquireLease that waits, retrying with a growing
// interval of up to half a second, until the thread is free or ctx ends;
// the error then wraps both ErrLeaseHeld and ctx's error.
func (s *Store) AcquireLease(ctx context.Context, threadID, owner string, ttl time.Duration) (Lease, error) {
	wait := 10 * time.Millisecond
	var held error // the last attempt's ErrLeaseHeld
	for {
		l, err := s.TryAcquireLease(ctx, threadID, owner, ttl)
		if err != nil && held != nil && ctx.Err() != nil {
			// ctx ended during an attempt rather than between two: the
			// wait for a held thread ended all the same.
			return Lease{}, fmt.Errorf("%w: %w", held, ctx.Err())
		}
		if err == nil || !errors.Is(err, ErrLeaseHeld) {
			return l, err
		}
		held = err
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Lease{}, fmt.Errorf("%w: %w", err, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// RenewLease extends l to ttl from now and returns the updated lease. It
// fails with ErrStaleLease if another owner took the thread over; a lease
// that expired but was not taken over is renewed.
func (s *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	err := s.pool.QueryRow(ctx, `UPDATE thread_leases SET expires_at = now() + $3 * interval '1 microsecond'
		WHERE thread_id = $1 AND token = $2 RETURNING expires_at`, l.ThreadID, l.Token, ttl.Microseconds()).Scan(&l.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrStaleLease
	}
	if err != nil {
		return Lease{}, fmt.Errorf("postgres: renew lease on %q (token %d): %w", l.ThreadID, l.Token, err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// ReleaseLease gives the thread up, so another owner can take it at once;
// writes through the lease fail from then on. Releasing a lease that is no
// longer current fails with ErrStaleLease.
func (s *Store) ReleaseLease(ctx context.Context, l Lease) error {
	tag, err := s.pool.Exec(ctx, `UPDATE thread_leases SET expires_at = '-infinity'
		WHERE thread_id = $1 AND token = $2 AND expires_at > now()`, l.ThreadID, l.Token)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrStaleLease
	}
	if err != nil {
		return fmt.Errorf("postgres: release lease on %q (token %d): %w", l.ThreadID, l.Token, err)
	}
	return nil
}

// WithLease returns a Store on the same pool whose writes to l.ThreadID —
// its thread record, messages, values, thread env, files and the child
// registry it parents — each check, in the same transaction, that l is
// still current, and fail with ErrStaleLease when it is not. Reads, and
// writes to other threads and to user env, are not fenced. Closing the
// returned Store does nothing.
func (s *Store) WithLease(l Lease) *Store {
	return &Store{pool: s.pool, lease: &l, ttl: s.ttl, group: s.group, env: s.env}
}

// AcquireThread implements toolrun.ThreadLocker, so a toolrun.Runtime on
// this store runs a thread's turn on one instance at a time: it waits for
// the thread's lease (LockThread with Options.LeaseTTL) and returns the
// lease-bound store the turn writes through, and its release.
func (s *Store) AcquireThread(ctx context.Context, threadID, owner string) (toolrun.Store, func(context.Context) error, error) {
	ttl := s.ttl
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	st, release, err := s.LockThread(ctx, threadID, owner, ttl)
	if err != nil {
		return nil, nil, err
	}
	return st, release, nil
}

var _ toolrun.ThreadLocker = (*Store)(nil)

// Lease returns the lease the store is bound to, if any.
func (s *Store) Lease() (Lease, bool) {
	if s.lease == nil {
		return Lease{}, false
	}
	return *s.lease, true
}

// LockThread waits for the lease on threadID (as AcquireLease), then keeps
// it renewed in the background every ttl/3 and returns a store bound to it
// (WithLease) and a function that stops the renewal and releases the lease.
// If a renewal fails — the database was unreachable for longer than ttl and
// another owner took over — writes through the returned store fail with
// ErrStaleLease from then on; release then reports the stale lease.
func (s *Store) LockThread(ctx context.Context, threadID, owner string, ttl time.Duration) (st *Store, release func(context.Context) error, err error) {
	l, err := s.AcquireLease(ctx, threadID, owner, ttl)
	if err != nil {
		return nil, nil, err
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), ttl/3)
				_, err := s.RenewLease(rctx, l, ttl)
				cancel()
				if errors.Is(err, ErrStaleLease) {
					return // taken over: the fenced store refuses writes now
				}
			}
		}
	}()
	var once sync.Once
	release = func(ctx context.Context) error {
		var err error
		once.Do(func() {
			close(stop)
			<-done
			err = s.ReleaseLease(ctx, l)
		})
		return err
	}
	return s.WithLease(l), release, nil
}
