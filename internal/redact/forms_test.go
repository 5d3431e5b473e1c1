package redact

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// trickySecrets hold every kind of character an encoder treats specially.
var trickySecrets = []string{
	`tok"en-quote`,
	`back\slash\path`,
	"ctl\x01\x1f\n\r\t\b\f\x7f-end",
	"<script>&amp;</script>",
	"line\u2028sep\u2029para",
	"emoji😀-🔑key",
	"with spaces and +plus",
	"100%pure%25",
	"path/to/secret//x",
	"p!a'ss(w)o*rd~`",
	"ünïcödé-pässwörd",
	"all\"\\\x00<>&\u2028😀 +%/é'`",
	"!@#$%^&*()",
}

// A doc builds a document holding x the way some real encoder writes it.
// Redacting doc(secret) must give doc(placeholder). The placeholder encodes
// to itself in every JSON document; URL documents put it in as it is (see
// urlDoc).
type doc struct {
	name string
	make func(t *testing.T, x string) string
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func marshalNoHTML(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// js runs JavaScript in goja, a real JSON.stringify and encodeURIComponent.
func js(t *testing.T, src, x string) string {
	t.Helper()
	vm := goja.New()
	if err := vm.Set("x", x); err != nil {
		t.Fatal(err)
	}
	v, err := vm.RunString(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return v.String()
}

// pythonASCII writes s as Python's json.dumps does with ensure_ascii=True:
// everything outside ' '..'~' as \uxxxx, astral characters as surrogate
// pairs.
func pythonASCII(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r >= ' ' && r <= '~' {
				b.WriteRune(r)
				continue
			}
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// rewriteEscapes rewrites each escape sequence of a JSON text by f.
func rewriteEscapes(s string, f func(esc string) string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		n := 2
		if s[i+1] == 'u' {
			n = 6
		}
		b.WriteString(f(s[i : i+n]))
		i += n - 1
	}
	return b.String()
}

// upperU writes the hex digits of \u escapes in upper case.
func upperU(esc string) string {
	if esc[1] == 'u' {
		return `\u` + strings.ToUpper(esc[2:])
	}
	return esc
}

// hexControls writes the short escapes of control characters as \u00XX.
func hexControls(upper bool) func(string) string {
	return func(esc string) string {
		var c byte
		switch esc {
		case `\n`:
			c = '\n'
		case `\r`:
			c = '\r'
		case `\t`:
			c = '\t'
		case `\b`:
			c = '\b'
		case `\f`:
			c = '\f'
		default:
			return esc
		}
		e := fmt.Sprintf(`\u%04x`, c)
		if upper {
			e = upperU(e)
		}
		return e
	}
}

// lowerPercent writes the hex digits of %XX escapes in lower case.
func lowerPercent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			b.WriteByte('%')
			b.WriteString(strings.ToLower(s[i+1 : i+3]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// encodeURIComponent is JavaScript's encodeURIComponent for valid UTF-8.
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isAlnum(c) || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

const testPlaceholder = "[REDACTED:S]"

// urlDoc is a document with x percent-encoded by enc between prefix and
// suffix, or the placeholder as it is.
func urlDoc(prefix string, enc func(t *testing.T, x string) string, suffix string) func(t *testing.T, x string) string {
	return func(t *testing.T, x string) string {
		if x == testPlaceholder {
			return prefix + x + suffix
		}
		return prefix + enc(t, x) + suffix
	}
}

var docs = []doc{
	{"raw", func(t *testing.T, x string) string { return "before " + x + " after" }},
	{"json.Marshal", func(t *testing.T, x string) string { return marshal(t, map[string]any{"k": x, "n": 1}) }},
	{"json.Encoder/SetEscapeHTML(false)", func(t *testing.T, x string) string {
		return marshalNoHTML(t, map[string]any{"k": []any{x}})
	}},
	{"json.Marshal twice", func(t *testing.T, x string) string {
		return marshal(t, map[string]any{"doc": marshal(t, map[string]any{"k": x})})
	}},
	{"json.Marshal of SetEscapeHTML(false)", func(t *testing.T, x string) string {
		return marshal(t, map[string]any{"doc": marshalNoHTML(t, map[string]any{"k": x})})
	}},
	{"SetEscapeHTML(false) of json.Marshal", func(t *testing.T, x string) string {
		return marshalNoHTML(t, map[string]any{"doc": marshal(t, map[string]any{"k": x})})
	}},
	{"JSON.stringify", func(t *testing.T, x string) string { return js(t, `JSON.stringify({k: x})`, x) }},
	{"JSON.stringify twice", func(t *testing.T, x string) string {
		return js(t, `JSON.stringify({doc: JSON.stringify({k: x})})`, x)
	}},
	{"json.Marshal of JSON.stringify", func(t *testing.T, x string) string {
		return marshal(t, map[string]any{"doc": js(t, `JSON.stringify([x])`, x)})
	}},
	{"Python ensure_ascii", func(t *testing.T, x string) string { return "{\"k\": " + pythonASCII(x) + "}" }},
	{"Python ensure_ascii twice", func(t *testing.T, x string) string {
		return "{\"doc\": " + pythonASCII("{\"k\": "+pythonASCII(x)+"}") + "}"
	}},
	{"json.Marshal, upper-case hex", func(t *testing.T, x string) string {
		return rewriteEscapes(marshal(t, x), upperU)
	}},
	{"json.Marshal, controls as \\u00xx", func(t *testing.T, x string) string {
		return rewriteEscapes(marshal(t, x), hexControls(false))
	}},
	{"JSON.stringify, controls as \\u00XX", func(t *testing.T, x string) string {
		return rewriteEscapes(rewriteEscapes(js(t, `JSON.stringify(x)`, x), hexControls(true)), upperU)
	}},
	{"url.QueryEscape", urlDoc("/p?q=", func(t *testing.T, x string) string { return url.QueryEscape(x) }, "&z=1")},
	{"url.QueryEscape, lower-case hex", urlDoc("/p?q=", func(t *testing.T, x string) string {
		return lowerPercent(url.QueryEscape(x))
	}, "&z=1")},
	{"url.PathEscape", urlDoc("/a/", func(t *testing.T, x string) string { return url.PathEscape(x) }, "/b")},
	{"url.PathEscape, lower-case hex", urlDoc("/a/", func(t *testing.T, x string) string {
		return lowerPercent(url.PathEscape(x))
	}, "/b")},
	{"encodeURIComponent", urlDoc("/p?q=", func(t *testing.T, x string) string {
		return js(t, `encodeURIComponent(x)`, x)
	}, "")},
	{"encodeURIComponent, lower-case hex", urlDoc("/p?q=", func(t *testing.T, x string) string {
		return lowerPercent(encodeURIComponent(x))
	}, "")},
	{"html.EscapeString", func(t *testing.T, x string) string { return "<p title=\"" + html.EscapeString(x) + "\">x</p>" }},
	{"Python html.escape", func(t *testing.T, x string) string {
		return "<td>" + strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;").Replace(x) + "</td>"
	}},
	{"PHP htmlspecialchars", func(t *testing.T, x string) string {
		return "<td>" + strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#039;").Replace(x) + "</td>"
	}},
	{"XML", func(t *testing.T, x string) string {
		return "<v>" + strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(x) + "</v>"
	}},
	{"text between tags (quotes as they are)", func(t *testing.T, x string) string {
		return "<p>" + strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(x) + "</p>"
	}},
	{"json.Marshal of html.EscapeString", func(t *testing.T, x string) string {
		return marshal(t, map[string]any{"html": "<p>" + html.EscapeString(x) + "</p>"})
	}},
}

// TestEveryFormIsRedacted redacts each tricky secret in each document a
// real encoder writes: the result must be the document holding the
// placeholder instead, so the secret is gone in that form and the
// placeholder is there.
func TestEveryFormIsRedacted(t *testing.T) {
	const name = "S"
	placeholder := testPlaceholder
	for _, secret := range trickySecrets {
		r, skipped := New([]Secret{{name, secret}})
		if r == nil || skipped != nil {
			t.Fatalf("New(%q) = %v, %v", secret, r, skipped)
		}
		for _, d := range docs {
			t.Run(fmt.Sprintf("%s/%q", d.name, secret), func(t *testing.T) {
				text := d.make(t, secret)
				want := d.make(t, placeholder)
				got := r.String(text)
				if got != want {
					t.Fatalf("String(%q)\n got %q\nwant %q", text, got, want)
				}
				if strings.Contains(got, secret) {
					t.Fatalf("the raw secret is still in %q", got)
				}
			})
		}
	}
}

// TestEncodersUsedByTheTestsAreDistinct makes sure the documents above
// really exercise different forms: for the secret with every special
// character, all but a few encoders write different documents (two
// encodings applied one after the other can agree).
func TestEncodersUsedByTheTestsAreDistinct(t *testing.T) {
	secret := trickySecrets[len(trickySecrets)-2]
	seen := map[string]bool{}
	for _, d := range docs {
		seen[d.make(t, secret)] = true
	}
	if len(seen) < len(docs)-2 {
		t.Errorf("the %d documents hold only %d distinct texts", len(docs), len(seen))
	}
}

// TestURLStylesMatchNetURL checks the query and path rows byte by byte
// against net/url.
func TestURLStylesMatchNetURL(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if got, want := urlStyles[0].escape(s, false), url.QueryEscape(s); got != want {
			t.Errorf("query row writes %q as %q, url.QueryEscape as %q", s, got, want)
		}
		if got, want := urlStyles[1].escape(s, false), url.PathEscape(s); got != want {
			t.Errorf("path row writes %q as %q, url.PathEscape as %q", s, got, want)
		}
		if got, want := urlStyles[2].escape(s, false), encodeURIComponent(s); c < 0x80 && got != want {
			t.Errorf("component row writes %q as %q, encodeURIComponent as %q", s, got, want)
		}
	}
}

// TestGoRowsMatchEncodingJSON checks the rows that stand for encoding/json
// character by character against it.
func TestGoRowsMatchEncodingJSON(t *testing.T) {
	var chars []string
	for c := 0; c < 0x80; c++ {
		chars = append(chars, string(rune(c)))
	}
	chars = append(chars, "é", "\u2028", "\u2029", "😀", "\xff", "\xe2\x80")
	for _, s := range chars {
		b, _ := json.Marshal(s)
		if got, want := jsonStyles[0].escape(s), string(b[1:len(b)-1]); got != want {
			t.Errorf("go row writes %q as %q, json.Marshal as %q", s, got, want)
		}
		if got, want := jsonStyles[1].escape(s), strings.Trim(marshalNoHTML(t, s), `"`); got != want && s != `"` {
			t.Errorf("go-nohtml row writes %q as %q, SetEscapeHTML(false) as %q", s, got, want)
		}
		if got, want := jsonStyles[8].escape(s), strings.Trim(pythonASCII(s), `"`); got != want && s != `"` && utf8.ValidString(s) {
			t.Errorf("ascii row writes %q as %q, Python as %q", s, got, want)
		}
	}
}

func TestFormsAreDistinctAndRawFirst(t *testing.T) {
	for _, secret := range append(trickySecrets, "plainAlnum1234", "sk-proj_abc.def~") {
		fs := forms(secret)
		if fs[0] != secret {
			t.Errorf("forms(%q)[0] = %q, want the raw value", secret, fs[0])
		}
		seen := map[string]bool{}
		for _, f := range fs {
			if seen[f] {
				t.Errorf("forms(%q) has %q twice", secret, f)
			}
			seen[f] = true
		}
	}
	for _, s := range []string{"plainAlnum1234", "sk-proj_abc.DEF"} {
		if fs := forms(s); len(fs) != 1 {
			t.Errorf("%q has %d forms, want 1: %q", s, len(fs), fs)
		}
	}
	// plain is only a shortcut: for every byte it accepts, every style
	// writes the byte as it is.
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)}) + "abc"
		if !plain(s) {
			continue
		}
		for i := range jsonStyles {
			if got := jsonStyles[i].escape(s); got != s {
				t.Errorf("style %s writes %q as %q", jsonStyles[i].name, s, got)
			}
		}
		for i := range urlStyles {
			if got := urlStyles[i].escape(s, true); got != s {
				t.Errorf("style %s writes %q as %q", urlStyles[i].name, s, got)
			}
		}
	}
}

// TestAnchorIsInEveryForm is the rule the prefilter rests on.
func TestAnchorIsInEveryForm(t *testing.T) {
	for _, secret := range append(trickySecrets, "plainAlnum1234", "\"\"\"\"") {
		p, ok := anchor(secret)
		if !ok {
			continue
		}
		for _, f := range forms(secret) {
			if !strings.Contains(f, string(p[:])) {
				t.Errorf("anchor %q of %q is not in its form %q", p, secret, f)
			}
		}
	}
	for _, s := range []string{`!"#$`, "a!b@c#d$"} {
		if _, ok := anchor(s); ok {
			t.Errorf("%q, without two adjacent letters or digits, has an anchor", s)
		}
	}
}

func TestByFrequencyListsEveryLetterAndDigitOnce(t *testing.T) {
	if len(byFrequency) != 62 {
		t.Fatalf("byFrequency has %d bytes, want 62", len(byFrequency))
	}
	for c := 0; c < 256; c++ {
		if n := strings.Count(byFrequency, string(rune(c))); isAlnum(byte(c)) && n != 1 {
			t.Errorf("%q is in byFrequency %d times", rune(c), n)
		}
	}
}

// TestBase64FormsAreRedacted: a secret inside base64 text, in either
// alphabet, padded or not, at any offset and with anything after it, loses
// every character made of its bits alone, and only those; an encoded
// secret shorter than minEncodedLen bytes is left alone.
func TestBase64FormsAreRedacted(t *testing.T) {
	secrets := append([]string{"plainAlnum1234", "seven77"}, trickySecrets...)
	encs := map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding,
		"raw std": base64.RawStdEncoding, "raw url": base64.RawURLEncoding}
	for _, secret := range secrets {
		if len(secret) < minEncodedLen {
			continue
		}
		r, _ := New([]Secret{{"S", secret}})
		for encName, enc := range encs {
			checkEncodedForms(t, r, secret, "base64 "+encName, enc.EncodeToString, 6, "Authorization: Basic ")
		}
	}
	short := "six666"
	r, _ := New([]Secret{{"S", short}})
	text := base64.StdEncoding.EncodeToString([]byte(short))
	if got := r.String(text); got != text {
		t.Errorf("a %d-byte secret's base64 form was redacted: %q", len(short), got)
	}
}

// checkEncodedForms checks that r, a Redactor of secret alone, redacts in
// lead + encode(prefix + secret + suffix) + " end" exactly the characters
// that hold the secret's bits and no others (each bits bits wide), for
// prefixes that put the secret at every offset within a group of base64
// or base32 and suffixes of every length.
func checkEncodedForms(t *testing.T, r *Redactor, secret, encName string, encode func([]byte) string, bits int, lead string) {
	t.Helper()
	for _, prefix := range []string{"", "u", "us", "use", "user", "user:", "Bearer-"} {
		for _, suffix := range []string{"", "!", "?!", "?!#", "?!#$"} {
			e := encode([]byte(prefix + secret + suffix))
			lo, hi := (8*len(prefix)+bits-1)/bits, 8*(len(prefix)+len(secret))/bits
			text := lead + e + " end"
			want := lead + e[:lo] + testPlaceholder + e[hi:] + " end"
			if got := r.String(text); got != want {
				t.Errorf("%s, %q before, %q after %q:\n got %q\nwant %q", encName, prefix, suffix, secret, got, want)
			}
		}
	}
}

// TestHexAndBase32FormsAreRedacted: a secret in hex, lower or upper case,
// is redacted whole; inside base32 text, upper or lower case,
// padded or not, at any offset and with anything after it, it loses every
// character made of its bits alone, and only those. A secret shorter than
// minEncodedLen bytes is left alone in both.
func TestHexAndBase32FormsAreRedacted(t *testing.T) {
	secrets := append([]string{"plainAlnum1234", "seven77"}, trickySecrets...)
	encs := map[string]func([]byte) string{
		"std":       base32.StdEncoding.EncodeToString,
		"raw std":   base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString,
		"lower std": func(b []byte) string { return strings.ToLower(base32.StdEncoding.EncodeToString(b)) },
		"lower raw": func(b []byte) string {
			return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
		},
	}
	for _, secret := range secrets {
		if len(secret) < minEncodedLen {
			continue
		}
		r, _ := New([]Secret{{"S", secret}})
		for _, h := range []string{hex.EncodeToString([]byte(secret)), strings.ToUpper(hex.EncodeToString([]byte(secret)))} {
			text := "sha=" + h + "; digest=00ff" + h + "ff00."
			want := "sha=" + testPlaceholder + "; digest=00ff" + testPlaceholder + "ff00."
			if got := r.String(text); got != want {
				t.Errorf("hex of %q:\n got %q\nwant %q", secret, got, want)
			}
		}
		for encName, enc := range encs {
			checkEncodedForms(t, r, secret, "base32 "+encName, enc, 5, "otpauth secret=")
		}
	}
	short := "six666"
	r, _ := New([]Secret{{"S", short}})
	for _, text := range []string{hex.EncodeToString([]byte(short)), base32.StdEncoding.EncodeToString([]byte(short))} {
		if got := r.String(text); got != text {
			t.Errorf("a %d-byte secret's encoded form was redacted: %q", len(short), got)
		}
	}
}

// TestOneSecretIsScannedWithIndexByte: the pairs of one secret's value
// and of its encoded forms start with few enough distinct bytes that the
// scan looks for them with strings.IndexByte (machine.preFew), as it did
// before base64 forms brought pairs of their own.
func TestOneSecretIsScannedWithIndexByte(t *testing.T) {
	for _, s := range append(benchSecrets, Secret{"T", trickySecrets[len(trickySecrets)-2]}) {
		r, _ := New([]Secret{s})
		if r.m.preFew == nil {
			t.Errorf("%s: the scan tests every byte", s.Name)
		}
	}
}

// sepHex writes b in hex, lower or upper case, with sep between bytes.
func sepHex(b []byte, sep string, upper bool) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = hex.EncodeToString([]byte{c})
		if upper {
			parts[i] = strings.ToUpper(parts[i])
		}
	}
	return strings.Join(parts, sep)
}

// TestSeparatedHexFormsAreRedacted: a secret in hex with ':', ' ' or '-'
// between its bytes, lower or upper case, is redacted whole, alone or
// inside a longer dump, and the separators around it stay; a secret
// shorter than minEncodedLen bytes is left alone.
func TestSeparatedHexFormsAreRedacted(t *testing.T) {
	secrets := append([]string{"plainAlnum1234", "seven77", "\x00\x01\x02\xfd\xfe\xff\x10"}, trickySecrets...)
	for _, secret := range secrets {
		r, _ := New([]Secret{{"S", secret}})
		for _, sep := range []string{":", " ", "-"} {
			for _, upper := range []bool{false, true} {
				for _, around := range [][2]string{{"", ""}, {"\x00", "\xff"}, {"ab", "c"}, {"", "\x7f\x80"}} {
					h := sepHex([]byte(around[0]+secret+around[1]), sep, upper)
					want := testPlaceholder
					if around[0] != "" {
						want = sepHex([]byte(around[0]), sep, upper) + sep + want
					}
					if around[1] != "" {
						want += sep + sepHex([]byte(around[1]), sep, upper)
					}
					text := "SHA256 Fingerprint=" + h + "\n"
					want = "SHA256 Fingerprint=" + want + "\n"
					if got := r.String(text); got != want {
						t.Errorf("%q with %q, upper %v, %q around:\n got %q\nwant %q", secret, sep, upper, around, got, want)
					}
				}
			}
		}
	}
	short := "six666"
	r, _ := New([]Secret{{"S", short}})
	for _, sep := range []string{":", " ", "-"} {
		if text := sepHex([]byte(short), sep, false); r.String(text) != text {
			t.Errorf("a %d-byte secret's hex with %q was redacted: %q", len(short), sep, r.String(text))
		}
	}
}
