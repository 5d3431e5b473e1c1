// Package keyring encrypts values at rest with AES-256-GCM under a ring of
// named keys, so that keys can be rotated. The durable stores
// (store/sqlite, store/postgres) take a *Ring in their options and use it
// for secret environment values.
//
// A ring's first key encrypts; every key of the ring decrypts. To rotate,
// put a new key first and keep the old ones until every value sealed with
// them has been sealed again (the stores' ReencryptSecrets does that);
// then drop them.
//
//	ring, err := keyring.Parse(os.Getenv("TOOLRUN_SECRET_KEYS")) // "k2:base64…,k1:base64…"
//	if err != nil {
//		log.Fatal(err)
//	}
//	st, err := sqlite.Open("toolrun.db", &sqlite.Options{Keys: ring})
//
// # Sealed values
//
// [Ring.Seal] returns text of the form
//
//	toolrun:sealed:v1:<key id>:<base64url of nonce, ciphertext and tag>
//
// Each value gets a fresh random 96-bit nonce. The additional authenticated
// data is the prefix up to and including the key id, followed by the context
// strings given to Seal, each preceded by its length (the stores pass
// "toolrun.env" and the variable's scope, owner, name and type), so a
// sealed value opens only with the same key id, the same key and the same
// context: copied to another row, it fails to decrypt. The version ("v1")
// names this format; a later format gets a new version, and [Ring.Open]
// refuses versions it does not know. Text without the "toolrun:sealed:"
// prefix is not a sealed value ([IsSealed]): that is how the stores
// recognise a secret that an older build stored in plain text.
//
// One key must not seal more than 2^32 values (the limit of random GCM
// nonces); rotate long before that.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// KeySize is the size in bytes of a key's secret: AES-256.
const KeySize = 32

// MaxIDLen is the longest key id, in bytes.
const MaxIDLen = 64

// The errors of this package. Errors of Open are *DecryptError values that
// match ErrDecrypt, and also ErrUnknownKey when the ring lacks the key.
var (
	// ErrDecrypt is matched by every error of [Ring.Open]: the value is not
	// a sealed value this package can read, its key is not in the ring, or
	// authentication failed (a wrong key, an altered value, or a value
	// copied from another context).
	ErrDecrypt = errors.New("keyring: cannot decrypt")
	// ErrUnknownKey is matched by the errors of [Ring.Open] for a value
	// sealed with a key id the ring does not have.
	ErrUnknownKey = errors.New("keyring: unknown key id")
	// ErrNoKey is returned by [Ring.Seal] on a nil or empty ring.
	ErrNoKey = errors.New("keyring: no key to encrypt with")
)

// Key is one named AES-256 key. Its formatted forms (fmt's %v, %s, %#v …),
// its log/slog value and its JSON encoding show the id only, never the
// secret; [Format] writes the secret out. A Key has no JSON form that holds
// its secret: keep keys as the text Format writes and Parse reads.
type Key struct {
	// ID names the key in the values it seals: 1 to MaxIDLen bytes of
	// ASCII letters, digits, '.', '_' and '-'.
	ID string
	// Secret is the key material, KeySize bytes.
	Secret []byte
}

// Generate returns a new key with the given id and a random secret.
func Generate(id string) (Key, error) {
	if err := checkID(id); err != nil {
		return Key{}, err
	}
	k := Key{ID: id, Secret: make([]byte, KeySize)}
	_, _ = rand.Read(k.Secret) // never fails: crypto/rand.Read crashes the program instead
	return k, nil
}

// String returns "keyring.Key(<id>)".
func (k Key) String() string { return "keyring.Key(" + k.ID + ")" }

// Format implements fmt.Formatter: every verb prints k.String(), so a key
// in a log line or an error never shows its secret.
func (k Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// LogValue implements slog.LogValuer: a key logged with any handler (the
// JSON handler would otherwise encode its fields) is k.String().
func (k Key) LogValue() slog.Value { return slog.StringValue(k.String()) }

// MarshalJSON encodes k as the JSON string k.String(), so a key inside a
// value given to encoding/json (a configuration dumped for debugging, say)
// does not show its secret. Decoding that string into a Key fails.
func (k Key) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }

// checkID reports why id is not a valid key id. Its errors never quote
// the id: text that is not a valid id may be a secret in the wrong place.
func checkID(id string) error {
	if id == "" {
		return errors.New("keyring: empty key id")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("keyring: the key id is %d bytes, longer than %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("keyring: the key id has a byte not allowed at offset %d: only ASCII letters, digits, '.', '_' and '-' are allowed", i)
		}
	}
	return nil
}

// Ring is an ordered set of keys: the first seals, all open. A Ring is
// immutable and safe for concurrent use. A nil *Ring has no keys: Seal
// fails with ErrNoKey and Open with ErrUnknownKey.
type Ring struct {
	keys  []Key
	aeads []cipher.AEAD // per key, with random nonces
	byID  map[string]int
}

// New returns a ring of keys, the first of which seals. Ids must be valid
// and distinct, and secrets KeySize bytes; the secrets are copied.
func New(keys ...Key) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring: a ring needs at least one key")
	}
	r := &Ring{byID: make(map[string]int, len(keys))}
	for i, k := range keys {
		if err := checkID(k.ID); err != nil {
			return nil, fmt.Errorf("keyring: key %d: %w", i+1, err)
		}
		if _, dup := r.byID[k.ID]; dup {
			return nil, fmt.Errorf("keyring: key id %q appears twice", k.ID)
		}
		if len(k.Secret) != KeySize {
			return nil, fmt.Errorf("keyring: key %q: secret is %d bytes, want %d (AES-256)", k.ID, len(k.Secret), KeySize)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("keyring: key %q: %w", k.ID, err)
		}
		// The random-nonce GCM keeps no state between calls, so one value
		// per key serves every goroutine.
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("keyring: key %q: %w", k.ID, err)
		}
		r.keys = append(r.keys, Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)})
		r.aeads = append(r.aeads, aead)
		r.byID[k.ID] = i
	}
	return r, nil
}

// Parse reads a ring written as text: entries "<id>:<base64 secret>"
// separated by commas or white space, the sealing key first, as [Format]
// writes them. The secret may use the standard or the URL-safe base64
// alphabet, with or without padding. Errors name the entry by its number,
// and by its id once the id is valid; they never echo a secret, nor an id
// that is not valid. An entry whose id part is a key's secret in base64
// and whose secret part is not is reported as swapped.
func Parse(text string) (*Ring, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	if len(fields) == 0 {
		return nil, errors.New("keyring: parse: no keys (want id:base64[,id:base64…])")
	}
	keys := make([]Key, 0, len(fields))
	for i, f := range fields {
		id, b64, ok := strings.Cut(f, ":")
		if !ok {
			return nil, fmt.Errorf("keyring: parse: entry %d has no ':' (want id:base64)", i+1)
		}
		if swapped(id, b64) {
			return nil, fmt.Errorf("keyring: parse: entry %d: the text before ':' is a %d-byte base64 secret and the text after it is not: the halves look swapped (want id:base64)", i+1, KeySize)
		}
		if err := checkID(id); err != nil {
			return nil, fmt.Errorf("keyring: parse: entry %d: %w", i+1, err)
		}
		secret, err := decodeSecret(b64)
		if err != nil {
			return nil, fmt.Errorf("keyring: parse: key %q: the secret is not base64", id)
		}
		keys = append(keys, Key{ID: id, Secret: secret})
	}
	return New(keys...)
}

// swapped reports whether an entry looks written secret first: its id part
// decodes as a key's secret and its secret part does not. Such an id is
// valid in the URL-safe alphabet, and must not be quoted.
func swapped(id, b64 string) bool {
	if s, err := decodeSecret(id); err != nil || len(s) != KeySize {
		return false
	}
	s, err := decodeSecret(b64)
	return err != nil || len(s) != KeySize
}

// decodeSecret decodes s in any of the four base64 variants.
func decodeSecret(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

// Format writes keys as the text Parse reads: "<id>:<base64 secret>"
// entries separated by commas, in order. The result holds the secrets.
func Format(keys ...Key) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k.ID)
		b.WriteByte(':')
		b.WriteString(base64.StdEncoding.EncodeToString(k.Secret))
	}
	return b.String()
}

// Keys returns copies of the ring's keys, the sealing key first; nil for a
// nil ring.
func (r *Ring) Keys() []Key {
	if r == nil {
		return nil
	}
	out := make([]Key, len(r.keys))
	for i, k := range r.keys {
		out[i] = Key{ID: k.ID, Secret: append([]byte(nil), k.Secret...)}
	}
	return out
}

// IDs returns the ids of the ring's keys, the sealing key's first.
func (r *Ring) IDs() []string {
	if r == nil {
		return nil
	}
	ids := make([]string, len(r.keys))
	for i, k := range r.keys {
		ids[i] = k.ID
	}
	return ids
}

// Primary returns the id of the key Seal uses, "" for a nil ring.
func (r *Ring) Primary() string {
	if r == nil || len(r.keys) == 0 {
		return ""
	}
	return r.keys[0].ID
}

// String lists the ring's key ids, the sealing key first:
// "keyring.Ring[k2 k1]".
func (r *Ring) String() string {
	return "keyring.Ring[" + strings.Join(r.IDs(), " ") + "]"
}

// Format implements fmt.Formatter: every verb prints r.String(), so a ring
// printed with its options never shows a secret.
func (r *Ring) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// prefix starts every sealed value; version follows it.
const (
	prefix  = "toolrun:sealed:"
	version = "v1"
)

// IsSealed reports whether s has the form of a sealed value (of any
// version). It does not check that s can be opened.
func IsSealed(s string) bool { return strings.HasPrefix(s, prefix) }

// Prefix returns the text every value Seal writes with the key id starts
// with, "toolrun:sealed:v1:<id>:", for finding such values in a database
// (a SQL range or substring test).
func Prefix(keyID string) string { return prefix + version + ":" + keyID + ":" }

// KeyID returns the key id a sealed value of a known version names.
func KeyID(sealed string) (string, bool) {
	id, _, err := split(sealed)
	return id, err == nil
}

// split parses a sealed value into its key id and the raw bytes after it.
// The errors are *DecryptError.
func split(sealed string) (id string, raw []byte, err error) {
	rest, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", nil, &DecryptError{Reason: "not a sealed value (no " + prefix + " prefix)"}
	}
	ver, rest, ok := strings.Cut(rest, ":")
	if !ok || ver != version {
		return "", nil, &DecryptError{Reason: fmt.Sprintf("unsupported format version %.16q (this build reads %s)", ver, version)}
	}
	id, b64, ok := strings.Cut(rest, ":")
	if !ok || checkID(id) != nil {
		return "", nil, &DecryptError{Reason: "malformed key id"}
	}
	raw, err = base64.RawURLEncoding.DecodeString(b64)
	if err != nil {
		return id, nil, &DecryptError{KeyID: id, Reason: "the ciphertext is not base64url"}
	}
	if len(raw) < 12+16 {
		return id, nil, &DecryptError{KeyID: id, Reason: "the ciphertext is truncated"}
	}
	return id, raw, nil
}

// aad is the additional authenticated data of a value sealed under id
// with context: the value's prefix through the key id, then each context
// string preceded by its length, so that no two different contexts share
// an encoding.
func aad(id string, context []string) []byte {
	n := len(prefix) + len(version) + len(id) + 2
	for _, c := range context {
		n += binary.MaxVarintLen64 + len(c)
	}
	b := make([]byte, 0, n)
	b = append(b, prefix...)
	b = append(b, version...)
	b = append(b, ':')
	b = append(b, id...)
	b = append(b, ':')
	for _, c := range context {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

// Seal encrypts plaintext with the ring's first key, binding context (for
// example the owner and name of the value) as additional authenticated
// data, and returns the sealed text. Open needs the same context. It fails
// with ErrNoKey on a nil ring.
func (r *Ring) Seal(plaintext []byte, context ...string) (string, error) {
	if r == nil || len(r.keys) == 0 {
		return "", ErrNoKey
	}
	id := r.keys[0].ID
	ct := r.aeads[0].Seal(nil, nil, plaintext, aad(id, context))
	head := Prefix(id)
	out := make([]byte, len(head)+base64.RawURLEncoding.EncodedLen(len(ct)))
	copy(out, head)
	base64.RawURLEncoding.Encode(out[len(head):], ct)
	return string(out), nil
}

// Open decrypts a value Seal returned, with the key it names and the
// same context. Its errors are *DecryptError values matching ErrDecrypt
// (and ErrUnknownKey when the ring lacks the key); it never returns
// unauthenticated bytes.
func (r *Ring) Open(sealed string, context ...string) ([]byte, error) {
	id, raw, err := split(sealed)
	if err != nil {
		return nil, err
	}
	i, ok := 0, false
	if r != nil {
		i, ok = r.byID[id]
	}
	if !ok {
		reason := "there is no key with this id (no keys are configured)"
		if ids := r.IDs(); len(ids) > 0 {
			reason = "there is no key with this id (the configured keys are " + strings.Join(ids, ", ") + ")"
		}
		return nil, &DecryptError{KeyID: id, Reason: reason, unknown: true}
	}
	pt, err := r.aeads[i].Open(nil, nil, raw, aad(id, context))
	if err != nil {
		return nil, &DecryptError{KeyID: id, Reason: "authentication failed: the key with this id is not the one that sealed the value, or the value was altered or copied from another place"}
	}
	return pt, nil
}

// DecryptError is the error of [Ring.Open]. It matches ErrDecrypt, and
// ErrUnknownKey when the ring has no key with the value's id.
type DecryptError struct {
	// KeyID is the key id the sealed value names; "" when it names none.
	KeyID string
	// Reason says what was wrong.
	Reason  string
	unknown bool
}

// Error names the key id and the reason.
func (e *DecryptError) Error() string {
	if e.KeyID == "" {
		return "keyring: cannot decrypt: " + e.Reason
	}
	return fmt.Sprintf("keyring: cannot decrypt a value sealed with key %q: %s", e.KeyID, e.Reason)
}

// Unwrap returns ErrDecrypt, and ErrUnknownKey when the key was missing.
func (e *DecryptError) Unwrap() []error {
	if e.unknown {
		return []error{ErrDecrypt, ErrUnknownKey}
	}
	return []error{ErrDecrypt}
}
