package sqlite_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ncruces/go-sqlite3/driver"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/sqlite"
)

// ring returns a ring of the keys, the first sealing.
func ring(t *testing.T, keys ...keyring.Key) *keyring.Ring {
	t.Helper()
	r, err := keyring.New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func genKey(t *testing.T, id string) keyring.Key {
	t.Helper()
	k, err := keyring.Generate(id)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// marker returns a value no database holds by chance.
func marker(kind string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return kind + "-" + hex.EncodeToString(b[:])
}

func open(t *testing.T, path string, opts *sqlite.Options) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// fileBytes returns the bytes of the database file and of its WAL.
func fileBytes(t *testing.T, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal", path + "-journal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func setEnv(t *testing.T, st toolrun.Store, scope toolrun.EnvScope, owner, name string, v toolrun.EnvValue) {
	t.Helper()
	if err := st.SetEnv(t.Context(), scope, owner, name, v); err != nil {
		t.Fatalf("SetEnv(%s, %s, %s): %v", scope, owner, name, err)
	}
}

func wantEnv(t *testing.T, st toolrun.Store, scope toolrun.EnvScope, owner, name string, want toolrun.EnvValue) {
	t.Helper()
	got, err := st.GetEnv(t.Context(), scope, owner, name)
	if err != nil || got != want {
		t.Errorf("GetEnv(%s, %s, %s) = %+v, %v; want %+v", scope, owner, name, got, err, want)
	}
}

// rawValue reads the value column as stored.
func rawValue(t *testing.T, st *sqlite.Store, scope, owner, name string) string {
	t.Helper()
	var v string
	if err := st.DB().QueryRow(`SELECT value FROM env WHERE scope = ? AND owner_id = ? AND name = ?`, scope, owner, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The database and WAL files never hold a secret's bytes, while a text
// value is stored as given; GetEnv and ListEnv return the secrets.
func TestSecretsEncryptedAtRest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.db")
	st := open(t, path, &sqlite.Options{Keys: ring(t, genKey(t, "k1"))})
	secret, userSecret, untyped, text := marker("sk-thread"), marker("sk-user"), marker("sk-untyped"), marker("region")
	thread := map[string]toolrun.EnvValue{
		"API_KEY": {Value: secret, Type: toolrun.VarSecret},
		"UNTYPED": {Value: untyped}, // an unset type is secret
		"REGION":  {Value: text, Type: toolrun.VarText},
	}
	for k, v := range thread {
		setEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	setEnv(t, st, toolrun.ScopeUser, "u1", "API_KEY", toolrun.EnvValue{Value: userSecret, Type: toolrun.VarSecret})

	for k, v := range thread {
		wantEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	wantEnv(t, st, toolrun.ScopeUser, "u1", "API_KEY", toolrun.EnvValue{Value: userSecret, Type: toolrun.VarSecret})
	m, err := st.ListEnv(t.Context(), toolrun.ScopeThread, "t1")
	if err != nil || !maps.Equal(m, thread) {
		t.Errorf("ListEnv = %v, %v; want %v", m, err, thread)
	}
	if v := rawValue(t, st, "thread", "t1", "API_KEY"); !strings.HasPrefix(v, "toolrun:sealed:v1:k1:") {
		t.Errorf("stored secret %q is not sealed with k1", v)
	}
	if v := rawValue(t, st, "thread", "t1", "REGION"); v != text {
		t.Errorf("stored text value %q, want %q as given", v, text)
	}

	check := func(when string) {
		t.Helper()
		raw := fileBytes(t, path)
		for _, s := range []string{secret, userSecret, untyped} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s: the database files contain the secret %q", when, s)
			}
		}
		if !bytes.Contains(raw, []byte(text)) {
			t.Errorf("%s: the database files lack the text value %q (is the scan reading them?)", when, text)
		}
	}
	check("open, in the WAL")
	if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	check("after a checkpoint")
	st.Close()
	check("after Close")
}

// Rotation: values sealed with key a open with ring [b a], which seals new
// ones with b; ReencryptSecrets moves every value to b; ring [b] alone
// then reads them all.
func TestSecretsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotate.db")
	a, b := genKey(t, "a"), genKey(t, "b")
	want := map[string]toolrun.EnvValue{
		"ONE":    {Value: marker("one"), Type: toolrun.VarSecret},
		"TWO":    {Value: marker("two"), Type: toolrun.VarSecret},
		"REGION": {Value: "eu-west-1", Type: toolrun.VarText},
	}
	userVal := toolrun.EnvValue{Value: marker("user"), Type: toolrun.VarSecret}
	st := open(t, path, &sqlite.Options{Keys: ring(t, a)})
	for k, v := range want {
		setEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	setEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", userVal)
	st.Close()

	st = open(t, path, &sqlite.Options{Keys: ring(t, b, a)})
	for k, v := range want {
		wantEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	want["THREE"] = toolrun.EnvValue{Value: marker("three"), Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "THREE", want["THREE"])
	if v := rawValue(t, st, "thread", "t1", "THREE"); !strings.HasPrefix(v, keyring.Prefix("b")) {
		t.Errorf("a value written with ring [b a] is %q, want it sealed with b", v)
	}
	if id, _ := keyring.KeyID(rawValue(t, st, "thread", "t1", "ONE")); id != "a" {
		t.Errorf("before ReencryptSecrets ONE is sealed with %q, want a", id)
	}
	n, err := st.ReencryptSecrets(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("ReencryptSecrets = %d, %v; want 3 (ONE, TWO, TOKEN)", n, err)
	}
	for _, name := range []string{"ONE", "TWO", "THREE"} {
		if id, _ := keyring.KeyID(rawValue(t, st, "thread", "t1", name)); id != "b" {
			t.Errorf("after ReencryptSecrets %s is sealed with %q, want b", name, id)
		}
	}
	if v := rawValue(t, st, "thread", "t1", "REGION"); v != "eu-west-1" {
		t.Errorf("ReencryptSecrets changed a text value to %q", v)
	}
	if n, err := st.ReencryptSecrets(t.Context()); err != nil || n != 0 {
		t.Errorf("second ReencryptSecrets = %d, %v; want 0", n, err)
	}
	st.Close()

	st = open(t, path, &sqlite.Options{Keys: ring(t, b)})
	m, err := st.ListEnv(t.Context(), toolrun.ScopeThread, "t1")
	if err != nil || !maps.Equal(m, want) {
		t.Errorf("ring [b] ListEnv = %v, %v; want %v", m, err, want)
	}
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", userVal)
}

// Many rows: ReencryptSecrets walks them in batches and rewrites each once.
func TestSecretsReencryptBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "many.db")
	a, b := genKey(t, "a"), genKey(t, "b")
	st := open(t, path, &sqlite.Options{Keys: ring(t, a)})
	const rows = 700
	for i := range rows {
		setEnv(t, st, toolrun.ScopeThread, "t"+strings.Repeat("x", i%7)+hex.EncodeToString([]byte{byte(i), byte(i >> 8)}), "K",
			toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret})
	}
	st.Close()
	st = open(t, path, &sqlite.Options{Keys: ring(t, b, a)})
	if n, err := st.ReencryptSecrets(t.Context()); err != nil || n != rows {
		t.Fatalf("ReencryptSecrets = %d, %v; want %d", n, err, rows)
	}
	var left int
	if err := st.DB().QueryRow(`SELECT count(*) FROM env WHERE value NOT LIKE 'toolrun:sealed:v1:b:%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows not sealed with b (%v)", left, err)
	}
}

// A ring without the value's key, or with another key under its id, gives
// the clear error: it wraps the sentinel and names the variable and the
// key id; no value is returned, and ListEnv fails as a whole.
func TestSecretsWrongKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wrong.db")
	st := open(t, path, &sqlite.Options{Keys: ring(t, genKey(t, "k1"))})
	setEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: "sk-123456", Type: toolrun.VarSecret})
	setEnv(t, st, toolrun.ScopeThread, "t1", "REGION", toolrun.EnvValue{Value: "eu", Type: toolrun.VarText})
	st.Close()

	for _, tt := range []struct {
		name    string
		keys    *keyring.Ring
		unknown bool
		says    []string
	}{
		{"another key under the id", ring(t, genKey(t, "k1")), false, []string{`key "k1"`, "authentication failed"}},
		{"no key with the id", ring(t, genKey(t, "k2")), true, []string{`key "k1"`, "k2"}},
		{"no keys", nil, true, []string{`key "k1"`, "no keys"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := open(t, path, &sqlite.Options{Keys: tt.keys})
			v, err := st.GetEnv(t.Context(), toolrun.ScopeThread, "t1", "API_KEY")
			if !errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, keyring.ErrUnknownKey) != tt.unknown {
				t.Fatalf("GetEnv = %+v, %v; want ErrDecrypt (ErrUnknownKey: %v)", v, err, tt.unknown)
			}
			if v != (toolrun.EnvValue{}) {
				t.Errorf("GetEnv returned %+v with the error", v)
			}
			for _, s := range append(tt.says, "thread/t1/API_KEY") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			m, err := st.ListEnv(t.Context(), toolrun.ScopeThread, "t1")
			if !errors.Is(err, keyring.ErrDecrypt) || m != nil || !strings.Contains(err.Error(), "thread/t1/API_KEY") {
				t.Errorf("ListEnv = %v, %v; want nil and the variable's error", m, err)
			}
			wantEnv(t, st, toolrun.ScopeThread, "t1", "REGION", toolrun.EnvValue{Value: "eu", Type: toolrun.VarText})
			if tt.keys != nil && tt.unknown {
				// (A value under the sealing key's id is not rewritten, so
				// not opened: the other cases do not reach the error.)
				n, err := st.ReencryptSecrets(t.Context())
				if n != 0 || !errors.Is(err, keyring.ErrDecrypt) || !strings.Contains(err.Error(), "thread/t1/API_KEY") {
					t.Errorf("ReencryptSecrets = %d, %v; want 0 and the variable's error", n, err)
				}
			}
		})
	}
}

// A sealed value copied to another row (owner, scope, name) or relabelled
// with another secret type does not decrypt there.
func TestSecretsBoundToRow(t *testing.T) {
	st := openTemp(t, &sqlite.Options{Keys: ring(t, genKey(t, "k1"))})
	setEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: "sk-123456", Type: toolrun.VarSecret})
	sealed := rawValue(t, st, "thread", "t1", "API_KEY")
	for _, row := range [][4]string{
		{"thread", "t2", "API_KEY", "secret"},
		{"user", "t1", "API_KEY", "secret"},
		{"thread", "t1", "OTHER", "secret"},
		{"thread", "t3", "API_KEY", ""},
	} {
		if _, err := st.DB().Exec(`INSERT INTO env (scope, owner_id, name, value, type) VALUES (?, ?, ?, ?, ?)`, row[0], row[1], row[2], sealed, row[3]); err != nil {
			t.Fatal(err)
		}
		_, err := st.GetEnv(t.Context(), toolrun.EnvScope(row[0]), row[1], row[2])
		if !errors.Is(err, keyring.ErrDecrypt) || errors.Is(err, keyring.ErrUnknownKey) {
			t.Errorf("the value copied to %v: %v; want ErrDecrypt", row, err)
		}
	}
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: "sk-123456", Type: toolrun.VarSecret})
}

// Without keys, a secret is refused with an error that names the variable
// and the fix, and nothing is stored; text values are stored.
func TestSecretsWithoutKey(t *testing.T) {
	for _, opts := range []*sqlite.Options{nil, {}} {
		path := filepath.Join(t.TempDir(), "nokey.db")
		st := open(t, path, opts)
		for _, v := range []toolrun.EnvValue{{Value: "sk-123456", Type: toolrun.VarSecret}, {Value: "sk-123456"}} {
			err := st.SetEnv(t.Context(), toolrun.ScopeThread, "t1", "API_KEY", v)
			if !errors.Is(err, keyring.ErrNoKey) {
				t.Fatalf("SetEnv of %+v without keys: %v; want keyring.ErrNoKey", v, err)
			}
			for _, s := range []string{"thread/t1/API_KEY", "Options.Keys", "PlaintextSecrets"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		}
		if _, err := st.GetEnv(t.Context(), toolrun.ScopeThread, "t1", "API_KEY"); !errors.Is(err, toolrun.ErrNotFound) {
			t.Errorf("a refused secret was stored: %v", err)
		}
		setEnv(t, st, toolrun.ScopeThread, "t1", "REGION", toolrun.EnvValue{Value: "eu", Type: toolrun.VarText})
		wantEnv(t, st, toolrun.ScopeThread, "t1", "REGION", toolrun.EnvValue{Value: "eu", Type: toolrun.VarText})
		if _, err := st.ReencryptSecrets(t.Context()); !errors.Is(err, keyring.ErrNoKey) {
			t.Errorf("ReencryptSecrets without keys: %v; want keyring.ErrNoKey", err)
		}
		st.Close()
		if bytes.Contains(fileBytes(t, path), []byte("sk-123456")) {
			t.Error("the refused secret reached the file")
		}
	}
}

// PlaintextSecrets stores secrets as given, as builds before encryption
// did; it cannot be combined with Keys.
func TestSecretsPlaintextOptOut(t *testing.T) {
	st := openTemp(t, &sqlite.Options{PlaintextSecrets: true})
	v := toolrun.EnvValue{Value: "sk-plain-123", Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", v)
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", v)
	if raw := rawValue(t, st, "thread", "t1", "API_KEY"); raw != v.Value {
		t.Errorf("stored %q, want the plain value", raw)
	}
	// A secret that looks sealed would not read back as itself.
	if err := st.SetEnv(t.Context(), toolrun.ScopeThread, "t1", "X", toolrun.EnvValue{Value: "toolrun:sealed:v1:k:abc", Type: toolrun.VarSecret}); err == nil {
		t.Error("PlaintextSecrets stored a secret that looks sealed")
	}
	// A text value may look like anything.
	odd := toolrun.EnvValue{Value: "toolrun:sealed:v1:k:abc", Type: toolrun.VarText}
	setEnv(t, st, toolrun.ScopeThread, "t1", "ODD", odd)
	wantEnv(t, st, toolrun.ScopeThread, "t1", "ODD", odd)

	_, err := sqlite.Open(filepath.Join(t.TempDir(), "both.db"), &sqlite.Options{Keys: ring(t, genKey(t, "k")), PlaintextSecrets: true})
	if err == nil || !strings.Contains(err.Error(), "PlaintextSecrets") {
		t.Errorf("Open with Keys and PlaintextSecrets: %v; want a refusal", err)
	}
	db, err := driver.Open(filepath.Join(t.TempDir(), "new.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlite.New(db, &sqlite.Options{Keys: ring(t, genKey(t, "k")), PlaintextSecrets: true}); err == nil {
		t.Error("New accepted Keys and PlaintextSecrets")
	}
}

// New takes Keys too.
func TestSecretsNew(t *testing.T) {
	db, err := driver.Open(filepath.Join(t.TempDir(), "own.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlite.New(db, &sqlite.Options{Keys: ring(t, genKey(t, "k1"))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := toolrun.EnvValue{Value: "sk-123456", Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeUser, "u", "K", v)
	wantEnv(t, st, toolrun.ScopeUser, "u", "K", v)
	if raw := rawValue(t, st, "user", "u", "K"); !keyring.IsSealed(raw) {
		t.Errorf("New's store stored %q", raw)
	}
}

// A database written by a build before encryption (plain secrets in the
// value column) opens with keys: its secrets stay readable, new ones are
// sealed, and ReencryptSecrets seals the old ones, after which the files no
// longer hold them.
func TestSecretsUpgradePlaintextDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old, legacyUser, text := marker("sk-old"), marker("sk-olduser"), marker("text")
	// What the previous build's Open (schema version 1) and SetEnv left in
	// the file.
	db, err := driver.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range [][]any{
		{`PRAGMA journal_mode=WAL`},
		{`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`},
		{sqlite.Migration1},
		{`INSERT INTO schema_version (version, applied_at) VALUES (1, 0)`},
		{`INSERT INTO env (scope, owner_id, name, value, type) VALUES (?, ?, ?, ?, ?)`, "thread", "t1", "API_KEY", old, "secret"},
		{`INSERT INTO env (scope, owner_id, name, value, type) VALUES (?, ?, ?, ?, ?)`, "user", "u1", "TOKEN", legacyUser, ""},
		{`INSERT INTO env (scope, owner_id, name, value, type) VALUES (?, ?, ?, ?, ?)`, "thread", "t1", "REGION", text, "text"},
	} {
		if _, err := db.Exec(q[0].(string), q[1:]...); err != nil {
			t.Fatalf("%s: %v", q[0], err)
		}
	}
	db.Close()
	if raw := fileBytes(t, path); !bytes.Contains(raw, []byte(old)) || !bytes.Contains(raw, []byte(legacyUser)) {
		t.Fatal("the old database does not hold its plain secrets (the scan is wrong)")
	}

	st := open(t, path, &sqlite.Options{Keys: ring(t, genKey(t, "k1"))})
	var version int
	if err := st.DB().QueryRow(`SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != sqlite.SchemaVersion {
		t.Errorf("schema version after the upgrade %d, %v; want %d", version, err, sqlite.SchemaVersion)
	}
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: old, Type: toolrun.VarSecret})
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", toolrun.EnvValue{Value: legacyUser})
	newer := toolrun.EnvValue{Value: marker("sk-new"), Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "NEW", newer)
	m, err := st.ListEnv(t.Context(), toolrun.ScopeThread, "t1")
	want := map[string]toolrun.EnvValue{"API_KEY": {Value: old, Type: toolrun.VarSecret}, "REGION": {Value: text, Type: toolrun.VarText}, "NEW": newer}
	if err != nil || !maps.Equal(m, want) {
		t.Errorf("ListEnv of a mixed database = %v, %v; want %v", m, err, want)
	}
	n, err := st.ReencryptSecrets(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("ReencryptSecrets = %d, %v; want 2 (the two plain secrets)", n, err)
	}
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: old, Type: toolrun.VarSecret})
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", toolrun.EnvValue{Value: legacyUser})
	check := func(when string) {
		raw := fileBytes(t, path)
		for _, s := range []string{old, legacyUser, newer.Value} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s: the files still hold the secret %q", when, s)
			}
		}
		if !bytes.Contains(raw, []byte(text)) {
			t.Errorf("%s: the text value is gone from the files", when)
		}
	}
	check("after ReencryptSecrets")
	st.Close()
	check("after Close")
}
