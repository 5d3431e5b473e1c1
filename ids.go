package toolrun

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
	"slices"
)

// newID returns prefix + "_" + 16 random hex digits, from the operating
// system's generator: for ids that may be handed out as names of a
// conversation (threads, runtimes), which nobody should guess.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return formatID(prefix, b)
}

// newRecordID returns prefix + "_" + 16 random hex digits from the
// runtime's per-thread generator (ChaCha8, seeded by the operating system
// at start): ids of messages, calls and attachments only need to be
// unique, and are made on every call.
func newRecordID(prefix string) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], mrand.Uint64())
	return formatID(prefix, b)
}

func formatID(prefix string, b [8]byte) string {
	var out [40]byte
	n := copy(out[:], prefix)
	out[n] = '_'
	hex.Encode(out[n+1:], b[:])
	return string(out[:n+1+16])
}

// randomHex returns n random bytes as 2n hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// fewKeys is how many entries a keyed finds by walking its slices; past
// it, through a map.
const fewKeys = 16

// keyed holds values in the order they were added and finds them by key:
// by walking its entries while they are few (a request offers a few tools,
// a response makes a call or two), through a map once they are more, so
// that the usual request allocates no map and a long one stays linear.
type keyed[K comparable, V any] struct {
	entries []keyedPair[K, V] // in the order they were added
	index   map[K]int         // positions in entries, past fewKeys
}

type keyedPair[K comparable, V any] struct {
	key K
	val V
}

// find returns the value of key. It walks from the newest entry: the
// chunks of a streamed call come in a row.
func (k *keyed[K, V]) find(key K) (V, bool) {
	if k.index != nil {
		if i, ok := k.index[key]; ok {
			return k.entries[i].val, true
		}
	} else {
		for i := len(k.entries) - 1; i >= 0; i-- {
			if k.entries[i].key == key {
				return k.entries[i].val, true
			}
		}
	}
	var zero V
	return zero, false
}

// add appends v under key, unless key is there already; it reports
// whether it added v.
func (k *keyed[K, V]) add(key K, v V) bool {
	if _, ok := k.find(key); ok {
		return false
	}
	k.entries = append(k.entries, keyedPair[K, V]{key, v})
	switch {
	case k.index != nil:
		k.index[key] = len(k.entries) - 1
	case len(k.entries) > fewKeys:
		k.index = make(map[K]int, 2*len(k.entries))
		for i, e := range k.entries {
			k.index[e.key] = i
		}
	}
	return true
}

// grow makes room for n more entries, so that adding them allocates no
// entries (a map past fewKeys aside).
func (k *keyed[K, V]) grow(n int) { k.entries = slices.Grow(k.entries, n) }

// reset empties k, keeping its entries' array for the next use.
func (k *keyed[K, V]) reset() {
	clear(k.entries)
	k.entries, k.index = k.entries[:0], nil
}

// idSet is a set of ids.
type idSet struct{ k keyed[string, struct{}] }

func (s *idSet) has(id string) bool { _, ok := s.k.find(id); return ok }

// add adds id and reports whether it was new.
func (s *idSet) add(id string) bool { return s.k.add(id, struct{}{}) }

// reset empties s, keeping its room.
func (s *idSet) reset() { s.k.reset() }
