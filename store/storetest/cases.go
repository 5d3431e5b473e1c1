package storetest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolrun/toolrun"
)

// cases returns the conformance cases in the order they run.
func cases() []testCase {
	return []testCase{
		{name: "Thread/RoundTrip", rule: "GetThread returns every field CreateThread stored", fn: caseThreadRoundTrip},
		{name: "Thread/AsGiven", rule: "CreateThread stores the thread exactly as given, adding no time (a zero CreatedAt stays zero) and changing nothing in it", fn: caseThreadAsGiven},
		{name: "Thread/Incomplete", rule: "CreateThread refuses a thread without ID, with an error naming the ID, and stores nothing", fn: caseThreadIncomplete},
		{name: "Thread/Exists", rule: "CreateThread fails with ErrThreadExists for an id in use and leaves the stored thread unchanged", fn: caseThreadExists},
		{name: "Thread/NotFound", rule: "GetThread and UpdateThread fail with ErrNotFound for an unknown id", fn: caseThreadNotFound},
		{name: "Thread/Update", rule: "UpdateThread replaces every field but CreatedAt, which stays the first one", fn: caseThreadUpdate},
		{name: "Thread/DeepCopy", rule: "threads handed to or returned by the store do not share maps or slices with it", fn: caseThreadDeepCopy},
		{name: "Messages/AsGiven", rule: "AppendMessages assigns only Seq (strictly increasing, written back) and keeps every other field as given; a stored message's ThreadID is its thread's", fn: caseMessagesAsGiven},
		{name: "Messages/Incomplete", rule: "AppendMessages refuses a batch with a message without ID or CreatedAt, or with a Depth outside 0 to 2^31-1, with an error naming the field, and stores none of it", fn: caseMessagesIncomplete},
		{name: "Messages/NulBytes", rule: "a message with a NUL byte in a text field is either stored and returned intact or refused with an error wrapping ErrUnstorable, and a refused append stores nothing of its batch", fn: caseMessagesNulBytes},
		{name: "Messages/InvalidUTF8", rule: "a message with invalid UTF-8 in a text field is stored and returned either intact or with each invalid byte replaced by U+FFFD (as encoding/json writes it), or refused with an error wrapping ErrUnstorable, and a refused append stores nothing of its batch", fn: caseMessagesInvalidUTF8},
		{name: "Messages/UnknownThread", rule: "AppendMessages fails with ErrNotFound when the thread does not exist", fn: caseMessagesUnknownThread},
		{name: "Messages/RoundTrip", rule: "every Message field survives AppendMessages and ListMessages/ToolResult", fn: caseMessagesRoundTrip},
		{name: "Messages/NotAliased", rule: "changing a message after AppendMessages, or a listed message, does not change the stored one", fn: caseMessagesNotAliased},
		{name: "Messages/CallsNotShared", rule: "appending to, or changing, the tool calls of one listed message changes no other message of the page", fn: caseCallsNotShared},
		{name: "Messages/DuplicateToolResult", rule: "a second result for a tool-call id fails with ErrDuplicateToolResult and the whole append stores nothing", fn: caseDuplicateToolResult},
		{name: "Messages/DuplicateToolResultInBatch", rule: "two results for one tool-call id within one append fail with ErrDuplicateToolResult and store nothing", fn: caseDuplicateInBatch},
		{name: "Messages/LongBatch", rule: "an append of hundreds of messages is as atomic and ordered as a short one", fn: caseLongBatch},
		{name: "Messages/ToolResultScope", rule: "the duplicate rule applies per thread and only to RoleTool messages that name a tool-call id", fn: caseToolResultScope},
		{name: "Messages/List", rule: "ListMessages follows the documented Order, Limit, Offset, IncludeSilent and MaxDepth semantics, with Total and HasMore, for any Limit, Offset and MaxDepth up to the largest int", fn: caseMessagesList},
		{name: "Messages/ListAfter", rule: "ListMessages with After keeps only rows with Seq > After, combined with the other filters, Order, Limit and Offset, Total and HasMore counting only those rows", fn: caseMessagesListAfter},
		{name: "Messages/ListUnknownThread", rule: "ListMessages of an unknown thread returns no messages and no error", fn: caseListUnknownThread},
		{name: "Messages/ToolResult", rule: "ToolResult returns the stored result of a tool-call id, or ErrNotFound", fn: caseToolResult},
		{name: "Messages/ConcurrentAppends", rule: "concurrent appends to one thread lose nothing and get unique Seqs that increase in list order", fn: caseConcurrentAppends},
		{name: "Values/RoundTrip", rule: "SetValue stores a JSON document that GetValue returns unchanged; values are per thread", fn: caseValuesRoundTrip},
		{name: "Values/Delete", rule: "SetValue with nil or JSON null deletes the key; GetValue of a missing key fails with ErrNotFound", fn: caseValuesDelete},
		{name: "Env/Scopes", rule: "env values keep value and type, per scope and owner; thread and user scopes do not mix", fn: caseEnvScopes},
		{name: "Env/DeleteList", rule: "DeleteEnv removes a value (a missing one is no error); ListEnv returns every value, an empty map when none", fn: caseEnvDeleteList},
		{name: "Files/WriteRead", rule: "WriteFile stores bytes and info, times as given, that ReadFile and StatFile return; an empty file reads as non-nil bytes", fn: caseFilesWriteRead},
		{name: "Files/Replace", rule: "WriteFile on an existing path replaces data, type, size and UpdatedAt and keeps CreatedAt", fn: caseFilesReplace},
		{name: "Files/List", rule: "ListFiles returns every file at or below dir, sorted by path (byte order), and nothing that merely shares a prefix", fn: caseFilesList},
		{name: "Files/Delete", rule: "DeleteFile removes the file; reading, stating or deleting a missing file fails with ErrNotFound", fn: caseFilesDelete},
		{name: "Children/PutGet", rule: "PutChild stores an entry exactly as given, times included (zero times stay zero), that Child returns", fn: caseChildrenPutGet},
		{name: "Children/Order", rule: "Children returns entries in creation order; replacing an entry keeps its CreatedAt and position and takes everything else, UpdatedAt included, as given", fn: caseChildrenOrder},
		{name: "Children/NotFound", rule: "Child of an unknown entry fails with ErrNotFound; Children of an unknown parent is empty", fn: caseChildrenNotFound},
		{name: "JSON/AsDecoded", rule: "the maps of records (a thread's Arguments and Properties, a message's Metadata and ErrorData, a child's InitialArguments) come back as encoding/json decodes them (typed slices and maps as []any and map[string]any, numbers as float64), nested values included, sharing nothing with what was given", fn: caseJSONAsDecoded},
		{name: "JSON/TooDeep", rule: "a map nested deeper than a JSON decoder reads (10,000 levels) is refused with an error wrapping ErrUnstorable, storing nothing, and the records already stored still read", fn: caseJSONTooDeep},
		{name: "Times/FarRange", rule: "a time far outside the usual range (years 300000 and -300000) is stored and comes back as the same instant, or is refused with an error, storing nothing", fn: caseFarTimes},
		{name: "Large", rule: "multi-megabyte message content, values and files are stored and returned intact", fn: caseLarge},
		{name: "Unicode", rule: "non-ASCII thread ids, keys, names, paths and contents round-trip unchanged", fn: caseUnicode},
		{name: "Reopen", rule: "everything written survives closing and reopening the store, and Seq and the duplicate rule continue across it", needsReopen: true, fn: caseReopen},
	}
}

var idCounter atomic.Int64

// uid returns a fresh id with the given prefix, unique across stores and runs.
func uid(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", prefix, idCounter.Add(1), hex.EncodeToString(b[:]))
}

// ts returns a fixed time at microsecond precision (the finest precision a
// store is required to keep), in a non-UTC zone to catch zone mix-ups.
func ts(sec int) time.Time {
	return time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.FixedZone("X", 3600)).Add(time.Duration(sec) * time.Second)
}

var stampCounter atomic.Int64

// stamp gives every message without an ID or CreatedAt a fresh ID and a
// time, and each its thread's id, as a caller's front layer does before an
// append, and returns msgs.
func stamp(thread string, msgs ...*toolrun.Message) []*toolrun.Message {
	for _, m := range msgs {
		m.ThreadID = thread
		if m.ID == "" {
			m.ID = uid("msg")
		}
		if m.CreatedAt.IsZero() {
			m.CreatedAt = ts(0).Add(time.Duration(stampCounter.Add(1)) * time.Millisecond)
		}
	}
	return msgs
}

// appendMsgs stamps msgs and appends them to the thread.
func (e *env) appendMsgs(st toolrun.Store, thread string, msgs ...*toolrun.Message) error {
	return st.AppendMessages(e.ctx, thread, stamp(thread, msgs...)...)
}

// sameZone reports whether a and b are in zones of one name and offset.
func sameZone(a, b time.Time) bool {
	an, ao := a.Zone()
	bn, bo := b.Zone()
	return an == bn && ao == bo
}

// newThread creates a thread with a fresh id on st.
func (e *env) newThread(st toolrun.Store) string {
	e.Helper()
	id := uid("thr")
	e.must(st.CreateThread(e.ctx, &toolrun.Thread{ID: id}), "create thread %s", id)
	return id
}

// jsonNorm returns v after a JSON round trip, so values that differ only
// in Go representation (int vs float64, nil vs empty) compare equal.
func jsonNorm(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unmarshalable: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return fmt.Sprintf("bad json: %v", err)
	}
	return out
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return short(string(b))
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(a, b any) bool { return reflect.DeepEqual(jsonNorm(a), jsonNorm(b)) }

// diffThread describes how got differs from want, or returns "".
func diffThread(got, want *toolrun.Thread) string {
	if got == nil {
		return "got nil thread"
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		return fmt.Sprintf("CreatedAt = %v, want %v", got.CreatedAt, want.CreatedAt)
	}
	if !got.TerminatedAt.Equal(want.TerminatedAt) {
		return fmt.Sprintf("TerminatedAt = %v, want %v", got.TerminatedAt, want.TerminatedAt)
	}
	g, w := *got, *want
	g.CreatedAt, w.CreatedAt, g.TerminatedAt, w.TerminatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if len(g.Tags) == 0 && len(w.Tags) == 0 {
		g.Tags, w.Tags = nil, nil
	}
	if !sameJSON(g, w) {
		return fmt.Sprintf("got %s, want %s", jsonText(g), jsonText(w))
	}
	return ""
}

// diffMessage describes how got differs from want, or returns "".
func diffMessage(got, want *toolrun.Message) string {
	if got == nil {
		return "got nil message"
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		return fmt.Sprintf("message %s: CreatedAt = %v, want %v", want.ID, got.CreatedAt, want.CreatedAt)
	}
	g, w := *got, *want
	g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
	if !sameJSON(g, w) {
		return fmt.Sprintf("message %s: got %s, want %s", want.ID, jsonText(g), jsonText(w))
	}
	return ""
}

func diffFileInfo(got, want toolrun.FileInfo) string {
	if got.Path != want.Path || got.MimeType != want.MimeType || got.Size != want.Size ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		return fmt.Sprintf("got %+v, want %+v", got, want)
	}
	return ""
}

func diffChild(got, want toolrun.ChildEntry) string {
	if !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) {
		return fmt.Sprintf("child %s: CreatedAt, UpdatedAt = %v, %v; want %v, %v", want.Reference, got.CreatedAt, got.UpdatedAt, want.CreatedAt, want.UpdatedAt)
	}
	g, w := got, want
	g.CreatedAt, w.CreatedAt, g.UpdatedAt, w.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !sameJSON(g, w) {
		return fmt.Sprintf("child %s: got %s, want %s", want.Reference, jsonText(g), jsonText(w))
	}
	return ""
}

// all is the query that lists every message of a thread oldest first.
var all = toolrun.MessageQuery{Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1}

func (e *env) listAll(st toolrun.Store, thread string) []toolrun.Message {
	e.Helper()
	p, err := st.ListMessages(e.ctx, thread, all)
	e.must(err, "list messages of %s", thread)
	return p.Messages
}

// ---- threads ----

func sampleThread(id string) *toolrun.Thread {
	return &toolrun.Thread{
		ID:       id,
		AgentID:  "support-agent",
		UserID:   "user-42",
		ParentID: "thr-parent",
		Arguments: map[string]any{
			"topic": "refunds",
			"limit": 5.0,
			"opts":  map[string]any{"tags": []any{"a", 2.0, false, nil}},
		},
		SessionTurns: 3,
		Properties: map[string]any{
			"topic": "billing",
			"n":     3.5,
			"args":  map[string]any{"list": []any{1.0, "two", true, nil}, "deep": map[string]any{"x": "y"}},
			// A caller's own keys named like toolrun's fields stay its own.
			"arguments":     "mine",
			"session_turns": "mine too",
		},
		Tags:      []string{"vip", "beta"},
		CreatedAt: ts(0),
	}
}

func caseThreadRoundTrip(e *env) {
	st := e.newStore()
	want := sampleThread(uid("thr"))
	e.must(st.CreateThread(e.ctx, want), "create thread")
	got, err := st.GetThread(e.ctx, want.ID)
	e.must(err, "get thread")
	if d := diffThread(got, want); d != "" {
		e.Errorf("GetThread: %s", d)
	}
	// A minimal thread (no optional fields) also round-trips.
	min := &toolrun.Thread{ID: uid("thr")}
	e.must(st.CreateThread(e.ctx, min), "create minimal thread")
	got, err = st.GetThread(e.ctx, min.ID)
	e.must(err, "get minimal thread")
	if d := diffThread(got, min); d != "" {
		e.Errorf("GetThread of a minimal thread: %s", d)
	}
}

func caseThreadAsGiven(e *env) {
	st := e.newStore()
	// No CreatedAt: the store must not stamp one.
	bare := &toolrun.Thread{ID: uid("thr"), AgentID: "a"}
	e.must(st.CreateThread(e.ctx, bare), "create thread without CreatedAt")
	if !bare.CreatedAt.IsZero() {
		e.Errorf("CreateThread wrote CreatedAt %v back into the thread it was given", bare.CreatedAt)
	}
	got, err := st.GetThread(e.ctx, bare.ID)
	e.must(err, "get thread")
	if !got.CreatedAt.IsZero() {
		e.Errorf("a thread created without CreatedAt came back with CreatedAt %v; a store adds no time", got.CreatedAt)
	}
	// Every field given comes back, in a value the store did not touch.
	given := sampleThread(uid("thr"))
	given.TerminatedAt = ts(9)
	want := sampleThread(given.ID)
	want.TerminatedAt = ts(9)
	e.must(st.CreateThread(e.ctx, given), "create thread")
	if d := diffThread(given, want); d != "" {
		e.Errorf("CreateThread changed the thread it was given: %s", d)
	}
	got, err = st.GetThread(e.ctx, given.ID)
	e.must(err, "get thread")
	if d := diffThread(got, want); d != "" {
		e.Errorf("GetThread: %s", d)
	}
}

func caseThreadIncomplete(e *env) {
	st := e.newStore()
	err := st.CreateThread(e.ctx, &toolrun.Thread{AgentID: "a", CreatedAt: ts(1)})
	if err == nil {
		e.Fatalf("CreateThread accepted a thread without ID")
	}
	if !strings.Contains(err.Error(), "ID") {
		e.Errorf("CreateThread of a thread without ID failed with %q, which does not name the ID", err)
	}
	if _, err := st.GetThread(e.ctx, ""); !errors.Is(err, toolrun.ErrNotFound) {
		e.Errorf("after the refused CreateThread, GetThread(\"\") = %v; want ErrNotFound", err)
	}
}

func caseThreadExists(e *env) {
	st := e.newStore()
	first := sampleThread(uid("thr"))
	e.must(st.CreateThread(e.ctx, first), "create thread")
	second := &toolrun.Thread{ID: first.ID, AgentID: "other", CreatedAt: ts(99)}
	e.wantErr(st.CreateThread(e.ctx, second), toolrun.ErrThreadExists, "second CreateThread with the same id")
	got, err := st.GetThread(e.ctx, first.ID)
	e.must(err, "get thread")
	if d := diffThread(got, first); d != "" {
		e.Errorf("failed CreateThread changed the stored thread: %s", d)
	}
}

func caseThreadNotFound(e *env) {
	st := e.newStore()
	_, err := st.GetThread(e.ctx, uid("missing"))
	e.wantErr(err, toolrun.ErrNotFound, "GetThread of an unknown id")
	err = st.UpdateThread(e.ctx, &toolrun.Thread{ID: uid("missing"), AgentID: "a"})
	e.wantErr(err, toolrun.ErrNotFound, "UpdateThread of an unknown id")
}

func caseThreadUpdate(e *env) {
	st := e.newStore()
	orig := sampleThread(uid("thr"))
	e.must(st.CreateThread(e.ctx, orig), "create thread")
	upd := &toolrun.Thread{
		ID:           orig.ID,
		AgentID:      "billing-agent",
		UserID:       "",
		ParentID:     "",
		Arguments:    map[string]any{"new": "args"},
		SessionTurns: 7,
		Properties:   map[string]any{"replaced": true},
		Tags:         nil,
		CreatedAt:    ts(500), // ignored: CreatedAt is kept
		TerminatedAt: ts(600),
	}
	e.must(st.UpdateThread(e.ctx, upd), "update thread")
	got, err := st.GetThread(e.ctx, orig.ID)
	e.must(err, "get thread")
	want := *upd
	want.CreatedAt = orig.CreatedAt
	if d := diffThread(got, &want); d != "" {
		e.Errorf("after UpdateThread: %s", d)
	}
	// Clearing TerminatedAt, Arguments and SessionTurns again works too.
	want.TerminatedAt, want.Arguments, want.SessionTurns = time.Time{}, nil, 0
	e.must(st.UpdateThread(e.ctx, &want), "update thread")
	got, err = st.GetThread(e.ctx, orig.ID)
	e.must(err, "get thread")
	if d := diffThread(got, &want); d != "" {
		e.Errorf("after clearing TerminatedAt: %s", d)
	}
}

func caseThreadDeepCopy(e *env) {
	st := e.newStore()
	th := sampleThread(uid("thr"))
	e.must(st.CreateThread(e.ctx, th), "create thread")
	want := sampleThread(th.ID)
	// Change the caller's copy after the call.
	th.Tags[0] = "changed"
	th.Properties["topic"] = "changed"
	th.Properties["args"].(map[string]any)["deep"].(map[string]any)["x"] = "changed"
	th.Arguments["topic"] = "changed"
	th.Arguments["opts"].(map[string]any)["tags"].([]any)[0] = "changed"
	got, err := st.GetThread(e.ctx, th.ID)
	e.must(err, "get thread")
	if d := diffThread(got, want); d != "" {
		e.Fatalf("changing the thread passed to CreateThread changed the store: %s", d)
	}
	// Change a returned copy.
	got.Tags[1] = "changed"
	got.Properties["n"] = 0.0
	got.Properties["args"].(map[string]any)["list"].([]any)[0] = "changed"
	got.Arguments["limit"] = 0.0
	got.Arguments["opts"].(map[string]any)["tags"].([]any)[1] = "changed"
	again, err := st.GetThread(e.ctx, th.ID)
	e.must(err, "get thread")
	if d := diffThread(again, want); d != "" {
		e.Errorf("changing a thread returned by GetThread changed the store: %s", d)
	}
}

// ---- messages ----

func caseMessagesAsGiven(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	a := &toolrun.Message{ID: "id-a", Role: toolrun.RoleUser, Content: "one", CreatedAt: ts(5)}
	b := &toolrun.Message{ID: "id-b", ThreadID: "not-this-thread", Role: toolrun.RoleAssistant, Content: "two", CreatedAt: ts(3)}
	c := &toolrun.Message{ID: "id-a", Role: toolrun.RoleUser, Content: "three", CreatedAt: ts(4)} // ids are the caller's: not checked
	e.must(st.AppendMessages(e.ctx, thread, a, b), "append")
	e.must(st.AppendMessages(e.ctx, thread, c), "append")
	e.must(st.AppendMessages(e.ctx, thread), "append of no messages")

	if !(a.Seq > 0 && a.Seq < b.Seq && b.Seq < c.Seq) {
		e.Errorf("Seqs %d, %d, %d are not positive and strictly increasing in append order", a.Seq, b.Seq, c.Seq)
	}
	// Nothing but Seq is written back.
	for _, w := range []struct {
		m       *toolrun.Message
		id, tid string
		created time.Time
	}{{a, "id-a", "", ts(5)}, {b, "id-b", "not-this-thread", ts(3)}, {c, "id-a", "", ts(4)}} {
		if w.m.ID != w.id || w.m.ThreadID != w.tid || !w.m.CreatedAt.Equal(w.created) || !sameZone(w.m.CreatedAt, w.created) {
			e.Errorf("%q after append: ID %q, ThreadID %q, CreatedAt %v; want them unchanged: %q, %q, %v",
				w.m.Content, w.m.ID, w.m.ThreadID, w.m.CreatedAt, w.id, w.tid, w.created)
		}
	}
	got := e.listAll(st, thread)
	if len(got) != 3 {
		e.Fatalf("listed %d messages, want 3", len(got))
	}
	for i, want := range []*toolrun.Message{a, b, c} {
		w := *want
		w.ThreadID = thread
		if d := diffMessage(&got[i], &w); d != "" {
			e.Errorf("stored message differs from the one given: %s", d)
		}
	}
}

func caseMessagesIncomplete(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	for _, tt := range []struct {
		field string
		bad   *toolrun.Message
	}{
		{"ID", &toolrun.Message{Role: toolrun.RoleUser, Content: "no id", CreatedAt: ts(1)}},
		{"CreatedAt", &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleUser, Content: "no time"}},
		{"depth", &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleUser, Content: "too deep", CreatedAt: ts(1), Depth: math.MaxInt32 + 1}},
		{"depth", &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleUser, Content: "above the top", CreatedAt: ts(1), Depth: -1}},
	} {
		good := &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleUser, Content: "fine", CreatedAt: ts(1)}
		result := &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleTool, ToolCallID: "call_" + tt.field, Content: "r", CreatedAt: ts(1)}
		err := st.AppendMessages(e.ctx, thread, good, result, tt.bad)
		if err == nil {
			e.Errorf("AppendMessages accepted a message without a valid %s", tt.field)
			continue
		}
		if !strings.Contains(err.Error(), tt.field) {
			e.Errorf("AppendMessages of a message without a valid %s failed with %q, which does not name %s", tt.field, err, tt.field)
		}
		if tt.field == "ID" && tt.bad.ID != "" {
			e.Errorf("the refused append gave the message the ID %q", tt.bad.ID)
		}
		if tt.field == "CreatedAt" && !tt.bad.CreatedAt.IsZero() {
			e.Errorf("the refused append gave the message the CreatedAt %v", tt.bad.CreatedAt)
		}
		if _, err := st.ToolResult(e.ctx, thread, result.ToolCallID); !errors.Is(err, toolrun.ErrNotFound) {
			e.Errorf("the append refused for a missing %s stored the tool result of its batch", tt.field)
		}
	}
	if got := e.listAll(st, thread); len(got) != 0 {
		e.Errorf("refused appends stored %d messages; want none", len(got))
	}
}

func caseMessagesNulBytes(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	const nul = "a\x00b"
	fields := []struct {
		name string
		set  func(m *toolrun.Message)
	}{
		{"Content", func(m *toolrun.Message) { m.Content = nul }},
		{"ToolCallID", func(m *toolrun.Message) { m.ToolCallID = nul }},
		{"Name", func(m *toolrun.Message) { m.Name = nul }},
		{"ErrorCode", func(m *toolrun.Message) { m.ErrorCode = nul }},
		{"ErrorData", func(m *toolrun.Message) { m.ErrorData = map[string]any{nul: nul} }},
		{"Stack", func(m *toolrun.Message) { m.Stack = nul }},
		{"Arguments", func(m *toolrun.Message) { m.Arguments = nul }},
		{"Prompt", func(m *toolrun.Message) { m.Prompt = nul }},
		{"Side", func(m *toolrun.Message) { m.Side = nul }},
		{"CallDigest", func(m *toolrun.Message) { m.CallDigest = nul }},
		{"Metadata", func(m *toolrun.Message) { m.Metadata = map[string]any{"k": nul} }},
		{"ToolCalls", func(m *toolrun.Message) { m.ToolCalls = []toolrun.ToolCall{{ID: nul, Name: nul, Arguments: nul}} }},
	}
	var kept []*toolrun.Message
	for i, f := range fields {
		good := &toolrun.Message{Role: toolrun.RoleUser, Content: "before " + f.name}
		bad := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("call_%d", i), Name: "t", ToolStatus: toolrun.StatusSuccess, Content: "r"}
		f.set(bad)
		err := e.appendMsgs(st, thread, good, bad)
		switch {
		case err == nil:
			kept = append(kept, good, bad)
		case !errors.Is(err, toolrun.ErrUnstorable):
			e.Errorf("AppendMessages of a NUL byte in %s failed with %v, which does not wrap ErrUnstorable", f.name, err)
		}
	}
	got := e.listAll(st, thread)
	if len(got) != len(kept) {
		e.Fatalf("stored %d messages; want the %d of the appends that succeeded", len(got), len(kept))
	}
	for i := range got {
		if d := diffMessage(&got[i], kept[i]); d != "" {
			e.Errorf("a message with a NUL byte did not come back intact: %s", d)
		}
	}
}

func caseMessagesInvalidUTF8(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	// Two bytes that are not UTF-8, then a truncated three-byte sequence:
	// replacing each byte and replacing each run differ.
	const bad, fixed = "a\xff\xfeb\xe2\x82", "a\ufffd\ufffdb\ufffd\ufffd"
	fields := []struct {
		name string
		set  func(m *toolrun.Message, s string)
	}{
		{"Content", func(m *toolrun.Message, s string) { m.Content = s }},
		{"ToolCallID", func(m *toolrun.Message, s string) { m.ToolCallID = s }},
		{"Name", func(m *toolrun.Message, s string) { m.Name = s }},
		{"ErrorCode", func(m *toolrun.Message, s string) { m.ErrorCode = s }},
		{"ErrorData", func(m *toolrun.Message, s string) { m.ErrorData = map[string]any{s: []any{s}} }},
		{"Stack", func(m *toolrun.Message, s string) { m.Stack = s }},
		{"Arguments", func(m *toolrun.Message, s string) { m.Arguments = s }},
		{"Prompt", func(m *toolrun.Message, s string) { m.Prompt = s }},
		{"Side", func(m *toolrun.Message, s string) { m.Side = s }},
		{"CallDigest", func(m *toolrun.Message, s string) { m.CallDigest = s }},
		{"Metadata", func(m *toolrun.Message, s string) { m.Metadata = map[string]any{"k": s} }},
		{"ToolCalls", func(m *toolrun.Message, s string) {
			m.ToolCalls = []toolrun.ToolCall{{ID: s, Name: s, Arguments: `{"q":"` + s + `"}`}}
		}},
		{"Attachments", func(m *toolrun.Message, s string) {
			m.Attachments = []toolrun.AttachmentRef{{ID: "att_u", Type: "file", Path: "/" + s, Name: s, MimeType: "text/plain", Description: s}}
		}},
	}
	type kept struct {
		field      string
		raw, fixed *toolrun.Message
	}
	var want []kept
	for i, f := range fields {
		good := &toolrun.Message{Role: toolrun.RoleUser, Content: "before " + f.name}
		msg := func(s string) *toolrun.Message {
			m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: fmt.Sprintf("call_u%d", i), Name: "t", ToolStatus: toolrun.StatusSuccess, Content: "r"}
			f.set(m, s)
			return m
		}
		raw, fix := msg(bad), msg(fixed)
		err := e.appendMsgs(st, thread, good, raw)
		switch {
		case err == nil:
			fix.ID, fix.ThreadID, fix.CreatedAt = raw.ID, raw.ThreadID, raw.CreatedAt
			want = append(want, kept{f.name, good, good}, kept{f.name, raw, fix})
		case !errors.Is(err, toolrun.ErrUnstorable):
			e.Errorf("AppendMessages of invalid UTF-8 in %s failed with %v, which does not wrap ErrUnstorable", f.name, err)
		}
	}
	got := e.listAll(st, thread)
	if len(got) != len(want) {
		e.Fatalf("stored %d messages; want the %d of the appends that succeeded", len(got), len(want))
	}
	for i := range got {
		if d := diffMessage(&got[i], want[i].raw); d != "" {
			if d2 := diffMessage(&got[i], want[i].fixed); d2 != "" {
				e.Errorf("invalid UTF-8 in %s came back neither intact nor with each invalid byte replaced by U+FFFD: %s", want[i].field, d)
			}
		}
	}
}

func caseMessagesUnknownThread(e *env) {
	st := e.newStore()
	missing := uid("missing")
	err := e.appendMsgs(st, missing, &toolrun.Message{Role: toolrun.RoleUser, Content: "x"})
	e.wantErr(err, toolrun.ErrNotFound, "AppendMessages to an unknown thread")
	p, err := st.ListMessages(e.ctx, missing, all)
	e.must(err, "list")
	if len(p.Messages) != 0 || p.Total != 0 {
		e.Errorf("failed append stored something: %d messages, Total %d", len(p.Messages), p.Total)
	}
}

// fullMessages returns messages that use every Message field.
func fullMessages() []*toolrun.Message {
	return []*toolrun.Message{
		{Role: toolrun.RoleSystem, Content: "You are helpful.", Prompt: "main"},
		{
			Role:    toolrun.RoleAssistant,
			Content: "Calling tools — «ok» \"quoted\"\n\ttab \\ backslash",
			ToolCalls: []toolrun.ToolCall{
				{ID: "call_1", Name: "search", Arguments: `{"q":"straße","n":3}`},
				{ID: "call_2", Name: "fetch", Arguments: `{}`},
			},
			Prompt:   "main",
			Metadata: map[string]any{"usage": map[string]any{"in": 10.0, "out": 20.0}},
		},
		{
			ID:         "given-id",
			Role:       toolrun.RoleTool,
			Content:    "Error: boom",
			ToolCallID: "call_1",
			Name:       "search",
			ToolStatus: toolrun.StatusError,
			Attachments: []toolrun.AttachmentRef{{
				ID: "att_1", Type: "file", Path: "/out/chart.png", Name: "chart.png",
				MimeType: "image/png", Size: 1234, Width: 640, Height: 480, Description: "a chart",
			}},
			ParentID:    "msg_parent",
			Depth:       2,
			Silent:      true,
			Prompt:      "sub",
			SubagentID:  "thr-child",
			ErrorCode:   "upstream_failed",
			ErrorData:   map[string]any{"status": 502.0, "hosts": []any{"a", "b"}, "nested": map[string]any{"ok": false, "none": nil}},
			Stack:       "goroutine 1 [running]:\nmain.main()",
			Queued:      true,
			Arguments:   `{"q":"x"}`,
			QueuedCalls: []toolrun.ToolCall{{ID: "call_1_q1", Name: "notify", Arguments: `{"to":"[REDACTED:T]"}`, Redacted: true}},
			CallDigest:  "Zx1rT5yq3pVw0eLh2mB7aA",
			Side:        "b",
			Metadata:    map[string]any{"trace": "abc"},
			CreatedAt:   ts(10),
		},
		{
			Role: toolrun.RoleTool, Content: "ok", ToolCallID: "call_2", Name: "fetch",
			ToolStatus: toolrun.StatusSuccess, Depth: 1,
		},
		{Role: toolrun.RoleUser, Content: ""},
	}
}

func caseMessagesRoundTrip(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	msgs := fullMessages()
	e.must(e.appendMsgs(st, thread, msgs...), "append")
	got := e.listAll(st, thread)
	if len(got) != len(msgs) {
		e.Fatalf("listed %d messages, want %d", len(got), len(msgs))
	}
	for i, want := range msgs {
		if d := diffMessage(&got[i], want); d != "" {
			e.Errorf("ListMessages: %s", d)
		}
	}
	r, err := st.ToolResult(e.ctx, thread, "call_1")
	e.must(err, "tool result")
	if d := diffMessage(r, msgs[2]); d != "" {
		e.Errorf("ToolResult: %s", d)
	}
}

func caseMessagesNotAliased(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	msgs := fullMessages()
	e.must(e.appendMsgs(st, thread, msgs...), "append")
	want := make([]toolrun.Message, len(msgs))
	for i, m := range msgs {
		want[i] = *m
		want[i].Metadata = nil
		if m.Metadata != nil {
			want[i].Metadata = jsonNorm(m.Metadata).(map[string]any)
		}
		want[i].ToolCalls = slices.Clone(m.ToolCalls)
		want[i].QueuedCalls = slices.Clone(m.QueuedCalls)
		want[i].Attachments = slices.Clone(m.Attachments)
		if m.ErrorData != nil {
			want[i].ErrorData = jsonNorm(m.ErrorData).(map[string]any)
		}
	}
	// Change the appended messages.
	msgs[1].ToolCalls[0].Name = "changed"
	msgs[1].Metadata["usage"].(map[string]any)["in"] = -1.0
	msgs[2].Attachments[0].Path = "/changed"
	msgs[2].ErrorData["hosts"].([]any)[0] = "changed"
	msgs[2].QueuedCalls[0].Name = "changed"
	msgs[3].Content = "changed"
	got := e.listAll(st, thread)
	for i := range want {
		if d := diffMessage(&got[i], &want[i]); d != "" {
			e.Errorf("changing a message after AppendMessages changed the store: %s", d)
		}
	}
	// Change a listed message.
	got[1].ToolCalls[0].Name = "changed"
	got[1].Metadata["usage"].(map[string]any)["in"] = -1.0
	got[2].Attachments[0].Path = "/changed"
	again := e.listAll(st, thread)
	for i := range want {
		if d := diffMessage(&again[i], &want[i]); d != "" {
			e.Errorf("changing a listed message changed the store: %s", d)
		}
	}
}

func caseCallsNotShared(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	var msgs []*toolrun.Message
	for i := range 4 {
		msgs = append(msgs, &toolrun.Message{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{
			{ID: fmt.Sprintf("call_%da", i), Name: "search", Arguments: `{"q":"a"}`},
			{ID: fmt.Sprintf("call_%db", i), Name: "fetch", Arguments: `{"url":"b"}`},
		}})
	}
	e.must(e.appendMsgs(st, thread, msgs...), "append")
	want := e.listAll(st, thread)
	for _, q := range []toolrun.MessageQuery{all, {Order: toolrun.OrderAsc, Limit: 3, Offset: 1}} {
		p, err := st.ListMessages(e.ctx, thread, q)
		e.must(err, "list messages")
		got := p.Messages
		if len(got) < 3 {
			e.Fatalf("listed %d messages; want at least 3", len(got))
		}
		first := want[len(want)-len(got):]
		got[0].ToolCalls = append(got[0].ToolCalls, toolrun.ToolCall{ID: "call_added", Name: "added"})
		got[1].ToolCalls[0].Name = "changed"
		for i := range got {
			w := first[i]
			switch i {
			case 0:
				w.ToolCalls = append(slices.Clone(w.ToolCalls), toolrun.ToolCall{ID: "call_added", Name: "added"})
			case 1:
				w.ToolCalls = slices.Clone(w.ToolCalls)
				w.ToolCalls[0].Name = "changed"
			}
			if d := diffMessage(&got[i], &w); d != "" {
				e.Errorf("after changing the calls of listed messages 0 and 1 (query %+v), message %d: %s", q, i, d)
			}
		}
	}
}

func toolMsg(callID, content string) *toolrun.Message {
	return &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: callID, Name: "t", ToolStatus: toolrun.StatusSuccess, Content: content}
}

func caseDuplicateToolResult(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	e.must(e.appendMsgs(st, thread, toolMsg("call_a", "first")), "append first result")
	before := e.listAll(st, thread)
	// A batch with a fresh message, a fresh result and a duplicate result.
	err := e.appendMsgs(st, thread,
		&toolrun.Message{Role: toolrun.RoleAssistant, Content: "fresh"},
		toolMsg("call_b", "fresh result"),
		toolMsg("call_a", "second"))
	e.wantErr(err, toolrun.ErrDuplicateToolResult, "append with a duplicate tool result")
	after := e.listAll(st, thread)
	if len(after) != len(before) {
		e.Errorf("the refused append stored %d of its messages; want all or nothing", len(after)-len(before))
	}
	if _, err := st.ToolResult(e.ctx, thread, "call_b"); err == nil {
		e.Errorf("the refused append stored the result of call_b")
	}
	r, err := st.ToolResult(e.ctx, thread, "call_a")
	e.must(err, "tool result")
	if r.Content != "first" {
		e.Errorf("ToolResult(call_a) = %q, want the first result", r.Content)
	}
	// The thread still takes appends, with Seqs above every earlier one.
	m := toolMsg("call_b", "later")
	e.must(e.appendMsgs(st, thread, m), "append after a refused append")
	if m.Seq <= before[len(before)-1].Seq {
		e.Errorf("Seq %d after a refused append is not above the last stored Seq %d", m.Seq, before[len(before)-1].Seq)
	}
}

func caseDuplicateInBatch(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	err := e.appendMsgs(st, thread,
		toolMsg("call_x", "one"),
		&toolrun.Message{Role: toolrun.RoleUser, Content: "between"},
		toolMsg("call_x", "two"))
	e.wantErr(err, toolrun.ErrDuplicateToolResult, "append with two results for one tool call")
	if got := e.listAll(st, thread); len(got) != 0 {
		e.Errorf("the refused append stored %d messages; want none", len(got))
	}
	_, err = st.ToolResult(e.ctx, thread, "call_x")
	e.wantErr(err, toolrun.ErrNotFound, "ToolResult after the refused append")
}

func caseLongBatch(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	batch := func(dupAt int) []*toolrun.Message {
		var ms []*toolrun.Message
		for i := range 250 {
			id := fmt.Sprintf("call-%03d", i)
			if i == dupAt {
				id = "call-000"
			}
			ms = append(ms, toolMsg(id, fmt.Sprintf("r%03d", i)))
		}
		return ms
	}
	e.wantErr(e.appendMsgs(st, thread, batch(240)...), toolrun.ErrDuplicateToolResult, "250-message append with a duplicate at 240")
	if got := e.listAll(st, thread); len(got) != 0 {
		e.Fatalf("the refused 250-message append stored %d messages", len(got))
	}
	ms := batch(-1)
	e.must(e.appendMsgs(st, thread, ms...), "250-message append")
	got := e.listAll(st, thread)
	if len(got) != len(ms) {
		e.Fatalf("listed %d of 250 messages", len(got))
	}
	for i := range got {
		if got[i].Content != ms[i].Content || got[i].Seq != ms[i].Seq || (i > 0 && got[i].Seq <= got[i-1].Seq) {
			e.Fatalf("message %d: got %q seq %d, want %q seq %d, increasing", i, got[i].Content, got[i].Seq, ms[i].Content, ms[i].Seq)
		}
	}
}

func caseToolResultScope(e *env) {
	st := e.newStore()
	t1, t2 := e.newThread(st), e.newThread(st)
	e.must(e.appendMsgs(st, t1, toolMsg("call_1", "t1")), "append to thread 1")
	// The same tool-call id on another thread is a different call.
	e.must(e.appendMsgs(st, t2, toolMsg("call_1", "t2")), "append the same tool-call id to another thread")
	r, err := st.ToolResult(e.ctx, t2, "call_1")
	e.must(err, "tool result of thread 2")
	if r.Content != "t2" {
		e.Errorf("ToolResult on thread 2 = %q, want %q", r.Content, "t2")
	}
	// The assistant message that issued the call is not a result.
	e.must(e.appendMsgs(st, t1, &toolrun.Message{
		Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "call_2", Name: "t", Arguments: "{}"}},
	}), "append an assistant message with a call")
	e.must(e.appendMsgs(st, t1, toolMsg("call_2", "result")), "append the result of a call issued before")
	// Tool messages without a tool-call id name no call and never collide.
	e.must(e.appendMsgs(st, t1, toolMsg("", "a"), toolMsg("", "b")), "append two tool messages without a tool-call id")
	e.must(e.appendMsgs(st, t1, toolMsg("", "c")), "append another tool message without a tool-call id")
	if n := len(e.listAll(st, t1)); n != 6 {
		e.Errorf("thread 1 has %d messages, want 6", n)
	}
}

// listFixture describes the messages of the List case: depth and silence.
var listFixture = []struct {
	depth  int
	silent bool
}{
	{0, false}, {0, false}, {1, false}, {0, true}, {2, false}, {0, false},
	{1, true}, {0, false}, {0, true}, {1, false}, {0, false}, {2, true}, {0, false},
}

// expectPage computes the documented answer to q over msgs (oldest first).
func expectPage(msgs []toolrun.Message, q toolrun.MessageQuery) (ids []string, total int, hasMore bool) {
	var match []toolrun.Message
	for _, m := range msgs {
		if q.After > 0 && m.Seq <= q.After {
			continue
		}
		if m.Silent && !q.IncludeSilent {
			continue
		}
		if q.MaxDepth >= 0 && m.Depth > q.MaxDepth {
			continue
		}
		match = append(match, m)
	}
	total = len(match)
	from := slices.Clone(match) // the end the order selects from comes first
	if q.Order != toolrun.OrderAsc {
		slices.Reverse(from)
	}
	off := max(q.Offset, 0)
	if off > len(from) {
		off = len(from)
	}
	page := from[off:]
	if q.Limit > 0 && len(page) > q.Limit {
		page = page[:q.Limit]
	}
	hasMore = off+len(page) < total
	if q.Order == toolrun.OrderDefault {
		page = slices.Clone(page)
		slices.Reverse(page)
	}
	for _, m := range page {
		ids = append(ids, m.ID)
	}
	return ids, total, hasMore
}

func caseMessagesList(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	// Append in a mix of batch sizes.
	var msgs []*toolrun.Message
	for i, f := range listFixture {
		msgs = append(msgs, &toolrun.Message{Role: toolrun.RoleUser, Content: fmt.Sprintf("m%02d", i), Depth: f.depth, Silent: f.silent})
	}
	e.must(e.appendMsgs(st, thread, msgs[:1]...), "append")
	e.must(e.appendMsgs(st, thread, msgs[1:5]...), "append")
	for _, m := range msgs[5:] {
		e.must(e.appendMsgs(st, thread, m), "append")
	}
	stored := make([]toolrun.Message, len(msgs))
	for i, m := range msgs {
		stored[i] = *m
	}
	failures := 0
	for _, order := range []toolrun.Order{toolrun.OrderDefault, toolrun.OrderDesc, toolrun.OrderAsc} {
		for _, limit := range []int{0, 1, 3, 5, 100, math.MaxInt} {
			for _, offset := range []int{0, 1, 4, 8, 50, math.MaxInt} {
				for _, silent := range []bool{false, true} {
					for _, depth := range []int{0, 1, -1, math.MaxInt32 + 1, math.MaxInt} {
						q := toolrun.MessageQuery{Limit: limit, Offset: offset, Order: order, IncludeSilent: silent, MaxDepth: depth}
						wantIDs, wantTotal, wantMore := expectPage(stored, q)
						p, err := st.ListMessages(e.ctx, thread, q)
						e.must(err, "list %+v", q)
						var gotIDs []string
						for _, m := range p.Messages {
							gotIDs = append(gotIDs, m.ID)
						}
						if !slices.Equal(gotIDs, wantIDs) || p.Total != wantTotal || p.HasMore != wantMore {
							failures++
							if failures <= 10 {
								e.Errorf("ListMessages(%+v) = %s Total %d HasMore %v; want %s Total %d HasMore %v",
									q, contents(p.Messages), p.Total, p.HasMore, contentsOf(stored, wantIDs), wantTotal, wantMore)
							}
						}
					}
				}
			}
		}
	}
	if failures > 10 {
		e.Errorf("… and %d more wrong pages", failures-10)
	}
}

func caseMessagesListAfter(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	var msgs []*toolrun.Message
	for i, f := range listFixture {
		msgs = append(msgs, &toolrun.Message{Role: toolrun.RoleUser, Content: fmt.Sprintf("m%02d", i), Depth: f.depth, Silent: f.silent})
	}
	e.must(e.appendMsgs(st, thread, msgs[:6]...), "append")
	for _, m := range msgs[6:] {
		e.must(e.appendMsgs(st, thread, m), "append")
	}
	stored := make([]toolrun.Message, len(msgs))
	for i, m := range msgs {
		stored[i] = *m
	}
	first, last := stored[0].Seq, stored[len(stored)-1].Seq
	afters := []int64{-1, first - 1, first, stored[3].Seq, stored[7].Seq, stored[11].Seq, last, last + 5}
	failures := 0
	for _, after := range afters {
		for _, order := range []toolrun.Order{toolrun.OrderDefault, toolrun.OrderDesc, toolrun.OrderAsc} {
			for _, limit := range []int{0, 1, 3} {
				for _, offset := range []int{0, 2, 50} {
					for _, silent := range []bool{false, true} {
						for _, depth := range []int{0, 1, -1} {
							q := toolrun.MessageQuery{After: after, Limit: limit, Offset: offset, Order: order, IncludeSilent: silent, MaxDepth: depth}
							wantIDs, wantTotal, wantMore := expectPage(stored, q)
							p, err := st.ListMessages(e.ctx, thread, q)
							e.must(err, "list %+v", q)
							var gotIDs []string
							for _, m := range p.Messages {
								gotIDs = append(gotIDs, m.ID)
							}
							if !slices.Equal(gotIDs, wantIDs) || p.Total != wantTotal || p.HasMore != wantMore {
								failures++
								if failures <= 10 {
									e.Errorf("ListMessages(%+v) = %s Total %d HasMore %v; want %s Total %d HasMore %v",
										q, contents(p.Messages), p.Total, p.HasMore, contentsOf(stored, wantIDs), wantTotal, wantMore)
								}
							}
						}
					}
				}
			}
		}
	}
	if failures > 10 {
		e.Errorf("… and %d more wrong pages", failures-10)
	}
	// Reading what was appended since the last read.
	more := []*toolrun.Message{{Role: toolrun.RoleAssistant, Content: "n1"}, {Role: toolrun.RoleTool, ToolCallID: "c", Content: "n2", Depth: 3, Silent: true}}
	e.must(e.appendMsgs(st, thread, more...), "append")
	p, err := st.ListMessages(e.ctx, thread, toolrun.MessageQuery{After: last, Order: toolrun.OrderAsc, IncludeSilent: true, MaxDepth: -1})
	e.must(err, "list after the last read")
	if len(p.Messages) != 2 || p.Messages[0].ID != more[0].ID || p.Messages[1].ID != more[1].ID || p.Total != 2 || p.HasMore {
		e.Errorf("ListMessages after the last Seq read = %s Total %d HasMore %v; want [n1 n2] Total 2", contents(p.Messages), p.Total, p.HasMore)
	}
}

func contents(ms []toolrun.Message) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Content)
	}
	return "[" + strings.Join(s, " ") + "]"
}

func contentsOf(ms []toolrun.Message, ids []string) string {
	var s []string
	for _, id := range ids {
		for _, m := range ms {
			if m.ID == id {
				s = append(s, m.Content)
			}
		}
	}
	return "[" + strings.Join(s, " ") + "]"
}

func caseListUnknownThread(e *env) {
	st := e.newStore()
	for _, q := range []toolrun.MessageQuery{{}, all, {Order: toolrun.OrderDesc, Limit: 5}} {
		p, err := st.ListMessages(e.ctx, uid("missing"), q)
		if err != nil {
			e.Errorf("ListMessages(%+v) of an unknown thread: %v", q, err)
			continue
		}
		if len(p.Messages) != 0 || p.Total != 0 || p.HasMore {
			e.Errorf("ListMessages(%+v) of an unknown thread = %d messages, Total %d, HasMore %v; want none", q, len(p.Messages), p.Total, p.HasMore)
		}
	}
}

func caseToolResult(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	r1, r2 := toolMsg("call_1", "one"), toolMsg("call_2", "two")
	e.must(e.appendMsgs(st, thread, &toolrun.Message{Role: toolrun.RoleAssistant, ToolCalls: []toolrun.ToolCall{{ID: "call_1"}, {ID: "call_2"}}}, r1), "append")
	e.must(e.appendMsgs(st, thread, r2), "append")
	for _, want := range []*toolrun.Message{r1, r2} {
		got, err := st.ToolResult(e.ctx, thread, want.ToolCallID)
		if err != nil {
			e.Errorf("ToolResult(%s): %v", want.ToolCallID, err)
			continue
		}
		if d := diffMessage(got, want); d != "" {
			e.Errorf("ToolResult(%s): %s", want.ToolCallID, d)
		}
	}
	_, err := st.ToolResult(e.ctx, thread, "call_3")
	e.wantErr(err, toolrun.ErrNotFound, "ToolResult of a call without a result")
	_, err = st.ToolResult(e.ctx, uid("missing"), "call_1")
	e.wantErr(err, toolrun.ErrNotFound, "ToolResult on an unknown thread")
}

func caseConcurrentAppends(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	workers, rounds := e.opts.goroutines(), 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	var appended atomic.Int64
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				var batch []*toolrun.Message
				if i%3 == 0 {
					id := fmt.Sprintf("call-%d-%d", w, i)
					batch = []*toolrun.Message{
						{Role: toolrun.RoleAssistant, Content: fmt.Sprintf("w%d-%d-a", w, i), ToolCalls: []toolrun.ToolCall{{ID: id, Name: "t"}}},
						toolMsg(id, fmt.Sprintf("w%d-%d-b", w, i)),
					}
				} else {
					batch = []*toolrun.Message{{Role: toolrun.RoleUser, Content: fmt.Sprintf("w%d-%d-a", w, i)}}
				}
				if err := e.appendMsgs(st, thread, batch...); err != nil {
					errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
					return
				}
				for j := 1; j < len(batch); j++ {
					if batch[j].Seq <= batch[j-1].Seq {
						errs <- fmt.Errorf("worker %d round %d: Seqs within one batch not increasing: %d, %d", w, i, batch[j-1].Seq, batch[j].Seq)
					}
				}
				appended.Add(int64(len(batch)))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.Errorf("concurrent append: %v", err)
	}
	got := e.listAll(st, thread)
	if int64(len(got)) != appended.Load() {
		e.Errorf("listed %d messages after %d successful concurrent appends", len(got), appended.Load())
	}
	ids := map[string]bool{}
	last := map[int]int{} // worker → last round seen
	for i, m := range got {
		if i > 0 && m.Seq <= got[i-1].Seq {
			e.Errorf("Seq %d at position %d follows Seq %d: not strictly increasing", m.Seq, i, got[i-1].Seq)
		}
		if ids[m.ID] {
			e.Errorf("message ID %q stored twice", m.ID)
		}
		ids[m.ID] = true
		var w, r int
		var part string
		if _, err := fmt.Sscanf(m.Content, "w%d-%d-%s", &w, &r, &part); err != nil {
			e.Errorf("unexpected content %q", m.Content)
			continue
		}
		if prev, ok := last[w]; ok && (r < prev || (r == prev && part != "b")) {
			e.Errorf("messages of worker %d are out of order: %q after round %d", w, m.Content, prev)
		}
		if part == "b" {
			if i == 0 || got[i-1].Content != fmt.Sprintf("w%d-%d-a", w, r) {
				e.Errorf("the messages of one append were interleaved with another: %q does not follow its batch", m.Content)
			}
		}
		last[w] = r
	}
}

// ---- values ----

func caseValuesRoundTrip(e *env) {
	st := e.newStore()
	t1, t2 := e.newThread(st), e.newThread(st)
	values := map[string]string{
		"object": `{"a": [1, 2.5, "x", true, null], "b": {"c": "ü"}}`,
		"string": `"hello"`,
		"number": `42`,
		"bool":   `false`,
		"array":  `[]`,
		"empty":  `{}`,
	}
	for k, v := range values {
		e.must(st.SetValue(e.ctx, t1, k, json.RawMessage(v)), "set value %s", k)
	}
	for k, v := range values {
		got, err := st.GetValue(e.ctx, t1, k)
		if err != nil {
			e.Errorf("GetValue(%s): %v", k, err)
			continue
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			e.Errorf("GetValue(%s) returned invalid JSON %q: %v", k, got, err)
			continue
		}
		_ = json.Unmarshal([]byte(v), &w)
		if !reflect.DeepEqual(g, w) {
			e.Errorf("GetValue(%s) = %s, want %s", k, got, v)
		}
	}
	// Overwrite.
	e.must(st.SetValue(e.ctx, t1, "number", json.RawMessage(`7`)), "overwrite value")
	if got, err := st.GetValue(e.ctx, t1, "number"); err != nil || string(bytes.TrimSpace(got)) != "7" {
		e.Errorf("after overwrite GetValue = %s, %v; want 7", got, err)
	}
	// Per thread.
	_, err := st.GetValue(e.ctx, t2, "object")
	e.wantErr(err, toolrun.ErrNotFound, "GetValue of another thread's key")
	e.must(st.SetValue(e.ctx, t2, "object", json.RawMessage(`"t2"`)), "set value on thread 2")
	if got, _ := st.GetValue(e.ctx, t1, "object"); sameJSON(json.RawMessage(got), json.RawMessage(`"t2"`)) {
		e.Errorf("setting a key on one thread changed it on another")
	}
	// The returned bytes belong to the caller.
	got, err := st.GetValue(e.ctx, t1, "string")
	e.must(err, "get value")
	for i := range got {
		got[i] = ' '
	}
	if again, _ := st.GetValue(e.ctx, t1, "string"); !sameJSON(json.RawMessage(again), json.RawMessage(`"hello"`)) {
		e.Errorf("changing the bytes GetValue returned changed the store: %q", again)
	}
}

func caseValuesDelete(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	_, err := st.GetValue(e.ctx, thread, "missing")
	e.wantErr(err, toolrun.ErrNotFound, "GetValue of a missing key")
	_, err = st.GetValue(e.ctx, uid("missing"), "k")
	e.wantErr(err, toolrun.ErrNotFound, "GetValue on an unknown thread")
	for _, del := range []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(` null `)} {
		e.must(st.SetValue(e.ctx, thread, "k", json.RawMessage(`{"x":1}`)), "set value")
		e.must(st.SetValue(e.ctx, thread, "k", del), "delete value with %q", del)
		_, err := st.GetValue(e.ctx, thread, "k")
		e.wantErr(err, toolrun.ErrNotFound, "GetValue after SetValue(%q)", del)
	}
	// Deleting a missing key is not an error.
	e.must(st.SetValue(e.ctx, thread, "never-set", nil), "delete a missing key")
}

// ---- env ----

func caseEnvScopes(e *env) {
	st := e.newStore()
	owner := uid("owner")
	set := func(scope toolrun.EnvScope, owner, name string, v toolrun.EnvValue) {
		e.Helper()
		e.must(st.SetEnv(e.ctx, scope, owner, name, v), "SetEnv(%s, %s, %s)", scope, owner, name)
	}
	want := func(scope toolrun.EnvScope, owner, name string, v toolrun.EnvValue) {
		e.Helper()
		got, err := st.GetEnv(e.ctx, scope, owner, name)
		if err != nil {
			e.Errorf("GetEnv(%s, %s, %s): %v", scope, owner, name, err)
			return
		}
		if got != v {
			e.Errorf("GetEnv(%s, %s, %s) = %+v, want %+v", scope, owner, name, got, v)
		}
	}
	key := toolrun.EnvValue{Value: "sk-thread-123", Type: toolrun.VarSecret}
	region := toolrun.EnvValue{Value: "eu-west-1", Type: toolrun.VarText}
	userKey := toolrun.EnvValue{Value: "sk-user-456", Type: toolrun.VarSecret}
	empty := toolrun.EnvValue{Value: "", Type: toolrun.VarText}
	set(toolrun.ScopeThread, owner, "API_KEY", key)
	set(toolrun.ScopeThread, owner, "REGION", region)
	set(toolrun.ScopeThread, owner, "EMPTY", empty)
	set(toolrun.ScopeUser, owner, "API_KEY", userKey) // same owner id, other scope
	want(toolrun.ScopeThread, owner, "API_KEY", key)
	want(toolrun.ScopeThread, owner, "REGION", region)
	want(toolrun.ScopeThread, owner, "EMPTY", empty) // "" is a value, not a missing one
	want(toolrun.ScopeUser, owner, "API_KEY", userKey)
	_, err := st.GetEnv(e.ctx, toolrun.ScopeUser, owner, "REGION")
	e.wantErr(err, toolrun.ErrNotFound, "GetEnv of a name set only in the other scope")
	_, err = st.GetEnv(e.ctx, toolrun.ScopeThread, uid("owner"), "API_KEY")
	e.wantErr(err, toolrun.ErrNotFound, "GetEnv of another owner")
	// Replace, including the type.
	newKey := toolrun.EnvValue{Value: "now-visible", Type: toolrun.VarText}
	set(toolrun.ScopeThread, owner, "API_KEY", newKey)
	want(toolrun.ScopeThread, owner, "API_KEY", newKey)
	want(toolrun.ScopeUser, owner, "API_KEY", userKey)
}

func caseEnvDeleteList(e *env) {
	st := e.newStore()
	owner := uid("owner")
	for _, scope := range []toolrun.EnvScope{toolrun.ScopeThread, toolrun.ScopeUser} {
		m, err := st.ListEnv(e.ctx, scope, owner)
		e.must(err, "ListEnv(%s) of an owner without env", scope)
		if m == nil || len(m) != 0 {
			e.Errorf("ListEnv(%s) of an owner without env = %#v, want an empty non-nil map", scope, m)
		}
		vals := map[string]toolrun.EnvValue{
			"A": {Value: "1", Type: toolrun.VarText},
			"B": {Value: "2", Type: toolrun.VarSecret},
			"C": {Value: string(scope), Type: toolrun.VarText},
		}
		for k, v := range vals {
			e.must(st.SetEnv(e.ctx, scope, owner, k, v), "SetEnv")
		}
		e.must(st.DeleteEnv(e.ctx, scope, owner, "B"), "DeleteEnv")
		e.must(st.DeleteEnv(e.ctx, scope, owner, "B"), "DeleteEnv of a deleted name")
		e.must(st.DeleteEnv(e.ctx, scope, uid("owner"), "X"), "DeleteEnv of an unknown owner")
		delete(vals, "B")
		_, err = st.GetEnv(e.ctx, scope, owner, "B")
		e.wantErr(err, toolrun.ErrNotFound, "GetEnv after DeleteEnv")
		m, err = st.ListEnv(e.ctx, scope, owner)
		e.must(err, "ListEnv")
		if !reflect.DeepEqual(m, vals) {
			e.Errorf("ListEnv(%s) = %v, want %v", scope, m, vals)
		}
	}
}

// ---- files ----

func allBytes() []byte {
	b := make([]byte, 0, 1024)
	for i := range 1024 {
		b = append(b, byte(i*7))
	}
	return append(b, 0, 0, 0xff, 0xfe, 0, '\n', '\r')
}

func caseFilesWriteRead(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	files := []struct {
		path, mime string
		data       []byte
	}{
		{"/notes/hello.txt", "text/plain", []byte("hello, world\n")},
		{"/bin/data.bin", "application/octet-stream", allBytes()},
		{"/empty", "text/plain", []byte{}},
		{"/nil", "text/plain", nil},
	}
	for i, f := range files {
		// The times are the caller's, kept as given (even an update before
		// the creation: a store does not judge them).
		created, updated := ts(100+i), ts(90+2*i)
		info, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: f.path, MimeType: f.mime, CreatedAt: created, UpdatedAt: updated}, f.data)
		e.must(err, "WriteFile(%s)", f.path)
		want := toolrun.FileInfo{Path: f.path, MimeType: f.mime, Size: int64(len(f.data)), CreatedAt: created, UpdatedAt: updated}
		if d := diffFileInfo(info, want); d != "" {
			e.Errorf("WriteFile(%s) info: %s", f.path, d)
		}
		data, rinfo, err := st.ReadFile(e.ctx, thread, f.path)
		if err != nil {
			e.Errorf("ReadFile(%s): %v", f.path, err)
			continue
		}
		if data == nil {
			e.Errorf("ReadFile(%s) returned nil bytes for an existing file", f.path)
		}
		if !bytes.Equal(data, f.data) {
			e.Errorf("ReadFile(%s) = %d bytes %q, want %d bytes", f.path, len(data), short(string(data)), len(f.data))
		}
		if d := diffFileInfo(rinfo, info); d != "" {
			e.Errorf("ReadFile(%s) info: %s", f.path, d)
		}
		sinfo, err := st.StatFile(e.ctx, thread, f.path)
		e.must(err, "StatFile(%s)", f.path)
		if d := diffFileInfo(sinfo, info); d != "" {
			e.Errorf("StatFile(%s): %s", f.path, d)
		}
	}
	// Data passed in and handed out is not shared with the store.
	src := []byte("original")
	_, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: "/alias", MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, src)
	e.must(err, "WriteFile")
	copy(src, "CHANGED!")
	data, _, err := st.ReadFile(e.ctx, thread, "/alias")
	e.must(err, "ReadFile")
	if string(data) != "original" {
		e.Errorf("changing the slice passed to WriteFile changed the file: %q", data)
	}
	copy(data, "CHANGED!")
	data, _, _ = st.ReadFile(e.ctx, thread, "/alias")
	if string(data) != "original" {
		e.Errorf("changing the slice ReadFile returned changed the file: %q", data)
	}
	// Files are per thread.
	other := e.newThread(st)
	_, _, err = st.ReadFile(e.ctx, other, "/notes/hello.txt")
	e.wantErr(err, toolrun.ErrNotFound, "ReadFile of another thread's file")
}

func caseFilesReplace(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	first, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: "/report.md", MimeType: "text/markdown", CreatedAt: ts(1), UpdatedAt: ts(1)}, []byte("# draft"))
	e.must(err, "WriteFile")
	second, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: "/report.md", MimeType: "application/json", CreatedAt: ts(20), UpdatedAt: ts(20)}, []byte(`{"final":true}`))
	e.must(err, "WriteFile (replace)")
	if !second.CreatedAt.Equal(first.CreatedAt) {
		e.Errorf("replacing a file changed CreatedAt from %v to %v", first.CreatedAt, second.CreatedAt)
	}
	if !second.UpdatedAt.Equal(ts(20)) {
		e.Errorf("replacing a file set UpdatedAt %v, want the given %v", second.UpdatedAt, ts(20))
	}
	data, info, err := st.ReadFile(e.ctx, thread, "/report.md")
	e.must(err, "ReadFile")
	if string(data) != `{"final":true}` || info.MimeType != "application/json" || info.Size != 14 {
		e.Errorf("after replace ReadFile = %q %+v", data, info)
	}
	if !info.CreatedAt.Equal(ts(1)) || !info.UpdatedAt.Equal(ts(20)) {
		e.Errorf("stored times after replace = %v, %v; want %v, %v", info.CreatedAt, info.UpdatedAt, ts(1), ts(20))
	}
	if list, _ := st.ListFiles(e.ctx, thread, "/"); len(list) != 1 {
		e.Errorf("after replace ListFiles shows %d files, want 1", len(list))
	}
}

func caseFilesList(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	paths := []string{
		"/docs/sub/deep.txt", "/docs/readme.md", "/docs-x/a", "/docs2/b", "/doc",
		"/a_b/c", "/aXb/c", "/a%b/c", "/Z", "/a", "/docs/sub/Zeta", "/docs/é",
	}
	for _, p := range paths {
		_, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: p, MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte(p))
		e.must(err, "WriteFile(%s)", p)
	}
	other := e.newThread(st)
	_, err := st.WriteFile(e.ctx, other, toolrun.FileInfo{Path: "/docs/other-thread", MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("x"))
	e.must(err, "WriteFile on another thread")

	sorted := slices.Clone(paths)
	slices.Sort(sorted) // byte order
	tests := []struct {
		dir  string
		want []string
	}{
		{"/", sorted},
		{"/docs", []string{"/docs/readme.md", "/docs/sub/Zeta", "/docs/sub/deep.txt", "/docs/é"}},
		{"/docs/sub", []string{"/docs/sub/Zeta", "/docs/sub/deep.txt"}},
		{"/docs/readme.md", []string{"/docs/readme.md"}},
		{"/a_b", []string{"/a_b/c"}},
		{"/a%b", []string{"/a%b/c"}},
		{"/a", []string{"/a"}},
		{"/do", nil},
		{"/nowhere", nil},
	}
	for _, tt := range tests {
		list, err := st.ListFiles(e.ctx, thread, tt.dir)
		if err != nil {
			e.Errorf("ListFiles(%s): %v", tt.dir, err)
			continue
		}
		var got []string
		for _, f := range list {
			got = append(got, f.Path)
			if f.Size != int64(len(f.Path)) || f.MimeType != "text/plain" || f.CreatedAt.IsZero() {
				e.Errorf("ListFiles(%s) info of %s = %+v", tt.dir, f.Path, f)
			}
		}
		if !slices.Equal(got, tt.want) {
			e.Errorf("ListFiles(%s) = %q, want %q", tt.dir, got, tt.want)
		}
	}
	list, err := st.ListFiles(e.ctx, uid("missing"), "/")
	e.must(err, "ListFiles of an unknown thread")
	if len(list) != 0 {
		e.Errorf("ListFiles of an unknown thread = %d files", len(list))
	}
}

func caseFilesDelete(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	for _, p := range []string{"/a/x", "/a/y"} {
		_, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: p, MimeType: "text/plain", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("data"))
		e.must(err, "WriteFile")
	}
	e.must(st.DeleteFile(e.ctx, thread, "/a/x"), "DeleteFile")
	_, _, err := st.ReadFile(e.ctx, thread, "/a/x")
	e.wantErr(err, toolrun.ErrNotFound, "ReadFile of a deleted file")
	_, err = st.StatFile(e.ctx, thread, "/a/x")
	e.wantErr(err, toolrun.ErrNotFound, "StatFile of a deleted file")
	e.wantErr(st.DeleteFile(e.ctx, thread, "/a/x"), toolrun.ErrNotFound, "DeleteFile of a deleted file")
	e.wantErr(st.DeleteFile(e.ctx, uid("missing"), "/a/y"), toolrun.ErrNotFound, "DeleteFile on an unknown thread")
	list, err := st.ListFiles(e.ctx, thread, "/a")
	e.must(err, "ListFiles")
	if len(list) != 1 || list[0].Path != "/a/y" {
		e.Errorf("after delete ListFiles = %+v, want only /a/y", list)
	}
	_, _, err = st.ReadFile(e.ctx, thread, "/never")
	e.wantErr(err, toolrun.ErrNotFound, "ReadFile of a missing file")
	_, err = st.StatFile(e.ctx, thread, "/never")
	e.wantErr(err, toolrun.ErrNotFound, "StatFile of a missing file")
}

// ---- children ----

func sampleChild(parent, ref string) toolrun.ChildEntry {
	return toolrun.ChildEntry{
		ParentID:            parent,
		Reference:           ref,
		Relationship:        "researcher",
		Owner:               "a",
		Agent:               "research-agent",
		Name:                "Researcher " + ref,
		Description:         "looks things up",
		Blocking:            true,
		Hidden:              true,
		ParentCommunication: "explicit",
		Status:              "running",
		Report:              "reading the second source",
		InitialArguments:    map[string]any{"topic": "go", "depth": 2.0, "filters": []any{"a", map[string]any{"b": nil}}},
		CreatedAt:           ts(30),
		UpdatedAt:           ts(31),
	}
}

func caseChildrenPutGet(e *env) {
	st := e.newStore()
	parent := e.newThread(st)
	want := sampleChild(parent, uid("child"))
	e.must(st.PutChild(e.ctx, want), "PutChild")
	got, err := st.Child(e.ctx, parent, want.Reference)
	e.must(err, "Child")
	if d := diffChild(got, want); d != "" {
		e.Errorf("Child: %s", d)
	}
	// A minimal entry round-trips, its zero times staying zero: a store adds
	// no time.
	min := toolrun.ChildEntry{ParentID: parent, Reference: uid("child")}
	e.must(st.PutChild(e.ctx, min), "PutChild")
	got, err = st.Child(e.ctx, parent, min.Reference)
	e.must(err, "Child")
	if d := diffChild(got, min); d != "" {
		e.Errorf("Child of a minimal entry: %s", d)
	}
	// The map handed in, and the one returned, belong to the caller.
	given := sampleChild(parent, uid("child"))
	e.must(st.PutChild(e.ctx, given), "PutChild")
	given.InitialArguments["topic"] = "changed"
	given.InitialArguments["filters"].([]any)[0] = "changed"
	got, err = st.Child(e.ctx, parent, given.Reference)
	e.must(err, "Child")
	if d := diffChild(got, sampleChild(parent, given.Reference)); d != "" {
		e.Errorf("changing the entry passed to PutChild changed the store: %s", d)
	}
	got, _ = st.Child(e.ctx, parent, want.Reference)
	got.InitialArguments["topic"] = "changed"
	again, _ := st.Child(e.ctx, parent, want.Reference)
	if d := diffChild(again, want); d != "" {
		e.Errorf("changing an entry returned by Child changed the store: %s", d)
	}
}

func caseChildrenOrder(e *env) {
	st := e.newStore()
	parent := e.newThread(st)
	refs := []string{"ref-c", "ref-a", "ref-d", "ref-b"} // creation order, not sorted
	for _, r := range refs {
		e.must(st.PutChild(e.ctx, sampleChild(parent, r)), "PutChild(%s)", r)
	}
	repl := sampleChild(parent, "ref-a")
	repl.Status = "idle"
	repl.Report = ""
	repl.Blocking = false
	repl.InitialArguments = nil
	repl.CreatedAt, repl.UpdatedAt = ts(500), ts(501) // CreatedAt is ignored: the first one stays
	e.must(st.PutChild(e.ctx, repl), "PutChild (replace)")
	got, err := st.Child(e.ctx, parent, "ref-a")
	e.must(err, "Child")
	want := repl
	want.CreatedAt = ts(30)
	if d := diffChild(got, want); d != "" {
		e.Errorf("after replace: %s", d)
	}
	list, err := st.Children(e.ctx, parent)
	e.must(err, "Children")
	var order []string
	for _, c := range list {
		order = append(order, c.Reference)
	}
	if !slices.Equal(order, refs) {
		e.Errorf("Children order = %q, want creation order %q", order, refs)
	}
	if len(list) == len(refs) {
		if d := diffChild(list[1], want); d != "" {
			e.Errorf("Children shows the replaced entry as %s", d)
		}
	}
	// Entries are per parent.
	other := e.newThread(st)
	e.must(st.PutChild(e.ctx, sampleChild(other, "ref-a")), "PutChild on another parent")
	if list, _ := st.Children(e.ctx, parent); len(list) != len(refs) {
		e.Errorf("an entry of another parent appeared: %d entries", len(list))
	}
}

func caseChildrenNotFound(e *env) {
	st := e.newStore()
	parent := e.newThread(st)
	_, err := st.Child(e.ctx, parent, "nope")
	e.wantErr(err, toolrun.ErrNotFound, "Child of an unknown reference")
	_, err = st.Child(e.ctx, uid("missing"), "nope")
	e.wantErr(err, toolrun.ErrNotFound, "Child of an unknown parent")
	list, err := st.Children(e.ctx, uid("missing"))
	e.must(err, "Children of an unknown parent")
	if len(list) != 0 {
		e.Errorf("Children of an unknown parent = %d entries", len(list))
	}
}

// ---- large data and unicode ----

func caseLarge(e *env) {
	st := e.newStore()
	thread := e.newThread(st)
	n := e.opts.largeSize()
	unit := "large ✓ données 日本語 "
	content := strings.Repeat(unit, n/len(unit)+1)
	quarter := strings.Repeat(unit, n/4/len(unit)+1)
	m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: "call_big", ToolStatus: toolrun.StatusSuccess, Content: content,
		Metadata: map[string]any{"blob": quarter}}
	e.must(e.appendMsgs(st, thread, m), "append a %d-byte message", len(content))
	r, err := st.ToolResult(e.ctx, thread, "call_big")
	e.must(err, "ToolResult")
	if r.Content != content {
		e.Errorf("large content came back as %d bytes, want %d", len(r.Content), len(content))
	}
	if r.Metadata["blob"] != quarter {
		e.Errorf("large metadata value came back changed")
	}
	val, _ := json.Marshal(map[string]any{"blob": content})
	e.must(st.SetValue(e.ctx, thread, "big", val), "set a %d-byte value", len(val))
	got, err := st.GetValue(e.ctx, thread, "big")
	e.must(err, "get value")
	var dec map[string]any
	if err := json.Unmarshal(got, &dec); err != nil || dec["blob"] != content {
		e.Errorf("large value came back as %d bytes (%v)", len(got), err)
	}
	data := make([]byte, n)
	_, _ = rand.Read(data)
	info, err := st.WriteFile(e.ctx, thread, toolrun.FileInfo{Path: "/big.bin", MimeType: "application/octet-stream", CreatedAt: fileTime(), UpdatedAt: fileTime()}, data)
	e.must(err, "write a %d-byte file", n)
	if info.Size != int64(n) {
		e.Errorf("large file Size = %d, want %d", info.Size, n)
	}
	back, _, err := st.ReadFile(e.ctx, thread, "/big.bin")
	e.must(err, "read large file")
	if !bytes.Equal(back, data) {
		e.Errorf("large file came back as %d different bytes", len(back))
	}
}

func caseUnicode(e *env) {
	st := e.newStore()
	id := "thr-ü-日本-🚀-" + uid("")
	th := &toolrun.Thread{ID: id, AgentID: "агент", UserID: "użytkownik", Tags: []string{"标签", "ταγ"}, Properties: map[string]any{"ключ": "значение 🎉"}}
	e.must(st.CreateThread(e.ctx, th), "create thread %s", id)
	got, err := st.GetThread(e.ctx, id)
	e.must(err, "get thread")
	if d := diffThread(got, th); d != "" {
		e.Errorf("thread: %s", d)
	}
	msgs := []*toolrun.Message{
		{Role: toolrun.RoleUser, Content: "Grüße 👋 — 你好 — مرحبا — \u200d\U0001F468\u200d\U0001F469"},
		{Role: toolrun.RoleTool, ToolCallID: "call-ñ-東", Name: "outil_é", ToolStatus: toolrun.StatusSuccess, Content: "✓", Metadata: map[string]any{"ключ": "ß"}},
	}
	e.must(e.appendMsgs(st, id, msgs...), "append")
	list := e.listAll(st, id)
	if len(list) != 2 {
		e.Fatalf("listed %d messages, want 2", len(list))
	}
	for i := range msgs {
		if d := diffMessage(&list[i], msgs[i]); d != "" {
			e.Errorf("%s", d)
		}
	}
	if _, err := st.ToolResult(e.ctx, id, "call-ñ-東"); err != nil {
		e.Errorf("ToolResult of a unicode tool-call id: %v", err)
	}
	e.wantErr(e.appendMsgs(st, id, toolMsg("call-ñ-東", "again")), toolrun.ErrDuplicateToolResult, "duplicate unicode tool-call id")
	e.must(st.SetValue(e.ctx, id, "ключ-🔑", json.RawMessage(`"значение"`)), "set value")
	if v, err := st.GetValue(e.ctx, id, "ключ-🔑"); err != nil || !sameJSON(json.RawMessage(v), json.RawMessage(`"значение"`)) {
		e.Errorf("unicode value = %s, %v", v, err)
	}
	ev := toolrun.EnvValue{Value: "wért ✓", Type: toolrun.VarText}
	e.must(st.SetEnv(e.ctx, toolrun.ScopeThread, id, "ÜBER_名前", ev), "set env")
	if v, err := st.GetEnv(e.ctx, toolrun.ScopeThread, id, "ÜBER_名前"); err != nil || v != ev {
		e.Errorf("unicode env = %+v, %v", v, err)
	}
	_, err = st.WriteFile(e.ctx, id, toolrun.FileInfo{Path: "/données/日本.txt", MimeType: "text/plain; charset=utf-8", CreatedAt: fileTime(), UpdatedAt: fileTime()}, []byte("テキスト"))
	e.must(err, "write file")
	data, info, err := st.ReadFile(e.ctx, id, "/données/日本.txt")
	if err != nil || string(data) != "テキスト" || info.Path != "/données/日本.txt" {
		e.Errorf("unicode file = %q %+v, %v", data, info, err)
	}
	if list, _ := st.ListFiles(e.ctx, id, "/données"); len(list) != 1 {
		e.Errorf("ListFiles of a unicode dir = %d files, want 1", len(list))
	}
	c := sampleChild(id, "子-1")
	c.Name = "Forscher 🔬"
	e.must(st.PutChild(e.ctx, c), "put child")
	gc, err := st.Child(e.ctx, id, "子-1")
	e.must(err, "child")
	if d := diffChild(gc, c); d != "" {
		e.Errorf("%s", d)
	}
}

// ---- reopen ----

func caseReopen(e *env) {
	st := e.newStore()
	th := sampleThread(uid("thr"))
	e.must(st.CreateThread(e.ctx, th), "create thread")
	msgs := fullMessages()
	e.must(e.appendMsgs(st, th.ID, msgs...), "append")
	e.must(st.SetValue(e.ctx, th.ID, "k", json.RawMessage(`{"v":[1,2]}`)), "set value")
	ev := toolrun.EnvValue{Value: "s3cret", Type: toolrun.VarSecret}
	e.must(st.SetEnv(e.ctx, toolrun.ScopeThread, th.ID, "KEY", ev), "set env")
	e.must(st.SetEnv(e.ctx, toolrun.ScopeUser, "user-42", "KEY", ev), "set user env")
	finfo, err := st.WriteFile(e.ctx, th.ID, toolrun.FileInfo{Path: "/f.bin", MimeType: "application/octet-stream", CreatedAt: fileTime(), UpdatedAt: fileTime()}, allBytes())
	e.must(err, "write file")
	child := sampleChild(th.ID, "ref-1")
	e.must(st.PutChild(e.ctx, child), "put child")

	st = e.reopen(st)

	got, err := st.GetThread(e.ctx, th.ID)
	e.must(err, "get thread after reopen")
	if d := diffThread(got, th); d != "" {
		e.Errorf("thread after reopen: %s", d)
	}
	list := e.listAll(st, th.ID)
	if len(list) != len(msgs) {
		e.Fatalf("after reopen listed %d messages, want %d", len(list), len(msgs))
	}
	for i := range msgs {
		if d := diffMessage(&list[i], msgs[i]); d != "" {
			e.Errorf("after reopen: %s", d)
		}
	}
	if v, err := st.GetValue(e.ctx, th.ID, "k"); err != nil || !sameJSON(json.RawMessage(v), json.RawMessage(`{"v":[1,2]}`)) {
		e.Errorf("value after reopen = %s, %v", v, err)
	}
	if v, err := st.GetEnv(e.ctx, toolrun.ScopeThread, th.ID, "KEY"); err != nil || v != ev {
		e.Errorf("thread env after reopen = %+v, %v", v, err)
	}
	if v, err := st.GetEnv(e.ctx, toolrun.ScopeUser, "user-42", "KEY"); err != nil || v != ev {
		e.Errorf("user env after reopen = %+v, %v", v, err)
	}
	data, info, err := st.ReadFile(e.ctx, th.ID, "/f.bin")
	if err != nil || !bytes.Equal(data, allBytes()) {
		e.Errorf("file after reopen: %d bytes, %v", len(data), err)
	} else if d := diffFileInfo(info, finfo); d != "" {
		e.Errorf("file info after reopen: %s", d)
	}
	gc, err := st.Child(e.ctx, th.ID, "ref-1")
	e.must(err, "child after reopen")
	if d := diffChild(gc, child); d != "" {
		e.Errorf("child after reopen: %s", d)
	}
	// Seq continues above every stored one; the duplicate rule still holds.
	m := &toolrun.Message{Role: toolrun.RoleUser, Content: "after reopen"}
	e.must(e.appendMsgs(st, th.ID, m), "append after reopen")
	if m.Seq <= msgs[len(msgs)-1].Seq {
		e.Errorf("Seq after reopen = %d, not above the last stored Seq %d", m.Seq, msgs[len(msgs)-1].Seq)
	}
	e.wantErr(e.appendMsgs(st, th.ID, toolMsg("call_1", "again")), toolrun.ErrDuplicateToolResult, "duplicate tool result after reopen")
}

// fileTime is the time a case writes a file at, as a caller's front layer
// would stamp it.
func fileTime() time.Time { return ts(40) }

// ---- JSON values ----

// typedValues is a map of Go-typed values and what encoding/json decodes
// them to.
func typedValues() (given, decoded map[string]any) {
	given = map[string]any{
		"tags":   []string{"a", "b"},
		"labels": map[string]string{"k": "v"},
		"n":      7,
		"nested": map[string]any{"list": []int{1, 2}, "deep": map[string]any{"x": []string{"y"}}},
	}
	decoded = map[string]any{
		"tags":   []any{"a", "b"},
		"labels": map[string]any{"k": "v"},
		"n":      7.0,
		"nested": map[string]any{"list": []any{1.0, 2.0}, "deep": map[string]any{"x": []any{"y"}}},
	}
	return given, decoded
}

func caseJSONAsDecoded(e *env) {
	st := e.newStore()
	given, want := typedValues()
	th := &toolrun.Thread{ID: uid("thr"), Arguments: given, Properties: given, CreatedAt: ts(0)}
	e.must(st.CreateThread(e.ctx, th), "create thread")
	m := &toolrun.Message{Role: toolrun.RoleTool, ToolCallID: "c1", Name: "t", ToolStatus: toolrun.StatusError, Metadata: given, ErrorData: given}
	e.must(e.appendMsgs(st, th.ID, m), "append")
	e.must(st.PutChild(e.ctx, toolrun.ChildEntry{ParentID: th.ID, Reference: "child", Status: "active", InitialArguments: given, CreatedAt: ts(1), UpdatedAt: ts(1)}), "put child")
	// Change what was given: none of it is the store's.
	given["tags"].([]string)[0] = "changed"
	given["labels"].(map[string]string)["k"] = "changed"
	given["nested"].(map[string]any)["deep"].(map[string]any)["x"].([]string)[0] = "changed"

	check := func(what string, got map[string]any) {
		e.Helper()
		if !reflect.DeepEqual(got, want) {
			e.Errorf("%s read back as %#v; want %#v", what, got, want)
		}
	}
	got, err := st.GetThread(e.ctx, th.ID)
	e.must(err, "get thread")
	check("thread arguments", got.Arguments)
	check("thread properties", got.Properties)
	p, err := st.ListMessages(e.ctx, th.ID, toolrun.MessageQuery{})
	e.must(err, "list")
	if len(p.Messages) != 1 {
		e.Fatalf("listed %d messages; want 1", len(p.Messages))
	}
	check("message metadata", p.Messages[0].Metadata)
	check("message error data", p.Messages[0].ErrorData)
	c, err := st.Child(e.ctx, th.ID, "child")
	e.must(err, "child")
	check("child initial arguments", c.InitialArguments)

	// Change what was read: none of it is the store's either.
	if n, ok := p.Messages[0].Metadata["nested"].(map[string]any); ok {
		if list, ok := n["list"].([]any); ok && len(list) > 0 {
			list[0] = "changed"
		}
	}
	again, err := st.ListMessages(e.ctx, th.ID, toolrun.MessageQuery{})
	e.must(err, "list")
	check("message metadata after a change to a listed copy", again.Messages[0].Metadata)
}

// nested returns a map with depth maps nested in it.
func nested(depth int) map[string]any {
	root := map[string]any{}
	cur := root
	for range depth {
		next := map[string]any{}
		cur["d"] = next
		cur = next
	}
	return root
}

func caseJSONTooDeep(e *env) {
	st := e.newStore()
	deep, fine := nested(10001), nested(100)
	th := &toolrun.Thread{ID: uid("thr"), Properties: fine, CreatedAt: ts(0)}
	e.must(st.CreateThread(e.ctx, th), "create thread")
	ok := &toolrun.Message{Role: toolrun.RoleUser, Content: "kept", Metadata: fine}
	e.must(e.appendMsgs(st, th.ID, ok), "append a message 101 levels deep")
	e.must(st.PutChild(e.ctx, toolrun.ChildEntry{ParentID: th.ID, Reference: "kept", Status: "active", InitialArguments: fine, CreatedAt: ts(1), UpdatedAt: ts(1)}), "put child")

	if err := st.CreateThread(e.ctx, &toolrun.Thread{ID: uid("thr"), Properties: deep, CreatedAt: ts(0)}); !errors.Is(err, toolrun.ErrUnstorable) {
		e.Errorf("CreateThread with properties 10,002 levels deep: %v; want an error wrapping ErrUnstorable", err)
	}
	if err := st.UpdateThread(e.ctx, &toolrun.Thread{ID: th.ID, Arguments: deep, Properties: fine}); !errors.Is(err, toolrun.ErrUnstorable) {
		e.Errorf("UpdateThread with arguments 10,002 levels deep: %v; want an error wrapping ErrUnstorable", err)
	}
	for _, m := range []*toolrun.Message{
		{Role: toolrun.RoleUser, Content: "deep", Metadata: deep},
		{Role: toolrun.RoleTool, ToolCallID: "c1", Name: "t", ToolStatus: toolrun.StatusError, ErrorData: deep},
	} {
		if err := e.appendMsgs(st, th.ID, &toolrun.Message{Role: toolrun.RoleUser, Content: "with it"}, m); !errors.Is(err, toolrun.ErrUnstorable) {
			e.Errorf("AppendMessages of a message with a map 10,002 levels deep: %v; want an error wrapping ErrUnstorable", err)
		}
	}
	if err := st.PutChild(e.ctx, toolrun.ChildEntry{ParentID: th.ID, Reference: "deep", Status: "active", InitialArguments: deep, CreatedAt: ts(2), UpdatedAt: ts(2)}); !errors.Is(err, toolrun.ErrUnstorable) {
		e.Errorf("PutChild with initial arguments 10,002 levels deep: %v; want an error wrapping ErrUnstorable", err)
	}

	got, err := st.GetThread(e.ctx, th.ID)
	e.must(err, "get thread after the refused writes")
	if !reflect.DeepEqual(got.Properties, fine) || got.Arguments != nil {
		e.Errorf("the thread changed: arguments %v, properties 101 levels deep: %v", got.Arguments != nil, reflect.DeepEqual(got.Properties, fine))
	}
	msgs := e.listAll(st, th.ID)
	if len(msgs) != 1 || msgs[0].Content != "kept" || !reflect.DeepEqual(msgs[0].Metadata, fine) {
		e.Errorf("after the refused appends the thread holds %s; want only the message kept, as stored", contents(msgs))
	}
	children, err := st.Children(e.ctx, th.ID)
	e.must(err, "children after the refused write")
	if len(children) != 1 || children[0].Reference != "kept" {
		e.Errorf("after the refused PutChild the children are %+v; want only the one kept", children)
	}
}

func caseFarTimes(e *env) {
	st := e.newStore()
	for _, far := range []time.Time{
		time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		id := uid("thr")
		if err := st.CreateThread(e.ctx, &toolrun.Thread{ID: id, CreatedAt: far}); err != nil {
			if _, gerr := st.GetThread(e.ctx, id); !errors.Is(gerr, toolrun.ErrNotFound) {
				e.Errorf("CreateThread with CreatedAt %v was refused (%v), but GetThread gives %v; want ErrNotFound", far, err, gerr)
			}
		} else if got, err := st.GetThread(e.ctx, id); err != nil || !got.CreatedAt.Equal(far) {
			e.Errorf("a thread created at %v reads back at %v (%v)", far, got.CreatedAt, err)
		}

		thread := e.newThread(st)
		m := &toolrun.Message{ID: uid("msg"), Role: toolrun.RoleUser, Content: "far", CreatedAt: far}
		if err := st.AppendMessages(e.ctx, thread, m); err != nil {
			if msgs := e.listAll(st, thread); len(msgs) != 0 {
				e.Errorf("AppendMessages with CreatedAt %v was refused (%v), but the thread holds %s", far, err, contents(msgs))
			}
		} else if msgs := e.listAll(st, thread); len(msgs) != 1 || !msgs[0].CreatedAt.Equal(far) {
			e.Errorf("a message created at %v reads back as %+v", far, msgs)
		}
	}
}
