package keyring_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/store/keyring"
)

// secretForms are the ways a key's secret could show in text.
func secretForms(k keyring.Key) []string {
	return []string{
		base64.StdEncoding.EncodeToString(k.Secret),
		base64.RawURLEncoding.EncodeToString(k.Secret),
		fmt.Sprintf("%x", k.Secret),
		fmt.Sprint(k.Secret),
	}
}

// A key logged with log/slog, by either built-in handler, or encoded with
// encoding/json, alone or inside another value, shows its id and not its
// secret.
func TestKeyInLogsAndJSONHidesSecret(t *testing.T) {
	k := mustKey(t, "k1")
	type config struct {
		Key  keyring.Key
		Keys []keyring.Key
		Ptr  *keyring.Key
	}
	var outs []string
	for _, h := range []func(*bytes.Buffer) slog.Handler{
		func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		slog.New(h(&buf)).Info("rotating", "key", k, "ptr", &k, "group", slog.Group("g", "key", k))
		outs = append(outs, buf.String())
	}
	for _, v := range []any{k, &k, []keyring.Key{k}, config{Key: k, Keys: []keyring.Key{k}, Ptr: &k}, map[string]keyring.Key{"a": k}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%T): %v", v, err)
		}
		outs = append(outs, string(b))
	}
	for _, out := range outs {
		for _, f := range secretForms(k) {
			if strings.Contains(out, f) {
				t.Errorf("%s shows the key's secret", out)
			}
		}
		if !strings.Contains(out, "keyring.Key(k1)") {
			t.Errorf("%s does not name the key k1", out)
		}
	}
	// The JSON form does not decode back into a Key without its secret.
	b, _ := json.Marshal(k)
	var back keyring.Key
	if err := json.Unmarshal(b, &back); err == nil {
		t.Errorf("json.Unmarshal(%s) into a Key succeeded: %+v", b, back.ID)
	}
}

// An entry written secret first ("<base64>:<id>") is reported as swapped,
// by its number, without echoing the secret, in either alphabet and
// whatever follows the ':'. An id that is not valid is never quoted,
// by Parse or by New.
func TestParseSwappedEntryNeverEchoesSecret(t *testing.T) {
	k := mustKey(t, "k1")
	other := base64.StdEncoding.EncodeToString(make([]byte, 16))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		secret := enc.EncodeToString(k.Secret)
		for _, text := range []string{secret + ":k1", secret + ":" + other, "k0:" + base64.StdEncoding.EncodeToString(k.Secret) + "," + secret + ":k1"} {
			_, err := keyring.Parse(text)
			if err == nil {
				t.Fatalf("Parse(%q) accepted a swapped entry", text)
			}
			for _, f := range secretForms(k) {
				if strings.Contains(err.Error(), f[:16]) {
					t.Errorf("Parse(%q) error echoes the secret: %v", text, err)
				}
			}
			if !strings.Contains(err.Error(), "swapped (want id:base64)") || !strings.Contains(err.Error(), "entry ") {
				t.Errorf("Parse(%q) = %v; want an error naming the entry and saying the halves look swapped", text, err)
			}
		}
	}
	// Two keys' worth of base64 either side is a valid entry: its id
	// happens to be base64, and is taken as given.
	id := base64.RawURLEncoding.EncodeToString(k.Secret)
	if _, err := keyring.Parse(id + ":" + base64.StdEncoding.EncodeToString(k.Secret)); err != nil {
		t.Errorf("Parse of a 43-byte id: %v", err)
	}

	bad := "sk+" + strings.Repeat("s3cr3t", 4)
	long := strings.Repeat("long-id-", 9)
	_, parseErr := keyring.Parse(bad + ":" + base64.StdEncoding.EncodeToString(k.Secret))
	_, newErr := keyring.New(k, keyring.Key{ID: bad, Secret: k.Secret})
	_, longErr := keyring.New(keyring.Key{ID: long, Secret: k.Secret})
	for _, tt := range []struct {
		err  error
		name string
	}{{parseErr, "entry 1"}, {newErr, "key 2"}, {longErr, "key 1"}} {
		if tt.err == nil {
			t.Fatalf("an id that is not valid was accepted (want an error naming %s)", tt.name)
		}
		if strings.Contains(tt.err.Error(), "s3cr3t") || strings.Contains(tt.err.Error(), "long-id") {
			t.Errorf("error %q quotes an id that is not valid", tt.err)
		}
		if !strings.Contains(tt.err.Error(), tt.name) {
			t.Errorf("error %q does not name %s", tt.err, tt.name)
		}
	}
}
