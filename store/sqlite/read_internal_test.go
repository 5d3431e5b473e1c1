package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver"

	"github.com/toolrun/toolrun"
)

// fillThread creates thread id with n user messages.
func fillThread(t *testing.T, st *Store, id string, n int) {
	t.Helper()
	ctx := t.Context()
	if err := st.CreateThread(ctx, &toolrun.Thread{ID: id}); err != nil {
		t.Fatal(err)
	}
	msgs := make([]*toolrun.Message, n)
	for i := range msgs {
		msgs[i] = &toolrun.Message{ID: fmt.Sprint(id, "-", i), Role: toolrun.RoleUser, Content: fmt.Sprint("message ", i), CreatedAt: testTimeInternal}
	}
	if err := st.AppendMessages(ctx, id, msgs...); err != nil {
		t.Fatal(err)
	}
}

// openTemp opens a Store on a new file in t's temporary directory, closed
// when t ends.
func openTemp(t *testing.T) *Store {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "x.db"), &Options{PlaintextSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// The page statements a Store keeps prepared are never prepared again by
// SQLite when their parameters change: a LIMIT bound straight to a
// parameter makes SQLite prepare the statement again at each new binding,
// which cost as much as the read.
func TestPageStatementsAreNotPreparedAgain(t *testing.T) {
	st := openTemp(t)
	fillThread(t, st, "t1", 30)
	fillThread(t, st, "t2", 30)
	ctx := t.Context()
	for i := range 20 {
		q := toolrun.MessageQuery{Limit: 1 + i%7, Offset: i % 3}
		if i%2 == 1 {
			q.After = int64(i % 5)
		}
		if _, err := st.ListMessages(ctx, fmt.Sprint("t", 1+i%2), q); err != nil {
			t.Fatal(err)
		}
	}
	r := st.readers.get(ctx)
	if r == nil {
		t.Fatal("the Store holds no reader")
	}
	defer st.readers.put(r, false)
	if len(r.stmts) < 2 {
		t.Fatalf("the reader holds %d statements, want the page statements of both kinds of query", len(r.stmts))
	}
	for q, s := range r.stmts {
		if n := s.Status(sqlite3.STMTSTATUS_REPREPARE, false); n != 0 {
			t.Errorf("prepared again %d times: %s", n, q)
		}
	}
}

// A read that stops part way — its context ended, or a row it cannot
// decode — reports why and leaves its reader with no transaction open:
// the next read works and a checkpoint can copy the whole WAL back.
func TestStoppedReadEndsItsTransaction(t *testing.T) {
	st := openTemp(t)
	fillThread(t, st, "t", 200)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := st.DB().ExecContext(t.Context(), `UPDATE messages SET extra = '{not json' WHERE thread_id = 't' AND seq = 100`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ListMessages(t.Context(), "t", toolrun.MessageQuery{}); err == nil || !strings.Contains(err.Error(), "decode message 100") {
		t.Fatalf("read of a thread with a corrupt row: %v, want the row's decode error", err)
	}
	page, err := st.ListMessages(t.Context(), "t", toolrun.MessageQuery{Limit: 5})
	if err != nil || len(page.Messages) != 5 || page.Total != 200 || page.Messages[4].Content != "message 199" {
		t.Fatalf("read after: %v %d rows, total %d", err, len(page.Messages), page.Total)
	}
	// Every reader the Store holds is idle; none may keep a snapshot.
	var busy, log, done int
	if err := st.DB().QueryRowContext(t.Context(), `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &done); err != nil {
		t.Fatal(err)
	}
	if busy != 0 {
		t.Fatalf("checkpoint blocked (busy %d, %d of %d frames): a read transaction stayed open", busy, done, log)
	}
}

// A Store on a caller's database holds readers only as far as the pool
// spares them, works with the pool it is given, and gives every connection
// back on Close.
func TestReadersFollowTheCallersPool(t *testing.T) {
	for _, limit := range []int{0, 2, 3, 8} {
		t.Run(fmt.Sprint("max_open=", limit), func(t *testing.T) {
			db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(limit)
			st, err := New(db, &Options{PlaintextSecrets: true})
			if err != nil {
				t.Fatal(err)
			}
			if want := maxReaders(db); st.readers.free != want || (limit > 0 && want > limit-2) {
				t.Fatalf("%d readers may be opened, want %d for a pool of %d", st.readers.free, want, limit)
			}
			fillThread(t, st, "t", 50)
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for g := range 16 {
				wg.Go(func() {
					for i := range 20 {
						if g%4 == 0 {
							if err := st.AppendMessages(t.Context(), "t", &toolrun.Message{ID: fmt.Sprint("w", g, "-", i), Role: toolrun.RoleUser, Content: "more", CreatedAt: testTimeInternal}); err != nil {
								errs <- err
								return
							}
							continue
						}
						page, err := st.ListMessages(t.Context(), "t", toolrun.MessageQuery{Limit: 10})
						if err == nil && (len(page.Messages) != 10 || page.Total < 50) {
							err = fmt.Errorf("page of %d rows, total %d", len(page.Messages), page.Total)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if n := db.Stats().InUse; n != 0 {
				t.Fatalf("%d connections still in use after Close", n)
			}
		})
	}
}

// Close waits for the reads in flight and gives back every connection the
// readers held; reads after it fail instead of reopening one.
func TestCloseDuringReads(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "x.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := New(db, &Options{PlaintextSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	fillThread(t, st, "t", 300)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				if _, err := st.ListMessages(t.Context(), "t", toolrun.MessageQuery{Limit: 100}); err != nil {
					return
				}
			}
		})
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st.readers.out != 0 || len(st.readers.idle) != 0 {
		t.Fatalf("after Close: %d readers out, %d idle", st.readers.out, len(st.readers.idle))
	}
	if n := db.Stats().InUse; n > 8 {
		t.Fatalf("%d connections in use after Close, more than the reads still going", n)
	}
	// The reads still going take no reader; stop them by closing the db.
	db.Close()
	wg.Wait()
	if n := db.Stats().InUse; n != 0 {
		t.Fatalf("%d connections in use after the reads stopped", n)
	}
}

// A page read through a reader holds the same messages as one read
// through database/sql (the path taken when every reader is busy, and
// with a one-connection pool): every column and the fields kept in extra.
func TestReaderDecodesAsDatabaseSQL(t *testing.T) {
	st := openTemp(t)
	fillThread(t, st, "t", 0)
	ctx := t.Context()
	msgs := []*toolrun.Message{
		{ID: "u", Role: toolrun.RoleUser, Content: "hello", Side: "a", CreatedAt: testTimeInternal},
		{ID: "a", Role: toolrun.RoleAssistant, Content: "calling", Prompt: "p", Side: "b", SubagentID: "s",
			ToolCalls: []toolrun.ToolCall{{ID: "c1", Name: "get", Arguments: `{"x":1}`}}, Metadata: map[string]any{"k": "v"}, CreatedAt: testTimeInternal},
		{ID: "r", Role: toolrun.RoleTool, Content: "failed", ToolCallID: "c1", Name: "get", ToolStatus: toolrun.StatusError,
			ErrorCode: "bad", ParentID: "pa", Depth: 2, Silent: true, CallDigest: "dg", Side: "a",
			Attachments: []toolrun.AttachmentRef{{Path: "/attachments/x.png", Name: "x.png", MimeType: "image/png"}}, CreatedAt: testTimeInternal.Add(time.Second)},
		{ID: "o", Role: "other-role", Content: "", ToolStatus: "other-status", Side: "c", CreatedAt: testTimeInternal},
	}
	if err := st.AppendMessages(ctx, "t", msgs...); err != nil {
		t.Fatal(err)
	}
	query := `SELECT ` + msgColumns + ` FROM messages WHERE thread_id = ?1 ORDER BY seq`
	raw, ok, err := st.readPage(ctx, "t", 0, query, []any{"t"}, nil)
	if !ok || err != nil {
		t.Fatalf("reader: ok %v, %v", ok, err)
	}
	rows, err := st.db.QueryContext(ctx, query, "t")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var viaSQL []toolrun.Message
	for rows.Next() {
		m, err := scanMessage("t", rows)
		if err != nil {
			t.Fatal(err)
		}
		viaSQL = append(viaSQL, m)
	}
	if len(raw.Messages) != len(msgs) || !reflect.DeepEqual(raw.Messages, viaSQL) {
		t.Fatalf("reader:\n%+v\ndatabase/sql:\n%+v", raw.Messages, viaSQL)
	}
	if m := raw.Messages[2]; m.ErrorCode != "bad" || !m.Silent || m.Depth != 2 || m.CallDigest != "dg" || len(m.Attachments) != 1 {
		t.Fatalf("tool result read back as %+v", m)
	}
}

// A page is read into room for the rows its query can return: its limit,
// or the rows known to match and a few more, whichever is fewer, within
// maxPageRoom; none when neither is known.
func TestPageRoom(t *testing.T) {
	for _, c := range []struct {
		limit, matching int64
		want            int
	}{
		{54, -1, 54},
		{-1, -1, 0},
		{1000, -1, maxPageRoom},
		{54, 10, 14},
		{54, 0, 4},
		{-1, 10, 14},
		{-1, 10000, maxPageRoom},
	} {
		if got := pageRoom(c.limit, c.matching); got != c.want {
			t.Errorf("pageRoom(%d, %d) = %d; want %d", c.limit, c.matching, got, c.want)
		}
	}
}

// A message row whose integer column (seq, depth, silent, created_at) holds
// another type — user SQL can store one, the columns not being STRICT — is
// refused with an error naming the row, the column and the type, the same
// through a reader as through database/sql, where a reader read it as 0
// (depth 0, not silent, created in 1970). Any silent but 0 is silent, as
// for the filter of silent messages.
func TestMessageColumnOfAnotherType(t *testing.T) {
	st := openTemp(t)
	fillThread(t, st, "t", 1)
	ctx := t.Context()
	insert := `INSERT INTO messages (thread_id, seq, id, role, tool_call_id, depth, silent, created_at, content, name, tool_status, parent_id, prompt, subagent_id)
		VALUES ('t', ?, 'u', 'tool', 'c1', ?, ?, ?, 'x', '', '', '', '', '')`
	for _, c := range []struct {
		seq, depth, silent, created any
		want                        string
	}{
		{2, "deep", "yes", "2025-01-01T00:00:00Z", "decode message 2: column depth holds TEXT"},
		{2, 1, "yes", 0, "decode message 2: column silent holds TEXT"},
		{2, 1, 0, "2025-01-01T00:00:00Z", "decode message 2: column created_at holds TEXT"},
		{2, 1, 0, []byte{0}, "decode message 2: column created_at holds BLOB"},
		{2, 1.5, 0, 0, "decode message 2: column depth holds FLOAT"},
		{"two", 1, 0, 0, `decode message "u": column seq holds TEXT`},
	} {
		if _, err := st.DB().ExecContext(ctx, `DELETE FROM messages WHERE id = 'u'`); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().ExecContext(ctx, insert, c.seq, c.depth, c.silent, c.created); err != nil {
			t.Fatal(err)
		}
		query := `SELECT ` + msgColumns + ` FROM messages WHERE thread_id = ?1 ORDER BY seq`
		_, ok, rawErr := st.readPage(ctx, "t", 0, query, []any{"t"}, nil)
		if !ok {
			t.Fatal("no reader")
		}
		rows, err := st.db.QueryContext(ctx, query, "t")
		if err != nil {
			t.Fatal(err)
		}
		var sqlErr error
		for rows.Next() && sqlErr == nil {
			_, sqlErr = scanMessage("t", rows)
		}
		rows.Close()
		if rawErr == nil || sqlErr == nil || rawErr.Error() != c.want || sqlErr.Error() != c.want {
			t.Errorf("row %v: through a reader: %v; through database/sql: %v; want %q from both", c, rawErr, sqlErr, c.want)
		}
	}
	// A silent other than 0 and 1 is silent, on both paths.
	if _, err := st.DB().ExecContext(ctx, `DELETE FROM messages WHERE id = 'u'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, insert, 2, 1, 2, 0); err != nil {
		t.Fatal(err)
	}
	page, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	if err != nil || len(page.Messages) != 2 || !page.Messages[1].Silent {
		t.Fatalf("ListMessages of a row with silent 2: %+v, %v; want it silent", page.Messages, err)
	}
	if m, err := st.ToolResult(ctx, "t", "c1"); err != nil || !reflect.DeepEqual(*m, page.Messages[1]) {
		t.Fatalf("ToolResult of a row with silent 2: %+v, %v; want %+v", m, err, page.Messages[1])
	}

	// Through the Store: ListMessages (a reader) and ToolResult (database/sql).
	if _, err := st.DB().ExecContext(ctx, `DELETE FROM messages WHERE id = 'u'`); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, insert, 2, "deep", "yes", "2025-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	const want = "decode message 2: column depth holds TEXT"
	if page, err := st.ListMessages(ctx, "t", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ListMessages: %+v, %v; want an error with %q", page.Messages, err, want)
	}
	if m, err := st.ToolResult(ctx, "t", "c1"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ToolResult: %+v, %v; want an error with %q", m, err, want)
	}
}
