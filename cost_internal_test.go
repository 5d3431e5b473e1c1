package toolrun

import (
	"context"
	"iter"
	"sync"
	"testing"
	"unsafe"
)

// fragmentsProvider streams one call of a tool, its arguments in pieces,
// then a text answer.
type fragmentsProvider struct {
	mu sync.Mutex
	n  int
}

func (p *fragmentsProvider) Name() string { return "fragments" }

func (p *fragmentsProvider) Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error] {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	return func(yield func(Chunk, error) bool) {
		if n == 1 {
			chunks := []Chunk{
				{Type: ChunkToolCallStart, ToolCall: ToolCall{ID: "c1", Name: "write_file"}},
				{Type: ChunkToolCallDelta, ToolCall: ToolCall{Arguments: `{"description":"writing a`}},
				{Type: ChunkToolCallDelta, ToolCall: ToolCall{Arguments: `.txt","path":"/a.txt"}`}},
				{Type: ChunkToolCall, ToolCall: ToolCall{ID: "c1", Name: "write_file", Arguments: `{"description":"writing a.txt","path":"/a.txt"}`}},
				{Type: ChunkFinish, FinishReason: "tool_calls"},
			}
			for _, c := range chunks {
				if !yield(c, nil) {
					return
				}
			}
			return
		}
		if yield(Chunk{Type: ChunkText, Text: "done"}, nil) {
			yield(Chunk{Type: ChunkFinish, FinishReason: "stop"}, nil)
		}
	}
}

type writeArgs struct {
	Description string `json:"description"`
	Path        string `json:"path"`
}

// TestACallConsultsTheRegistryOnceAndParsesItsArgumentsTwice: on the
// runtime path, one tool call looks its name up in the registry once (when
// the request's toolset is built) and reads its argument text twice: while
// it streams, for the progress argument, and to validate and decode it.
func TestACallConsultsTheRegistryOnceAndParsesItsArgumentsTwice(t *testing.T) {
	reg := NewRegistry(nil)
	var progress *string
	if err := reg.Register(
		&Model{Name: "m", Provider: &fragmentsProvider{}},
		&Func[writeArgs]{Name: "write_file", ProgressArgument: "description", Execute: func(ctx context.Context, s ThreadState, a writeArgs) (Result, error) {
			return Text("wrote " + a.Path), nil
		}},
		&Prompt{Name: "p", Model: "m", IncludeChat: true, Tools: []PromptTool{Use("write_file")}},
		&Agent{Name: "a", SideA: Side{Prompt: "p"}, SideB: Side{Human: true}},
	); err != nil {
		t.Fatal(err)
	}
	rt := NewRuntime(reg, &RuntimeOptions{Hooks: Hooks{ToolCallStarted: func(_ context.Context, _ string, ev ToolCallStarted) { progress = ev.Progress }}})
	th, err := rt.NewThread(context.Background(), "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lookups := map[string]int{}
	parses := map[string]int{}
	testHookLookup = func(name string) { mu.Lock(); lookups[name]++; mu.Unlock() }
	testHookParse = func(where string) { mu.Lock(); parses[where]++; mu.Unlock() }
	defer func() { testHookLookup, testHookParse = nil, nil }()
	reply, err := rt.Send(context.Background(), th.ID, "write it")
	if err != nil {
		t.Fatal(err)
	}
	if reply.Text != "done" || progress == nil || *progress != "writing a.txt" {
		t.Fatalf("reply %q, progress %v", reply.Text, progress)
	}
	// Two model requests, each building its toolset: one lookup each, and
	// the call itself adds none.
	if got := lookups["write_file"]; got != 2 {
		t.Errorf("the registry was consulted %d times for write_file over 2 requests and 1 call, want 2 (once per request's toolset, none for the call)", got)
	}
	total := 0
	for _, n := range parses {
		total += n
	}
	if total != 2 || parses["stream"] != 1 || parses["decode"] != 1 {
		t.Errorf("the argument text was parsed %v, want once while streaming and once to decode", parses)
	}
}

// A bare batch and the room for its call are one allocation of 1 KiB, a
// size class of the allocator, which puts an 8-byte type header before an
// object over 512 bytes that holds pointers: a few bytes more would make
// every call allocate the next class, 1,152 bytes.
func TestABareBatchFitsOneKibibyte(t *testing.T) {
	if n := unsafe.Sizeof(roomyBatch{}); n+8 > 1024 {
		t.Errorf("a batch with its room is %d bytes, %d with its header; want at most 1024", n, n+8)
	}
}

// A memory-store thread record is 512 bytes, a whole number of cache lines:
// in a slab each record then starts at the same offset in its line (0, or
// the 8 bytes of Go's header before a small slab's array), so the line a
// record's lock starts in holds, of the record before it, at most its last
// 8 bytes, which are its id's and written once. A new field takes its room
// from threadIDRoom. Every collection scans the record of every idle
// thread, slab by slab; a record of 592 bytes (a few tool calls kept in it
// too), when records were still allocated one by one, made a collection of
// 40,000 idle threads take half as long again (60-68 ms against 37-45).
func TestAMemoryStoreThreadRecordIs512Bytes(t *testing.T) {
	if n := unsafe.Sizeof(memThread{}); n != 512 {
		t.Errorf("a memory-store thread record is %d bytes; want 512 (adjust threadIDRoom)", n)
	}
}

// A memory-store row is 160 bytes: a chunk of 4 rows, the first chunk of
// a short thread, fits the 640-byte size class.
func TestAMemoryStoreRowIs160Bytes(t *testing.T) {
	if n := unsafe.Sizeof(memRow{}); n > 160 {
		t.Errorf("a memory-store row is %d bytes; want at most 160", n)
	}
}

// A user-scope env record fills a cache line: records lie side by side in
// their slab, and a user's lock, written even to read, must not share one
// with another user's.
func TestAMemoryStoreUserRecordIs64Bytes(t *testing.T) {
	if n := unsafe.Sizeof(memUser{}); n != 64 {
		t.Errorf("a memory-store user record is %d bytes; want 64", n)
	}
}
