package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/internal/jsondepth"
)

// Group commit of single-message appends.
//
// A durable commit waits for the server's WAL flush (an fsync), which bounds
// one connection to a few thousand commits a second whatever the client
// does. When many goroutines append at once — a service running many
// threads — their single-message appends (every tool result) are coalesced:
// while groupInFlight batches are being committed, new appends queue, and
// the first batch to finish sends everything queued as the next batch: one
// round trip, one transaction, one WAL flush for all of them.
//
// A batch is one call of toolrun_append_batch (schema version 2), which
// handles each append as the single-message statement would: the lease
// check when the store is fenced, the thread row's next Seq, the insert. An
// append that fails (stale lease, unknown thread, duplicate tool result)
// is skipped and reported to its caller with the same error as without
// batching; the others commit. An error no append can be blamed for by
// itself (a value the server cannot parse, say) fails the whole statement:
// then nothing of the batch was committed, and each append is run again on
// its own, so each caller gets its own outcome and error. Every caller
// returns only after the transaction holding its message committed.
//
// An append that finds no batch in flight goes at once, alone, through the
// plain single-statement path: one goroutine's appends wait for nothing and
// pay nothing.
type group struct {
	s     *Store // unfenced; the pool and the fallback path
	mu    sync.Mutex
	queue []*pending
	busy  int // batches in flight

	fallbacks atomic.Int64 // batches the server refused, retried append by append

	// hook, when set (tests), runs before each batch with its size.
	hook func(n int)
}

// groupInFlight is how many batches may be committed at once; appends that
// find that many in flight queue for the next. Two keep the server busy
// while the next batch is built and sent.
const groupInFlight = 2

// groupMax is the most appends one batch carries.
const groupMax = 256

// pending is one queued single-message append, with the values it stores
// (copied: a caller that gives up may reuse its message), and, once done is
// closed, its outcome.
type pending struct {
	ctx     context.Context
	thread  string
	token   int64 // the lease token to check; 0: not fenced
	id      string
	role    string
	callID  string
	depth   int32
	silent  bool
	created time.Time
	body    string

	seq  int64
	err  error
	done chan struct{}
}

func newGroup(s *Store) *group { return &group{s: s} }

// append appends p's message, batched with whatever else is waiting.
func (g *group) append(p *pending) error {
	g.mu.Lock()
	if g.busy < groupInFlight {
		g.busy++
		batch := append(g.take(), p)
		g.mu.Unlock()
		g.lead(batch)
		return p.err
	}
	g.queue = append(g.queue, p)
	g.mu.Unlock()
	select {
	case <-p.done:
		return p.err
	case <-p.ctx.Done():
	}
	g.mu.Lock()
	if i := slices.Index(g.queue, p); i >= 0 {
		// Not sent: nothing of it can be stored.
		g.queue = slices.Delete(g.queue, i, i+1)
		g.mu.Unlock()
		return p.ctx.Err()
	}
	g.mu.Unlock()
	// In flight: like a statement cancelled while it runs, the append may
	// or may not commit.
	select {
	case <-p.done:
		return p.err
	default:
		return p.ctx.Err()
	}
}

// take removes and returns up to groupMax-1 queued appends, leaving room
// for the append of a caller that starts the batch itself; g.mu is held.
func (g *group) take() []*pending {
	n := min(len(g.queue), groupMax-1)
	batch := make([]*pending, n, n+1)
	copy(batch, g.queue)
	g.queue = slices.Delete(g.queue, 0, n)
	return batch
}

// lead commits batch, then hands whatever queued meanwhile to a new leader.
func (g *group) lead(batch []*pending) {
	g.run(batch)
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.take()
		g.mu.Unlock()
		go g.lead(next)
		return
	}
	g.busy--
	g.mu.Unlock()
}

// run commits batch and settles every pending of it.
func (g *group) run(batch []*pending) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	if g.hook != nil {
		g.hook(len(batch))
	}
	if len(batch) == 1 {
		p := batch[0]
		p.seq, p.err = g.s.appendOne(p.ctx, p)
		return
	}
	// The batch runs until every one of its callers has given up.
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var left atomic.Int32
	left.Store(int32(len(batch)))
	for _, p := range batch {
		stop := context.AfterFunc(p.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	err := g.s.appendBatch(ctx, batch)
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// The server refused the statement: nothing of it committed. Each
		// append on its own gets its own outcome.
		g.fallbacks.Add(1)
		for _, p := range batch {
			p.seq, p.err = g.s.appendOne(p.ctx, p)
		}
		return
	}
	if err != nil {
		// Lost connection and the like: whether the transaction committed
		// is unknown, as for a single statement.
		for _, p := range batch {
			p.seq, p.err = 0, err
		}
	}
}

// appendBatchSQL calls the batch function; see migration 2.
const appendBatchSQL = `SELECT out_idx, out_seq, out_outcome FROM toolrun_append_batch($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::integer[], $7::boolean[], $8::timestamptz[], $9::text[])`

// appendBatch commits the appends of batch in one statement and sets each
// one's seq or err. The error returned is the statement's.
func (s *Store) appendBatch(ctx context.Context, batch []*pending) error {
	n := len(batch)
	threads, tokens, ids, roles, callIDs, bodies := make([]string, n), make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	depths, silent, created := make([]int32, n), make([]bool, n), make([]time.Time, n)
	for i, p := range batch {
		threads[i], tokens[i], ids[i], roles[i], callIDs[i], bodies[i] = p.thread, p.token, p.id, p.role, p.callID, p.body
		depths[i], silent[i], created[i] = p.depth, p.silent, p.created
	}
	rows, err := s.pool.Query(ctx, appendBatchSQL, threads, tokens, ids, roles, callIDs, depths, silent, created, bodies)
	if err != nil {
		return err
	}
	// Outcomes count only once the statement (and so its transaction)
	// completed without error.
	seqs, errs := make([]int64, n), make([]error, n)
	seen := 0
	err = drain(rows, func(r pgx.Rows) error {
		var (
			i       int32
			seq     *int64
			outcome string
		)
		if err := r.Scan(&i, &seq, &outcome); err != nil {
			return err
		}
		if i < 1 || int(i) > n {
			return fmt.Errorf("batch append: result for append %d of %d", i, n)
		}
		k := i - 1
		switch outcome {
		case "ok":
			if seq == nil {
				return errors.New("batch append: no seq")
			}
			seqs[k] = *seq
		case "notfound":
			errs[k] = toolrun.ErrNotFound
		case "duplicate":
			errs[k] = toolrun.ErrDuplicateToolResult
		case "stale":
			errs[k] = fmt.Errorf("%w: %s", ErrStaleLease, staleMessage(batch[k].thread, batch[k].token))
		default:
			return fmt.Errorf("batch append: outcome %q", outcome)
		}
		seen++
		return nil
	})
	if err == nil && seen != n {
		err = fmt.Errorf("batch append: %d outcomes for %d appends", seen, n)
	}
	if err != nil {
		return err
	}
	for i, p := range batch {
		p.seq, p.err = seqs[i], errs[i]
	}
	return nil
}

// staleMessage is the message toolrun_check_lease raises.
func staleMessage(thread string, token int64) string {
	return fmt.Sprintf("lease on thread %s with token %d is no longer held", thread, token)
}

// appendOne appends p's message alone with appendSQL and returns its Seq.
func (s *Store) appendOne(ctx context.Context, p *pending) (int64, error) {
	var seq int64
	got := 0
	args := []any{p.thread, 1, []string{p.id}, []string{p.role}, []string{p.callID},
		[]int32{p.depth}, []bool{p.silent}, []time.Time{p.created}, []string{p.body}}
	err := s.writeQueryToken(ctx, p.thread, p.token, appendSQL, args, func(r pgx.Rows) error {
		got++
		return r.Scan(&seq)
	})
	if err == nil && got == 0 {
		err = toolrun.ErrNotFound
	}
	return seq, err
}

// encodeBody returns the JSON body stored for m (its Seq, ID and
// CreatedAt have columns, and are read from those). A field nested too
// deeply to decode (see jsondepth.TooDeep) is refused with an error naming its JSON
// key.
func encodeBody(m *toolrun.Message, threadID string) (string, error) {
	c := *m
	c.ThreadID, c.Seq = threadID, 0
	b, err := json.Marshal(&c)
	if member, deep := jsondepth.TooDeep(b); deep {
		return "", fmt.Errorf("%s: %w", member, jsondepth.ErrTooDeep)
	}
	return string(b), err
}
