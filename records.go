package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun/internal/jsonvalue"
)

// records is the front of a Store: a record gets its id, its timestamps and
// its defaults here, before the store sees it, as database/sql and
// go-cloud's portable types fill in what a driver then only keeps. A Store
// therefore stores records as given. Reads go to the store unchanged.
//
// Every write of the executor and the runtime goes through records.
type records struct {
	Store
}

// recordTime is the time written on records: UTC, to the microsecond (what
// every store keeps).
func recordTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// AppendMessages gives each message an id, its thread and a creation time
// when it has none, and text that is valid UTF-8 (validText), then appends
// them.
func (r records) AppendMessages(ctx context.Context, threadID string, msgs ...*Message) error {
	var now time.Time
	for _, m := range msgs {
		validText(m)
		if m.ID == "" {
			m.ID = newRecordID("msg")
		}
		m.ThreadID = threadID
		if m.CreatedAt.IsZero() {
			if now.IsZero() {
				now = recordTime()
			}
			m.CreatedAt = now
		}
	}
	if ms, ok := r.Store.(*MemoryStore); ok {
		// A direct call, which keeps no reference to msgs: the callers'
		// lists of one message need no allocation.
		return ms.AppendMessages(ctx, threadID, msgs...)
	}
	// Through the interface msgs escapes; a copy does instead of it.
	return r.Store.AppendMessages(ctx, threadID, slices.Clone(msgs)...)
}

// CreateThread gives the thread an id and a creation time when it has none.
func (r records) CreateThread(ctx context.Context, t *Thread) error {
	if t.ID == "" {
		t.ID = newID("thread")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = recordTime()
	}
	return r.Store.CreateThread(ctx, t)
}

// PutChild stamps the entry: created now when it has no creation time,
// updated now.
func (r records) PutChild(ctx context.Context, e ChildEntry) error {
	now := recordTime()
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	e.UpdatedAt = now
	return r.Store.PutChild(ctx, e)
}

// SetEnv stores v with its type defaulted to secret. A type that is
// neither text nor secret is refused with an error naming the variable and
// the type: the stores would keep it as given, and everything reading it
// would have to guess what it means.
func (r records) SetEnv(ctx context.Context, scope EnvScope, ownerID, name string, v EnvValue) error {
	if !knownType(v.Type) {
		return fmt.Errorf("toolrun: env %q: unknown type %q (want %q or %q; empty means %q)", name, v.Type, VarText, VarSecret, VarSecret)
	}
	v.Type = typeOr(v.Type)
	return r.Store.SetEnv(ctx, scope, ownerID, name, v)
}

// SetValue stores value with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as the text of messages is (see validText):
// encoding/json fixes the strings it encodes but keeps the bytes of a raw
// value (a json.RawMessage, a MarshalJSON) as they are, which every store
// would keep its own way, and PostgreSQL, which cannot hold them, refuse.
func (r records) SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error {
	return r.Store.SetValue(ctx, threadID, key, jsonvalue.FixUTF8JSON(value))
}

// writeFile writes a thread file now, its MIME type defaulted to
// application/octet-stream.
func (r records) writeFile(ctx context.Context, threadID, path string, data []byte, mimeType string) (FileInfo, error) {
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	now := recordTime()
	return r.Store.WriteFile(ctx, threadID, FileInfo{Path: path, MimeType: mimeType, CreatedAt: now, UpdatedAt: now}, data)
}

// threadFacts are what a batch reads of its thread's record.
type threadFacts struct {
	agentID, userID string
	terminatedAt    *time.Time // nil: not terminated (a pointer keeps a bare batch within 1 KiB)
}

func factsOf(th *Thread) threadFacts {
	f := threadFacts{agentID: th.AgentID, userID: th.UserID}
	if !th.TerminatedAt.IsZero() {
		at := th.TerminatedAt
		f.terminatedAt = &at
	}
	return f
}

// batchLoader is a store that reads what a batch needs of a thread — its
// facts and its env, nil when empty — at once and without copying the
// record: the memory store, whose copies would cost more than the call.
type batchLoader interface {
	loadBatch(ctx context.Context, threadID string) (threadFacts, map[string]EnvValue, error)
}

// loadBatch reads the facts and the env of a thread; ErrNotFound, unwrapped,
// when there is no such thread.
func (r records) loadBatch(ctx context.Context, threadID string) (threadFacts, map[string]EnvValue, error) {
	if l, ok := r.Store.(batchLoader); ok {
		f, env, err := l.loadBatch(ctx, threadID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			err = &StoreError{Op: "load thread " + threadID, Err: err}
		}
		return f, env, err
	}
	th, err := r.GetThread(ctx, threadID)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			err = &StoreError{Op: "load thread " + threadID, Err: err}
		}
		return threadFacts{}, nil, err
	}
	env, err := r.ListEnv(ctx, ScopeThread, threadID)
	if err != nil {
		return threadFacts{}, nil, &StoreError{Op: "load thread env", Err: err}
	}
	return factsOf(th), env, nil
}

// messagesInto is a store that can read a page of messages into a slice the
// caller gives: the memory store, where the turn's pooled buffers save the
// allocation of every page.
type messagesInto interface {
	listMessagesInto(ctx context.Context, threadID string, q MessageQuery, buf []Message) (MessagePage, error)
}

// readsInto reports whether the store reads pages into the caller's
// buffer (listMessagesInto).
func (r records) readsInto() bool {
	_, ok := r.Store.(messagesInto)
	return ok
}

// listMessagesInto is ListMessages, into buf when the store can.
func (r records) listMessagesInto(ctx context.Context, threadID string, q MessageQuery, buf []Message) (MessagePage, error) {
	if l, ok := r.Store.(messagesInto); ok {
		return l.listMessagesInto(ctx, threadID, q, buf)
	}
	return r.ListMessages(ctx, threadID, q)
}

// validText replaces, in the text fields of m that can hold text from
// outside the runtime, each byte that is not part of valid UTF-8 with
// U+FFFD, as encoding/json does when it writes the field: what the model is
// sent of a message and what every store keeps of it are then the same
// text. A tool's output or a user's text can hold any bytes; PostgreSQL
// cannot keep them in a text column and SQLite keeps them only outside
// JSON, so stores left to themselves would keep three different texts.
//
// The other fields are registered names, the runtime's ids and names
// cleaned where they come in (a model's tool names and call ids, and what a
// tool's InjectMessage gives), and its maps are normalised where they are
// made. Its slices are copied before an element changes: they may be the
// caller's.
func validText(m *Message) {
	fixText(&m.Content)
	fixText(&m.ErrorCode)
	fixText(&m.Stack)
	fixText(&m.Arguments)
	// Fields are written only when they change: a message already valid is
	// only read.
	if calls, fixed := validCalls(m.ToolCalls); fixed {
		m.ToolCalls = calls
	}
	if calls, fixed := validCalls(m.QueuedCalls); fixed {
		m.QueuedCalls = calls
	}
	copied := false
	for i := range m.Attachments {
		a := &m.Attachments[i]
		if allValid(a.ID, a.Type, a.Path, a.Name, a.MimeType, a.Description) {
			continue
		}
		if !copied {
			m.Attachments, copied = slices.Clone(m.Attachments), true
			a = &m.Attachments[i]
		}
		for _, s := range [...]*string{&a.ID, &a.Type, &a.Path, &a.Name, &a.MimeType, &a.Description} {
			fixText(s)
		}
	}
}

// validCalls returns calls with valid UTF-8 in every field: calls itself
// when it has, a fixed copy otherwise, and whether it made one.
func validCalls(calls []ToolCall) ([]ToolCall, bool) {
	copied := false
	for i := range calls {
		c := &calls[i]
		if allValid(c.ID, c.Name, c.Arguments) {
			continue
		}
		if !copied {
			calls, copied = slices.Clone(calls), true
			c = &calls[i]
		}
		for _, s := range [...]*string{&c.ID, &c.Name, &c.Arguments} {
			fixText(s)
		}
	}
	return calls, copied
}

// fixText makes *s valid UTF-8, each invalid byte a U+FFFD.
func fixText(s *string) {
	if len(*s) > 0 && !utf8.ValidString(*s) {
		*s = jsonvalue.FixUTF8(*s)
	}
}

// allValid reports whether every string is valid UTF-8.
func allValid(ss ...string) bool {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return false
		}
	}
	return true
}
