package toolrun

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	mrand "math/rand/v2"
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

// fewIDs is how many ids an idSet keeps in its slice.
const fewIDs = 16

// idSet is a set of ids: a few in a slice (most sets hold one or two),
// more in a map.
type idSet struct {
	few  []string
	many map[string]bool
}

func (s *idSet) has(id string) bool {
	if s.many != nil {
		return s.many[id]
	}
	for _, x := range s.few {
		if x == id {
			return true
		}
	}
	return false
}

func (s *idSet) add(id string) {
	switch {
	case s.many != nil:
		s.many[id] = true
	case s.has(id):
	case len(s.few) < fewIDs:
		s.few = append(s.few, id)
	default:
		s.many = make(map[string]bool, 2*fewIDs)
		for _, x := range s.few {
			s.many[x] = true
		}
		s.many[id] = true
	}
}
