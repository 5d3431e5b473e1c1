package toolrun

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
)

// MemoryStore is the in-memory Store: the default when no store is
// configured, and a good fit for tests. Everything is lost when the process
// ends. It is safe for concurrent use; every value handed in or out is copied.
type MemoryStore struct {
	mu       sync.RWMutex
	threads  map[string]*memThread
	userEnv  map[string]map[string]EnvValue
	children map[string][]ChildEntry // by parent, in creation order
}

type memThread struct {
	t        Thread
	exists   bool // CreateThread stored t (not only data kept by thread id)
	msgs     []*Message
	results  map[string]int // tool-call id → index in msgs
	nextSeq  int64
	values   map[string]json.RawMessage
	env      map[string]EnvValue
	files    map[string]*memFile
	hasFiles bool
}

type memFile struct {
	info FileInfo
	data []byte
}

// NewMemoryStore returns an empty in-memory store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		threads:  map[string]*memThread{},
		userEnv:  map[string]map[string]EnvValue{},
		children: map[string][]ChildEntry{},
	}
}

var _ Store = (*MemoryStore)(nil)

// thread returns the record of id, creating a bare one for data kept by
// thread id (values, env, files) when create is set. Callers hold mu.
func (s *MemoryStore) thread(id string, create bool) *memThread {
	t := s.threads[id]
	if t == nil && create {
		t = &memThread{t: Thread{ID: id}}
		s.threads[id] = t
	}
	return t
}

func (t *memThread) created() bool { return t.exists }

// CreateThread implements ThreadStore.
func (s *MemoryStore) CreateThread(ctx context.Context, th *Thread) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if th.ID == "" {
		return fmt.Errorf("toolrun: create thread: the thread has no ID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.thread(th.ID, true)
	if t.created() {
		return ErrThreadExists
	}
	t.t = copyThread(th)
	t.exists = true
	return nil
}

// GetThread implements ThreadStore.
func (s *MemoryStore) GetThread(ctx context.Context, id string) (*Thread, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[id]
	if t == nil || !t.created() {
		return nil, ErrNotFound
	}
	c := copyThread(&t.t)
	return &c, nil
}

// UpdateThread implements ThreadStore.
func (s *MemoryStore) UpdateThread(ctx context.Context, th *Thread) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[th.ID]
	if t == nil || !t.created() {
		return ErrNotFound
	}
	created := t.t.CreatedAt
	t.t = copyThread(th)
	t.t.CreatedAt = created
	return nil
}

func copyThread(t *Thread) Thread {
	c := *t
	if t.Arguments != nil {
		c.Arguments = cloneJSONMap(t.Arguments)
	}
	if t.Properties != nil {
		c.Properties = cloneJSONMap(t.Properties)
	}
	if t.Tags != nil {
		c.Tags = append([]string(nil), t.Tags...)
	}
	return c
}

// AppendMessages implements MessageStore.
func (s *MemoryStore) AppendMessages(ctx context.Context, threadID string, msgs ...*Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkMessages(msgs); err != nil {
		return fmt.Errorf("toolrun: append to thread %s: %w", threadID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[threadID]
	if t == nil || !t.created() {
		return ErrNotFound
	}
	// Check everything before changing anything: all or nothing.
	var seen map[string]bool // within msgs, for long batches
	if len(msgs) > 16 {
		seen = map[string]bool{}
	}
	for i, m := range msgs {
		if m.Role != RoleTool || m.ToolCallID == "" {
			continue
		}
		_, dup := t.results[m.ToolCallID]
		if seen != nil {
			dup = dup || seen[m.ToolCallID]
			seen[m.ToolCallID] = true
		} else {
			for _, o := range msgs[:i] {
				dup = dup || o.Role == RoleTool && o.ToolCallID == m.ToolCallID
			}
		}
		if dup {
			return fmt.Errorf("%w (thread %s, tool call %s)", ErrDuplicateToolResult, threadID, m.ToolCallID)
		}
	}
	for _, m := range msgs {
		t.nextSeq++
		m.Seq = t.nextSeq
		c := m.clone()
		c.ThreadID = threadID
		if m.Role == RoleTool && m.ToolCallID != "" {
			if t.results == nil {
				t.results = map[string]int{}
			}
			t.results[m.ToolCallID] = len(t.msgs)
		}
		t.msgs = append(t.msgs, c)
	}
	return nil
}

// ListMessages implements MessageStore.
func (s *MemoryStore) ListMessages(ctx context.Context, threadID string, q MessageQuery) (MessagePage, error) {
	if err := ctx.Err(); err != nil {
		return MessagePage{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[threadID]
	if t == nil {
		return MessagePage{}, nil
	}
	match := func(m *Message) bool {
		if q.After > 0 && m.Seq <= q.After {
			return false
		}
		if m.Silent && !q.IncludeSilent {
			return false
		}
		return q.MaxDepth < 0 || m.Depth <= q.MaxDepth
	}
	all := q.IncludeSilent && q.MaxDepth < 0 && q.After <= 0
	filtered := len(t.msgs)
	if !all {
		filtered = 0
		for _, m := range t.msgs {
			if match(m) {
				filtered++
			}
		}
	}
	lo, hi := pageBounds(filtered, q)
	// Collect the window [lo, hi) of matching rows (oldest-first indexes)
	// without copying the rest, walking from the end it lies nearer to.
	out := make([]Message, 0, hi-lo)
	if q.Order == OrderAsc {
		k := 0
		for _, m := range t.msgs {
			if k >= hi {
				break
			}
			if !all && !match(m) {
				continue
			}
			if k >= lo {
				out = append(out, *m.clone())
			}
			k++
		}
	} else {
		k := filtered // index, among matching rows, of the row after m
		for i := len(t.msgs) - 1; i >= 0 && k > lo; i-- {
			m := t.msgs[i]
			if !all && !match(m) {
				continue
			}
			if k--; k < hi {
				out = append(out, *m.clone()) // newest first
			}
		}
		if q.Order != OrderDesc {
			slices.Reverse(out)
		}
	}
	return MessagePage{Messages: out, Total: filtered, HasMore: pageHasMore(filtered, q, lo, hi)}, nil
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
	}
	return nil
}

// pageBounds returns the [lo, hi) window, in oldest-first indexes, that q
// selects from n matching rows.
func pageBounds(n int, q MessageQuery) (lo, hi int) {
	off := max(q.Offset, 0)
	if q.Order == OrderAsc {
		lo = min(off, n)
		hi = n
		if q.Limit > 0 {
			hi = min(lo+q.Limit, n)
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[threadID]
	if t == nil {
		return nil, ErrNotFound
	}
	i, ok := t.results[toolCallID]
	if !ok {
		return nil, ErrNotFound
	}
	return t.msgs[i].clone(), nil
}

// GetValue implements ValueStore.
func (s *MemoryStore) GetValue(ctx context.Context, threadID, key string) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[threadID]
	if t == nil {
		return nil, ErrNotFound
	}
	v, ok := t.values[key]
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
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.thread(threadID, true)
	if isJSONNull(value) {
		delete(t.values, key)
		return nil
	}
	if !json.Valid(value) {
		return fmt.Errorf("toolrun: set value %q: not valid JSON", key)
	}
	if t.values == nil {
		t.values = map[string]json.RawMessage{}
	}
	t.values[key] = append(json.RawMessage(nil), value...)
	return nil
}

func isJSONNull(v json.RawMessage) bool {
	return len(v) == 0 || strings.TrimSpace(string(v)) == "null"
}

func (s *MemoryStore) envMap(scope EnvScope, owner string, create bool) (map[string]EnvValue, error) {
	switch scope {
	case ScopeThread:
		t := s.thread(owner, create)
		if t == nil {
			return nil, nil
		}
		if t.env == nil && create {
			t.env = map[string]EnvValue{}
		}
		return t.env, nil
	case ScopeUser:
		m := s.userEnv[owner]
		if m == nil && create {
			m = map[string]EnvValue{}
			s.userEnv[owner] = m
		}
		return m, nil
	}
	return nil, fmt.Errorf("toolrun: unknown env scope %q", scope)
}

// GetEnv implements EnvStore.
func (s *MemoryStore) GetEnv(ctx context.Context, scope EnvScope, ownerID, name string) (EnvValue, error) {
	if err := ctx.Err(); err != nil {
		return EnvValue{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, err := s.envMap(scope, ownerID, false)
	if err != nil {
		return EnvValue{}, err
	}
	v, ok := m[name]
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
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.envMap(scope, ownerID, true)
	if err != nil {
		return err
	}
	m[name] = v
	return nil
}

// DeleteEnv implements EnvStore.
func (s *MemoryStore) DeleteEnv(ctx context.Context, scope EnvScope, ownerID, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, err := s.envMap(scope, ownerID, false)
	if err != nil {
		return err
	}
	delete(m, name)
	return nil
}

// ListEnv implements EnvStore.
func (s *MemoryStore) ListEnv(ctx context.Context, scope EnvScope, ownerID string) (map[string]EnvValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	m, err := s.envMap(scope, ownerID, false)
	if err != nil {
		return nil, err
	}
	out := make(map[string]EnvValue, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}

// WriteFile implements FileStore.
func (s *MemoryStore) WriteFile(ctx context.Context, threadID string, f FileInfo, data []byte) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.thread(threadID, true)
	if t.files == nil {
		t.files = map[string]*memFile{}
	}
	p := f.Path
	info := FileInfo{Path: p, MimeType: f.MimeType, Size: int64(len(data)), CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
	if old := t.files[p]; old != nil {
		info.CreatedAt = old.info.CreatedAt
	}
	t.files[p] = &memFile{info: info, data: append([]byte{}, data...)}
	return info, nil
}

// ReadFile implements FileStore.
func (s *MemoryStore) ReadFile(ctx context.Context, threadID, p string) ([]byte, FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, FileInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.file(threadID, p)
	if f == nil {
		return nil, FileInfo{}, ErrNotFound
	}
	return append([]byte{}, f.data...), f.info, nil
}

func (s *MemoryStore) file(threadID, p string) *memFile {
	t := s.threads[threadID]
	if t == nil {
		return nil
	}
	return t.files[p]
}

// StatFile implements FileStore.
func (s *MemoryStore) StatFile(ctx context.Context, threadID, p string) (FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return FileInfo{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
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
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.threads[threadID]
	out := []FileInfo{}
	if t == nil {
		return out, nil
	}
	for p, f := range t.files {
		if underDir(p, dir) {
			out = append(out, f.info)
		}
	}
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
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.threads[threadID]
	if t == nil || t.files[p] == nil {
		return ErrNotFound
	}
	delete(t.files, p)
	return nil
}

// PutChild implements ChildStore.
func (s *MemoryStore) PutChild(ctx context.Context, e ChildEntry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.InitialArguments != nil {
		e.InitialArguments = cloneJSONMap(e.InitialArguments)
	}
	list := s.children[e.ParentID]
	for i := range list {
		if list[i].Reference == e.Reference {
			e.CreatedAt = list[i].CreatedAt
			list[i] = e
			return nil
		}
	}
	s.children[e.ParentID] = append(list, e)
	return nil
}

// Child implements ChildStore.
func (s *MemoryStore) Child(ctx context.Context, parentID, reference string) (ChildEntry, error) {
	if err := ctx.Err(); err != nil {
		return ChildEntry{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, e := range s.children[parentID] {
		if e.Reference == reference {
			if e.InitialArguments != nil {
				e.InitialArguments = cloneJSONMap(e.InitialArguments)
			}
			return e, nil
		}
	}
	return ChildEntry{}, ErrNotFound
}

// Children implements ChildStore.
func (s *MemoryStore) Children(ctx context.Context, parentID string) ([]ChildEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.children[parentID]
	out := make([]ChildEntry, len(list))
	for i, e := range list {
		if e.InitialArguments != nil {
			e.InitialArguments = cloneJSONMap(e.InitialArguments)
		}
		out[i] = e
	}
	return out, nil
}

// CleanPath normalises a thread file path the way every ThreadState does
// before it reaches a FileStore: a leading "/", no trailing "/", no empty,
// "." or ".." elements (".." cannot climb above the root).
func CleanPath(p string) string {
	c := path.Clean("/" + p)
	return c
}
