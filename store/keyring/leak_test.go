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
