package partialjson

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFind(t *testing.T) {
	tests := []struct {
		name, text, key string
		want            string
		state           State
	}{
		{"empty", ``, "a", "", Missing},
		{"open brace", `{`, "a", "", Missing},
		{"partial key", `{"descr`, "description", "", Missing},
		{"key done", `{"description"`, "description", "", Pending},
		{"colon", `{"description":`, "description", "", Pending},
		{"value open", `{"description": "writ`, "description", "", Pending},
		{"value done", `{"description": "writing a.txt"`, "description", "writing a.txt", Complete},
		{"value then more", `{"description":"x","content":"..`, "description", "x", Complete},
		{"other key pending", `{"description":"x","content":"..`, "content", "", Pending},
		{"complete object", `{"a":"1","b":"2"}`, "b", "2", Complete},
		{"whitespace", " \n\t{ \"a\" \r\n : \t \"v\" \n}", "a", "v", Complete},
		{"escaped quote", `{"a":"say \"hi\""`, "a", `say "hi"`, Complete},
		{"escaped quote open", `{"a":"say \"hi\"`, "a", "", Pending},
		{"escaped backslash", `{"a":"c:\\dir\\"`, "a", `c:\dir\`, Complete},
		{"backslash then quote", `{"a":"x\\\"y"}`, "a", `x\"y`, Complete},
		{"control escapes", `{"a":"\b\f\n\r\t\/"}`, "a", "\b\f\n\r\t/", Complete},
		{"unicode escape", `{"a":"caf\u00e9"}`, "a", "café", Complete},
		{"surrogate pair", `{"a":"\ud83d\ude00!"}`, "a", "😀!", Complete},
		{"lone high surrogate", `{"a":"\ud83dx"}`, "a", "\uFFFDx", Complete},
		{"lone low surrogate", `{"a":"\ude00"}`, "a", "\uFFFD", Complete},
		{"high then high", `{"a":"\ud83d\ud83d\ude00"}`, "a", "\uFFFD😀", Complete},
		{"raw utf8", `{"a":"日本語"}`, "a", "日本語", Complete},
		{"escaped key", `{"\u0061":"v"}`, "a", "v", Complete},
		{"nested same key", `{"o":{"a":"inner"},"a":"outer"}`, "a", "outer", Complete},
		{"nested only", `{"o":{"a":"inner"}}`, "a", "", Missing},
		{"nested in array", `{"list":[{"a":"x"},"a"],"b":"y"}`, "a", "", Missing},
		{"nested partial", `{"o":{"a":"inner"`, "a", "", Missing},
		{"brace in string", `{"s":"}{][","a":"v"}`, "a", "v", Complete},
		{"brace in nested string", `{"o":{"s":"}\"}"},"a":"v"}`, "a", "v", Complete},
		{"number", `{"a":12,"b":"x"}`, "a", "", NotString},
		{"number partial", `{"a":1`, "a", "", NotString},
		{"bool", `{"a":true}`, "a", "", NotString},
		{"null", `{"a":null}`, "a", "", NotString},
		{"object value", `{"a":{"b":"c"}}`, "a", "", NotString},
		{"array value", `{"a":["x"]}`, "a", "", NotString},
		{"after number", `{"n":-1.5e3,"a":"v"}`, "a", "v", Complete},
		{"after literal", `{"n":false ,"a":"v"}`, "a", "v", Complete},
		{"duplicate last wins", `{"a":"1","a":"2"}`, "a", "2", Complete},
		{"duplicate pending", `{"a":"1","a":"2`, "a", "", Pending},
		{"duplicate not string", `{"a":"1","a":2}`, "a", "", NotString},
		{"not an object", `["a","b"]`, "a", "", Missing},
		{"string top level", `"a"`, "a", "", Missing},
		{"garbage after key", `{"a" x "v"}`, "a", "", Missing},
		{"found before garbage", `{"a":"v" x`, "a", "v", Complete},
		{"empty value", `{"a":""}`, "a", "", Complete},
		{"empty key", `{"":"v"}`, "", "v", Complete},
		{"case sensitive", `{"A":"v"}`, "a", "", Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := Find(tt.text, tt.key)
			if got != tt.want || st != tt.state {
				t.Errorf("Find(%q, %q) = %q, %v; want %q, %v", tt.text, tt.key, got, st, tt.want, tt.state)
			}
			v, ok := TopLevelString(tt.text, tt.key)
			if ok != (tt.state == Complete) || v != tt.want {
				t.Errorf("TopLevelString(%q, %q) = %q, %v", tt.text, tt.key, v, ok)
			}
			// The same text fed one byte at a time, to a scanner that
			// records every key, gives the same answer.
			var s Scanner
			s.Limit = -1
			for i := 0; i < len(tt.text); i++ {
				s.Feed(tt.text[i : i+1])
			}
			got, st = s.Value(tt.key)
			if got != tt.want || st != tt.state {
				t.Errorf("Scanner byte-wise %q, %q = %q, %v; want %q, %v", tt.text, tt.key, got, st, tt.want, tt.state)
			}
		})
	}
}

// TestScannerProgress follows a stream the way the runtime does and checks
// the value becomes available exactly when its closing quote arrives.
func TestScannerProgress(t *testing.T) {
	deltas := []string{`{"desc`, `ription":"wri`, `ting a.txt`, `\`, `"!`, `","content":"x`, `yz"}`}
	var s Scanner
	var got []string
	for _, d := range deltas {
		s.Feed(d)
		v, st := s.Value("description")
		got = append(got, fmt.Sprintf("%v:%s", st, v))
	}
	want := []string{"missing:", "pending:", "pending:", "pending:", "pending:", `complete:writing a.txt"!`, `complete:writing a.txt"!`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if v, st := s.Value("content"); v != "xyz" || st != Complete {
		t.Errorf("content = %q, %v", v, st)
	}
}

func TestScannerSplitRunes(t *testing.T) {
	text := `{"a":"é😀\u00e9\ud83d\ude00"}`
	for size := 1; size <= 7; size++ {
		var s Scanner
		for i := 0; i < len(text); i += size {
			s.Feed(text[i:min(i+size, len(text))])
		}
		if v, st := s.Value("a"); v != "é😀é😀" || st != Complete {
			t.Errorf("size %d: %q, %v", size, v, st)
		}
	}
}

func TestScannerLimit(t *testing.T) {
	long := strings.Repeat("x", DefaultLimit)
	var s Scanner
	s.Feed(`{"early":"yes","late":"`)
	s.Feed(long)
	if !s.Truncated() {
		t.Fatal("not truncated")
	}
	s.Feed(`","after":"v"}`)
	if v, st := s.Value("early"); v != "yes" || st != Complete {
		t.Errorf("early = %q, %v; want found before the limit", v, st)
	}
	if _, st := s.Value("late"); st != Missing {
		t.Errorf("late = %v; want missing", st)
	}
	if _, st := s.Value("after"); st != Missing {
		t.Errorf("after = %v; want missing", st)
	}
	if s.Len() != DefaultLimit {
		t.Errorf("Len = %d", s.Len())
	}

	// Exactly at the limit is still scanned.
	text := `{"a":"` + strings.Repeat("y", 10) + `"}`
	s = Scanner{Limit: len(text)}
	s.Feed(text)
	if _, ok := s.Value("a"); ok != Complete || s.Truncated() {
		t.Errorf("at limit: %v truncated=%v", ok, s.Truncated())
	}
	s = Scanner{Limit: len(text) - 3} // closing quote cut off
	s.Feed(text)
	if _, ok := s.Value("a"); ok != Missing || !s.Truncated() {
		t.Errorf("over limit: %v truncated=%v", ok, s.Truncated())
	}
}

func TestStateString(t *testing.T) {
	for st, want := range map[State]string{Missing: "missing", Pending: "pending", Complete: "complete", NotString: "not_string", 9: "unknown"} {
		if st.String() != want {
			t.Errorf("%d: %q", st, st.String())
		}
	}
}

// check compares Find with encoding/json for a complete text.
func check(t *testing.T, text, key string) {
	got, ok := TopLevelString(text, key)
	var s Scanner
	s.Limit = -1
	half := len(text) / 2
	s.Feed(text[:half])
	s.Feed(text[half:])
	sv, sst := s.Value(key)
	if sst == Complete != ok || (ok && sv != got) {
		t.Errorf("scanner %q disagrees with Find: %q %v vs %q %v", text, sv, sst, got, ok)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return
	}
	want, wantOK := m[key].(string)
	if ok != wantOK || got != want {
		t.Errorf("TopLevelString(%q, %q) = %q, %v; encoding/json says %q, %v", text, key, got, ok, want, wantOK)
	}
}

func FuzzTopLevelString(f *testing.F) {
	seeds := []struct{ text, key string }{
		{`{"a":"b"}`, "a"},
		{`{"description":"writ`, "description"},
		{`{"o":{"a":"x"},"a":"y"}`, "a"},
		{`{"a":"\ud83d\ude00\"\\"}`, "a"},
		{`{"\u0061":"v","a":1}`, "a"},
		{`{"a":"\ud800\udbff\udc00"}`, "a"},
		{"{\"a\":\"\xff\xfe\"}", "a"},
		{"{\"\xff\":\"v\"}", "\uFFFD"},
		{`{"a":[{"a":"x"}],"b":"}"}`, "b"},
		{`{"a":"1","a":"2"}`, "a"},
		{`  {"a" : "x" }  `, "a"},
		{`{"a":"x"} {"a":"y"}`, "a"},
	}
	for _, s := range seeds {
		f.Add(s.text, s.key)
	}
	f.Fuzz(func(t *testing.T, text, key string) {
		check(t, text, key)
		// Also ask for the first top-level key encoding/json sees, so
		// matches are exercised and not only misses.
		var m map[string]any
		if json.Unmarshal([]byte(text), &m) == nil {
			for k := range m {
				check(t, text, k)
			}
		}
	})
}

func TestAgainstEncodingJSON(t *testing.T) {
	values := []any{
		"plain", "quo\"te", `back\slash`, "nl\n", "日本", "😀", "\u2028", "", "<&>",
		1, 2.5, true, nil, []any{"a", map[string]any{"a": "deep"}}, map[string]any{"a": "x", "b": []any{"}"}},
	}
	for i, v := range values {
		m := map[string]any{"a": v, "z": "last", "m": map[string]any{"a": "nested"}}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		check(t, string(b), "a")
		check(t, string(b), "z")
		check(t, string(b), "m")
		indented, _ := json.MarshalIndent(m, "", "  ")
		check(t, string(indented), "a")
		if !utf8.Valid(b) {
			t.Errorf("%d: invalid utf8", i)
		}
	}
}

func benchText() string {
	return `{"path":"src/main.go","options":{"mode":"overwrite","tags":["a","b"]},"description":"` +
		strings.Repeat(`writing \"file\" `, 40) + `","content":"` + strings.Repeat("package main\\n", 200) + `"}`
}

func BenchmarkTopLevelString(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, ok := TopLevelString(text, "description"); !ok {
			b.Fatal("not found")
		}
	}
}

// BenchmarkScannerFeed follows a stream in 16-byte deltas, asking for the
// key after every delta, as the runtime does.
func BenchmarkScannerFeed(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		var s Scanner
		for i := 0; i < len(text); i += 16 {
			s.Feed(text[i:min(i+16, len(text))])
			s.Value("description")
		}
	}
}

// BenchmarkRescan is the naive alternative to a Scanner: rescanning the
// whole accumulated text after every delta.
func BenchmarkRescan(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		for i := 0; i < len(text); i += 16 {
			TopLevelString(text[:min(i+16, len(text))], "description")
		}
	}
}
