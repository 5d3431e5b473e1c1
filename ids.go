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
