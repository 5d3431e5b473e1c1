package argdecode

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestUnquote(t *testing.T) {
	for _, s := range []string{
		`plain`, `a\"b`, `\\`, `\/`, `\b\f\n\r\t`, `\u00e9`, `\u00E9`, `\ud83d\ude00`, `\ud83d`, `\ud83dx`,
		`\ude00`, `\ud83d\u0041`, `\ud83d\ud83d\ude00`, "\xff", "a\xc3", `\u12`, `\q`, `\'`, "tab\there", `end\`,
	} {
		checkString(t, s)
	}
}

func checkString(t *testing.T, s string) {
	t.Helper()
	var want string
	err := json.Unmarshal([]byte(`"`+s+`"`), &want)
	d := decoder{s: `"` + s + `"`}
	got, ok := d.str()
	ok = ok && d.i == len(d.s)
	if ok != (err == nil) || ok && got != want {
		t.Fatalf("%q: got %q %v, encoding/json %q %v", s, got, ok, want, err)
	}
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`a\"b`, `\ud83d\ude00`, `\ud83d`, "\xff", `\u00e9x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, `"`) {
			return
		}
		checkString(t, s)
	})
}

// FuzzDecode: on any text, Decode never panics, never accepts invalid JSON,
// and, where the executor would use it, gives what the general route gives.
