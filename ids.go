package toolrun

import (
	"crypto/rand"
	"encoding/hex"
)

// newID returns prefix + "_" + 16 random hex digits.
func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
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
