// Package envcrypt is the encryption at rest of secret env values that
// store/sqlite and store/postgres share, so that both keep a row the same
// way: what is encrypted, under which context, and what their errors say.
//
// The value column of a secret row holds either a keyring sealed value
// ("toolrun:sealed:v1:<key id>:…") or, for a secret written by a build
// before encryption existed or with PlaintextSecrets, the value as given.
// The sealed form describes itself, so no other column is needed and the
// schema is unchanged. A text row is always stored as given, whatever it
// looks like.
package envcrypt

import (
	"errors"
	"fmt"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
)

// Policy is how a store keeps env values. It is a plain value, safe for
// concurrent use.
type Policy struct {
	keys      *keyring.Ring
	plaintext bool
}

// New returns the policy of a store's options: keys seal secret values;
// without keys, plaintext allows storing them as given, and otherwise
// they are refused. Setting both is refused as contradictory.
func New(keys *keyring.Ring, plaintext bool) (Policy, error) {
	if keys != nil && plaintext {
		return Policy{}, errors.New("Options.Keys and Options.PlaintextSecrets are both set: set Keys to encrypt secret env values, or only PlaintextSecrets to store them unencrypted")
	}
	return Policy{keys: keys, plaintext: plaintext}, nil
}

// Keys returns the ring, nil when there is none.
func (p Policy) Keys() *keyring.Ring { return p.keys }

// Secret reports whether values of type t are encrypted: every type but
// VarText, since an unset type means VarSecret to the executor.
func Secret(t toolrun.VarType) bool { return t != toolrun.VarText }

// rowContext is the additional authenticated data of a row: a sealed
// value opens only in its row (scope, owner, name) and with the type it
// was written with, so it cannot be moved to another row.
func rowContext(scope, owner, name, typ string) []string {
	return []string{"toolrun.env", scope, owner, name, typ}
}

// ErrNoKey is SetEnv's refusal of a secret value by a store without keys.
var ErrNoKey = fmt.Errorf("refusing to store a secret value unencrypted: %w; set Options.Keys (package store/keyring), or Options.PlaintextSecrets to store secrets in plain text (development only)", keyring.ErrNoKey)

// ErrNoKeyToReencrypt is ReencryptSecrets's error on a store without keys.
var ErrNoKeyToReencrypt = fmt.Errorf("%w: set Options.Keys to the ring whose first key is to encrypt the secrets", keyring.ErrNoKey)

// Seal returns what the store writes in the value column for v in row
// (scope, owner, name).
func (p Policy) Seal(scope toolrun.EnvScope, owner, name string, v toolrun.EnvValue) (string, error) {
	if !Secret(v.Type) {
		return v.Value, nil
	}
	if p.keys == nil {
		if !p.plaintext {
			return "", ErrNoKey
		}
		if keyring.IsSealed(v.Value) {
			// It would read back as a sealed value, not as itself.
			return "", errors.New(`a secret value that starts with "toolrun:sealed:" cannot be stored in plain text (PlaintextSecrets)`)
		}
		return v.Value, nil
	}
	return p.keys.Seal([]byte(v.Value), rowContext(string(scope), owner, name, string(v.Type))...)
}

// Open returns the value of a stored row: a secret's sealed value is
// opened with the ring; every other value is returned as stored. A sealed
// value that cannot be opened gives the *keyring.DecryptError (naming the
// key id), never the stored text.
func (p Policy) Open(scope toolrun.EnvScope, owner, name, value, typ string) (string, error) {
	if !Secret(toolrun.VarType(typ)) || !keyring.IsSealed(value) {
		return value, nil
	}
	b, err := p.keys.Open(value, rowContext(string(scope), owner, name, typ)...)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Stale returns the SQL condition (with its arguments, written as the
// placeholders ph1 and ph2) that selects the rows Reseal rewrites: secret
// rows whose value does not start with the sealing key's prefix.
func (p Policy) Stale(ph1, ph2 string) (cond string, args []any) {
	pre := keyring.Prefix(p.keys.Primary())
	return `type <> 'text' AND substr(value, 1, ` + ph1 + `) <> ` + ph2, []any{len(pre), pre}
}

// Reseal returns a row's value sealed with the ring's first key; ok is
// false when the row needs no change (a text row, or one sealed with that
// key already).
func (p Policy) Reseal(scope, owner, name, value, typ string) (sealed string, ok bool, err error) {
	if p.keys == nil {
		return "", false, ErrNoKeyToReencrypt
	}
	if !Secret(toolrun.VarType(typ)) {
		return "", false, nil
	}
	if id, sealed := keyring.KeyID(value); sealed && id == p.keys.Primary() {
		return "", false, nil
	}
	plain, err := p.Open(toolrun.EnvScope(scope), owner, name, value, typ)
	if err != nil {
		return "", false, err
	}
	s, err := p.keys.Seal([]byte(plain), rowContext(scope, owner, name, typ)...)
	if err != nil {
		return "", false, err
	}
	return s, true, nil
}
