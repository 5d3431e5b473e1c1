package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	"math"
	"math/bits"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/toolrun/toolrun/internal/jsonvalue"
)

// MemoryStore is the in-memory Store: the default when no store is
// configured, and a good fit for tests. Everything is lost when the process
// ends. It is safe for concurrent use; every value handed in or out is
// copied. Its zero value is an empty store, ready to use.
//
// The maps of records are kept as the JSON values the Store contract
// describes. Besides what every store refuses, it refuses one of more than
// 2²⁰ values or 16 MiB of strings and keys, the bounds tools' values are
// held to, which also stops a value that shares one map many times from
// growing into a huge copy.
//
// Each thread has its own lock: work on different threads never waits on
// one lock (the store-wide map from thread ids to threads is read without
// locking once a thread exists). Reading messages costs the rows returned,
// plus the rows skipped over for a filter other than the top level or every
// depth: Total is kept by counters, and a page of the newest (or oldest)
// rows is found without walking the thread.
type MemoryStore struct {
	threads memIndex[memThread]
	users   memIndex[memUser] // user-scope env
}

// memIndex finds records by id: 64 shards, each a plain map under its own
// lock, taken for reading to find a record and for writing only to add one.
// Plain maps hold their keys and record pointers in a few large arrays,
// where a sync.Map holds each entry in objects of its own: with many
// threads kept, that was most of what the collector had to mark.
//
// Records are made in slabs, arrays of up to 64 records filled in the order
// records are made and replaced, never grown, when full. A collection then
// scans a slab's records in one piece and reaches what they point to in
// the order it was made, where records allocated one by one are reached
// through the maps in hash order, each a cache miss away from the last: a
// collection of 40,000 idle threads took two to two and a half times as
// long (BenchmarkCollectIdleThreads).
type memIndex[T any] struct {
	shards [64]memShard[T]

	slabMu sync.Mutex
	slab   []T // the room new records are made in
}

// Slabs start small, so that a store of a few records holds little room,
// and double up to maxSlab records.
const (
	firstSlab = 4
	maxSlab   = 64
)

// keyHolder is a record that keeps the bytes of its own id: the index keys
// it by the string holdKey returns, which saves the collector an object per
// record. holdKey is called once, before the record is published.
type keyHolder interface {
	holdKey(id string) string
}

// newRecord returns a zero record, made in the current slab.
func (x *memIndex[T]) newRecord() *T {
	x.slabMu.Lock()
	defer x.slabMu.Unlock()
	if len(x.slab) == cap(x.slab) {
		x.slab = make([]T, 0, min(max(2*cap(x.slab), firstSlab), maxSlab))
	}
	x.slab = x.slab[:len(x.slab)+1]
	return &x.slab[len(x.slab)-1]
}

type memShard[T any] struct {
	mu sync.RWMutex
	m  map[string]*T
	_  [32]byte // a shard to a cache line: finding records in two shards shares no written memory
}

// indexSeed seeds the shard hashes of every memIndex in the process.
var indexSeed = maphash.MakeSeed()

// get returns the record of id; when there is none, a new one if create is
// set, nil otherwise.
func (x *memIndex[T]) get(id string, create bool) *T {
	sh := &x.shards[maphash.String(indexSeed, id)%uint64(len(x.shards))]
	sh.mu.RLock()
	r := sh.m[id]
	sh.mu.RUnlock()
	if r != nil || !create {
		return r
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r = sh.m[id]; r == nil {
		if sh.m == nil {
			sh.m = make(map[string]*T)
		}
		r = x.newRecord()
		if h, ok := any(r).(keyHolder); ok {
			id = h.holdKey(id)
		}
		sh.m[id] = r
	}
	return r
}

// memThread is everything kept under one thread id. Its fields are guarded
// by mu. A record exists for data kept by thread id (values, env, files,
// children) even when no thread was created; exists tells them apart.
type memThread struct {
	mu      sync.RWMutex
	exists  bool   // CreateThread stored t
	t       Thread // immutable once stored: writes replace it with a copy
	rows    memRows
	arena   memArena      // the bytes of the rows' strings
	calls   []memCall     // the rows' tool calls, in row order; only ever appended to
	more    []*memRowMore // the rows' rarer fields; row.more-1 indexes it; immutable once stored
	results resultIndex   // tool-call id → index in rows
	nextSeq int64

	values   map[string]json.RawMessage
	env      map[string]EnvValue
	files    map[string]*memFile // immutable once stored
	children []ChildEntry        // entries whose parent is this thread, in creation order; immutable once stored

	// The thread's id, the index's key, is kept in the record when it
	// fits, as the runtime's ids do: one object fewer a thread for the
	// collector to mark in every cycle. Its bytes end the record, which is
	// 512 bytes, and are written once: where a slab's records do not start
	// on a cache line (a small slab's array starts after Go's 8-byte
	// header), the line they share with the next record's lock holds
	// nothing this record's goroutines write.
	id      string
	idBytes [threadIDRoom]byte
}

// threadIDRoom is the room a thread record has for its id: enough for the
// ids the runtime makes ("thread_" and 16 hex digits).
const threadIDRoom = 24

// holdKey implements keyHolder: the id, copied into the record when it
// fits. idBytes is never written again, so the string stays immutable.
func (t *memThread) holdKey(id string) string {
	t.id = id
	if len(id) > 0 && len(id) <= len(t.idBytes) {
		n := copy(t.idBytes[:], id)
		t.id = unsafe.String(&t.idBytes[0], n)
	}
	return t.id
}

// callIDOf returns the tool-call id of row i. Callers hold t.mu.
func (t *memThread) callIDOf(i int) string {
	return t.arena.blocks.str(t.rows.at(i).toolCallID)
}

// resultIndex finds a thread's tool results by call id without a pointer
// per result, so the collector does not scan it: the hash of the id and the
// row, for the first few results in place and then in a map, the row's own
// id checked; the ids whose hash another id already has (which a 64-bit
// hash makes all but impossible) are kept by name.
type resultIndex struct {
	few    [2]resultSlot
	nFew   int
	byHash map[uint64]int
	clash  map[string]int
}

type resultSlot struct {
	hash uint64
	row  int
}

// resultSeed seeds the hashes of every resultIndex in the process.
var resultSeed = maphash.MakeSeed()

// byHashOf returns the row recorded for hash h.
func (x *resultIndex) byHashOf(h uint64) (int, bool) {
	for _, sl := range x.few[:x.nFew] {
		if sl.hash == h {
			return sl.row, true
		}
	}
	i, ok := x.byHash[h]
	return i, ok
}

// find returns the row of the result of call id; idOf gives a row's id.
func (x *resultIndex) find(id string, idOf func(int) string) (int, bool) {
	if i, ok := x.clash[id]; ok {
		return i, true
	}
	i, ok := x.byHashOf(maphash.String(resultSeed, id))
	if !ok || idOf(i) != id {
		return 0, false
	}
	return i, true
}

// add records row i as the result of call id.
func (x *resultIndex) add(id string, i int, idOf func(int) string) {
	h := maphash.String(resultSeed, id)
	if j, taken := x.byHashOf(h); taken && idOf(j) != id {
		if x.clash == nil {
			x.clash = map[string]int{}
		}
		x.clash[id] = i
		return
	}
	if x.nFew < len(x.few) {
		x.few[x.nFew] = resultSlot{h, i}
		x.nFew++
		return
	}
	if x.byHash == nil {
		x.byHash = map[uint64]int{}
	}
	x.byHash[h] = i
}

// memRow is one stored message and the counts of rows up to and including
// it that match the common filters: at the top level, not silent, and both.
// A row holds no pointers: its strings are in the thread's arena and its
// rarer fields, which most rows leave empty, in the thread's more list. So
// the garbage collector marks a chunk of rows, and a block of their
// strings, without scanning them: a store holding many messages costs each
// collection little. Its
// thread id is the thread's; CreatedAt is kept as a UTC instant. A row is
// never changed once stored, so readers may copy it after releasing the
// thread's lock.
type memRow struct {
	id, content, toolCallID, name, side, prompt, callDigest, role, status strRef
	nsec                                                                  int32 // CreatedAt's nanoseconds (here, it fills the strRefs' last 8 bytes)
	seq                                                                   int64
	sec                                                                   int64 // CreatedAt, Unix seconds
	depth                                                                 int32
	more                                                                  int32 // 1 + index in the thread's more; 0: none
	top, visible, topVisible                                              uint32
	calls, ncalls                                                         uint32 // the row's tool calls: ncalls from index calls in the thread's calls
	silent                                                                bool
}

// memCall is a stored tool call, its strings in the thread's arena. Calls
// are kept apart from the rarer fields, which hold pointers: most
// assistant messages have calls and nothing else, and a thread's calls are
// then one array the collector does not scan.
type memCall struct {
	id, name, arguments strRef
	redacted            bool
}

// memRowMore holds the fields of a message that most messages leave empty.
type memRowMore struct {
	errorCode, stack, arguments, parentID, subagentID string
	queued                                            bool
	errorData, metadata                               map[string]any
	queuedCalls                                       []ToolCall
	attachments                                       []AttachmentRef
}

// newMemRowMore returns the rarer fields of m, with copies of its slices
// and its maps as kept (keepMap), or nil when m has none.
func newMemRowMore(m *Message) (*memRowMore, error) {
	if m.ErrorCode == "" && m.Stack == "" && m.Arguments == "" && m.ParentID == "" && m.SubagentID == "" &&
		!m.Queued && m.ErrorData == nil && m.Metadata == nil && m.QueuedCalls == nil && m.Attachments == nil {
		return nil, nil
	}
	errorData, err := keepMap("error_data", m.ErrorData)
	if err != nil {
		return nil, err
	}
	metadata, err := keepMap("metadata", m.Metadata)
	if err != nil {
		return nil, err
	}
	return &memRowMore{errorCode: m.ErrorCode, stack: m.Stack, arguments: m.Arguments, parentID: m.ParentID,
		subagentID: m.SubagentID, queued: m.Queued, errorData: errorData, metadata: metadata,
		queuedCalls: slices.Clone(m.QueuedCalls), attachments: slices.Clone(m.Attachments)}, nil
}

// memStaged is what an append prepares for a message before it takes the
// thread's lock: the copies of its rarer fields and of a long content.
type memStaged struct {
	more    *memRowMore
	content []byte // a copy of a content longer than arenaOwn; nil otherwise
}

func stage(m *Message) (memStaged, error) {
	more, err := newMemRowMore(m)
	if err != nil {
		return memStaged{}, err
	}
	st := memStaged{more: more}
	if len(m.Content) > arenaOwn {
		st.content = []byte(m.Content)
	}
	return st, nil
}

// addRow stores m as the thread's next row, numbered seq, with the counters
// given; callers hold t.mu for writing.
func (t *memThread) addRow(m *Message, st memStaged, seq int64, top, visible, topVisible uint32) {
	a := &t.arena
	r := t.rows.push()
	*r = memRow{id: a.put(m.ID), toolCallID: a.put(m.ToolCallID), name: a.put(m.Name), side: a.put(m.Side),
		prompt: a.put(m.Prompt), callDigest: a.put(m.CallDigest), role: a.put(string(m.Role)), status: a.put(string(m.ToolStatus)),
		seq: seq, sec: m.CreatedAt.Unix(), nsec: int32(m.CreatedAt.Nanosecond()), silent: m.Silent, depth: int32(m.Depth),
		top: top, visible: visible, topVisible: topVisible}
	if len(m.ToolCalls) > 0 {
		r.calls, r.ncalls = uint32(len(t.calls)), uint32(len(m.ToolCalls))
		for _, c := range m.ToolCalls {
			t.calls = append(t.calls, memCall{id: a.put(c.ID), name: a.put(c.Name), arguments: a.put(c.Arguments), redacted: c.Redacted})
		}
	}
	if st.content != nil {
		r.content = a.own(st.content)
	} else {
		r.content = a.put(m.Content)
	}
	if st.more != nil {
		t.more = append(t.more, st.more)
		r.more = int32(len(t.more))
	}
}

// memView is what a reader copies of a thread under its lock: rows, arena
// blocks, calls and more list, whose first elements never change.
type memView struct {
	rows   memRows
	blocks arenaBlocks
	calls  []memCall
	more   []*memRowMore
	// room is where fill takes its messages' tool calls from, when a read
	// has made room for a page's calls in one allocation (reserveCalls);
	// otherwise each message's calls are allocated on their own.
	room []ToolCall
}

// view returns the thread's rows as a reader may keep them; callers hold
// t.mu.
func (t *memThread) view() memView {
	return memView{rows: t.rows, blocks: t.arena.blocks, calls: t.calls, more: t.more}
}

// message returns the message of r (a row of v) on thread, with copies of
// its slices and maps.
func (v *memView) message(r *memRow, thread string) Message {
	var m Message
	v.fill(&m, r, thread)
	return m
}

// fill sets *m to the message of r, as message returns it, in place: a
// page's messages are written where the page holds them.
func (v *memView) fill(m *Message, r *memRow, thread string) {
	b := &v.blocks
	*m = Message{}
	m.ID, m.ThreadID, m.Seq, m.Role, m.Content = b.str(r.id), thread, r.seq, Role(b.str(r.role)), b.str(r.content)
	m.ToolCallID, m.Name, m.ToolStatus, m.Side = b.str(r.toolCallID), b.str(r.name), Status(b.str(r.status)), b.str(r.side)
	m.Depth, m.Silent, m.Prompt, m.CallDigest = int(r.depth), r.silent, b.str(r.prompt), b.str(r.callDigest)
	m.CreatedAt = time.Unix(r.sec, int64(r.nsec)).UTC()
	if n := int(r.ncalls); n > 0 {
		if len(v.room) >= n {
			m.ToolCalls, v.room = v.room[:n:n], v.room[n:]
		} else {
			m.ToolCalls = make([]ToolCall, n)
		}
		for i, c := range v.calls[r.calls : r.calls+r.ncalls] {
			m.ToolCalls[i] = ToolCall{ID: b.str(c.id), Name: b.str(c.name), Arguments: b.str(c.arguments), Redacted: c.redacted}
		}
	}
	if r.more > 0 {
		x := v.more[r.more-1]
		m.ErrorCode, m.Stack, m.Arguments, m.ParentID, m.SubagentID = x.errorCode, x.stack, x.arguments, x.parentID, x.subagentID
		m.Queued = x.queued
		m.ErrorData, m.Metadata = cloneMap(x.errorData), cloneMap(x.metadata)
		m.QueuedCalls, m.Attachments = slices.Clone(x.queuedCalls), slices.Clone(x.attachments)
	}
}

// reserveCalls makes room for the n tool calls of the messages fill is
// about to write, in one allocation: each message gets its own part of it,
// capped, so that appending to one message's calls copies them instead of
// writing over the next one's.
func (v *memView) reserveCalls(n int) {
	if n > 0 {
		v.room = make([]ToolCall, n)
	}
}

// strRef locates a string in a thread's arena: n bytes at off in block blk,
// or the whole block when n is wholeBlock. The zero strRef is "".
type strRef struct{ blk, off, n uint32 }

const wholeBlock = math.MaxUint32

// memArena holds the bytes of a thread's strings in blocks. Bytes are only
// ever written after the bytes in use, and a block is only replaced by a
// bigger copy of itself (block 0, which grows up to arenaGrown so that a
// short thread keeps one block, as chunk 0 of the rows does), so a copy of
// blocks (taken under the thread's lock) reads every string of the rows
// seen with it; the strings a reader builds point into the blocks it
// copied, which nothing changes.
type memArena struct {
	blocks arenaBlocks
	cur    int // the block strings are packed into; -1 (or no blocks): none yet
	used   int // bytes used in it
}

// arenaBlocks are an arena's blocks: the first in place (most threads need
// no other, and then hold no list of blocks), the others in a list.
type arenaBlocks struct {
	first []byte
	rest  [][]byte
}

func (b *arenaBlocks) len() int {
	if b.first == nil {
		return 0
	}
	return 1 + len(b.rest)
}

func (b *arenaBlocks) at(i int) []byte {
	if i == 0 {
		return b.first
	}
	return b.rest[i-1]
}

// add appends blk, which is not empty, and returns its index.
func (b *arenaBlocks) add(blk []byte) int {
	if b.first == nil {
		b.first = blk
		return 0
	}
	b.rest = append(b.rest, blk)
	return len(b.rest)
}

// str returns the string r locates, without copying it.
func (b *arenaBlocks) str(r strRef) string {
	if r.n == 0 {
		return ""
	}
	blk := b.at(int(r.blk))
	if r.n == wholeBlock {
		return unsafe.String(&blk[0], len(blk))
	}
	return unsafe.String(&blk[r.off], int(r.n))
}

const (
	arenaFirst = 256     // the first block's size: a short thread's strings
	arenaGrown = 2 << 10 // the first block grows in place of itself up to this
	arenaMax   = 8 << 10 // blocks double in size up to this
	arenaOwn   = 1 << 10 // a string longer than this gets a block of its own
)

// put copies s into the arena.
func (a *memArena) put(s string) strRef {
	if s == "" {
		return strRef{}
	}
	if len(s) > arenaOwn {
		return a.own([]byte(s))
	}
	switch {
	case a.blocks.len() > 0 && a.cur >= 0 && a.used+len(s) <= len(a.blocks.at(a.cur)):
	case a.cur == 0 && len(a.blocks.first) < arenaGrown:
		// By half again: most threads stay short, and each growth copies.
		grown := make([]byte, max(min(len(a.blocks.first)*3/2, arenaGrown), a.used+len(s)))
		copy(grown, a.blocks.first[:a.used])
		a.blocks.first = grown // readers keep the block they copied
	default:
		size := arenaFirst
		if a.blocks.len() > 0 && a.cur >= 0 {
			size = min(2*len(a.blocks.at(a.cur)), arenaMax)
		}
		a.cur, a.used = a.blocks.add(make([]byte, max(size, len(s)))), 0
	}
	r := strRef{blk: uint32(a.cur), off: uint32(a.used), n: uint32(len(s))}
	a.used += copy(a.blocks.at(a.cur)[a.used:], s)
	return r
}

// own adds b, which nothing else holds, as a block of its own.
func (a *memArena) own(b []byte) strRef {
	if a.blocks.len() == 0 {
		a.cur = -1
	}
	return strRef{blk: uint32(a.blocks.add(b)), n: wholeBlock}
}

// keptLimits bound the maps the store keeps: nested as deep as a JSON
// decoder reads (what the other stores can give back), and the default
// bounds of size.
var keptLimits = jsonvalue.Limits{MaxDepth: jsonvalue.HardMaxDepth}

// keepMap returns the copy of m the store keeps: the JSON value
// encoding/json would write for m and read back (objects as map[string]any,
// arrays as []any), so that the memory store gives back what a durable
// store would and shares nothing with the caller. A value JSON cannot hold
// (one that contains itself, a func, NaN) or one nested deeper than a
// decoder reads is an error naming where, under root, that wraps
// ErrUnstorable. nil stays nil.
func keepMap(root string, m map[string]any) (map[string]any, error) {
	if m == nil {
		return nil, nil
	}
	tree, err := jsonvalue.Normalize(root, m, &keptLimits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrUnstorable)
	}
	return tree.(map[string]any), nil
}

// cloneMap copies a map the store keeps, without recursion; nil stays nil.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return jsonvalue.Clone(m).(map[string]any)
}

// memRows holds a thread's rows by value in chunks. Chunk 0 holds the first
// smallRows rows and is reallocated, twice as big (room for 4 at first),
// when it fills, so that a short thread holds little more than its rows;
// it is kept in place, so that such a thread has no list of chunks. Later
// chunks never move:
// chunk k (k ≥ 1) holds smallRows<<(k-1) rows up to chunks of maxChunk rows,
// then chunks of maxChunk. A copy of a memRows (taken under the thread's
// lock) stays valid for its first n rows while appends go on: they only
// write rows after them, into chunk 0's array or later chunks, and add
// chunks after those the copy's list holds.
type memRows struct {
	first []memRow   // chunk 0
	rest  [][]memRow // chunks 1, 2, …
	n     int
}

const (
	smallRows = 128
	maxChunk  = 4096
	// doubled is the number of rows up to the end of the last chunk that
	// doubles in size (maxChunk rows, starting at row maxChunk).
	doubled = 2 * maxChunk
)

// chunkOf returns the chunk of row i and its index within it.
func chunkOf(i int) (k, off int) {
	switch {
	case i < smallRows:
		return 0, i
	case i < doubled:
		k = bits.Len(uint(i)) - bits.Len(smallRows) + 1
		return k, i - smallRows<<(k-1)
	}
	j := i - doubled
	return bits.Len(maxChunk) - bits.Len(smallRows) + 2 + j/maxChunk, j % maxChunk
}

// at returns row i (i < r.n).
func (r *memRows) at(i int) *memRow {
	k, off := chunkOf(i)
	if k == 0 {
		return &r.first[off]
	}
	return &r.rest[k-1][off]
}

// push returns the next row's place, growing chunk 0 or adding a chunk when
// the last is full.
func (r *memRows) push() *memRow {
	k, off := chunkOf(r.n)
	r.n++
	if k == 0 {
		if off == len(r.first) {
			grown := make([]memRow, max(4, 2*off))
			copy(grown, r.first)
			r.first = grown // readers keep the array they copied
		}
		return &r.first[off]
	}
	if k > len(r.rest) {
		size := maxChunk
		if r.n <= doubled {
			size = smallRows << (k - 1)
		}
		r.rest = append(r.rest, make([]memRow, size))
	}
	return &r.rest[k-1][off]
}

type memUser struct {
	mu  sync.RWMutex
	env map[string]EnvValue
	// Padding to a cache line: records lie side by side in their slab, and
	// another user's lock, which goroutines of that user write even to read
	// (RLock), shares a line only with these bytes, which nothing writes.
	_ [32]byte
}

type memFile struct {
	info FileInfo
	data []byte
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

var _ Store = (*MemoryStore)(nil)

// thread returns the record of id, creating a bare one (for data kept by
// thread id, and for CreateThread) when create is set; otherwise nil when
// there is none.
func (s *MemoryStore) thread(id string, create bool) *memThread { return s.threads.get(id, create) }

// user returns the user-scope env record of id, created when create is set.
func (s *MemoryStore) user(id string, create bool) *memUser { return s.users.get(id, create) }

// CreateThread implements ThreadStore.
func (s *MemoryStore) CreateThread(ctx context.Context, th *Thread) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if th.ID == "" {
		return fmt.Errorf("toolrun: create thread: the thread has no ID")
	}
	c, err := keepThread(th)
	if err != nil {
		return fmt.Errorf("toolrun: create thread %s: %w", th.ID, err)
	}
	t := s.thread(th.ID, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exists {
		return ErrThreadExists
	}
	c.ID = t.id // the record's copy of the same id
	t.t, t.exists = c, true
	return nil
}

// GetThread implements ThreadStore.
func (s *MemoryStore) GetThread(ctx context.Context, id string) (*Thread, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := s.thread(id, false)
	if t == nil {
		return nil, ErrNotFound
	}
	t.mu.RLock()
	th, ok := t.t, t.exists
	t.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	c := copyThread(&th)
	return &c, nil
}

// loadBatch implements batchLoader.
func (s *MemoryStore) loadBatch(ctx context.Context, id string) (threadFacts, map[string]EnvValue, error) {
	if err := ctx.Err(); err != nil {
		return threadFacts{}, nil, err
	}
	t := s.thread(id, false)
	if t == nil {
		return threadFacts{}, nil, ErrNotFound
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if !t.exists {
		return threadFacts{}, nil, ErrNotFound
	}
	var env map[string]EnvValue
	if len(t.env) > 0 {
		env = maps.Clone(t.env)
	}
	return factsOf(&t.t), env, nil
}

// UpdateThread implements ThreadStore.
func (s *MemoryStore) UpdateThread(ctx context.Context, th *Thread) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := s.thread(th.ID, false)
	if t == nil {
		return ErrNotFound
	}
	c, err := keepThread(th)
	if err != nil {
		return fmt.Errorf("toolrun: update thread %s: %w", th.ID, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.exists {
		return ErrNotFound
	}
	c.CreatedAt, c.ID = t.t.CreatedAt, t.id
	t.t = c
	return nil
}

// changeThread applies change to the stored record of the thread, with
// nothing else changing it meanwhile, and returns a copy of the record
// changed. change is given the record itself (a copy would escape to the
// heap): it must not keep it or call the store; the maps it puts in the
// record are copied.
func (s *MemoryStore) changeThread(ctx context.Context, id string, change func(*Thread)) (Thread, error) {
	if err := ctx.Err(); err != nil {
		return Thread{}, err
	}
	t := s.thread(id, false)
	if t == nil {
		return Thread{}, ErrNotFound
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.exists {
		return Thread{}, ErrNotFound
	}
	created := t.t.CreatedAt
	change(&t.t)
	t.t.CreatedAt, t.t.ID = created, t.id
	t.t = copyThread(&t.t) // shares no map with what change put in
	return copyThread(&t.t), nil
}

// keepThread returns the copy of t the store keeps: its maps as keepMap
// keeps them.
func keepThread(t *Thread) (Thread, error) {
	c := *t
	var err error
	if c.Arguments, err = keepMap("arguments", t.Arguments); err != nil {
		return Thread{}, err
	}
	if c.Properties, err = keepMap("properties", t.Properties); err != nil {
		return Thread{}, err
	}
	c.Tags = slices.Clone(t.Tags)
	return c, nil
}

// copyThread copies a thread the store keeps.
func copyThread(t *Thread) Thread {
	c := *t
	c.Arguments, c.Properties = cloneMap(t.Arguments), cloneMap(t.Properties)
	c.Tags = slices.Clone(t.Tags)
	return c
}

// AppendMessages implements MessageStore. The messages are copied before
// the thread's lock is taken; under it the store only checks the duplicate
// rule, numbers the copies and puts them in place.
func (s *MemoryStore) AppendMessages(ctx context.Context, threadID string, msgs ...*Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("toolrun: append to thread %s: %w", threadID, err)
	}
	t := s.thread(threadID, false)
	if t == nil {
		return ErrNotFound
	}
	var one [1]memStaged // a single message, the usual append, is staged here
	staged := one[:0]
	if len(msgs) > 1 {
		staged = make([]memStaged, 0, len(msgs))
	}
	for i, m := range msgs {
		st, err := stage(m)
		if err != nil {
			return fmt.Errorf("toolrun: append to thread %s: message %d (%s): %w", threadID, i, m.ID, err)
		}
		staged = append(staged, st)
	}
	t.mu.Lock()
	if !t.exists {
		t.mu.Unlock()
		return ErrNotFound
	}
	// Check everything before changing anything: all or nothing.
	if id, dup := t.duplicate(msgs); dup {
		t.mu.Unlock()
		return fmt.Errorf("%w (thread %s, tool call %s)", ErrDuplicateToolResult, threadID, id)
	}
	base := t.nextSeq
	var top, visible, topVisible uint32
	if t.rows.n > 0 {
		prev := t.rows.at(t.rows.n - 1)
		top, visible, topVisible = prev.top, prev.visible, prev.topVisible
	}
	for i, m := range msgs {
		t.nextSeq++
		if m.Depth == 0 {
			top++
		}
		if !m.Silent {
			visible++
			if m.Depth == 0 {
				topVisible++
			}
		}
		t.addRow(m, staged[i], t.nextSeq, top, visible, topVisible)
		if m.Role == RoleTool && m.ToolCallID != "" {
			t.results.add(m.ToolCallID, t.rows.n-1, t.callIDOf)
		}
	}
	t.mu.Unlock()
	for i, m := range msgs {
		m.Seq = base + int64(i) + 1
	}
	return nil
}

// duplicate reports the first tool-call id of msgs that already has a
// stored result on t, or that two results of msgs name. Callers hold t.mu.
func (t *memThread) duplicate(msgs []*Message) (string, bool) {
	var seen map[string]bool // within msgs, for long batches
	if len(msgs) > 16 {
		seen = map[string]bool{}
	}
	for i := range msgs {
		m := msgs[i]
		if m.Role != RoleTool || m.ToolCallID == "" {
			continue
		}
		_, dup := t.results.find(m.ToolCallID, t.callIDOf)
		if seen != nil {
			dup = dup || seen[m.ToolCallID]
			seen[m.ToolCallID] = true
		} else {
			for j := range i {
				dup = dup || msgs[j].Role == RoleTool && msgs[j].ToolCallID == m.ToolCallID
			}
		}
		if dup {
			return m.ToolCallID, true
		}
	}
	return "", false
}

// checkMessages refuses messages a store cannot keep as given: each needs
// an ID and a CreatedAt, which the caller (the front layer) sets.
func checkMessages(msgs []*Message) error {
	for i, m := range msgs {
		if m.ID == "" {
			return fmt.Errorf("message %d has no ID", i)
		}
		if m.CreatedAt.IsZero() {
			return fmt.Errorf("message %d (%s) has no CreatedAt", i, m.ID)
		}
		if m.Depth < 0 || m.Depth > math.MaxInt32 {
			return fmt.Errorf("message %d (%s) has depth %d, outside 0 to %d", i, m.ID, m.Depth, math.MaxInt32)
		}
	}
	return nil
}

// matches reports whether r passes q's depth and silence filters.
func matches(r *memRow, q MessageQuery) bool {
	return (q.IncludeSilent || !r.silent) && (q.MaxDepth < 0 || int(r.depth) <= q.MaxDepth)
}

// rowCount counts the rows of a query's filters among the first rows of a
// thread, from the counters the rows keep: every row, the top level, the
// rows that are not silent, or both.
type rowCount struct {
	rows *memRows
	kind uint8 // one of the count* constants
}

const (
	countAll uint8 = iota
	countVisible
	countTop
	countTopVisible
)

// prefix returns the count of q's filters, or false when they are not one
// of the common ones that rows count.
func prefix(rows *memRows, q MessageQuery) (rowCount, bool) {
	switch {
	case q.MaxDepth < 0 && q.IncludeSilent:
		return rowCount{rows, countAll}, true
	case q.MaxDepth < 0:
		return rowCount{rows, countVisible}, true
	case q.MaxDepth == 0 && q.IncludeSilent:
		return rowCount{rows, countTop}, true
	case q.MaxDepth == 0:
		return rowCount{rows, countTopVisible}, true
	}
	return rowCount{}, false
}

// of returns the number of matching rows among the first i.
func (c rowCount) of(i int) int {
	if i == 0 || c.kind == countAll {
		return i
	}
	r := c.rows.at(i - 1)
	switch c.kind {
	case countVisible:
		return int(r.visible)
	case countTop:
		return int(r.top)
	}
	return int(r.topVisible)
}

// ListMessages implements MessageStore.
//
// The rows after After start at an index found by binary search (Seqs
// increase along rows). For the common filters the counters of the rows
// give Total, and a binary search over them gives the index of the page's
// first row; the page is then read from there, skipping only the
// non-matching rows among it. Other filters walk from the end the order
// selects from. The page's messages are copied after the lock is released:
// stored rows are never changed.
func (s *MemoryStore) ListMessages(ctx context.Context, threadID string, q MessageQuery) (MessagePage, error) {
	return s.listMessagesInto(ctx, threadID, q, nil)
}

// listMessagesInto implements messagesInto: ListMessages, the page's
// messages appended to buf[:0].
func (s *MemoryStore) listMessagesInto(ctx context.Context, threadID string, q MessageQuery, buf []Message) (MessagePage, error) {
	if err := ctx.Err(); err != nil {
		return MessagePage{}, err
	}
	t := s.thread(threadID, false)
	if t == nil {
		return MessagePage{}, nil
	}
	t.mu.RLock()
	v := t.view() // its first rows never change: appends only add after them
	t.mu.RUnlock()
	rows := v.rows
	// Row i is Seq i+1 (AppendMessages numbers a thread's rows one by one
	// from 1, and none is ever removed), so the rows after After start at
	// index After.
	a := int(min(max(q.After, 0), int64(rows.n)))
	var total int
	var out []Message
	if pre, ok := prefix(&rows, q); ok {
		base := pre.of(a)
		total = pre.of(rows.n) - base
		lo, hi := pageBounds(total, q)
		// The row of rank lo among the matching rows after a; the counters
		// say that the page is the n matching rows from there, which are
		// written where the page holds them, newest first for OrderDesc.
		i := a + sort.Search(rows.n-a, func(k int) bool { return pre.of(a+k+1)-base > lo })
		n := hi - lo
		out = pageBuffer(buf, n)
		calls, k := 0, 0
		for j := i; j < rows.n && k < n; j++ {
			if m := rows.at(j); matches(m, q) {
				calls += int(m.ncalls)
				k++
			}
		}
		v.reserveCalls(calls)
		k = 0
		for ; i < rows.n && k < n; i++ {
			if m := rows.at(i); matches(m, q) {
				j := k
				if q.Order == OrderDesc {
					j = n - 1 - k
				}
				v.fill(&out[j], m, threadID)
				k++
			}
		}
		if k < n { // not if the counters are right
			if q.Order == OrderDesc {
				out = out[n-k:]
			} else {
				out = out[:k]
			}
		}
	} else {
		for i := a; i < rows.n; i++ {
			if matches(rows.at(i), q) {
				total++
			}
		}
		picked := pickWalking(&rows, a, q, total)
		out = pageBuffer(buf, len(picked))
		calls := 0
		for _, r := range picked {
			calls += int(r.ncalls)
		}
		v.reserveCalls(calls)
		for k, r := range picked {
			v.fill(&out[k], r, threadID)
		}
	}
	lo, hi := pageBounds(total, q)
	return MessagePage{Messages: out, Total: total, HasMore: pageHasMore(total, q, lo, hi)}, nil
}

// pageBuffer returns n messages to write a page into: buf's array when it
// has room, a new one otherwise.
func pageBuffer(buf []Message, n int) []Message {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]Message, n)
}

// pickWalking returns the page q selects from the total matching rows of
// rows from index a on, walking from the end the order selects from, in
// the order q returns them.
func pickWalking(rows *memRows, a int, q MessageQuery, total int) []*memRow {
	lo, hi := pageBounds(total, q)
	out := make([]*memRow, 0, hi-lo)
	if q.Order == OrderAsc {
		k := 0
		for i := a; i < rows.n && k < hi; i++ {
			m := rows.at(i)
			if !matches(m, q) {
				continue
			}
			if k >= lo {
				out = append(out, m)
			}
			k++
		}
		return out
	}
	k := total // rank, among matching rows, of the row after row i
	for i := rows.n - 1; i >= a && k > lo; i-- {
		m := rows.at(i)
		if !matches(m, q) {
			continue
		}
		if k--; k < hi {
			out = append(out, m) // newest first
		}
	}
	if q.Order != OrderDesc {
		slices.Reverse(out)
	}
	return out
}

// pageBounds returns the [lo, hi) window, in oldest-first ranks, that q
// selects from n matching rows.
func pageBounds(n int, q MessageQuery) (lo, hi int) {
	off := max(q.Offset, 0)
	if q.Order == OrderAsc {
		lo = min(off, n)
		hi = n
		if q.Limit > 0 {
			hi = lo + min(q.Limit, n-lo) // lo+q.Limit may overflow
		}
		return lo, hi
	}
	hi = max(n-off, 0)
	lo = 0
	if q.Limit > 0 {
		lo = max(hi-q.Limit, 0)
	}
	return lo, hi
}

func pageHasMore(n int, q MessageQuery, lo, hi int) bool {
	if q.Order == OrderAsc {
		return hi < n
	}
	return lo > 0
}

// ToolResult implements MessageStore.
func (s *MemoryStore) ToolResult(ctx context.Context, threadID, toolCallID string) (*Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := s.thread(threadID, false)
	if t == nil {
		return nil, ErrNotFound
	}
	t.mu.RLock()
	i, ok := t.results.find(toolCallID, t.callIDOf)
	v := t.view()
	t.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	m := v.message(v.rows.at(i), threadID)
	return &m, nil
}

// GetValue implements ValueStore.
func (s *MemoryStore) GetValue(ctx context.Context, threadID, key string) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t := s.thread(threadID, false)
	if t == nil {
		return nil, ErrNotFound
	}
	t.mu.RLock()
	v, ok := t.values[key] // stored values are never changed
	t.mu.RUnlock()
	if !ok {
		return nil, ErrNotFound
	}
	return append(json.RawMessage(nil), v...), nil
}

// SetValue implements ValueStore.
func (s *MemoryStore) SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	del := isJSONNull(value)
	if !del && !json.Valid(value) {
		return fmt.Errorf("toolrun: set value %q: not valid JSON", key)
	}
	var c json.RawMessage
	if !del {
		c = append(json.RawMessage(nil), value...)
	}
	t := s.thread(threadID, !del)
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if del {
		delete(t.values, key)
		return nil
	}
	if t.values == nil {
		t.values = map[string]json.RawMessage{}
	}
	t.values[key] = c
	return nil
}

func isJSONNull(v json.RawMessage) bool {
	return len(v) == 0 || strings.TrimSpace(string(v)) == "null"
}

// envOf returns the lock and the env map of an owner (created when create
// is set; nil otherwise when there is none), or an error for an unknown
// scope. The map is guarded by the lock.
func (s *MemoryStore) envOf(scope EnvScope, owner string, create bool) (*sync.RWMutex, *map[string]EnvValue, error) {
	switch scope {
	case ScopeThread:
		if t := s.thread(owner, create); t != nil {
			return &t.mu, &t.env, nil
		}
		return nil, nil, nil
	case ScopeUser:
		if u := s.user(owner, create); u != nil {
			return &u.mu, &u.env, nil
		}
		return nil, nil, nil
	}
	return nil, nil, fmt.Errorf("toolrun: unknown env scope %q", scope)
}

// GetEnv implements EnvStore.
func (s *MemoryStore) GetEnv(ctx context.Context, scope EnvScope, ownerID, name string) (EnvValue, error) {
	if err := ctx.Err(); err != nil {
		return EnvValue{}, err
	}
	mu, env, err := s.envOf(scope, ownerID, false)
	if err != nil {
		return EnvValue{}, err
	}
	if mu == nil {
		return EnvValue{}, ErrNotFound
	}
	mu.RLock()
	v, ok := (*env)[name]
	mu.RUnlock()
	if !ok {
		return EnvValue{}, ErrNotFound
	}
	return v, nil
}

// SetEnv implements EnvStore.
func (s *MemoryStore) SetEnv(ctx context.Context, scope EnvScope, ownerID, name string, v EnvValue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mu, env, err := s.envOf(scope, ownerID, true)
	if err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	if *env == nil {
		*env = map[string]EnvValue{}
	}
	(*env)[name] = v
	return nil
}

// DeleteEnv implements EnvStore.
func (s *MemoryStore) DeleteEnv(ctx context.Context, scope EnvScope, ownerID, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	mu, env, err := s.envOf(scope, ownerID, false)
	if err != nil || mu == nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	delete(*env, name)
	return nil
}

// ListEnv implements EnvStore.
func (s *MemoryStore) ListEnv(ctx context.Context, scope EnvScope, ownerID string) (map[string]EnvValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	mu, env, err := s.envOf(scope, ownerID, false)
	if err != nil {
		return nil, err
	}
	if mu == nil {
		return map[string]EnvValue{}, nil
	}
	mu.RLock()
	defer mu.RUnlock()
	out := make(map[string]EnvValue, len(*env))
	for k, v := range *env {
		out[k] = v
	}
	return out, nil
}

// WriteFile implements FileStore.
func (s *MemoryStore) WriteFile(ctx context.Context, threadID string, f FileInfo, data []byte) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	info := FileInfo{Path: f.Path, MimeType: f.MimeType, Size: int64(len(data)), CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
	nf := &memFile{data: append([]byte{}, data...)}
	t := s.thread(threadID, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files == nil {
		t.files = map[string]*memFile{}
	}
	if old := t.files[f.Path]; old != nil {
		info.CreatedAt = old.info.CreatedAt
	}
	nf.info = info
	t.files[f.Path] = nf
	return info, nil
}

// file returns the stored file, or nil.
func (s *MemoryStore) file(threadID, p string) *memFile {
	t := s.thread(threadID, false)
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.files[p]
}

// ReadFile implements FileStore.
func (s *MemoryStore) ReadFile(ctx context.Context, threadID, p string) ([]byte, FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, FileInfo{}, err
	}
	f := s.file(threadID, p)
	if f == nil {
		return nil, FileInfo{}, ErrNotFound
	}
	return append([]byte{}, f.data...), f.info, nil
}

// StatFile implements FileStore.
func (s *MemoryStore) StatFile(ctx context.Context, threadID, p string) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	f := s.file(threadID, p)
	if f == nil {
		return FileInfo{}, ErrNotFound
	}
	return f.info, nil
}

// ListFiles implements FileStore.
func (s *MemoryStore) ListFiles(ctx context.Context, threadID, dir string) ([]FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []FileInfo{}
	t := s.thread(threadID, false)
	if t == nil {
		return out, nil
	}
	t.mu.RLock()
	for p, f := range t.files {
		if underDir(p, dir) {
			out = append(out, f.info)
		}
	}
	t.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// underDir reports whether the clean path p is dir or lies below it.
func underDir(p, dir string) bool {
	if dir == "" || dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// DeleteFile implements FileStore.
func (s *MemoryStore) DeleteFile(ctx context.Context, threadID, p string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := s.thread(threadID, false)
	if t == nil {
		return ErrNotFound
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.files[p] == nil {
		return ErrNotFound
	}
	delete(t.files, p)
	return nil
}

// PutChild implements ChildStore. Entries live with their parent's record.
func (s *MemoryStore) PutChild(ctx context.Context, e ChildEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	args, err := keepMap("initial_arguments", e.InitialArguments)
	if err != nil {
		return fmt.Errorf("toolrun: put child %s of thread %s: %w", e.Reference, e.ParentID, err)
	}
	e.InitialArguments = args
	t := s.thread(e.ParentID, true)
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.children {
		if t.children[i].Reference == e.Reference {
			e.CreatedAt = t.children[i].CreatedAt
			// A new backing array: readers may still be copying the old one.
			t.children = slices.Clone(t.children)
			t.children[i] = e
			return nil
		}
	}
	t.children = append(t.children, e)
	return nil
}

// Child implements ChildStore.
func (s *MemoryStore) Child(ctx context.Context, parentID, reference string) (ChildEntry, error) {
	if err := ctx.Err(); err != nil {
		return ChildEntry{}, err
	}
	for _, e := range s.childList(parentID) {
		if e.Reference == reference {
			return copyChild(e), nil
		}
	}
	return ChildEntry{}, ErrNotFound
}

// Children implements ChildStore.
func (s *MemoryStore) Children(ctx context.Context, parentID string) ([]ChildEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	list := s.childList(parentID)
	out := make([]ChildEntry, len(list))
	for i, e := range list {
		out[i] = copyChild(e)
	}
	return out, nil
}

// childList returns the parent's entries as stored; the caller copies what
// it returns. The elements of a returned slice are never changed: a
// replaced entry goes into a new backing array.
func (s *MemoryStore) childList(parentID string) []ChildEntry {
	t := s.thread(parentID, false)
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.children
}

func copyChild(e ChildEntry) ChildEntry {
	e.InitialArguments = cloneMap(e.InitialArguments)
	return e
}

// CleanPath normalises a thread file path the way every ThreadState does
// before it reaches a FileStore: a leading "/", no trailing "/", no empty,
// "." or ".." elements (".." cannot climb above the root).
func CleanPath(p string) string {
	c := path.Clean("/" + p)
	return c
}
