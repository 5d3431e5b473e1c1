package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/ncruces/go-sqlite3"

	"github.com/toolrun/toolrun"
)

// readers are connections a Store keeps out of the pool for reading pages
// of messages through SQLite's own API. A page read through database/sql
// costs about 27 allocations a row — the driver boxes every column into an
// interface and copies each text twice — where reading the columns one by
// one costs one per non-empty text; on a turn that reads a window of 50
// rows that was most of the read.
//
// A read takes the reader idle the shortest time (its statements are
// prepared), or opens one while fewer than max are open; when every reader
// is busy it goes through database/sql as before, so reads never wait on
// one another here. A pool of one connection (or one too small to spare
// any) has no readers.
type readers struct {
	db     *sql.DB
	mu     sync.Mutex
	idle   []*reader // last in, first out
	free   int       // readers that may still be opened
	out    int       // readers taken and not given back
	closed bool
	done   sync.Cond // signalled when out drops to 0 after closed
}

// reader is one held connection and the statements prepared on it.
type reader struct {
	conn  *sql.Conn
	c     *sqlite3.Conn // the connection stmts belong to
	stmts map[string]*sqlite3.Stmt
}

// maxReaders is the number of readers a Store may hold: one per processor,
// at most 4, and only as many as the pool spares besides the write
// connection and one for everything else.
func maxReaders(db *sql.DB) int {
	n := min(runtime.GOMAXPROCS(0), 4)
	if limit := db.Stats().MaxOpenConnections; limit > 0 {
		n = min(n, limit-2)
	}
	return max(n, 0)
}

func (rs *readers) init(db *sql.DB, held bool) {
	rs.db, rs.done.L = db, &rs.mu
	if held {
		rs.free = maxReaders(db)
	}
}

// get returns a reader, or nil when every reader is busy (or the Store is
// closed, or no connection could be had).
func (rs *readers) get(ctx context.Context) *reader {
	rs.mu.Lock()
	if rs.closed || (len(rs.idle) == 0 && rs.free == 0) {
		rs.mu.Unlock()
		return nil
	}
	rs.out++
	if n := len(rs.idle); n > 0 {
		r := rs.idle[n-1]
		rs.idle = rs.idle[:n-1]
		rs.mu.Unlock()
		return r
	}
	rs.free--
	rs.mu.Unlock()
	conn, err := rs.db.Conn(ctx)
	if err != nil {
		rs.put(nil, false)
		return nil
	}
	return &reader{conn: conn, stmts: make(map[string]*sqlite3.Stmt)}
}

// put gives r back (nil: a reader that was not opened). With drop set, or
// once the Store is closing, r's connection is closed instead (it failed,
// or the Store is done with it) and another may be opened in its place.
func (rs *readers) put(r *reader, drop bool) {
	rs.mu.Lock()
	closing := rs.closed
	rs.mu.Unlock()
	if r != nil && (drop || closing) {
		r.close()
		r = nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.out--
	if r != nil {
		rs.idle = append(rs.idle, r)
	} else {
		rs.free++
	}
	if rs.closed && rs.out == 0 {
		rs.done.Broadcast()
	}
}

// close closes the statements of every reader and gives its connection
// back to the pool, waiting for those in use. Reads after it go through
// database/sql.
func (rs *readers) close() error {
	rs.mu.Lock()
	rs.closed = true
	for rs.out > 0 {
		rs.done.Wait()
	}
	idle := rs.idle
	rs.idle = nil
	rs.mu.Unlock()
	var errs []error
	for _, r := range idle {
		errs = append(errs, r.close())
	}
	return errors.Join(errs...)
}

func (r *reader) close() error {
	return errors.Join(r.conn.Raw(func(any) error {
		r.finalize()
		return nil
	}), r.conn.Close())
}

func (r *reader) finalize() {
	for q, st := range r.stmts {
		st.Close()
		delete(r.stmts, q)
	}
}

// prepare returns query prepared on c, preparing it the first time.
func (r *reader) prepare(c *sqlite3.Conn, query string) (*sqlite3.Stmt, error) {
	if c != r.c {
		// A held connection does not change; should it, the statements
		// belong to the old one.
		r.finalize()
		r.c = c
	}
	if st := r.stmts[query]; st != nil {
		return st, nil
	}
	st, _, err := c.Prepare(query)
	if err != nil {
		return nil, err
	}
	r.stmts[query] = st
	return st, nil
}

// readPage runs a page query on a reader: args bind ?1, ?2 … (strings and
// integers), each row is a message's msgColumns followed by one integer
// column per tail pointer, which gets the last row's value. The page is
// read into room for room messages. ok is false when no reader was free;
// nothing was read then.
func (s *Store) readPage(ctx context.Context, threadID string, room int, query string, args []any, tail []any) (page toolrun.MessagePage, ok bool, err error) {
	r := s.readers.get(ctx)
	if r == nil {
		return page, false, nil
	}
	page.Messages = make([]toolrun.Message, 0, room)
	err = r.conn.Raw(func(dc any) error {
		d, ok := dc.(interface{ Raw() *sqlite3.Conn })
		if !ok {
			return errNotNcruces
		}
		c := d.Raw()
		st, err := r.prepare(c, query)
		if err != nil {
			return err
		}
		defer c.SetInterrupt(c.SetInterrupt(ctx))
		// Reset ends the statement's read transaction, which would
		// otherwise keep the WAL from being checkpointed.
		defer st.Reset()
		for i, a := range args {
			switch a := a.(type) {
			case string:
				err = st.BindText(i+1, a)
			case int64:
				err = st.BindInt64(i+1, a)
			case int:
				err = st.BindInt64(i+1, int64(a))
			default:
				err = fmt.Errorf("argument %d: unexpected type %T", i+1, a)
			}
			if err != nil {
				return err
			}
		}
		for st.Step() {
			m, err := rawMessage(threadID, st)
			if err != nil {
				return err
			}
			page.Messages = append(page.Messages, m)
			for i, p := range tail {
				*p.(*int64) = st.ColumnInt64(msgCols + i)
			}
		}
		return st.Err()
	})
	// A connection database/sql calls bad, or one of a closed db, is not
	// kept.
	s.readers.put(r, errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone))
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return page, true, err
}

// rawMessage reads the msgColumns of st's row, as scanMessage does. The
// integer columns are checked to hold integers: ColumnInt64 would read
// another type as a number (a text as 0, or as the number it begins with).
func rawMessage(threadID string, st *sqlite3.Stmt) (toolrun.Message, error) {
	for i, c := range intColumns {
		if typ := st.ColumnType(c.col); typ != sqlite3.INTEGER {
			return toolrun.Message{}, errColumnType(st.ColumnInt64(0), st.ColumnText(1), i, typ)
		}
	}
	m := toolrun.Message{
		Seq:        st.ColumnInt64(0),
		ID:         st.ColumnText(1),
		Role:       toolrun.Role(known(st.ColumnRawText(2))),
		ToolCallID: st.ColumnText(3),
		Depth:      int(st.ColumnInt64(4)),
		Silent:     st.ColumnInt64(5) != 0,
		Content:    st.ColumnText(7),
		Name:       st.ColumnText(8),
		ToolStatus: toolrun.Status(known(st.ColumnRawText(9))),
		ParentID:   st.ColumnText(10),
		Prompt:     st.ColumnText(11),
		SubagentID: st.ColumnText(12),
		Side:       known(st.ColumnRawText(13)),
		CallDigest: st.ColumnText(14),
	}
	if st.ColumnType(15) != sqlite3.NULL {
		var x toolrun.Message
		if err := json.Unmarshal(st.ColumnRawText(15), &x); err != nil {
			return m, fmt.Errorf("decode message %d: %w", m.Seq, err)
		}
		m = mergeExtra(m, x)
	}
	m.ThreadID, m.CreatedAt = threadID, fromMicros(st.ColumnInt64(6))
	return m, nil
}

// known returns the text of b, without a copy for the values a role, a
// tool status and a side take.
func known(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "tool":
		return "tool"
	case "system":
		return "system"
	case "success":
		return "success"
	case "error":
		return "error"
	case "a":
		return "a"
	case "b":
		return "b"
	}
	return string(b)
}
