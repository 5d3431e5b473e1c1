package postgres_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/store/keyring"
	"github.com/toolrun/toolrun/store/postgres"
)

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

// openIn opens a store on schema with opts (Schema is set here).
func openIn(t *testing.T, schema string, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.Schema = schema
	st, err := postgres.Open(t.Context(), dbURL(t), &opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
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

// rawValue reads the value column as text.
func rawValue(t *testing.T, st *postgres.Store, scope, owner, name string) string {
	t.Helper()
	var v string
	if err := st.Pool().QueryRow(t.Context(), `SELECT value::text FROM env WHERE scope = $1 AND owner_id = $2 AND name = $3`, scope, owner, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// tableDump returns the env table as pg_dump writes its data (COPY … TO
// STDOUT) and as whole rows cast to text.
func tableDump(t *testing.T, pool *pgxpool.Pool) []byte {
	t.Helper()
	conn, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var out bytes.Buffer
	if _, err := conn.Conn().PgConn().CopyTo(t.Context(), &out, `COPY env TO STDOUT`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(t.Context(), `SELECT e::text FROM env e`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out.WriteString(s + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// serverFiles returns the env table's heap file and the current WAL
// segment as the server keeps them on disk (after a CHECKPOINT), or nil
// when the role may not read server files.
func serverFiles(t *testing.T, pool *pgxpool.Pool) []byte {
	t.Helper()
	ctx := t.Context()
	var heap, wal []byte
	err := pool.QueryRow(ctx, `SELECT pg_read_binary_file(pg_relation_filepath('env'))`).Scan(&heap)
	if err == nil {
		_, err = pool.Exec(ctx, `CHECKPOINT`)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT pg_read_binary_file(pg_relation_filepath('env'))`).Scan(&heap)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT pg_read_binary_file('pg_wal/' || pg_walfile_name(pg_current_wal_lsn()))`).Scan(&wal)
	}
	if err != nil {
		t.Logf("not scanning the server's files: %v", err)
		return nil
	}
	return append(heap, wal...)
}

// The table, as selected, as dumped, and on the server's disk, never holds
// a secret's bytes, while a text value is stored as given; GetEnv and
// ListEnv return the secrets.
func TestSecretsEncryptedAtRest(t *testing.T) {
	st := openIn(t, newSchema(t), postgres.Options{Keys: ring(t, genKey(t, "k1"))})
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
	for what, raw := range map[string][]byte{"the dump": tableDump(t, st.Pool()), "the server's files": serverFiles(t, st.Pool())} {
		if raw == nil {
			continue
		}
		for _, s := range []string{secret, userSecret, untyped} {
			if bytes.Contains(raw, []byte(s)) {
				t.Errorf("%s contains the secret %q", what, s)
			}
		}
		if !bytes.Contains(raw, []byte(text)) {
			t.Errorf("%s lacks the text value %q (is the scan reading it?)", what, text)
		}
	}
}

// Rotation: values sealed with key a open with ring [b a], which seals new
// ones with b; ReencryptSecrets moves every value to b; ring [b] alone
// then reads them all.
func TestSecretsRotation(t *testing.T) {
	schema := newSchema(t)
	a, b := genKey(t, "a"), genKey(t, "b")
	want := map[string]toolrun.EnvValue{
		"ONE":    {Value: marker("one"), Type: toolrun.VarSecret},
		"TWO":    {Value: marker("two"), Type: toolrun.VarSecret},
		"REGION": {Value: "eu-west-1", Type: toolrun.VarText},
	}
	userVal := toolrun.EnvValue{Value: marker("user"), Type: toolrun.VarSecret}
	st := openIn(t, schema, postgres.Options{Keys: ring(t, a)})
	for k, v := range want {
		setEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	setEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", userVal)
	st.Close()

	st = openIn(t, schema, postgres.Options{Keys: ring(t, b, a)})
	for k, v := range want {
		wantEnv(t, st, toolrun.ScopeThread, "t1", k, v)
	}
	want["THREE"] = toolrun.EnvValue{Value: marker("three"), Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "THREE", want["THREE"])
	if v := rawValue(t, st, "thread", "t1", "THREE"); !strings.HasPrefix(v, keyring.Prefix("b")) {
		t.Errorf("a value written with ring [b a] is %q, want it sealed with b", v)
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

	st = openIn(t, schema, postgres.Options{Keys: ring(t, b)})
	m, err := st.ListEnv(t.Context(), toolrun.ScopeThread, "t1")
	if err != nil || !maps.Equal(m, want) {
		t.Errorf("ring [b] ListEnv = %v, %v; want %v", m, err, want)
	}
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", userVal)
}

// Many rows: ReencryptSecrets walks them in batches and rewrites each once.
func TestSecretsReencryptBatches(t *testing.T) {
	schema := newSchema(t)
	a, b := genKey(t, "a"), genKey(t, "b")
	st := openIn(t, schema, postgres.Options{Keys: ring(t, a)})
	const rows = 600
	for i := range rows {
		setEnv(t, st, toolrun.ScopeThread, "t"+strings.Repeat("x", i%5)+hex.EncodeToString([]byte{byte(i), byte(i >> 8)}), "K",
			toolrun.EnvValue{Value: "v", Type: toolrun.VarSecret})
	}
	st = openIn(t, schema, postgres.Options{Keys: ring(t, b, a)})
	if n, err := st.ReencryptSecrets(t.Context()); err != nil || n != rows {
		t.Fatalf("ReencryptSecrets = %d, %v; want %d", n, err, rows)
	}
	var left int
	if err := st.Pool().QueryRow(t.Context(), `SELECT count(*) FROM env WHERE value NOT LIKE 'toolrun:sealed:v1:b:%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rows not sealed with b (%v)", left, err)
	}
}

// A ring without the value's key, or with another key under its id, gives
// the clear error: it wraps the sentinel and names the variable and the
// key id; no value is returned, and ListEnv fails as a whole.
func TestSecretsWrongKey(t *testing.T) {
	schema := newSchema(t)
	st := openIn(t, schema, postgres.Options{Keys: ring(t, genKey(t, "k1"))})
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
			st := openIn(t, schema, postgres.Options{Keys: tt.keys})
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
	st := openIn(t, newSchema(t), postgres.Options{Keys: ring(t, genKey(t, "k1"))})
	setEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: "sk-123456", Type: toolrun.VarSecret})
	sealed := rawValue(t, st, "thread", "t1", "API_KEY")
	for _, row := range [][4]string{
		{"thread", "t2", "API_KEY", "secret"},
		{"user", "t1", "API_KEY", "secret"},
		{"thread", "t1", "OTHER", "secret"},
		{"thread", "t3", "API_KEY", ""},
	} {
		if _, err := st.Pool().Exec(t.Context(), `INSERT INTO env (scope, owner_id, name, value, type) VALUES ($1, $2, $3, $4, $5)`, row[0], row[1], row[2], sealed, row[3]); err != nil {
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
	st := openIn(t, newSchema(t), postgres.Options{})
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
}

// PlaintextSecrets stores secrets as given, as builds before encryption
// did; it cannot be combined with Keys.
func TestSecretsPlaintextOptOut(t *testing.T) {
	st := openIn(t, newSchema(t), postgres.Options{PlaintextSecrets: true})
	v := toolrun.EnvValue{Value: "sk-plain-123", Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", v)
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", v)
	if raw := rawValue(t, st, "thread", "t1", "API_KEY"); raw != v.Value {
		t.Errorf("stored %q, want the plain value", raw)
	}
	if err := st.SetEnv(t.Context(), toolrun.ScopeThread, "t1", "X", toolrun.EnvValue{Value: "toolrun:sealed:v1:k:abc", Type: toolrun.VarSecret}); err == nil {
		t.Error("PlaintextSecrets stored a secret that looks sealed")
	}
	_, err := postgres.Open(t.Context(), dbURL(t), &postgres.Options{Schema: newSchema(t), Keys: ring(t, genKey(t, "k")), PlaintextSecrets: true})
	if err == nil || !strings.Contains(err.Error(), "PlaintextSecrets") {
		t.Errorf("Open with Keys and PlaintextSecrets: %v; want a refusal", err)
	}
	if _, err := postgres.New(t.Context(), st.Pool(), &postgres.Options{Keys: ring(t, genKey(t, "k")), PlaintextSecrets: true}); err == nil {
		t.Error("New accepted Keys and PlaintextSecrets")
	}
}

// Stores bound to a lease (the runtime's turns write through them) and
// stores from New encrypt with the same keys.
func TestSecretsLeaseAndNew(t *testing.T) {
	keys := ring(t, genKey(t, "k1"))
	st := openIn(t, newSchema(t), postgres.Options{Keys: keys})
	ctx := t.Context()
	lease, err := st.AcquireLease(ctx, "t1", "me", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	leased := st.WithLease(lease)
	v := toolrun.EnvValue{Value: "sk-leased-1", Type: toolrun.VarSecret}
	setEnv(t, leased, toolrun.ScopeThread, "t1", "K", v)
	wantEnv(t, leased, toolrun.ScopeThread, "t1", "K", v)
	locked, release, err := st.AcquireThread(ctx, "t2", "me")
	if err != nil {
		t.Fatal(err)
	}
	setEnv(t, locked, toolrun.ScopeThread, "t2", "K", v)
	if err := release(ctx); err != nil {
		t.Fatal(err)
	}
	nst, err := postgres.New(ctx, st.Pool(), &postgres.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	setEnv(t, nst, toolrun.ScopeUser, "u", "K", v)
	wantEnv(t, nst, toolrun.ScopeThread, "t2", "K", v)
	for _, row := range [][2]string{{"thread", "t1"}, {"thread", "t2"}, {"user", "u"}} {
		if raw := rawValue(t, st, row[0], row[1], "K"); !keyring.IsSealed(raw) {
			t.Errorf("%v stored %q", row, raw)
		}
	}
}

// A database written by a build before encryption (plain secrets in the
// value column, schema version 2) opens with keys: its secrets stay
// readable, new ones are sealed, and ReencryptSecrets seals the old ones.
func TestSecretsUpgradePlaintextDatabase(t *testing.T) {
	url, schema := dbURL(t), newSchema(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	old, legacyUser, text := marker("sk-old"), marker("sk-olduser"), marker("text")
	for _, q := range []string{
		`CREATE SCHEMA ` + pgx.Identifier{schema}.Sanitize(),
		`SET search_path = ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		postgres.Migration1,
		postgres.Migration2,
		`INSERT INTO schema_version (version) VALUES (1), (2)`,
		// What the previous build's SetEnv wrote.
		`INSERT INTO env (scope, owner_id, name, value, type) VALUES
			('thread', 't1', 'API_KEY', '` + old + `', 'secret'),
			('user', 'u1', 'TOKEN', '` + legacyUser + `', ''),
			('thread', 't1', 'REGION', '` + text + `', 'text')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st := openIn(t, schema, postgres.Options{Keys: ring(t, genKey(t, "k1"))})
	var version int
	if err := st.Pool().QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&version); err != nil || version != postgres.SchemaVersion {
		t.Errorf("schema version after the upgrade %d, %v; want %d", version, err, postgres.SchemaVersion)
	}
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: old, Type: toolrun.VarSecret})
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", toolrun.EnvValue{Value: legacyUser})
	newer := toolrun.EnvValue{Value: marker("sk-new"), Type: toolrun.VarSecret}
	setEnv(t, st, toolrun.ScopeThread, "t1", "NEW", newer)
	m, err := st.ListEnv(ctx, toolrun.ScopeThread, "t1")
	want := map[string]toolrun.EnvValue{"API_KEY": {Value: old, Type: toolrun.VarSecret}, "REGION": {Value: text, Type: toolrun.VarText}, "NEW": newer}
	if err != nil || !maps.Equal(m, want) {
		t.Errorf("ListEnv of a mixed database = %v, %v; want %v", m, err, want)
	}
	n, err := st.ReencryptSecrets(ctx)
	if err != nil || n != 2 {
		t.Fatalf("ReencryptSecrets = %d, %v; want 2 (the two plain secrets)", n, err)
	}
	wantEnv(t, st, toolrun.ScopeThread, "t1", "API_KEY", toolrun.EnvValue{Value: old, Type: toolrun.VarSecret})
	wantEnv(t, st, toolrun.ScopeUser, "u1", "TOKEN", toolrun.EnvValue{Value: legacyUser})
	raw := tableDump(t, st.Pool())
	for _, s := range []string{old, legacyUser, newer.Value} {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("the table still holds the secret %q", s)
		}
	}
	if !bytes.Contains(raw, []byte(text)) {
		t.Error("the text value is gone from the table")
	}
}
