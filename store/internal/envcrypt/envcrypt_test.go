package envcrypt

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
)

func testKey(t *testing.T, id string) keyring.Key {
	t.Helper()
	k, err := keyring.Generate(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testRing(t *testing.T, ids ...string) *keyring.Ring {
	t.Helper()
	var keys []keyring.Key
	for _, id := range ids {
		keys = append(keys, testKey(t, id))
	}
	return ringOf(t, keys...)
}

func ringOf(t *testing.T, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	r, err := keyring.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every type but text is encrypted; text is stored as given.
func TestSealTypes(t *testing.T) {
	p, err := New(testRing(t, "k"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []toolrun.VarType{toolrun.VarSecret, "", "password"} {
		s, err := p.Seal(toolrun.ScopeThread, "o", "N", toolrun.EnvValue{Value: "v", Type: typ})
		if err != nil || !keyring.IsSealed(s) {
			t.Errorf("type %q: stored %q, %v; want it sealed", typ, s, err)
		}
		if got, err := p.Open(toolrun.ScopeThread, "o", "N", s, string(typ)); err != nil || got != "v" {
			t.Errorf("type %q: Open = %q, %v", typ, got, err)
		}
	}
	s, err := p.Seal(toolrun.ScopeThread, "o", "N", toolrun.EnvValue{Value: "toolrun:sealed:v1:x:y", Type: toolrun.VarText})
	if err != nil || s != "toolrun:sealed:v1:x:y" {
		t.Errorf("text value stored as %q, %v", s, err)
	}
	if got, err := p.Open(toolrun.ScopeThread, "o", "N", s, "text"); err != nil || got != s {
		t.Errorf("a text value that looks sealed reads %q, %v", got, err)
	}
}

func TestPolicyWithoutKeys(t *testing.T) {
	if _, err := New(testRing(t, "k"), true); err == nil {
		t.Error("New accepted keys and plaintext")
	}
	var p Policy
	_, err := p.Seal(toolrun.ScopeUser, "u", "N", toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret})
	if !errors.Is(err, keyring.ErrNoKey) || !strings.Contains(err.Error(), "Options.Keys") {
		t.Errorf("Seal without keys: %v", err)
	}
	if _, _, err := p.Reseal("user", "u", "N", "v", "secret"); !errors.Is(err, keyring.ErrNoKey) {
		t.Errorf("Reseal without keys: %v", err)
	}
	plain, _ := New(nil, true)
	if s, err := plain.Seal(toolrun.ScopeUser, "u", "N", toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret}); err != nil || s != "v" {
		t.Errorf("plaintext Seal = %q, %v", s, err)
	}
}

func TestReseal(t *testing.T) {
	a, b := testKey(t, "a"), testKey(t, "b")
	old, err := New(ringOf(t, a), false)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := New(ringOf(t, b, a), false)
	if err != nil {
		t.Fatal(err)
	}
	sealedA, _ := old.Seal(toolrun.ScopeThread, "o", "N", toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret})
	sealedB, _ := cur.Seal(toolrun.ScopeThread, "o", "N", toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret})
	for _, tt := range []struct {
		value, typ string
		change     bool
	}{
		{sealedA, "secret", true},
		{"plain", "secret", true},
		{sealedB, "secret", false},
		{"plain", "text", false},
	} {
		s, ok, err := cur.Reseal("thread", "o", "N", tt.value, tt.typ)
		if err != nil || ok != tt.change {
			t.Errorf("Reseal(%.30q, %s) = %v, %v; want change %v", tt.value, tt.typ, ok, err, tt.change)
		}
		if ok {
			if id, _ := keyring.KeyID(s); id != "b" {
				t.Errorf("resealed with %q", id)
			}
			if got, err := cur.Open(toolrun.ScopeThread, "o", "N", s, tt.typ); err != nil || (got != "v" && got != "plain") {
				t.Errorf("resealed value opens as %q, %v", got, err)
			}
		}
	}
	cond, args := cur.Stale("?", "?")
	if !strings.Contains(cond, "type <> 'text'") || len(args) != 2 || args[1] != "toolrun:sealed:v1:b:" || args[0] != len("toolrun:sealed:v1:b:") {
		t.Errorf("Stale = %q %v", cond, args)
	}
}
