package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

var memTestTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func memMsg(id string, role Role, callID string) *Message {
	return &Message{ID: id, Role: role, ToolCallID: callID, Content: "c " + id, CreatedAt: memTestTime}
}

// Rows are found again where they were put: in chunk 0, reallocated twice
// as big as it fills, and in the doubling and fixed-size chunks after it,
// whose rows never move. A copy of the rows taken earlier still reads its
// rows after more were added, and a short thread holds little more than its
// rows.
func TestMemoryStoreRowChunks(t *testing.T) {
	var r, past memRows
	const n = 3*maxChunk + doubled + 5
	var fixed *memRow
	for i := range n {
		p := r.push()
		p.seq = int64(i)
		switch i {
		case 5:
			past = r
		case smallRows:
			fixed = p
		}
	}
	if r.at(smallRows) != fixed {
		t.Fatal("a row after chunk 0 moved when later chunks were added")
	}
	for i := range n {
		if got := r.at(i).seq; got != int64(i) {
			t.Fatalf("row %d holds Seq %d", i, got)
		}
	}
	for i := range past.n {
		if got := past.at(i).seq; got != int64(i) {
			t.Fatalf("row %d of an earlier copy holds Seq %d", i, got)
		}
	}
	if len(r.first) != smallRows || len(r.rest[0]) != smallRows || len(r.rest[len(r.rest)-1]) != maxChunk {
		t.Errorf("chunk sizes %d, %d … %d; want %d, %d … %d", len(r.first), len(r.rest[0]), len(r.rest[len(r.rest)-1]), smallRows, smallRows, maxChunk)
	}
	var short memRows
	for range 4 {
		short.push()
	}
	if short.rest != nil || len(short.first) != 4 {
		t.Errorf("4 rows are held in %d chunks after a first of %d rows; want only a first of 4", len(short.rest), len(short.first))
	}
}

// A thread's row i holds Seq i+1, whatever the batches it was appended in
// (reads with After find their first row by it), and a read with After
// returns exactly the rows after it.
func TestMemoryStoreRowIndexIsSeq(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	if err := s.CreateThread(ctx, &Thread{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	appended := 0
	for batch := range 12 {
		msgs := make([]*Message, batch%4+1)
		for i := range msgs {
			msgs[i] = &Message{ID: fmt.Sprintf("m%d-%d", batch, i), Role: RoleUser, Content: "x", CreatedAt: memTestTime}
		}
		if err := s.AppendMessages(ctx, "a", msgs...); err != nil {
			t.Fatal(err)
		}
		appended += len(msgs)
	}
	th := s.thread("a", false)
	th.mu.RLock()
	v := th.view()
	th.mu.RUnlock()
	if v.rows.n != appended {
		t.Fatalf("%d rows for %d messages", v.rows.n, appended)
	}
	for i := range v.rows.n {
		if got := v.rows.at(i).seq; got != int64(i+1) {
			t.Fatalf("row %d holds Seq %d; want %d", i, got, i+1)
		}
	}
	for after := int64(-1); after <= int64(appended)+2; after++ {
		p, err := s.ListMessages(ctx, "a", MessageQuery{After: after, Order: OrderAsc})
		if err != nil {
			t.Fatal(err)
		}
		want := appended - int(min(max(after, 0), int64(appended)))
		if len(p.Messages) != want || p.Total != want {
			t.Fatalf("After %d: %d messages, Total %d; want %d", after, len(p.Messages), p.Total, want)
		}
		for i, m := range p.Messages {
			if m.Seq != max(after, 0)+int64(i)+1 {
				t.Fatalf("After %d: message %d has Seq %d", after, i, m.Seq)
			}
		}
	}
}

// A stored message keeps every field: the compact row holds them all. Every
// field of the message is set (by reflection, so that a field added to
// Message and forgotten by the row fails here).
func TestMemoryStoreRowKeepsEveryField(t *testing.T) {
	m := Message{}
	v := reflect.ValueOf(&m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("v-" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 1, 1))
			e := f.Index(0)
			for j := range e.NumField() {
				if e.Field(j).Kind() == reflect.String {
					e.Field(j).SetString("e-" + e.Type().Field(j).Name)
				}
			}
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]any{"k": "v-" + v.Type().Field(i).Name}))
		case reflect.Struct:
			f.Set(reflect.ValueOf(memTestTime))
		default:
			t.Fatalf("field %s of kind %s: the test does not know how to set it", v.Type().Field(i).Name, f.Kind())
		}
		if f.IsZero() {
			t.Fatalf("field %s is still zero", v.Type().Field(i).Name)
		}
	}
	m.Role = RoleTool
	for _, content := range []string{m.Content, strings.Repeat("long content ", arenaOwn)} {
		m.Content = content
		th := &memThread{exists: true}
		st, err := stage(&m)
		if err != nil {
			t.Fatal(err)
		}
		th.addRow(&m, st, m.Seq, 0, 0, 0)
		v := th.view()
		got := v.message(v.rows.at(0), m.ThreadID)
		if !reflect.DeepEqual(got, m) {
			t.Errorf("row of a message with every field set reads back as\n%+v\nwant\n%+v", got, m)
		}
		got.ToolCalls[0].Name, got.Metadata["k"] = "changed", "changed"
		if again := v.message(v.rows.at(0), m.ThreadID); !reflect.DeepEqual(again, m) {
			t.Error("a message read from a row shares its slices or maps with the row")
		}
	}
}

// Work on one thread never waits for another thread's lock: with thread
// a's lock held, every operation on thread b completes. (Were there one
// lock for the store, this test would never end.)
func TestMemoryStoreThreadsDoNotShareALock(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	if err := s.CreateThread(ctx, &Thread{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	a := s.thread("a", false)
	for _, read := range []bool{false, true} {
		if read {
			a.mu.RLock() // a long read of thread a
		} else {
			a.mu.Lock() // an append to thread a in progress
		}
		done := make(chan error)
		go func() {
			b := fmt.Sprint("b-", read)
			errs := []error{
				s.CreateThread(ctx, &Thread{ID: b}),
				s.AppendMessages(ctx, b, memMsg("m1", RoleTool, "c1")),
				s.SetValue(ctx, b, "k", json.RawMessage(`1`)),
				s.SetEnv(ctx, ScopeThread, b, "E", EnvValue{Value: "v"}),
				s.SetEnv(ctx, ScopeUser, "u", "E", EnvValue{Value: "v"}),
				s.PutChild(ctx, ChildEntry{ParentID: b, Reference: "kid"}),
			}
			_, err := s.WriteFile(ctx, b, FileInfo{Path: "/f"}, []byte("x"))
			errs = append(errs, err)
			_, err = s.ListMessages(ctx, b, MessageQuery{})
			errs = append(errs, err)
			_, err = s.ToolResult(ctx, b, "c1")
			errs = append(errs, err)
			_, err = s.GetThread(ctx, b)
			errs = append(errs, err)
			for _, err := range errs {
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if read {
			a.mu.RUnlock()
		} else {
			a.mu.Unlock()
		}
	}
}

// allocated returns the bytes f allocates, averaged over runs.
func allocated(runs int, f func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(runs)
}

// Reads copy what they return and nothing more: a page of 10 messages of a
// thread of 20,000, Total included, allocates about 10 messages, whatever
// the filter, order or offset; so does a query with After.
func TestMemoryStoreReadsCopyOnlyThePage(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	if err := s.CreateThread(ctx, &Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20000; i += 100 {
		batch := make([]*Message, 100)
		for j := range batch {
			batch[j] = memMsg(fmt.Sprint("m", i+j), RoleUser, "")
			batch[j].Silent, batch[j].Depth = (i+j)%5 == 0, (i+j)%3
		}
		if err := s.AppendMessages(ctx, "t", batch...); err != nil {
			t.Fatal(err)
		}
	}
	limit := 10 * 2 * float64(sizeofMessage) // ten messages, with room for the page's slices
	for _, q := range []MessageQuery{
		{Limit: 10},
		{Limit: 10, MaxDepth: -1, IncludeSilent: true},
		{Limit: 10, Offset: 5000, Order: OrderAsc},
		{Limit: 10, Order: OrderDesc, MaxDepth: -1},
		{After: 19990, Order: OrderAsc, IncludeSilent: true, MaxDepth: -1},
		{After: 10000, Limit: 10, IncludeSilent: true},
	} {
		var n int
		got := allocated(50, func() {
			p, err := s.ListMessages(ctx, "t", q)
			if err != nil {
				t.Fatal(err)
			}
			n = len(p.Messages)
		})
		if n == 0 || n > 10 || got > limit {
			t.Errorf("ListMessages(%+v): %d messages, %.0f bytes allocated; want at most 10 messages in %.0f bytes", q, n, got, limit)
		}
	}
}

// sizeofMessage is the size of a Message value.
var sizeofMessage = unsafe.Sizeof(Message{})

// The heap held per idle thread is small: a thread with one message, one
// value and one env variable costs under 4 KiB (about 1.7 KiB here).
func TestMemoryStoreIdleThreadHeap(t *testing.T) {
	const n = 4000
	s := NewMemoryStore()
	ctx := context.Background()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("thread-", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, id := range ids {
		if err := s.CreateThread(ctx, &Thread{ID: id, CreatedAt: memTestTime}); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendMessages(ctx, id, memMsg(fmt.Sprint("m", i), RoleUser, "")); err != nil {
			t.Fatal(err)
		}
		if err := s.SetValue(ctx, id, "k", json.RawMessage(`{"step":1}`)); err != nil {
			t.Fatal(err)
		}
		if err := s.SetEnv(ctx, ScopeThread, id, "E", EnvValue{Value: "v", Type: VarText}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%.0f bytes per idle thread", per)
	if per > 4096 {
		t.Errorf("an idle thread holds %.0f bytes of heap; want under 4 KiB", per)
	}
	runtime.KeepAlive(s)
}

// Many goroutines, each on its own thread and all on a shared one, mixing
// every kind of read and write, lose nothing (and, under -race, race on
// nothing).
func TestMemoryStoreConcurrentThreads(t *testing.T) {
	s := NewMemoryStore()
	ctx := context.Background()
	if err := s.CreateThread(ctx, &Thread{ID: "shared"}); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 16, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := fmt.Sprint("own-", w)
			if err := s.CreateThread(ctx, &Thread{ID: own, Arguments: map[string]any{"w": w}}); err != nil {
				t.Error(err)
				return
			}
			for i := range rounds {
				id := fmt.Sprintf("w%d-%d", w, i)
				for _, th := range []string{own, "shared"} {
					if err := s.AppendMessages(ctx, th, memMsg(id+"-a", RoleAssistant, ""), memMsg(id+"-r", RoleTool, id)); err != nil {
						t.Error(err)
						return
					}
					if _, err := s.ListMessages(ctx, th, MessageQuery{Limit: 5, After: int64(i)}); err != nil {
						t.Error(err)
					}
					if _, err := s.ToolResult(ctx, th, id); err != nil {
						t.Error(err)
					}
				}
				_ = s.SetValue(ctx, "shared", id, json.RawMessage(`1`))
				_, _ = s.GetValue(ctx, "shared", id)
				_ = s.SetEnv(ctx, ScopeUser, "u", id, EnvValue{Value: id})
				_, _ = s.ListEnv(ctx, ScopeUser, "u")
				_, _ = s.WriteFile(ctx, own, FileInfo{Path: "/f", UpdatedAt: memTestTime}, []byte(id))
				_, _ = s.ListFiles(ctx, own, "/")
				_ = s.PutChild(ctx, ChildEntry{ParentID: "shared", Reference: fmt.Sprint("kid-", w), Status: id})
				_, _ = s.Children(ctx, "shared")
				if th, err := s.GetThread(ctx, own); err == nil {
					th.SessionTurns = i
					_ = s.UpdateThread(ctx, th)
				}
			}
		})
	}
	wg.Wait()
	p, err := s.ListMessages(ctx, "shared", MessageQuery{IncludeSilent: true, MaxDepth: -1, Order: OrderAsc})
	if err != nil || p.Total != 2*workers*rounds || len(p.Messages) != p.Total {
		t.Fatalf("shared thread: %d messages, Total %d, %v; want %d", len(p.Messages), p.Total, err, 2*workers*rounds)
	}
	for i := 1; i < len(p.Messages); i++ {
		if p.Messages[i].Seq != p.Messages[i-1].Seq+1 {
			t.Fatalf("Seq %d follows %d", p.Messages[i].Seq, p.Messages[i-1].Seq)
		}
	}
	if kids, _ := s.Children(ctx, "shared"); len(kids) != workers {
		t.Errorf("%d children, want %d", len(kids), workers)
	}
}

// The result index finds results by call id through their hash, checks the
// row's own id, and keeps by name an id whose hash another id already has.
func TestResultIndex(t *testing.T) {
	ids := []string{"call_a", "call_b", "call_c"}
	idOf := func(i int) string { return ids[i] }
	var x resultIndex
	if _, ok := x.find("call_a", idOf); ok {
		t.Fatal("an empty index finds a result")
	}
	x.add("call_a", 0, idOf)
	if i, ok := x.find("call_a", idOf); !ok || i != 0 {
		t.Fatalf("find(call_a) = %d, %v", i, ok)
	}
	if _, ok := x.find("call_b", idOf); ok {
		t.Fatal("found a result that was never added")
	}
	// call_c's hash is taken by row 0 (call_a), as a collision would.
	x.few[x.nFew] = resultSlot{maphash.String(resultSeed, "call_c"), 0}
	x.nFew++
	if _, ok := x.find("call_c", idOf); ok {
		t.Fatal("a hash match whose row has another id counts as found")
	}
	x.add("call_c", 2, idOf)
	if i, ok := x.find("call_c", idOf); !ok || i != 2 {
		t.Fatalf("find(call_c) after a clash = %d, %v; want 2", i, ok)
	}
	if len(x.clash) != 1 {
		t.Fatalf("clash holds %d ids; want 1", len(x.clash))
	}
	// Past the first few, results go to the map and are found there.
	for i := range 100 {
		ids = append(ids, fmt.Sprint("more_", i))
		x.add(ids[len(ids)-1], len(ids)-1, idOf)
	}
	for i, id := range ids {
		if got, ok := x.find(id, idOf); id != "call_b" && (!ok || got != i) {
			t.Fatalf("find(%s) = %d, %v; want %d", id, got, ok, i)
		}
	}
}

// The arena's first block is replaced by a bigger copy as a short thread
// grows: a reader that copied the thread's view before keeps reading its
// rows' strings from the block it copied, and later reads see every row.
func TestMemoryStoreArenaFirstBlockGrowsUnderAReader(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	if err := s.CreateThread(ctx, &Thread{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	content := func(i int) string { return fmt.Sprintf("message %d: %s", i, strings.Repeat("x", 40+i)) }
	appendN := func(from, to int) {
		for i := from; i < to; i++ {
			m := &Message{ID: fmt.Sprintf("m%d", i), Role: RoleUser, Content: content(i), CreatedAt: time.Unix(int64(i), 0)}
			if err := s.AppendMessages(ctx, "t", m); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(0, 2)
	th := s.thread("t", false)
	th.mu.RLock()
	old, firstLen := th.view(), len(th.arena.blocks.first)
	th.mu.RUnlock()
	appendN(2, 20)
	th.mu.RLock()
	grown, rest := len(th.arena.blocks.first), len(th.arena.blocks.rest)
	th.mu.RUnlock()
	if grown <= firstLen || rest != 0 {
		t.Fatalf("first block %d → %d bytes with %d more blocks; want it grown in place", firstLen, grown, rest)
	}
	for i := range old.rows.n {
		if m := old.message(old.rows.at(i), "t"); m.ID != fmt.Sprintf("m%d", i) || m.Content != content(i) {
			t.Errorf("row %d read through a view taken before the block grew: %q %q", i, m.ID, m.Content)
		}
	}
	page, err := s.ListMessages(ctx, "t", MessageQuery{IncludeSilent: true})
	if err != nil || len(page.Messages) != 20 {
		t.Fatalf("list: %v, %d messages", err, len(page.Messages))
	}
	for i, m := range page.Messages {
		if m.ID != fmt.Sprintf("m%d", i) || m.Content != content(i) {
			t.Errorf("message %d after the block grew: %q %q", i, m.ID, m.Content)
		}
	}
}

// TestMemoryStoreThreadIDsLiveInTheirRecords: a thread id that fits the
// record's room is kept in the record (the index's key and the stored
// Thread's ID point into it), a longer one as given; either way the thread
// is found by any string of the same bytes, before and after it is
// created, updated or given data by id first.
func TestMemoryStoreThreadIDsLiveInTheirRecords(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	ids := []string{"t", "thread_0123456789abcdef", "thread_0123456789abcdef0", strings.Repeat("long-", 20), "fil-ñ-東"}
	for i, id := range ids {
		if i%2 == 1 {
			// Data kept by thread id makes the record before the thread.
			if err := s.SetValue(ctx, id, "k", json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateThread(ctx, &Thread{ID: strings.Clone(id), AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
		// CreateThread stores the record's copy of the id, not the caller's.
		if rec, fits := s.thread(id, false), len(id) <= threadIDRoom; idInRecord(rec, rec.t.ID) != fits {
			t.Errorf("id %q: the created Thread's ID in the record = %v, want %v", id, !fits, fits)
		}
		if err := s.UpdateThread(ctx, &Thread{ID: strings.Clone(id), AgentID: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		th, err := s.GetThread(ctx, strings.Clone(id))
		if err != nil || th.ID != id || th.AgentID != "b" {
			t.Fatalf("GetThread(%q) = %+v, %v", id, th, err)
		}
		rec := s.thread(id, false)
		fits := len(id) <= threadIDRoom
		if got := idInRecord(rec, rec.id); got != fits {
			t.Errorf("id %q (%d bytes): kept in its record = %v, want %v", id, len(id), got, fits)
		}
		if got := idInRecord(rec, rec.t.ID); got != fits {
			t.Errorf("id %q: the stored Thread's ID in the record = %v, want %v", id, got, fits)
		}
	}
}

// idInRecord reports whether the bytes of id lie inside rec.
func idInRecord(rec *memThread, id string) bool {
	lo, p := uintptr(unsafe.Pointer(rec)), uintptr(unsafe.Pointer(unsafe.StringData(id)))
	return p >= lo && p < lo+unsafe.Sizeof(*rec)
}

// TestMemoryStoreMakesRecordsInSlabs: thread records made one after another
// lie side by side in slabs that start small and stop doubling at maxSlab
// records; goroutines making records at once each get a record of their
// own.
func TestMemoryStoreMakesRecordsInSlabs(t *testing.T) {
	ctx := context.Background()
	s := NewMemoryStore()
	const n = firstSlab + 2*firstSlab
	var prev *memThread
	for i := range n {
		id := fmt.Sprint("thread-", i)
		if err := s.CreateThread(ctx, &Thread{ID: id}); err != nil {
			t.Fatal(err)
		}
		rec := s.thread(id, false)
		if prev != nil && i != firstSlab { // record firstSlab starts the second slab
			if d := uintptr(unsafe.Pointer(rec)) - uintptr(unsafe.Pointer(prev)); d != unsafe.Sizeof(*rec) {
				t.Errorf("record %d is %d bytes after record %d; want %d", i, d, i-1, unsafe.Sizeof(*rec))
			}
		}
		prev = rec
	}
	if c := cap(s.threads.slab); c != 2*firstSlab {
		t.Errorf("second slab has room for %d records; want %d", c, 2*firstSlab)
	}
	for range 8 {
		_ = s.threads.newRecord()
	}
	for range 200 {
		_ = s.threads.newRecord()
	}
	if c := cap(s.threads.slab); c != maxSlab {
		t.Errorf("slabs grew to %d records; want at most %d", c, maxSlab)
	}

	var wg sync.WaitGroup
	recs := make([]*memThread, 64)
	for g := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("concurrent-", g)
			if err := s.CreateThread(ctx, &Thread{ID: id}); err != nil {
				t.Error(err)
			}
			recs[g] = s.thread(id, false)
		}()
	}
	wg.Wait()
	seen := map[*memThread]bool{}
	for g, r := range recs {
		if r == nil || seen[r] {
			t.Fatalf("goroutine %d: record %p shared or missing", g, r)
		}
		seen[r] = true
	}
}

// TestChangeThreadChangesInPlaceWithoutSharing: the runtime's one-step
// thread update applies its change to the stored record, and neither a map
// the change put in nor the record it returns is shared with the store.
func TestChangeThreadChangesInPlaceWithoutSharing(t *testing.T) {
	ctx := context.Background()
	st := NewMemoryStore()
	if err := st.CreateThread(ctx, &Thread{ID: "t", Properties: map[string]any{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	given := map[string]any{"k": "v"}
	got, err := st.changeThread(ctx, "t", func(th *Thread) {
		th.SessionTurns++
		given["seen"] = true
		th.Properties = given
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionTurns != 1 || got.Properties["seen"] != true || got.ID != "t" {
		t.Fatalf("returned %+v", got)
	}
	given["late"] = 1 // the map the change put in
	got.Properties["mine"] = 2
	stored, err := st.GetThread(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if stored.SessionTurns != 1 || stored.Properties["seen"] != true || len(stored.Properties) != 2 {
		t.Fatalf("stored %+v, want the change and nothing written after it", stored)
	}
	if _, err := st.changeThread(ctx, "missing", func(*Thread) { t.Error("change ran for a missing thread") }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing thread: %v", err)
	}
}

// A page's bounds hold for any Limit and Offset: an ascending page with
// an Offset and a Limit near the largest int overflowed their sum, and
// the read panicked making a slice of negative length.
func TestPageBoundsHoldForAnyLimit(t *testing.T) {
	for _, q := range []MessageQuery{
		{Order: OrderAsc, Offset: 1, Limit: math.MaxInt},
		{Order: OrderAsc, Offset: math.MaxInt, Limit: math.MaxInt},
		{Order: OrderDesc, Offset: 1, Limit: math.MaxInt},
		{Offset: math.MaxInt, Limit: 1},
	} {
		lo, hi := pageBounds(5, q)
		if lo < 0 || hi > 5 || lo > hi {
			t.Errorf("pageBounds(5, %+v) = [%d, %d); want a window within [0, 5)", q, lo, hi)
		}
	}
	lo, hi := pageBounds(5, MessageQuery{Order: OrderAsc, Offset: 1, Limit: math.MaxInt})
	if lo != 1 || hi != 5 {
		t.Errorf("ascending from offset 1 without a useful limit: [%d, %d); want [1, 5)", lo, hi)
	}
}
