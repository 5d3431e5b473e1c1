package keyring_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolrun/toolrun/store/keyring"
)

func mustKey(t *testing.T, id string) keyring.Key {
	t.Helper()
	k, err := keyring.Generate(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustRing(t *testing.T, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	r, err := keyring.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSealOpenRoundTrip(t *testing.T) {
	r := mustRing(t, mustKey(t, "k1"))
	for _, pt := range []string{"", "x", "sk-live-0123456789", strings.Repeat("ü", 5000), "nul\x00byte"} {
		s, err := r.Seal([]byte(pt), "env", "thread", "t1", "API_KEY")
		if err != nil {
			t.Fatal(err)
		}
		if !keyring.IsSealed(s) || !strings.HasPrefix(s, "toolrun:sealed:v1:k1:") {
			t.Errorf("sealed value %q lacks the v1 prefix and key id", s)
		}
		if len(pt) >= 4 && strings.Contains(s, pt) {
			t.Errorf("sealed value contains the plaintext %q", pt)
		}
		if strings.ContainsAny(s, "\x00\n ") {
			t.Errorf("sealed value %q is not plain text", s)
		}
		if id, ok := keyring.KeyID(s); !ok || id != "k1" {
			t.Errorf("KeyID(%q) = %q, %v", s, id, ok)
		}
		got, err := r.Open(s, "env", "thread", "t1", "API_KEY")
		if err != nil || string(got) != pt {
			t.Errorf("Open = %q, %v; want %q", got, err, pt)
		}
	}
}

// Every Seal uses a fresh nonce: sealing one value twice gives two texts.
func TestSealFreshNonce(t *testing.T) {
	r := mustRing(t, mustKey(t, "k1"))
	seen := map[string]bool{}
	for range 100 {
		s, err := r.Seal([]byte("same"), "c")
		if err != nil {
			t.Fatal(err)
		}
		if seen[s] {
			t.Fatalf("Seal returned %q twice", s)
		}
		seen[s] = true
	}
}

// The context is bound: another context, another split of the same bytes,
// or none at all fails to open.
func TestContextBound(t *testing.T) {
	r := mustRing(t, mustKey(t, "k1"))
	s, err := r.Seal([]byte("v"), "env", "thread", "t1", "A")
	if err != nil {
		t.Fatal(err)
	}
	for _, ctx := range [][]string{
		{"env", "thread", "t2", "A"},
		{"env", "user", "t1", "A"},
		{"env", "thread", "t1", "B"},
		{"env", "thread", "t1A", ""},
		{"env", "thread", "t", "1A"},
		{"env", "thread", "t1"},
		nil,
	} {
		_, err := r.Open(s, ctx...)
		if !errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, keyring.ErrUnknownKey) {
			t.Errorf("Open with context %q: %v; want ErrDecrypt (not ErrUnknownKey)", ctx, err)
		}
	}
}

func TestRotation(t *testing.T) {
	a, b := mustKey(t, "a"), mustKey(t, "b")
	old := mustRing(t, a)
	s, err := old.Seal([]byte("secret"), "c")
	if err != nil {
		t.Fatal(err)
	}
	both := mustRing(t, b, a)
	if got, err := both.Open(s, "c"); err != nil || string(got) != "secret" {
		t.Fatalf("ring [b a] opens a value sealed with a: %q, %v", got, err)
	}
	s2, _ := both.Seal([]byte("secret"), "c")
	if id, _ := keyring.KeyID(s2); id != "b" || both.Primary() != "b" {
		t.Errorf("ring [b a] sealed with %q (Primary %q), want b", id, both.Primary())
	}
	_, err = mustRing(t, b).Open(s, "c")
	var de *keyring.DecryptError
	if !errors.Is(err, keyring.ErrUnknownKey) || !errors.Is(err, keyring.ErrDecrypt) || !errors.As(err, &de) || de.KeyID != "a" {
		t.Errorf("ring [b] opening a value of key a: %v; want ErrUnknownKey naming a", err)
	}
	if !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "b") {
		t.Errorf("error %q should name the missing key a and the configured key b", err)
	}
}

// A ring whose key has the right id but the wrong secret fails with
// ErrDecrypt naming the id, and never returns bytes.
func TestWrongKey(t *testing.T) {
	s, _ := mustRing(t, mustKey(t, "k1")).Seal([]byte("secret"), "c")
	got, err := mustRing(t, mustKey(t, "k1")).Open(s, "c")
	if got != nil || !errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("Open with a wrong key = %q, %v", got, err)
	}
	if !strings.Contains(err.Error(), `key "k1"`) || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("error %q should name key k1 and say authentication failed", err)
	}
}

func TestTampered(t *testing.T) {
	r := mustRing(t, mustKey(t, "k1"), mustKey(t, "k2"))
	s, _ := r.Seal([]byte("secret value"), "c")
	raw, _ := base64.RawURLEncoding.DecodeString(s[len("toolrun:sealed:v1:k1:"):])
	for i := range raw {
		bad := bytes.Clone(raw)
		bad[i] ^= 1
		if _, err := r.Open("toolrun:sealed:v1:k1:"+base64.RawURLEncoding.EncodeToString(bad), "c"); !errors.Is(err, keyring.ErrDecrypt) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	// The key id is authenticated too: relabelled, the value does not open
	// with the other key.
	if _, err := r.Open(strings.Replace(s, ":k1:", ":k2:", 1), "c"); !errors.Is(err, keyring.ErrDecrypt) {
		t.Errorf("relabelled key id: %v", err)
	}
	for _, bad := range []string{
		"plain text",
		"toolrun:sealed:v2:k1:" + s[len("toolrun:sealed:v1:k1:"):],
		"toolrun:sealed:v1:k1",
		"toolrun:sealed:v1::abc",
		"toolrun:sealed:v1:k1:!!!",
		"toolrun:sealed:v1:k1:AAAA",
	} {
		if _, err := r.Open(bad, "c"); !errors.Is(err, keyring.ErrDecrypt) {
			t.Errorf("Open(%q) = %v; want ErrDecrypt", bad, err)
		}
	}
	if _, err := r.Open("toolrun:sealed:v2:k1:xyz"); err == nil || !strings.Contains(err.Error(), "version") {
		t.Errorf("unknown version: %v; want an error naming the version", err)
	}
}

func TestNilRing(t *testing.T) {
	var r *keyring.Ring
	if _, err := r.Seal([]byte("x")); !errors.Is(err, keyring.ErrNoKey) {
		t.Errorf("nil ring Seal: %v", err)
	}
	s, _ := mustRing(t, mustKey(t, "k1")).Seal([]byte("x"))
	if _, err := r.Open(s); !errors.Is(err, keyring.ErrUnknownKey) || !strings.Contains(err.Error(), "no keys are configured") {
		t.Errorf("nil ring Open: %v", err)
	}
	if r.Primary() != "" || r.IDs() != nil || r.Keys() != nil || r.String() != "keyring.Ring[]" {
		t.Errorf("nil ring: Primary %q IDs %v Keys %v String %q", r.Primary(), r.IDs(), r.Keys(), r.String())
	}
}

func TestParseFormat(t *testing.T) {
	a, b := mustKey(t, "k-2025.a"), mustKey(t, "B_1")
	text := keyring.Format(a, b)
	r, err := keyring.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.IDs(); len(got) != 2 || got[0] != "k-2025.a" || got[1] != "B_1" {
		t.Fatalf("IDs = %v", got)
	}
	keys := r.Keys()
	if !bytes.Equal(keys[0].Secret, a.Secret) || !bytes.Equal(keys[1].Secret, b.Secret) {
		t.Error("Parse(Format(keys)) changed the secrets")
	}
	// Separators: commas, spaces, newlines; every base64 alphabet.
	std := base64.StdEncoding.EncodeToString(a.Secret)
	raw := base64.RawURLEncoding.EncodeToString(b.Secret)
	r2, err := keyring.Parse("\n k-2025.a:" + std + " ,\n\tB_1:" + raw + "\n")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.Seal([]byte("v"), "c")
	if got, err := r2.Open(s, "c"); err != nil || string(got) != "v" {
		t.Errorf("a ring parsed from another spelling opens: %q, %v", got, err)
	}
	secret := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	for _, tt := range []struct{ text, want string }{
		{"", "no keys"},
		{" , ", "no keys"},
		{"k1", "no ':'"},
		{":" + std, "empty key id"},
		{"k 1:" + std, "no ':'"},
		{"k/1:" + std, "only ASCII"},
		{"k1:" + secret, "16 bytes, want 32"},
		{"k1:not*base64", `key "k1": the secret is not base64`},
		{"k1:" + std + ",k1:" + raw, "appears twice"},
	} {
		_, err := keyring.Parse(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want an error containing %q", tt.text, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), std) {
			t.Errorf("Parse error %q echoes a secret", err)
		}
	}
}

func TestNewChecks(t *testing.T) {
	k := mustKey(t, "k1")
	if _, err := keyring.New(); err == nil {
		t.Error("New() accepted an empty ring")
	}
	if _, err := keyring.New(keyring.Key{ID: "k", Secret: make([]byte, 16)}); err == nil || !strings.Contains(err.Error(), "AES-256") {
		t.Errorf("New with a 16-byte secret: %v", err)
	}
	if _, err := keyring.Generate(strings.Repeat("x", keyring.MaxIDLen+1)); err == nil {
		t.Error("Generate accepted a too long id")
	}
	if _, err := keyring.Generate("a:b"); err == nil {
		t.Error("Generate accepted ':' in an id")
	}
	// New copies the secret: changing the caller's slice changes nothing.
	r := mustRing(t, k)
	s, _ := r.Seal([]byte("v"))
	for i := range k.Secret {
		k.Secret[i] = 0
	}
	if _, err := r.Open(s); err != nil {
		t.Errorf("the ring kept a reference to the caller's secret: %v", err)
	}
}

// Formatting a key or a ring never shows the secret.
func TestFormatHidesSecrets(t *testing.T) {
	k := mustKey(t, "k1")
	r := mustRing(t, k)
	type opts struct {
		Keys *keyring.Ring
		Key  keyring.Key
	}
	secretForms := []string{string(k.Secret), base64.StdEncoding.EncodeToString(k.Secret), fmt.Sprintf("%x", k.Secret), fmt.Sprint(k.Secret)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
		for _, v := range []any{k, &k, r, opts{r, k}, &opts{r, k}, []keyring.Key{k}} {
			out := fmt.Sprintf(verb, v)
			for _, f := range secretForms {
				if strings.Contains(out, f) {
					t.Errorf("Sprintf(%s, %T) = %q shows the secret", verb, v, out)
				}
			}
		}
	}
	if got := fmt.Sprint(r); got != "keyring.Ring[k1]" {
		t.Errorf("Sprint(ring) = %q", got)
	}
}

func TestConcurrentUse(t *testing.T) {
	r := mustRing(t, mustKey(t, "k1"), mustKey(t, "k0"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				pt := fmt.Sprintf("value %d/%d", g, i)
				s, err := r.Seal([]byte(pt), "c", pt)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := r.Open(s, "c", pt); err != nil || string(got) != pt {
					t.Errorf("Open = %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPrefix(t *testing.T) {
	r := mustRing(t, mustKey(t, "k_1"))
	s, _ := r.Seal([]byte("v"))
	if p := keyring.Prefix("k_1"); !strings.HasPrefix(s, p) || p != "toolrun:sealed:v1:k_1:" {
		t.Errorf("Prefix = %q; sealed value %q", p, s)
	}
}
