package toolrun

import (
	"context"
	"encoding/json"
	"time"
)

// Store is everything toolrun persists: threads, their messages, key-value
// values, environment variables, files and the registry of child threads.
// Implementations must be safe for concurrent use and must make every
// operation that reports success durable to the degree they document.
//
// A Store keeps records as it is given them. It generates no ids, reads no
// clock for records and fills in no defaults: ids, creation and update
// times and default values are the caller's (the Executor and the Runtime
// fill them in before every write), so a store only has to keep them. What
// a store decides is storage: the Seq of each
// appended message, and that a record's creation time is its first write's
// (an updated thread, a replaced file and a replaced child entry keep their
// CreatedAt). A store refuses, storing nothing, a message without ID or
// CreatedAt and a thread without ID, with an error that names the missing
// field. Times are kept to the microsecond at least and come back as the
// same instant (time.Time.Equal), possibly in UTC.
//
// The maps of records (a thread's Arguments and Properties, a message's
// Metadata and ErrorData, a child entry's InitialArguments) are JSON
// values: a store gives back what encoding/json would decode from them
// (objects as map[string]any, arrays as []any, numbers as float64; a store
// may keep an integer beyond 2^53 exactly, as a json.Number), sharing
// nothing with what it was given. It refuses, storing nothing, a map that
// JSON cannot encode (one that holds itself, a func, NaN) or that is nested
// deeper than a JSON decoder reads (10,000 levels), with an error that
// names the field and wraps ErrUnstorable.
//
// Three implementations exist: [NewMemoryStore] (the default, in process),
// store/sqlite (durable, one machine) and store/postgres (several instances
// sharing one database). Package store/storetest checks a new implementation
// against the rules documented here; run it from your store's tests.
//
// Paths given to FileStore methods are clean absolute paths (see
// [CleanPath]); thread ids, keys and names are opaque non-empty strings.
type Store interface {
	ThreadStore
	MessageStore
	ValueStore
	EnvStore
	FileStore
	ChildStore
}

// Thread is a conversation: the unit that owns messages, values, env, files
// and children.
type Thread struct {
	ID       string `json:"id"`
	AgentID  string `json:"agent_id,omitempty"`  // the thread's current agent
	UserID   string `json:"user_id,omitempty"`   // "" when the thread has no user
	ParentID string `json:"parent_id,omitempty"` // "" for a root thread
	// Arguments are the arguments the thread's agent was started with (a
	// subagent's initial arguments, a handoff's), which fill the {{name}}
	// placeholders of its prompt.
	Arguments map[string]any `json:"arguments,omitempty"`
	// SessionTurns counts the side turns of the current session, for the
	// agent's MaxSessionTurns; it is 0 when a session starts.
	SessionTurns int `json:"session_turns,omitempty"`
	// Properties are the caller's own free-form JSON values; toolrun does not
	// read them.
	Properties map[string]any `json:"properties,omitempty"`
	Tags       []string       `json:"tags,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	// TerminatedAt is zero until the thread is terminated; a terminated thread
	// takes no new work.
	TerminatedAt time.Time `json:"terminated_at,omitzero"`
}

// ThreadStore keeps thread records.
type ThreadStore interface {
	// CreateThread stores a new thread as given (a zero CreatedAt stays
	// zero); it changes nothing in t. It fails with ErrThreadExists when the
	// id is taken, and refuses a thread without ID.
	CreateThread(ctx context.Context, t *Thread) error
	// GetThread returns the thread, or ErrNotFound.
	GetThread(ctx context.Context, id string) (*Thread, error)
	// UpdateThread replaces the stored record of t.ID with t, every field but
	// CreatedAt (the thread keeps its first one), or fails with ErrNotFound.
	UpdateThread(ctx context.Context, t *Thread) error
}

// Order is the order of a message query.
type Order string

// The orders of a message query.
const (
	// OrderDefault selects the newest Limit rows and returns them oldest first.
	OrderDefault Order = ""
	// OrderDesc selects the newest Limit rows and returns them newest first.
	OrderDesc Order = "desc"
	// OrderAsc selects the oldest Limit rows and returns them oldest first.
	OrderAsc Order = "asc"
)

// MessageQuery selects messages of one thread. Its filters (IncludeSilent,
// MaxDepth, After) choose the matching rows; Order, Offset and Limit then
// choose the page among them.
type MessageQuery struct {
	// Limit caps the number of rows returned; 0 means no cap.
	Limit int
	// Offset skips matching rows from the end the order selects from: the
	// newest rows for OrderDefault and OrderDesc, the oldest for OrderAsc.
	Offset int
	Order  Order
	// IncludeSilent includes silent rows, which are left out by default.
	IncludeSilent bool
	// MaxDepth keeps rows with Depth ≤ MaxDepth (0: the top level only). A
	// negative value keeps every depth.
	MaxDepth int
	// After keeps only rows with Seq > After; 0 (or less) keeps every row.
	// With the Seq of the last message read, a query returns only what was
	// appended since. A store answers it without reading the rows up to
	// After: its cost grows with the rows after After, not with the
	// thread's length.
	After int64
}

// MessagePage is the answer to a MessageQuery.
type MessagePage struct {
	Messages []Message
	// Total counts every row that matches the query's filters (depth,
	// silence, After), ignoring Limit and Offset.
	Total int
	// HasMore reports whether matching rows lie beyond this page, at the end
	// the page was taken towards (older rows for OrderDefault and OrderDesc,
	// newer ones for OrderAsc).
	HasMore bool
}

// MessageStore keeps the messages of threads.
type MessageStore interface {
	// AppendMessages appends msgs to the thread, in order, all or nothing,
	// each as given. It assigns each message's Seq (strictly increasing per
	// thread, gaps allowed) and writes it back into msgs; it changes nothing
	// else. A stored message's ThreadID is its thread's id, whatever the
	// appended one held. Ids are the caller's and need not be checked for
	// uniqueness. It refuses, storing nothing, a batch in which a message has
	// no ID or a zero CreatedAt, or a Depth outside 0 to 2³¹−1, with an
	// error naming the field. It fails
	// with ErrNotFound when the thread does not exist, and with
	// ErrDuplicateToolResult when a RoleTool message names a ToolCallID that
	// already has a stored tool result on the thread (or twice within msgs).
	// It keeps nothing of msgs once it returns (it stores copies): callers
	// may reuse the messages.
	AppendMessages(ctx context.Context, threadID string, msgs ...*Message) error
	// ListMessages answers q for the thread; an unknown thread has no messages.
	ListMessages(ctx context.Context, threadID string, q MessageQuery) (MessagePage, error)
	// ToolResult returns the stored tool-result message for a tool-call id,
	// or ErrNotFound.
	ToolResult(ctx context.Context, threadID, toolCallID string) (*Message, error)
}

// ValueStore keeps a thread's key-value store (ThreadState.Value/SetValue).
// Values are JSON documents.
type ValueStore interface {
	// GetValue returns the value, or ErrNotFound.
	GetValue(ctx context.Context, threadID, key string) (json.RawMessage, error)
	// SetValue stores value under key; a nil value or JSON null deletes the key.
	SetValue(ctx context.Context, threadID, key string, value json.RawMessage) error
}

// EnvScope says whose environment an EnvStore entry belongs to.
type EnvScope string

// Env scopes persisted by stores. Agent and prompt defaults live on their
// definitions; the runtime-instance env lives in the executor's options.
const (
	ScopeThread EnvScope = "thread"
	ScopeUser   EnvScope = "user"
)

// EnvValue is a stored environment value and its display type.
type EnvValue struct {
	Value string  `json:"value"`
	Type  VarType `json:"type"`
}

// EnvStore keeps environment variables of threads and of user accounts.
type EnvStore interface {
	// GetEnv returns the value, or ErrNotFound.
	GetEnv(ctx context.Context, scope EnvScope, ownerID, name string) (EnvValue, error)
	// SetEnv stores (or replaces) the value.
	SetEnv(ctx context.Context, scope EnvScope, ownerID, name string, v EnvValue) error
	// DeleteEnv removes the value; removing a missing one is not an error.
	DeleteEnv(ctx context.Context, scope EnvScope, ownerID, name string) error
	// ListEnv returns every value of the owner (an empty map when none).
	ListEnv(ctx context.Context, scope EnvScope, ownerID string) (map[string]EnvValue, error)
}

// FileInfo describes a thread file.
type FileInfo struct {
	Path      string    `json:"path"`
	MimeType  string    `json:"mimeType"`
	Size      int64     `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FileStore keeps the files of threads. Paths are clean absolute paths.
type FileStore interface {
	// WriteFile creates or replaces the file f.Path with data, of type
	// f.MimeType, written at f.UpdatedAt (the caller's clock, as for every
	// record). A new file gets f.CreatedAt; a replaced file keeps the
	// CreatedAt it has. It returns the stored info, Size set.
	WriteFile(ctx context.Context, threadID string, f FileInfo, data []byte) (FileInfo, error)
	// ReadFile returns the file's bytes (never nil for an existing file), or ErrNotFound.
	ReadFile(ctx context.Context, threadID, path string) ([]byte, FileInfo, error)
	// StatFile returns the file's info, or ErrNotFound.
	StatFile(ctx context.Context, threadID, path string) (FileInfo, error)
	// ListFiles returns every file whose path is dir or lies below dir, sorted by path.
	ListFiles(ctx context.Context, threadID, dir string) ([]FileInfo, error)
	// DeleteFile removes the file, or fails with ErrNotFound.
	DeleteFile(ctx context.Context, threadID, path string) error
}

// ChildEntry is one line of a thread's child registry: a subagent thread it
// created.
type ChildEntry struct {
	ParentID     string `json:"parent_id"`
	Reference    string `json:"reference"` // the child thread's id
	Relationship string `json:"relationship"`
	Owner        string `json:"owner"` // the owning side: "a" or "b"
	Agent        string `json:"agent"`
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Blocking     bool   `json:"blocking"`
	Hidden       bool   `json:"hidden,omitempty"`
	// ParentCommunication is "implicit" (default) or "explicit".
	ParentCommunication string `json:"parent_communication,omitempty"`
	// Status is the child's state: running, idle, failed, awaiting_human or
	// terminated.
	Status string `json:"status"`
	// Report is the latest status text the child reported through its
	// side's SessionStatus tool ("" when none).
	Report           string         `json:"report,omitempty"`
	InitialArguments map[string]any `json:"initial_arguments,omitempty"`
	CreatedAt        time.Time      `json:"created_at"`
	UpdatedAt        time.Time      `json:"updated_at"`
}

// ChildStore keeps the child registry of threads.
type ChildStore interface {
	// PutChild creates or replaces the entry (ParentID, Reference) as given,
	// times included. A replaced entry keeps its CreatedAt and its place in
	// creation order.
	PutChild(ctx context.Context, e ChildEntry) error
	// Child returns one entry, or ErrNotFound.
	Child(ctx context.Context, parentID, reference string) (ChildEntry, error)
	// Children returns the parent's entries in creation order.
	Children(ctx context.Context, parentID string) ([]ChildEntry, error)
}
