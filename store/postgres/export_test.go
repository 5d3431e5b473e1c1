package postgres

import "github.com/toolrun/toolrun"

// SetGroupHook makes st's group committer call f with the size of every
// batch before running it (f may block to hold the batch back).
func SetGroupHook(st *Store, f func(n int)) { st.group.hook = f }

// GroupQueued returns how many appends of st's group committer wait for a
// batch.
func GroupQueued(st *Store) int {
	st.group.mu.Lock()
	defer st.group.mu.Unlock()
	return len(st.group.queue)
}

// GroupInFlight is how many batches run at once.
var GroupInFlight = groupInFlight

// Migration1 is the SQL of schema version 1.
var Migration1 = migrations[0]

// Migration2 is the SQL of schema version 2.
var Migration2 = migrations[1]

// GroupFallbacks returns how many batches of st's group committer the
// server refused as a whole (and were retried append by append).
func GroupFallbacks(st *Store) int64 { return st.group.fallbacks.Load() }

// Migration3 is the SQL of schema version 3, the last before typed fields.
var Migration3 = migrations[2]

// ListSQL returns the statements ListMessages runs for q: the page and its
// arguments, the count and its arguments.
func ListSQL(threadID string, q toolrun.MessageQuery) (string, []any, string, []any) {
	return listSQL(threadID, q)
}
