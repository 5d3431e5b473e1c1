package toolrun

import (
	"context"
	"strconv"
	"testing"
)

// TestValidTextCopiesWhatItFixes: validText fixes a message's own strings
// in place, but copies a slice of calls or attachments before it changes
// an element, so that a slice the caller still holds keeps its bytes; a
// message already valid keeps its slices.
func TestValidTextCopiesWhatItFixes(t *testing.T) {
	const bad, fixed = "x\xff", "x\ufffd"
	calls := []ToolCall{{ID: "c1", Name: "t", Arguments: `{"a":"` + bad + `"}`}}
	refs := []AttachmentRef{{ID: "a1", Type: "file", Path: "/f", Name: bad}}
	m := &Message{Content: bad, Stack: bad, ToolCalls: calls, QueuedCalls: calls, Attachments: refs}
	validText(m)
	if m.Content != fixed || m.Stack != fixed {
		t.Errorf("strings not fixed: %q %q", m.Content, m.Stack)
	}
	if m.ToolCalls[0].Arguments != `{"a":"`+fixed+`"}` || m.QueuedCalls[0].Arguments != m.ToolCalls[0].Arguments {
		t.Errorf("calls not fixed: %q %q", m.ToolCalls[0].Arguments, m.QueuedCalls[0].Arguments)
	}
	if m.Attachments[0].Name != fixed {
		t.Errorf("attachment not fixed: %q", m.Attachments[0].Name)
	}
	if calls[0].Arguments != `{"a":"`+bad+`"}` || refs[0].Name != bad {
		t.Errorf("the caller's slices changed: %q %q", calls[0].Arguments, refs[0].Name)
	}

	ok := []ToolCall{{ID: "c2", Name: "t", Arguments: "{}"}}
	m = &Message{Content: "fine", ToolCalls: ok}
	validText(m)
	if &m.ToolCalls[0] != &ok[0] {
		t.Error("a valid message's calls were copied")
	}
	if n := testing.AllocsPerRun(100, func() { validText(m) }); n != 0 {
		t.Errorf("validText of a valid message allocates %v times", n)
	}
}

// A turn reads pages into pooled buffers only with a store that reads into
// them (the memory store); for any other store it takes none, since the
// store's own slice would leave the buffer unused and the pool without it.
func TestReadBuffersOnlyForStoresThatReadIntoThem(t *testing.T) {
	type plain struct{ Store } // a Store with only the interface's methods
	for _, c := range []struct {
		name  string
		store Store
		into  bool
	}{
		{"memory", NewMemoryStore(), true},
		{"other", plain{NewMemoryStore()}, false},
	} {
		rt := NewRuntime(NewRegistry(nil), &RuntimeOptions{Store: c.store})
		var rows turnRows
		buf := rt.readBuffer(&rows, 8)
		if c.into {
			if buf == nil || cap(buf) < 8 || rows.scratch == nil || len(rows.scratch.owned) != 1 {
				t.Errorf("%s store: readBuffer gave %d of room, kept %v; want room for 8, kept", c.name, cap(buf), rows.scratch != nil)
			}
		} else if buf != nil || rows.scratch != nil {
			t.Errorf("%s store: readBuffer gave %d of room and took a scratch (%v); want neither", c.name, cap(buf), rows.scratch != nil)
		}
		rows.release()
	}
}

// Appending through records to the memory store costs what appending to
// the store directly costs: the caller's list of messages is not
// allocated. A store reached through the interface gets a list of its
// own, which the caller's appends never change.
func TestAppendThroughRecordsAllocatesNoList(t *testing.T) {
	ctx := context.Background()
	ms := NewMemoryStore()
	r := records{ms}
	for _, id := range []string{"direct", "records"} {
		if err := ms.CreateThread(ctx, &Thread{ID: id, CreatedAt: recordTime()}); err != nil {
			t.Fatal(err)
		}
	}
	at := recordTime()
	appends := func(thread string, add func(m *Message) error) float64 {
		msgs := make([]Message, 101) // AllocsPerRun runs once more than asked
		n := 0
		return testing.AllocsPerRun(100, func() {
			m := &msgs[n]
			*m = Message{ID: thread + strconv.Itoa(n), Role: RoleUser, Content: "hi", CreatedAt: at}
			n++
			if err := add(m); err != nil {
				t.Fatal(err)
			}
		})
	}
	direct := appends("direct", func(m *Message) error { return ms.AppendMessages(ctx, "direct", m) })
	through := appends("records", func(m *Message) error { return r.AppendMessages(ctx, "records", m) })
	if through > direct {
		t.Errorf("an append through records allocates %v times, a direct one %v", through, direct)
	}

	kept := &keepingStore{Store: NewMemoryStore()}
	if err := kept.CreateThread(ctx, &Thread{ID: "t", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	list := []*Message{{Role: RoleUser, Content: "first"}}
	if err := (records{kept}).AppendMessages(ctx, "t", list...); err != nil {
		t.Fatal(err)
	}
	list[0] = &Message{Role: RoleUser, Content: "changed"}
	if got := kept.list[0].Content; got != "first" {
		t.Errorf("the store's list changed with the caller's: %q", got)
	}
}

// keepingStore keeps the last list of messages it was given.
type keepingStore struct {
	Store
	list []*Message
}

func (s *keepingStore) AppendMessages(ctx context.Context, threadID string, msgs ...*Message) error {
	s.list = msgs
	return s.Store.AppendMessages(ctx, threadID, msgs...)
}
