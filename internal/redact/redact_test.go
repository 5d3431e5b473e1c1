package redact

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// naiveRedact is the reference the Redactor is checked against: it finds
// every occurrence of every form of every secret with strings.Index, and
// of every base64, base32 and hex form with line breaks between its
// characters (see lineBreakAt) by trying each place, merges the ranges that overlap or
// touch, and writes for each merged range the names of the secrets of the
// occurrences not inside another one, each once, in order of start, and
// then the line breaks inside the broken ones among those occurrences.
func naiveRedact(secrets []Secret, text string) string {
	type occ struct {
		start, end int
		name       string
		broken     bool
	}
	owner, brokenOwner := map[string]string{}, map[string]string{}
	var order, brokenOrder []string
	for _, s := range secrets {
		if len(s.Value) < MinLen {
			continue
		}
		for _, f := range allForms(s.Value) {
			if _, ok := owner[f]; !ok {
				owner[f] = s.Name
				order = append(order, f)
			}
		}
		for _, f := range breakableForms(s.Value) {
			if _, ok := brokenOwner[f]; !ok {
				brokenOwner[f] = s.Name
				brokenOrder = append(brokenOrder, f)
			}
		}
	}
	var all []occ
	for _, f := range order {
		for i := 0; i+len(f) <= len(text); i++ {
			k := strings.Index(text[i:], f)
			if k < 0 {
				break
			}
			i += k
			all = append(all, occ{i, i + len(f), owner[f], false})
		}
	}
	for _, f := range brokenOrder {
		for i := range len(text) {
			if end := brokenAt(text, i, f); end >= 0 {
				all = append(all, occ{i, end, brokenOwner[f], true})
			}
		}
	}
	// Sorted by start and, for one start, longest first, an occurrence lies
	// inside another exactly when one before it ends at or after its end;
	// of two with the same range, the broken one counts.
	slices.SortFunc(all, func(a, b occ) int {
		if a.start != b.start {
			return a.start - b.start
		}
		if a.end != b.end {
			return b.end - a.end
		}
		if a.broken != b.broken {
			if a.broken {
				return -1
			}
			return 1
		}
		return 0
	})
	var kept []occ
	maxEnd := -1
	for _, o := range all {
		if o.end > maxEnd {
			kept = append(kept, o)
			maxEnd = o.end
		}
	}
	var b strings.Builder
	last := 0
	for k := 0; k < len(kept); {
		start, end := kept[k].start, kept[k].end
		var names []string
		covered := map[int]bool{}
		for ; k < len(kept) && kept[k].start <= end; k++ {
			end = max(end, kept[k].end)
			if !slices.Contains(names, kept[k].name) {
				names = append(names, kept[k].name)
			}
			if kept[k].broken {
				for x := kept[k].start; x < kept[k].end; x++ {
					covered[x] = true
				}
			}
		}
		b.WriteString(text[last:start])
		for _, n := range names {
			b.WriteString("[REDACTED:" + n + "]")
		}
		for x := start; x < end; x++ {
			if covered[x] {
				if n := lineBreakAt(text, x); n > 0 {
					b.WriteString(text[x : x+n])
					x += n - 1
				}
			}
		}
		last = end
	}
	b.WriteString(text[last:])
	return b.String()
}

// lineBreaks are the ways of writing a newline the Redactor knows, as
// written in text and in a JSON string.
var lineBreaks = []string{"\r\n", "\n", `\r\n`, `\n`}

// The stretches a line break may be cut from: newlines as text writes
// them, spaces and tabs; or newlines as a JSON string writes them, spaces,
// tabs and `\t`.
var (
	rawStretch     = regexp.MustCompile(`^(?:[ \t]|\r?\n)+`)
	escapedStretch = regexp.MustCompile(`^(?:[ \t]|\\t|(?:\\r)?\\n)+`)
)

// lineBreakAt returns the length of the line break at text[x:], or 0: the
// longest stretch of one kind there, if it holds a newline, with at most 64
// bytes before its last newline (spaces at the end of a line, blank lines)
// and at most 64 after it (the indentation of the next line).
func lineBreakAt(text string, x int) int {
	for _, k := range []struct {
		re     *regexp.Regexp
		cr, lf string
	}{{rawStretch, "\r", "\n"}, {escapedStretch, `\r`, `\n`}} {
		m := k.re.FindString(text[x:])
		last := strings.LastIndex(m, k.lf)
		if last < 0 {
			continue
		}
		after := len(m) - last - len(k.lf)
		if strings.HasSuffix(m[:last], k.cr) {
			last -= len(k.cr)
		}
		if last <= 64 && after <= 64 {
			return len(m)
		}
	}
	return 0
}

// isEncodingChar reports whether c is a character of base64 (either
// alphabet), base32 or hex.
func isEncodingChar(c byte) bool {
	return isAlnum(c) || strings.IndexByte("+/-_", c) >= 0
}

// brokenAt returns the end of the occurrence of form that starts at
// text[i] with one or more line breaks between its characters, each
// between two encoding characters, or -1. An occurrence does not start
// inside such a break: the n of a `\n`, the r of a `\r\n` or the t of a
// `\t` in one is not a character of the encoded text.
func brokenAt(text string, i int, form string) int {
	inner := func(j int) int { // the length of the break between two encoding characters at j, or 0
		if n := lineBreakAt(text, j); n > 0 && j > 0 && isEncodingChar(text[j-1]) && j+n < len(text) && isEncodingChar(text[j+n]) {
			return n
		}
		return 0
	}
	j, breaks := i, 0
	for k := range len(form) {
		if k > 0 && j < len(text) {
			if n := inner(j); n > 0 {
				j += n
				breaks++
			}
		}
		if j >= len(text) || text[j] != form[k] {
			return -1
		}
		j++
	}
	if breaks == 0 {
		return -1
	}
	for x := max(0, i-64-len(`\r\n`)-64); x < i; x++ {
		if x+inner(x) > i {
			return -1
		}
	}
	return j
}

// breakableForms returns the forms of value that New also looks for with
// line breaks inside them: its base64, base32 and hex forms.
func breakableForms(value string) []string {
	return encodedForms(value, forms(value))
}

// allForms returns every form of value New looks for: its forms, its
// encoded forms and its forms in hex with separators.
func allForms(value string) []string {
	fs := forms(value)
	fs = append(fs, encodedForms(value, fs)...)
	return append(fs, separatedHexForms(value, fs)...)
}

func mustNew(t testing.TB, secrets ...Secret) *Redactor {
	t.Helper()
	r, skipped := New(secrets)
	if r == nil {
		t.Fatalf("New(%q) = nil", secrets)
	}
	if skipped != nil {
		t.Fatalf("New(%q) skipped %q", secrets, skipped)
	}
	return r
}

func TestOverlapsAreRedactedAsAUnion(t *testing.T) {
	A := Secret{"A", "tok-1234"}
	B := Secret{"B", "1234-the-rest-of-the-long-key"}
	C := Secret{"C", "tok-1234-the"}
	tests := []struct {
		name    string
		secrets []Secret
		text    string
		want    string
	}{
		{"overlapping", []Secret{A, B},
			"x tok-1234-the-rest-of-the-long-key y", "x [REDACTED:A][REDACTED:B] y"},
		{"overlapping, other order", []Secret{B, A},
			"x tok-1234-the-rest-of-the-long-key y", "x [REDACTED:A][REDACTED:B] y"},
		{"one inside another", []Secret{A, C}, "tok-1234-the", "[REDACTED:C]"},
		{"one inside another, the outer incomplete", []Secret{A, C}, "tok-1234-thX", "[REDACTED:A]-thX"},
		{"inside in the middle", []Secret{{"A", "abcdefgh"}, {"D", "cdef"}},
			"abcdefgh xcdefx", "[REDACTED:A] x[REDACTED:D]x"},
		{"adjacent", []Secret{A, {"E", "wxyz-9876"}}, "tok-1234wxyz-9876", "[REDACTED:A][REDACTED:E]"},
		{"same secret twice, adjacent", []Secret{A}, "tok-1234tok-1234", "[REDACTED:A]"},
		{"same secret twice, apart", []Secret{A}, "tok-1234 tok-1234", "[REDACTED:A] [REDACTED:A]"},
		{"a secret overlapping itself", []Secret{{"P", "abab"}}, "xabababx", "x[REDACTED:P]x"},
		{"a prefix of another", []Secret{{"A", "abcd1234"}, {"F", "abcd1234efgh"}},
			"abcd1234efgh abcd1234efgX", "[REDACTED:F] [REDACTED:A]efgX"},
		{"a suffix of another", []Secret{{"G", "1234efgh"}, {"F", "abcd1234efgh"}},
			"abcd1234efgh", "[REDACTED:F]"},
		{"a chain of three", []Secret{{"X", "abcd"}, {"Y", "cdef"}, {"Z", "efgh"}}, "abcdefgh", "[REDACTED:X][REDACTED:Y][REDACTED:Z]"},
		{"a chain of three, names in order of start", []Secret{{"Z", "efgh"}, {"X", "abcd"}, {"Y", "cdef"}}, "abcdefgh", "[REDACTED:X][REDACTED:Y][REDACTED:Z]"},
		{"an escaped form overlapping a raw one", []Secret{{"X", `ke"y1`}, {"Y", "y1-tail"}},
			`{"k":"ke\"y1-tail"}`, `{"k":"[REDACTED:X][REDACTED:Y]"}`},
		{"the same value under two names: the first names it", []Secret{{"FIRST", "same-value"}, {"SECOND", "same-value"}},
			"a same-value b", "a [REDACTED:FIRST] b"},
		{"the same name for two values", []Secret{{"K", "value-one"}, {"K", "value-two"}},
			"value-one value-two", "[REDACTED:K] [REDACTED:K]"},
		{"a secret at both ends", []Secret{A}, "tok-1234 middle tok-1234", "[REDACTED:A] middle [REDACTED:A]"},
		{"the whole text", []Secret{A}, "tok-1234", "[REDACTED:A]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustNew(t, tt.secrets...)
			if got := r.String(tt.text); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if got := naiveRedact(tt.secrets, tt.text); got != tt.want {
				t.Errorf("the reference gives %q, want %q", got, tt.want)
			}
			if got := string(r.Bytes([]byte(tt.text))); got != tt.want {
				t.Errorf("Bytes = %q, want %q", got, tt.want)
			}
			if got := string(r.AppendString([]byte("<"), tt.text)); got != "<"+tt.want {
				t.Errorf("AppendString = %q, want %q", got, "<"+tt.want)
			}
		})
	}
}

func TestShortSecretsAreSkippedAndReported(t *testing.T) {
	r, skipped := New([]Secret{{"PIN", "123"}, {"EMPTY", ""}, {"PIN", "12"}})
	if r != nil {
		t.Fatalf("New with only short secrets = %v, want nil", r)
	}
	if want := []string{"PIN", "EMPTY"}; !slices.Equal(skipped, want) {
		t.Fatalf("skipped = %q, want %q", skipped, want)
	}
	r, skipped = New([]Secret{{"PIN", "123"}, {"KEY", "long-enough"}, {"FOUR", "abcd"}})
	if !slices.Equal(skipped, []string{"PIN"}) {
		t.Fatalf("skipped = %q, want [PIN]", skipped)
	}
	if got, want := r.String("PIN 123, key long-enough, four abcd"), "PIN 123, key [REDACTED:KEY], four [REDACTED:FOUR]"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	// A name with a short value and a long one is redacted, not skipped.
	_, skipped = New([]Secret{{"K", "ab"}, {"K", "abcdef"}})
	if skipped != nil {
		t.Fatalf("skipped = %q, want none", skipped)
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	if r.Active() {
		t.Error("nil Redactor is active")
	}
	if r.String("tok-1234") != "tok-1234" || string(r.Bytes([]byte("ab"))) != "ab" ||
		string(r.AppendString([]byte("x"), "y")) != "xy" {
		t.Error("nil Redactor changed its input")
	}
	m := map[string]any{"a": "b"}
	if got := r.Value(m); !sameMap(got, m) {
		t.Error("nil Redactor copied a value")
	}
	if r, _ := New(nil); r != nil {
		t.Error("New(nil) is not nil")
	}
}

func sameMap(a any, b map[string]any) bool {
	m, ok := a.(map[string]any)
	return ok && reflect.ValueOf(m).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestNoMatchReturnsTheInputWithoutAllocating(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"}, Secret{"B", `pa"ss<word>`}, Secret{"C", "sk-abcdefghijklmnop"})
	text := strings.Repeat("Some text with tok-123 and pa ss and sk-abc, \\\"quoted\\\" %22 \\u0022. ", 40)
	if got := r.String(text); got != text {
		t.Fatal("String changed a text with no secret")
	}
	b := []byte(text)
	if got := r.Bytes(b); &got[0] != &b[0] {
		t.Fatal("Bytes copied a text with no secret")
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.String(text) }); n != 0 {
		t.Errorf("String allocates %v times on a text with no secret", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.Bytes(b) }); n != 0 {
		t.Errorf("Bytes allocates %v times on a text with no secret", n)
	}
	m := map[string]any{"a": "plain", "b": 1.5, "c": []any{"x", true, nil}}
	if n := testing.AllocsPerRun(100, func() { _ = r.Value(m) }); n != 0 {
		t.Errorf("Value allocates %v times on a tree with no secret", n)
	}
}

// TestAgainstTheReference compares the Redactor with naiveRedact on
// random secrets over a small alphabet, so that secrets overlap, share
// prefixes and have many forms, and on texts made of pieces of their forms.
func TestAgainstTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab1\"\\< %+/é\n"
	randString := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			k := rng.IntN(len(alphabet))
			if alphabet[k] >= 0x80 {
				b.WriteString("é")
			} else {
				b.WriteByte(alphabet[k])
			}
		}
		return b.String()
	}
	for iter := 0; iter < 3000; iter++ {
		var secrets []Secret
		for i := rng.IntN(4) + 1; i > 0; i-- {
			secrets = append(secrets, Secret{string(rune('A' + rng.IntN(6))), randString(rng.IntN(8) + 2)})
		}
		var text strings.Builder
		for i := rng.IntN(8); i > 0; i-- {
			if rng.IntN(2) == 0 {
				s := secrets[rng.IntN(len(secrets))].Value
				fs := forms(s)
				f := fs[rng.IntN(len(fs))]
				if rng.IntN(3) == 0 { // a piece of a form
					f = f[rng.IntN(len(f)):]
				}
				text.WriteString(f)
			} else {
				text.WriteString(randString(rng.IntN(6)))
			}
		}
		r, _ := New(secrets)
		got, want := r.String(text.String()), naiveRedact(secrets, text.String())
		if got != want {
			t.Fatalf("secrets %q, text %q:\n got %q\nwant %q", secrets, text.String(), got, want)
		}
	}
}

// TestPrefilterFalsePositives sets every pair bit, so that the prefilter
// stops at every byte that starts a prefilter pair whatever follows it, and
// checks that the scan still finds exactly what the reference finds.
func TestPrefilterFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "abXq1\"%+ "
	for iter := 0; iter < 500; iter++ {
		var secrets []Secret
		var patterns []pattern
		for i := rng.IntN(3) + 1; i > 0; i-- {
			var b strings.Builder
			for n := rng.IntN(6) + 4; n > 0; n-- {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			secrets = append(secrets, Secret{string(rune('A' + i)), b.String()})
		}
		r := mustNew(t, secrets...)
		for _, s := range secrets {
			for _, f := range forms(s.Value) {
				patterns = append(patterns, pattern{text: f})
			}
		}
		for i := range r.m.pairs {
			r.m.pairs[i] = ^uint64(0)
		}
		r.m.setLookback(patterns)
		var text strings.Builder
		for i := rng.IntN(10); i > 0; i-- {
			s := secrets[rng.IntN(len(secrets))].Value
			fs := forms(s)
			text.WriteString(fs[rng.IntN(len(fs))][rng.IntN(2):])
			text.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		if got, want := r.String(text.String()), naiveRedact(secrets, text.String()); got != want {
			t.Fatalf("secrets %q, text %q:\n got %q\nwant %q", secrets, text.String(), got, want)
		}
	}
}

// TestManySecrets exercises the automaton with many patterns sharing
// prefixes, and the table prefilter.
func TestManySecrets(t *testing.T) {
	var secrets []Secret
	var text strings.Builder
	for i := 0; i < 50; i++ {
		v := "key-" + strings.Repeat(string(rune('a'+i%26)), 3) + string(rune('0'+i%10)) + `"+/` + string(rune('A'+i%26))
		secrets = append(secrets, Secret{"S" + string(rune('A'+i%26)) + string(rune('0'+i/26)), v})
		text.WriteString("text ")
		text.WriteString(forms(v)[i%len(forms(v))])
	}
	text.WriteString(" tail")
	r := mustNew(t, secrets...)
	if got, want := r.String(text.String()), naiveRedact(secrets, text.String()); got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if strings.Contains(r.String(text.String()), "key-") {
		t.Fatal("a secret survived")
	}
}

func TestSecretsWithoutLettersOrDigits(t *testing.T) {
	secrets := []Secret{{"P", `!@#$%^&*`}, {"Q", `"""<<>>`}}
	r := mustNew(t, secrets...)
	text := `a !@#$%^&* b %21%40%23%24%25%5E%26* c \"\"\"\u003c\u003c\u003e\u003e d`
	want := "a [REDACTED:P] b [REDACTED:P] c [REDACTED:Q] d"
	if got := r.String(text); got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
}

func TestValue(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"}, Secret{"PIN", "98765432"})
	unchanged := map[string]any{"x": "plain", "n": 1.0}
	in := map[string]any{
		"tok-1234": "key holds a secret",
		"list":     []any{"a tok-1234 b", 1.0, true, nil, map[string]any{"deep": "tok-1234"}},
		"same":     unchanged,
		"strings":  []string{"ok", "tok-1234"},
		"smap":     map[string]string{"tok-1234": "v", "k": "tok-1234"},
		"number":   json.Number("98765432"),
		"float":    98765432.0,
		"int":      98765432,
		"small":    1.0,
		"raw":      json.RawMessage(`{"s":"tok-1234","n":98765432}`),
		"rawok":    json.RawMessage(`{"s":"x"}`),
	}
	before := deepCopy(in)
	got := r.Value(in).(map[string]any)
	if !reflect.DeepEqual(in, before) {
		t.Fatal("Value changed its input")
	}
	want := map[string]any{
		"[REDACTED:A]": "key holds a secret",
		"list":         []any{"a [REDACTED:A] b", 1.0, true, nil, map[string]any{"deep": "[REDACTED:A]"}},
		"same":         unchanged,
		"strings":      []string{"ok", "[REDACTED:A]"},
		"smap":         map[string]string{"[REDACTED:A]": "v", "k": "[REDACTED:A]"},
		"number":       "[REDACTED:PIN]",
		"float":        "[REDACTED:PIN]",
		"int":          "[REDACTED:PIN]",
		"small":        1.0,
		"raw":          json.RawMessage(`{"n":"[REDACTED:PIN]","s":"[REDACTED:A]"}`),
		"rawok":        json.RawMessage(`{"s":"x"}`),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Value =\n%#v\nwant\n%#v", got, want)
	}
	if !sameMap(got["same"], unchanged) {
		t.Error("an unchanged subtree was copied")
	}
	if !sameMap(r.Value(unchanged), unchanged) {
		t.Error("Value copied a tree with no secret")
	}
	if got := r.Value("tok-1234"); got != "[REDACTED:A]" {
		t.Errorf("Value(string) = %v", got)
	}
	for _, v := range []any{nil, true, 3, json.Number("12"), 12.0, struct{ S string }{"tok-1234"}} {
		if got := r.Value(v); !reflect.DeepEqual(got, v) {
			t.Errorf("Value(%T %v) = %T %v, want it unchanged", v, v, got, got)
		}
	}
}

func TestValueLeavesNumbersAloneWhenNoSecretIsNumeric(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"})
	in := []any{1234.0, json.Number("1234"), 1234}
	if got := r.Value(in).([]any); &got[0] != &in[0] {
		t.Fatal("Value copied a tree of numbers")
	}
}

func TestValueKeyCollisions(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"})
	in := map[string]any{
		"[REDACTED:A]":   "kept: not redacted",
		"tok-1234":       "dropped",
		"x tok-1234":     2.0,
		"x [REDACTED:A]": "kept too",
		"y tok-1234":     "second sorts first? no",
		"y \"tok-1234":   "other",
	}
	got := r.Value(in).(map[string]any)
	want := map[string]any{
		"[REDACTED:A]":     "kept: not redacted",
		"x [REDACTED:A]":   "kept too",
		"y [REDACTED:A]":   "second sorts first? no",
		"y \"[REDACTED:A]": "other",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Value = %#v\nwant %#v", got, want)
	}
	// Two redacted keys with one text: the one whose original sorts first.
	got = r.Value(map[string]any{"tok-1234b": 1.0, "tok-1234a": 2.0, "[REDACTED:A]a": 3.0}).(map[string]any)
	if want := map[string]any{"[REDACTED:A]a": 3.0, "[REDACTED:A]b": 1.0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Value = %#v, want %#v", got, want)
	}
	got = r.Value(map[string]any{"tok-1234": 1.0, "tok-1234tok-1234": 2.0}).(map[string]any)
	if want := map[string]any{"[REDACTED:A]": 1.0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Value = %#v, want %#v", got, want)
	}
}

func TestValueEndsOnCyclesAndDeepTrees(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"})
	m := map[string]any{"s": "tok-1234"}
	m["self"] = m
	got := r.Value(m).(map[string]any)
	if got["s"] != "[REDACTED:A]" || got["self"] != Cycle {
		t.Fatalf("Value of a cyclic map = %v", got)
	}
	s := []any{"tok-1234", nil}
	s[1] = s
	if got := r.Value(s).([]any); got[0] != "[REDACTED:A]" || got[1] != Cycle {
		t.Fatalf("Value of a cyclic slice = %v", got)
	}

	// 20000 levels, the secret at the bottom.
	var deep any = "tok-1234"
	for range 20000 {
		deep = []any{deep}
	}
	out := r.Value(deep)
	levels := 0
	for {
		a, ok := out.([]any)
		if !ok {
			break
		}
		out = a[0]
		levels++
	}
	if levels != MaxDepth || out != TooDeep {
		t.Fatalf("after %d levels Value left %v, want %q after %d", levels, out, TooDeep, MaxDepth)
	}
}

func TestRawMessageStaysValidJSON(t *testing.T) {
	// A placeholder name that needs escaping, and a secret outside a
	// string: the raw JSON is decoded, redacted and encoded again.
	r := mustNew(t, Secret{`N"Q`, "tok-1234"}, Secret{"PIN", "98765432"})
	got := r.Value(json.RawMessage(`{"a":"tok-1234","b":[98765432]}`)).(json.RawMessage)
	if !json.Valid(got) {
		t.Fatalf("Value made invalid JSON %s", got)
	}
	var tree map[string]any
	_ = json.Unmarshal(got, &tree)
	if want := map[string]any{"a": `[REDACTED:N"Q]`, "b": []any{"[REDACTED:PIN]"}}; !reflect.DeepEqual(tree, want) {
		t.Fatalf("Value = %s", got)
	}
	// Not JSON to begin with: redacted as text.
	if got := string(r.Value(json.RawMessage(`tok-1234 {`)).(json.RawMessage)); got != `[REDACTED:N"Q] {` {
		t.Fatalf("Value = %s", got)
	}
}

func deepCopy(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	_ = b
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	case []string:
		return slices.Clone(x)
	case map[string]string:
		m := make(map[string]string, len(x))
		for k, e := range x {
			m[k] = e
		}
		return m
	case json.RawMessage:
		return slices.Clone(x)
	}
	return v
}

func TestConcurrentUse(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"}, Secret{"B", "other-secret"})
	done := make(chan string)
	for range 8 {
		go func() {
			var last string
			for range 200 {
				last = r.String("a tok-1234 b other-secret")
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; got != "a [REDACTED:A] b [REDACTED:B]" {
			t.Fatalf("String = %q", got)
		}
	}
}

// TestRepeatedSecret: a text that is one secret over and over is one
// range, and the scan keeps one occurrence for it, not one per position.
func TestRepeatedSecret(t *testing.T) {
	r := mustNew(t, Secret{"P", "abab"}, Secret{"Q", "tok-1234"})
	text := strings.Repeat("ab", 100000)
	if ms := r.m.scan(text, nil); len(ms) != 1 || ms[0].start != 0 || ms[0].end != len(text) {
		t.Fatalf("scan kept %d occurrences, the first %v", len(ms), ms[:min(len(ms), 3)])
	}
	if got := r.String("<" + text + ">"); got != "<[REDACTED:P]>" {
		t.Fatalf("String = %.40q…", got)
	}
}
