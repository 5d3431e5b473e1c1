package redact

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// lineEncoding is an encoder whose output tools break into lines, and the
// width in bits of one of its characters.
type lineEncoding struct {
	name   string
	encode func([]byte) string
	bits   int
}

var lineEncodings = []lineEncoding{
	{"base64", base64.StdEncoding.EncodeToString, 6},
	{"base64 url raw", base64.RawURLEncoding.EncodeToString, 6},
	{"base32", base32.StdEncoding.EncodeToString, 5},
	{"base32 lower raw", func(b []byte) string {
		return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	}, 5},
	{"hex", hex.EncodeToString, 4},
	{"hex upper", func(b []byte) string { return strings.ToUpper(hex.EncodeToString(b)) }, 4},
}

// The ways of writing a line break: in text, and inside a JSON string.
var newlines = []string{"\n", "\r\n", `\n`, `\r\n`}

// broken writes e with the line break nl before each character k for which
// cut(k) holds (k > 0), and returns it with what redacting the characters
// e[lo:hi] makes of it: the characters outside, the placeholder, and every
// break where it was, those between two redacted characters right after the
// placeholder.
func broken(e string, lo, hi int, nl func(k int) string, cut func(k int) bool) (text, want string) {
	var t, w strings.Builder
	for k := range len(e) {
		if k > 0 && cut(k) {
			b := nl(k)
			t.WriteString(b)
			w.WriteString(b)
		}
		t.WriteByte(e[k])
		if k == lo {
			w.WriteString(testPlaceholder)
		}
		if k < lo || k >= hi {
			w.WriteByte(e[k])
		}
	}
	return t.String(), w.String()
}

// span returns the characters of enc(prefix + secret + suffix) made of the
// secret's bits alone.
func span(enc lineEncoding, prefix, secret int) (lo, hi int) {
	return (8*prefix + enc.bits - 1) / enc.bits, 8 * (prefix + secret) / enc.bits
}

func same(nl string) func(int) string { return func(int) string { return nl } }

// TestBrokenEncodedFormsAreRedacted: a secret in base64, base32 or hex
// broken into lines of every width from 1 to 80, with LF or CRLF breaks,
// in text or in a JSON string, at every offset inside a longer encoded
// text, loses exactly the characters made of its bits alone; the breaks
// between them follow the placeholder, and every other line stays as it
// was.
func TestBrokenEncodedFormsAreRedacted(t *testing.T) {
	widths := make([]int, 80)
	for i := range widths {
		widths[i] = i + 1
	}
	checkBrokenForms(t, brokenCases{
		secrets:  []string{"plainAlnum1234", "seven77", `tok"en-quote`, "emoji😀-🔑key", trickySecrets[len(trickySecrets)-2]},
		prefixes: []string{"", "u", "us", "use", "user", strings.Repeat("data before the secret; ", 4) + "!"},
		widths:   widths, breaks: newlines, head: "data:",
	})
}

// brokenCases are the secrets, the texts before them in their encoded
// form, the line widths, the line breaks and the text before the first
// line that checkBrokenForms combines.
type brokenCases struct {
	secrets, prefixes []string
	widths            []int
	breaks            []string
	head              string
}

// checkBrokenForms checks every combination of c: each secret's encoding,
// after each prefix and before no suffix or one, broken into lines of each
// width with each break, between head and a last line, loses exactly the
// characters made of the secret's bits alone, the breaks between them
// following the placeholder.
func checkBrokenForms(t *testing.T, c brokenCases) {
	t.Helper()
	for _, secret := range c.secrets {
		r := mustNew(t, Secret{"S", secret})
		for _, enc := range lineEncodings {
			for _, prefix := range c.prefixes {
				for _, suffix := range []string{"", "?!#$"} {
					e := enc.encode([]byte(prefix + secret + suffix))
					lo, hi := span(enc, len(prefix), len(secret))
					for _, w := range c.widths {
						for _, nl := range c.breaks {
							text, want := broken(e, lo, hi, same(nl), func(k int) bool { return k%w == 0 })
							text, want = c.head+nl+text+nl+"end", c.head+nl+want+nl+"end"
							if got := r.String(text); got != want {
								t.Fatalf("%q in %s, %q before, %q after, width %d, %q:\n got %q\nwant %q",
									secret, enc.name, prefix, suffix, w, nl, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestBreaksAnywhereAreFound puts the first line break at every place of
// every line width, and breaks lines at random widths, mixing LF and CRLF.
func TestBreaksAnywhereAreFound(t *testing.T) {
	secret := "sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ"
	r := mustNew(t, Secret{"S", secret})
	for _, enc := range lineEncodings {
		e := enc.encode([]byte("us" + secret + "!"))
		lo, hi := span(enc, 2, len(secret))
		for w := 1; w <= 80; w++ {
			for first := 1; first <= w; first++ {
				for _, nl := range newlines[:3] {
					text, want := broken(e, lo, hi, same(nl), func(k int) bool { return k >= first && (k-first)%w == 0 })
					if got := r.String(text); got != want {
						t.Fatalf("%s, width %d, first line %d, %q:\n got %q\nwant %q", enc.name, w, first, nl, got, want)
					}
				}
			}
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for range 500 {
			next := 1 + rng.IntN(20)
			cuts := map[int]bool{}
			for k := next; k < len(e); k += 1 + rng.IntN(20) {
				cuts[k] = true
			}
			nls := map[int]string{}
			for k := range cuts {
				nls[k] = newlines[rng.IntN(2)]
			}
			text, want := broken(e, lo, hi, func(k int) string { return nls[k] }, func(k int) bool { return cuts[k] })
			if got := r.String(text); got != want {
				t.Fatalf("%s, breaks at %v:\n got %q\nwant %q", enc.name, cuts, got, want)
			}
		}
	}
}

// TestBrokenFormsInLongEncodedTexts: secrets in the middle of a long
// encoded text, broken into lines as base64, MIME, PEM and xxd -p write
// them, once or several times, and a secret whose forms are longer than the
// window the broken forms are looked for in.
func TestBrokenFormsInLongEncodedTexts(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	noise := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	var long string // not periodic, so that two in a row are two
	for i := range 30 {
		long += fmt.Sprintf("part%02d-", i)
	}
	for _, secret := range []string{"sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ", long} {
		r := mustNew(t, Secret{"S", secret})
		for _, enc := range lineEncodings {
			for _, w := range []int{60, 64, 76} {
				for _, nl := range newlines {
					for iter := range 20 {
						before, between, after := noise(rng.IntN(3000)), noise(rng.IntN(40)), noise(rng.IntN(3000))
						data := before + secret
						if iter%2 == 1 {
							data += between + secret
						}
						data += after
						e := enc.encode([]byte(data))
						lo1, hi1 := span(enc, len(before), len(secret))
						lo2, hi2 := span(enc, len(before)+len(secret)+len(between), len(secret))
						var want strings.Builder
						var text strings.Builder
						if iter%2 == 0 {
							lo2, hi2 = lo1, hi1
						} else if lo2 <= hi1 {
							// Occurrences that touch are one range.
							lo2, hi1 = lo1, hi2
						}
						inside := func(k int) int {
							if k >= lo1 && k < hi1 {
								return lo1
							}
							if k >= lo2 && k < hi2 {
								return lo2
							}
							return -1
						}
						for k := range len(e) {
							if k > 0 && k%w == 0 {
								text.WriteString(nl)
								want.WriteString(nl)
							}
							text.WriteByte(e[k])
							switch at := inside(k); {
							case at == k:
								want.WriteString(testPlaceholder)
							case at < 0:
								want.WriteByte(e[k])
							}
						}
						if got := r.String(text.String()); got != want.String() {
							t.Fatalf("%d-byte secret in %s, width %d, %q, %d bytes before: %s",
								len(secret), enc.name, w, nl, len(before), difference(got, want.String()))
						}
					}
				}
			}
		}
	}
}

// TestLineBreaksNeverJoinOtherForms: a raw or escaped value is never found
// across a line break, and an encoded form only across one break between
// two encoding characters, indented or not, with blank lines or spaces
// before the newline or not, but not across a bare CR; and text with line
// breaks but no secret comes back as it is, without allocating.
func TestLineBreaksNeverJoinOtherForms(t *testing.T) {
	secret := "plainAlnum1234"
	r := mustNew(t, Secret{"S", secret}, Secret{"T", `tok"en-quote`})
	escaped := jsonStyles[0].escape(`tok"en-quote`)
	for _, nl := range append(newlines, "\n\n", " \n", "\n ", "\r\n\r\n", `\n\n`) {
		for k := 1; k < len(secret); k++ {
			for _, text := range []string{secret[:k] + nl + secret[k:], "x " + secret[:k] + nl + secret[k:] + " y"} {
				if got := r.String(text); got != text {
					t.Errorf("String(%q) = %q, want it unchanged", text, got)
				}
			}
		}
		for k := 1; k < len(escaped); k++ {
			if text := `{"k":"` + escaped[:k] + nl + escaped[k:] + `"}`; r.String(text) != text {
				t.Errorf("String(%q) = %q, want it unchanged", text, r.String(text))
			}
		}
	}
	// An encoded form is found across one line break between two of its
	// characters, and across nothing else.
	e := base64.StdEncoding.EncodeToString([]byte("user:" + secret))
	lo, hi := span(lineEncodings[0], 5, len(secret))
	for _, nl := range append(newlines, "\n\n", " \n", "\n ", "\r\n\r\n", `\n\n`, "\n\t", "\r") {
		joins := nl != "\r"
		for k := 1; k < len(e); k++ {
			text, want := broken(e, lo, hi, same(nl), func(j int) bool { return j == k })
			if !joins && k > lo && k < hi {
				want = text
			}
			if got := r.String(text); got != want {
				t.Errorf("String(%q) = %q, want %q", text, got, want)
			}
		}
	}

	// Many lines of prose, logs and base64 that hold no secret.
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, "2026-03-14T09:26:%02dZ INFO request done\nthe next line starts with a word\n", i%60)
		b.WriteString(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the secret ", 4+i%5))))
		b.WriteString("\r\n")
	}
	text := b.String()
	if got := r.String(text); got != text || unsafe.StringData(got) != unsafe.StringData(text) {
		t.Fatal("String changed or copied a text with no secret")
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.String(text) }); n != 0 {
		t.Errorf("String allocates %v times on a text with line breaks and no secret", n)
	}
	// A long MIME text with no secret, for a secret whose hex form is a
	// quarter of the window.
	r = mustNew(t, Secret{"S", strings.Repeat("sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ", 3)[:64]})
	mime := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the secret, ", 1000)))
	text, _ = broken(mime, 0, 0, same("\r\n"), func(k int) bool { return k%76 == 0 })
	if got := r.String(text); got != text || unsafe.StringData(got) != unsafe.StringData(text) {
		t.Fatal("String changed or copied a MIME text with no secret")
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.String(text) }); n != 0 {
		t.Errorf("String allocates %v times on a MIME text with no secret", n)
	}
}

// difference shows where got and want first differ.
func difference(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-40)
	return fmt.Sprintf("at %d:\n got …%q…\nwant …%q…", i, got[lo:min(len(got), i+80)], want[lo:min(len(want), i+80)])
}

// indents are indentations breakUp may put after a line break; `\t` is
// one only after an escaped one.
var indents = []string{" ", "    ", "\t", " \t", `\t`, `\t\t `}

// breakUp writes f with a line break, of a kind chosen at random, with
// spaces before the newline or not, a blank line after it or not, and
// indented or not, after every few characters, at random.
func breakUp(rng *rand.Rand, f string) string {
	var b strings.Builder
	w := 1 + rng.IntN(12)
	for k := range len(f) {
		if k > 0 && (k%w == 0 || rng.IntN(16) == 0) {
			if rng.IntN(6) == 0 {
				b.WriteString(indents[rng.IntN(len(indents))])
			}
			nl := newlines[rng.IntN(len(newlines))]
			b.WriteString(nl)
			if rng.IntN(6) == 0 {
				if rng.IntN(2) == 0 {
					b.WriteString(indents[rng.IntN(len(indents))])
				}
				b.WriteString(nl)
			}
			if rng.IntN(3) == 0 {
				b.WriteString(indents[rng.IntN(len(indents))])
			}
		}
		b.WriteByte(f[k])
	}
	return b.String()
}

// TestBrokenFormsAgainstTheReference compares the Redactor with
// naiveRedact on random secrets that share bytes, in texts made of their
// encoded forms broken into lines at random (indented or not, with spaces
// before the newline and blank lines or not), pieces of them, raw forms
// and random bytes, encoding characters and line breaks among them.
func TestBrokenFormsAgainstTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const alphabet = "ab1\"\\< \n+/"
	const noise = "QUJDab12+/\n\r\\n-_ =.\tt"
	for iter := range 3000 {
		var secrets []Secret
		for i := rng.IntN(3) + 1; i > 0; i-- {
			b := make([]byte, 7+rng.IntN(10))
			for k := range b {
				b[k] = alphabet[rng.IntN(len(alphabet))]
			}
			secrets = append(secrets, Secret{string(rune('A' + rng.IntN(4))), string(b)})
		}
		var text strings.Builder
		for i := rng.IntN(6) + 1; i > 0; i-- {
			s := secrets[rng.IntN(len(secrets))].Value
			switch rng.IntN(4) {
			case 0, 1:
				fs := breakableForms(s)
				f := fs[rng.IntN(len(fs))]
				if rng.IntN(4) == 0 { // a piece of a form
					f = f[rng.IntN(len(f)):]
				}
				text.WriteString(breakUp(rng, f))
			case 2:
				fs := forms(s)
				text.WriteString(breakUp(rng, fs[rng.IntN(len(fs))]))
			default:
				for k := rng.IntN(8); k > 0; k-- {
					text.WriteByte(noise[rng.IntN(len(noise))])
				}
			}
		}
		r := mustNew(t, secrets...)
		if got, want := r.String(text.String()), naiveRedact(secrets, text.String()); got != want {
			t.Fatalf("iteration %d, secrets %q, text %q:\n got %q\nwant %q", iter, secrets, text.String(), got, want)
		}
	}
}

// TestBrokenFormsAtTheEndOfARun: occurrences near the end of a run of
// encoded lines, where the scan stops again after the run has been looked
// at, are each found once, in order, also several in a row.
func TestBrokenFormsAtTheEndOfARun(t *testing.T) {
	secret := "sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ"
	r := mustNew(t, Secret{"S", secret})
	for _, enc := range lineEncodings {
		for _, n := range []int{1, 2, 3} {
			for gap := 0; gap < 12; gap += 5 {
				data := strings.Repeat("head of the data. ", 5) + strings.Repeat(secret+strings.Repeat("-", gap), n)
				for w := 7; w <= 80; w += 9 {
					for _, nl := range newlines {
						text, _ := broken(enc.encode([]byte(data)), 0, 0, same(nl), func(k int) bool { return k%w == 0 })
						text += " " + secret[:20] + nl + "Xq7vB2mK9pL4"
						if got, want := r.String(text), naiveRedact([]Secret{{"S", secret}}, text); got != want {
							t.Fatalf("%s, %d in a row %d apart, width %d, %q: %s", enc.name, n, gap, w, nl, difference(got, want))
						}
						_, found := r.m.scanAll(text, nil)
						for i := 1; i < len(found); i++ {
							if found[i].end <= found[i-1].end {
								t.Fatalf("%s, %d in a row %d apart, width %d, %q: broken occurrences out of order: %v", enc.name, n, gap, w, nl, found)
							}
						}
					}
				}
			}
		}
	}
}

// indentedBreaks are line breaks followed by the next line's indentation,
// as a YAML block scalar, an indented PEM block or a JSON string holding
// them writes them: spaces, tabs and both, after LF or CRLF, raw or
// escaped, with tabs escaped or not in a JSON string, up to the longest
// indentation that counts.
var indentedBreaks = []string{
	"\n    ", "\n\t", "\n\t  \t", "\r\n  ", "\r\n\t\t",
	`\n    `, `\n\t`, `\n  \t\t `, `\r\n` + "  ", `\n` + "\t ",
	"\n" + strings.Repeat(" ", maxIndent), `\n` + strings.Repeat(`\t`, maxIndent/2),
}

// brokenSecrets, brokenPrefixes and brokenWidths are the secrets, the
// encoded text before them and the line widths the tests of breaks with
// whitespace around them break encoded forms with (see checkBrokenForms).
var (
	brokenSecrets  = []string{"plainAlnum1234", `tok"en-quote`, "emoji😀-🔑key"}
	brokenPrefixes = []string{"", "u", "us", "use", strings.Repeat("data before the secret; ", 3) + "!"}
	brokenWidths   = []int{1, 2, 3, 5, 8, 13, 16, 60, 64, 76}
)

// TestIndentedEncodedFormsAreRedacted: a secret in base64, base32 or hex
// broken into lines that are indented, at widths from 1 to 76, at several
// offsets inside a longer encoded text, loses exactly the characters made
// of its bits alone; the breaks between them follow the placeholder with
// their indentation, and every other line stays as it was.
func TestIndentedEncodedFormsAreRedacted(t *testing.T) {
	checkBrokenForms(t, brokenCases{
		secrets: brokenSecrets, prefixes: brokenPrefixes, widths: brokenWidths, breaks: indentedBreaks, head: "key: |",
	})
}

// TestIndentedBreaksAnywhereAreFound puts the first indented line break at
// every place of every line width, and breaks lines at random widths, each
// line with an indentation of its own or none.
func TestIndentedBreaksAnywhereAreFound(t *testing.T) {
	checkBreaksAnywhere(t, anywhereCases{
		fixed:   []string{"\n   ", "\r\n\t", `\n  `, `\n\t`},
		raw:     []string{"\n", "\r\n", "\n  ", "\n\t", "\r\n    ", "\n \t ", "\n" + strings.Repeat("\t", 20)},
		escaped: []string{`\n`, `\r\n`, `\n  `, `\n\t`, `\r\n\t\t`, `\n` + "\t", `\n \t`},
		seed:    11,
	})
}

// anywhereCases are the breaks checkBreaksAnywhere puts into a secret's
// encoded forms: each of fixed at every line width, from every place of the
// first line on, and raw or escaped ones at random places, drawn from a
// generator seeded with seed.
type anywhereCases struct {
	fixed, raw, escaped []string
	seed                uint64
}

// checkBreaksAnywhere breaks the line encodings of a secret inside a
// longer text with c's breaks and checks that what is made of the
// secret's bits alone is redacted, the breaks following the placeholder.
func checkBreaksAnywhere(t *testing.T, c anywhereCases) {
	t.Helper()
	secret := "sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ"
	r := mustNew(t, Secret{"S", secret})
	for _, enc := range lineEncodings {
		e := enc.encode([]byte("us" + secret + "!"))
		lo, hi := span(enc, 2, len(secret))
		for _, w := range []int{1, 2, 7, 19, 33, 64, 76} {
			for first := 1; first <= w; first++ {
				for _, nl := range c.fixed {
					text, want := broken(e, lo, hi, same(nl), func(k int) bool { return k >= first && (k-first)%w == 0 })
					if got := r.String(text); got != want {
						t.Fatalf("%s, width %d, first line %d, %q:\n got %q\nwant %q", enc.name, w, first, nl, got, want)
					}
				}
			}
		}
		rng := rand.New(rand.NewPCG(c.seed, c.seed+1))
		for iter := range 500 {
			breaks := c.raw
			if iter%2 == 1 {
				breaks = c.escaped
			}
			cuts := map[int]string{}
			for k := 1 + rng.IntN(20); k < len(e); k += 1 + rng.IntN(20) {
				cuts[k] = breaks[rng.IntN(len(breaks))]
			}
			text, want := broken(e, lo, hi, func(k int) string { return cuts[k] }, func(k int) bool { return cuts[k] != "" })
			if got := r.String(text); got != want {
				t.Fatalf("%s, breaks %v:\n got %q\nwant %q", enc.name, cuts, got, want)
			}
		}
	}
}

// TestIndentedLinesExamples: base64 in a YAML block scalar and in a JSON
// string, URL-safe base64, base32 and hex, each with its lines indented.
func TestIndentedLinesExamples(t *testing.T) {
	r := mustNew(t, Secret{"S", "plainAlnum1234"})
	tests := []struct{ name, text, want string }{
		{"base64 in YAML", // base64 of "user:plainAlnum1234"
			"auth: |\n    dXNlcjpwbGFp\n    bkFsbnVtMTIz\n    NA==\nnext: 1\n",
			"auth: |\n    dXNlcjp[REDACTED:S]\n    \n    A==\nnext: 1\n"},
		{"base64 in JSON, escaped tabs",
			`{"auth":"dXNlcjpwbGFp\n\tbkFsbnVtMTIz\n\tNA==\n"}`,
			`{"auth":"dXNlcjp[REDACTED:S]\n\t\n\tA==\n"}`},
		{"base64 in JSON, spaces after CRLF",
			`{"auth":"dXNlcjpwbGFpbkFs\r\n  bnVtMTIzNA=="}`,
			`{"auth":"dXNlcjp[REDACTED:S]\r\n  A=="}`},
		{"URL-safe base64, CRLF and mixed indentation", // of "\xfb\xffplainAlnum1234"
			"-_9wbG\r\n \tFpbkFs\r\n\t bnVtMT\r\n  IzNA==",
			"-_9[REDACTED:S]\r\n \t\r\n\t \r\n  A=="},
		{"base32, tabs", "\tOBWGC2LO\n\tIFWG45LN\n\tGEZDGNA=\n", "\t[REDACTED:S]\n\t\n\tA=\n"},
		{"hex, CRLF and spaces", "  706c61696e\r\n  416c6e756d\r\n  31323334 ok", "  [REDACTED:S]\r\n  \r\n   ok"},
	}
	for _, tt := range tests {
		if got := r.String(tt.text); got != tt.want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tt.name, tt.text, got, tt.want)
		}
	}
}

// TestBrokenFormsDoNotStartInsideABreak: the n of a `\n`, the r of a
// `\r\n` and the t of a `\t` after one are bytes of a line break between
// encoding characters, not characters of the encoded text: a broken form
// that would start with one is not found there, and is found when it
// starts right after the break.
func TestBrokenFormsDoNotStartInsideABreak(t *testing.T) {
	tests := []struct {
		secret string
		enc    lineEncoding
		inside string // ends inside a break that the form's first character is the next byte of
		after  string // ends with that break whole
		split  bool   // the break goes on after the form's first character
	}{
		{"hello-world-1234", lineEncodings[3], `data0\`, `data0\n`, false},     // base32: n…
		{"\xacsecret-value", lineEncodings[0], `data0\`, `data0\r\n`, true},    // base64: r…
		{"\xb4secret-value", lineEncodings[0], `data0\n\`, `data0\n\t`, false}, // base64: t…
	}
	for _, tt := range tests {
		r := mustNew(t, Secret{"S", tt.secret})
		e := tt.enc.encode([]byte(tt.secret))
		lo, hi := span(tt.enc, 0, len(tt.secret))
		for w := 2; w < hi; w++ { // a break inside the form, which is not whole
			text, _ := broken(e, lo, hi, same(`\n`), func(k int) bool { return tt.split && k == 1 || k%w == 0 })
			text = tt.inside + text
			if got := r.String(text); got != text {
				t.Errorf("String(%q) = %q, want it unchanged", text, got)
			}
			if got := naiveRedact([]Secret{{"S", tt.secret}}, text); got != text {
				t.Errorf("the reference makes %q of %q, want it unchanged", got, text)
			}
			text, want := broken(e, lo, hi, same(`\n`), func(k int) bool { return k%w == 0 })
			text, want = tt.after+text, tt.after+want
			if got := r.String(text); got != want {
				t.Errorf("String(%q) = %q, want %q", text, got, want)
			}
		}
	}
	// Looked for from its r on, a `\r\n` between encoding characters holds
	// no break of its own.
	s := `ab\r\ncd`
	if got := nextInnerBreak(s, 3, len(s)); got != -1 {
		t.Errorf("nextInnerBreak(%q, 3) = %d, want -1", s, got)
	}
	if got := nextInnerBreak(s, 0, len(s)); got != 2 {
		t.Errorf("nextInnerBreak(%q, 0) = %d, want 2", s, got)
	}
}

// checkValuesNotJoined checks that neither secret nor the JSON-escaped
// form of other is found across any of breaks: each text with one inside
// comes back as it is.
func checkValuesNotJoined(t *testing.T, r *Redactor, secret, other string, breaks []string) {
	t.Helper()
	escaped := jsonStyles[0].escape(other)
	for _, nl := range breaks {
		for k := 1; k < len(secret); k++ {
			for _, text := range []string{secret[:k] + nl + secret[k:], "x:" + nl + secret[:k] + nl + secret[k:] + " y"} {
				if got := r.String(text); got != text {
					t.Errorf("String(%q) = %q, want it unchanged", text, got)
				}
			}
		}
		for k := 1; k < len(escaped); k++ {
			if text := `{"k":"` + escaped[:k] + nl + escaped[k:] + `"}`; r.String(text) != text {
				t.Errorf("String(%q) = %q, want it unchanged", text, r.String(text))
			}
		}
	}
}

// joinCase is a line break and whether an encoded form is found across it.
type joinCase struct {
	nl    string
	joins bool
}

// checkJoins breaks the base64 of "user:"+secret with one of each case's
// break at every place inside the secret's part, and checks that the part
// is redacted across a break that joins and left as it is across one that
// does not.
func checkJoins(t *testing.T, r *Redactor, secret string, cases []joinCase) {
	t.Helper()
	e := base64.StdEncoding.EncodeToString([]byte("user:" + secret))
	lo, hi := span(lineEncodings[0], 5, len(secret))
	for _, tt := range cases {
		for k := lo + 1; k < hi; k++ {
			text, want := broken(e, lo, hi, same(tt.nl), func(j int) bool { return j == k })
			if !tt.joins {
				want = text
			}
			if got := r.String(text); got != want {
				t.Errorf("String(%q) = %q, want %q", text, got, want)
			}
		}
	}
}

// TestIndentedBreaksNeverJoinOtherForms: a raw or escaped value is never
// found across an indented line break; an encoded form is found across an
// indentation of maxIndent bytes but not a longer one, nor across `\t`
// after a newline that is not escaped or a bare CR, and is found across
// blank lines and spaces before the newline too; and indented encoded
// lines with no secret come back as they are, without allocating.
func TestIndentedBreaksNeverJoinOtherForms(t *testing.T) {
	secret := "plainAlnum1234"
	// T does not start with a t: after `\t` it would be whole.
	r := mustNew(t, Secret{"S", secret}, Secret{"T", `pass"w-quote`})
	checkValuesNotJoined(t, r, secret, `pass"w-quote`, indentedBreaks)
	checkJoins(t, r, secret, []joinCase{
		{"\n" + strings.Repeat(" ", maxIndent), true}, {"\n" + strings.Repeat(" ", maxIndent+1), false},
		{"\n" + strings.Repeat("\t", maxIndent), true}, {"\n" + strings.Repeat("\t", maxIndent) + " ", false},
		{`\n` + strings.Repeat(`\t`, maxIndent/2), true}, {`\n` + strings.Repeat(`\t`, maxIndent/2) + " ", false},
		{"\n    ", true}, {"\n    \n    ", true}, {`\n  `, true}, {`\n  \n  `, true},
		{"\n  ", true}, {"  \n  ", true}, {"\r\n\t", true}, {" \r\n\t", true}, {"\r  ", false},
		{`\n\t`, true}, {`\t\n\t`, true}, {"\n" + `\t`, false},
	})

	// A YAML file of indented base64 and prose that holds no secret.
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "item%d:\n  note: the next lines are indented\n  data: |\n", i)
		data := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("not the secret ", 8+i%5)))
		for len(data) > 64 {
			b.WriteString("    " + data[:64] + "\n")
			data = data[64:]
		}
		b.WriteString("    " + data + "\n")
	}
	text := b.String()
	if got := r.String(text); got != text || unsafe.StringData(got) != unsafe.StringData(text) {
		t.Fatal("String changed or copied a text with no secret")
	}
	if n := testing.AllocsPerRun(100, func() { _ = r.String(text) }); n != 0 {
		t.Errorf("String allocates %v times on indented lines with no secret", n)
	}
}

// trailingBreaks are line breaks with spaces or tabs before the newline,
// as editors, copy and paste or fold leave them, in text and in a JSON
// string, some with the next line's indentation too, up to the most
// whitespace before a newline that counts.
var trailingBreaks = []string{
	" \n", "  \n", "\t\n", " \t \n", " \r\n", "   \r\n", "\t\r\n  ",
	` \n`, `  \r\n`, `\t\n`, "\t" + `\n`, ` \t\n\t`, `  \r\n  `,
	strings.Repeat(" ", maxLead) + "\n", strings.Repeat(`\t`, maxLead/2) + `\n`,
}

// blankBreaks are line breaks with one or two blank lines in them, empty
// or holding spaces and tabs, in text and in a JSON string, up to the
// longest stretch before the last newline that counts.
var blankBreaks = []string{
	"\n\n", "\n\n\n", "\r\n\r\n", "\r\n\r\n\r\n", "\n  \n", "\n\t\n\t", " \n \n ", "\r\n  \r\n  ",
	`\n\n`, `\n\n\n`, `\r\n\r\n`, `\n  \n  `, `\n\t\n\t`, `\r\n\t\r\n\t`, ` \n\t \n `,
	strings.Repeat("\n", maxLead+1), strings.Repeat("\r\n", maxLead/2) + "\r\n    ",
	"\n" + strings.Repeat(" ", maxLead-1) + "\n" + strings.Repeat(" ", maxIndent),
}

// TestTrailingWhitespaceBreaksAreRedacted: a secret in base64, base32 or
// hex broken into lines that end in spaces or tabs, at widths from 1 to
// 76, at several offsets inside a longer encoded text, loses exactly the
// characters made of its bits alone; the breaks between them follow the
// placeholder with their whitespace, and every other line stays as it was.
func TestTrailingWhitespaceBreaksAreRedacted(t *testing.T) {
	checkBrokenForms(t, brokenCases{
		secrets: brokenSecrets, prefixes: brokenPrefixes, widths: brokenWidths, breaks: trailingBreaks, head: "data:",
	})
}

// TestBlankLineBreaksAreRedacted: the same with blank lines between the
// encoded lines.
func TestBlankLineBreaksAreRedacted(t *testing.T) {
	checkBrokenForms(t, brokenCases{
		secrets: brokenSecrets, prefixes: brokenPrefixes, widths: brokenWidths, breaks: blankBreaks, head: "data:",
	})
}

// TestLongBreaksAnywhereAreFound puts the first line break with trailing
// whitespace or a blank line at every place of every line width, and
// breaks lines at random widths, each break of a kind of its own.
func TestLongBreaksAnywhereAreFound(t *testing.T) {
	checkBreaksAnywhere(t, anywhereCases{
		fixed:   []string{"  \n", "\t\r\n\t", "\n\n  ", ` \n`, `\t\n\n\t`},
		raw:     []string{"\n", " \n", "\t\n  ", "  \r\n", "\n\n", "\r\n \r\n ", " \n\t\n\t", strings.Repeat(" ", 40) + "\n"},
		escaped: []string{`\n`, ` \n`, `\t\n`, `\t\n\t`, `\n\n`, `\r\n  \r\n  `, ` \n\n `},
		seed:    13,
	})
}

// TestLongBreaksExamples: base64 with trailing spaces, as fold and editors
// leave it, with CRLF and trailing spaces, with blank lines, in a JSON
// string, and hex with a blank line holding spaces.
func TestLongBreaksExamples(t *testing.T) {
	r := mustNew(t, Secret{"S", "plainAlnum1234"})
	tests := []struct{ name, text, want string }{
		{"base64, trailing spaces", // base64 of "user:plainAlnum1234"
			"dXNlcjpwbGFp  \nbkFsbnVtMTIz \nNA==\n",
			"dXNlcjp[REDACTED:S]  \n \nA==\n"},
		{"base64, trailing tabs", "dXNlcjpwbGFp\t\nbkFsbnVtMTIz\t\t\nNA==",
			"dXNlcjp[REDACTED:S]\t\n\t\t\nA=="},
		{"base64, CRLF and trailing spaces", "dXNlcjpwbGFpbkFs \r\nbnVtMTIzNA==",
			"dXNlcjp[REDACTED:S] \r\nA=="},
		{"base64, a blank line", "dXNlcjpwbGFp\n\nbkFsbnVtMTIz\n\nNA==",
			"dXNlcjp[REDACTED:S]\n\n\n\nA=="},
		{"base64, two blank lines with spaces", "  dXNlcjpwbGFp\n  \n \t\n  bkFsbnVtMTIzNA==",
			"  dXNlcjp[REDACTED:S]\n  \n \t\n  A=="},
		{"base64 in JSON, trailing spaces and a blank line",
			`{"auth":"dXNlcjpwbGFp  \n\n\tbkFsbnVtMTIz\t\n\tNA=="}`,
			`{"auth":"dXNlcjp[REDACTED:S]  \n\n\t\t\n\tA=="}`},
		{"hex, a blank line holding spaces", "706c61696e   \r\n   \r\n416c6e756d31323334 ok",
			"[REDACTED:S]   \r\n   \r\n ok"},
	}
	for _, tt := range tests {
		if got := r.String(tt.text); got != tt.want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tt.name, tt.text, got, tt.want)
		}
	}
}

// TestLongBreaksNeverJoinOtherForms: a raw or escaped value is never
// found across a line break with trailing whitespace or blank lines; an
// encoded form is found across maxLead bytes before the last newline but
// not across more, nor across whitespace after the last newline longer
// than maxIndent, nor across raw and escaped newlines mixed, nor `\t`
// around a newline that is not escaped.
func TestLongBreaksNeverJoinOtherForms(t *testing.T) {
	secret := "plainAlnum1234"
	r := mustNew(t, Secret{"S", secret}, Secret{"T", `pass"w-quote`})
	checkValuesNotJoined(t, r, secret, `pass"w-quote`, append(slices.Clone(trailingBreaks), blankBreaks...))
	checkJoins(t, r, secret, []joinCase{
		{strings.Repeat(" ", maxLead) + "\n", true}, {strings.Repeat(" ", maxLead+1) + "\n", false},
		{strings.Repeat("\t", maxLead) + "\r\n", true}, {strings.Repeat("\t", maxLead+1) + "\r\n", false},
		{strings.Repeat(`\t`, maxLead/2) + `\n`, true}, {" " + strings.Repeat(`\t`, maxLead/2) + `\n`, false},
		{strings.Repeat("\n", maxLead+1), true}, {strings.Repeat("\n", maxLead+2), false},
		{strings.Repeat(`\n`, maxLead/2+1), true}, {strings.Repeat(`\n`, maxLead/2+2), false},
		{"\n" + strings.Repeat(" ", maxLead-1) + "\n", true}, {"\n" + strings.Repeat(" ", maxLead) + "\n", false},
		{" \n" + strings.Repeat(" ", maxIndent), true}, {" \n" + strings.Repeat(" ", maxIndent+1), false},
		{"\n\n" + strings.Repeat(" ", maxIndent), true}, {"\n\n" + strings.Repeat(" ", maxIndent+1), false},
		{"\n" + `\n`, false}, {`\n` + "\n", false}, {" \r \n", false}, {"\n\r\n\r", false},
		{`\t` + "\n", false}, {"\n" + `\t` + "\n", false}, {" \n\r", false},
	})
}

// TestBreakHelpersAgreeWithInnerBreak checks, on random texts of encoding
// characters and the bytes of line breaks, the helpers that find breaks
// from their ends or from a place inside a text against innerBreak, which
// says what a break is: breakEndingAt returns the longest break that ends
// at a place, and nextInnerBreak the first break that starts in a range
// and lies inside no longer break that starts before it.
func TestBreakHelpersAgreeWithInnerBreak(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const alphabet = "ab\\nrt \t\n\r"
	for range 20000 {
		b := make([]byte, 1+rng.IntN(40))
		for k := range b {
			b[k] = alphabet[rng.IntN(len(alphabet))]
		}
		s := string(b)
		if rng.IntN(4) == 0 { // long stretches of whitespace too
			k := rng.IntN(len(s))
			s = s[:k] + strings.Repeat(" \t"[rng.IntN(2):][:1], maxLead-4+rng.IntN(8)) + s[k:]
		}
		// covered[b] holds when a break starts before b and reaches past it.
		covered := make([]bool, len(s)+1)
		for b := range len(s) {
			if n := innerBreak(s, b); n > 0 {
				for x := b + 1; x < b+n; x++ {
					covered[x] = true
				}
			}
		}
		for e := range len(s) + 1 {
			want := 0
			for b := e - 1; b >= 0; b-- {
				if innerBreak(s, b) == e-b {
					want = e - b
				}
			}
			if got := breakEndingAt(s, e); got != want {
				t.Fatalf("breakEndingAt(%q, %d) = %d, want %d", s, e, got, want)
			}
		}
		for lo := range len(s) + 1 {
			hi := lo + rng.IntN(len(s)+1-lo)
			want := -1
			for b := lo; b < hi; b++ {
				if innerBreak(s, b) > 0 && !covered[b] {
					want = b
					break
				}
			}
			if got := nextInnerBreak(s, lo, hi); got != want {
				t.Fatalf("nextInnerBreak(%q, %d, %d) = %d, want %d", s, lo, hi, got, want)
			}
		}
	}
}
