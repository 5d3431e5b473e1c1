package redact

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The forms a secret can take on the way out of a tool.
//
// A tool rarely leaks a secret byte for byte: it puts it in a JSON document,
// in a URL, or in JSON that is itself stored inside a JSON string. Each
// secret is therefore looked for in every form below. The forms are made
// once per secret when the [Redactor] is built, duplicates are dropped (a
// secret of letters and digits has a single form, its raw value), and all
// forms of all secrets are then found in one scan of the text.
//
//	form                  how it is made                       who writes it
//	raw                   the value itself                     plain text, logs, error messages
//	JSON, one level       a jsonStyles row applied once        see jsonStyles
//	JSON, two levels      any row applied to any row's output  JSON text kept in a JSON string
//	URL                   a urlStyles row, upper-case hex      see urlStyles
//	URL, lower-case hex   the same row with lower-case hex     encoders that write %2f
//	HTML                  &amp; &lt; &gt; and each way of      pages and HTML reports a tool
//	                      writing the quotes (htmlQuotes,      fetches or renders; JSON
//	                      htmlApos); each also in Go's JSON    holding such text
//	                      (\u0026amp;)
//	base64                see encodedForms                     HTTP Basic auth, tokens and
//	                                                           files sent base64-encoded
//	hex, base32           see encodedForms                     digests and dumps of bytes,
//	                                                           TOTP seeds, DNS labels
//	hex with separators   see separatedHexForms: ':' ' ' '-'   fingerprints, MAC addresses,
//	                      between bytes, either case           xxd -g1 and od dumps
//	base64, base32, hex   the forms above with a line break    base64 (76 columns), PEM
//	broken into lines     ("\n", "\r\n") between any two       and MIME (64, 76), xxd -p
//	                      characters, also as JSON writes      (60); JSON holding such
//	                      it (`\n`, `\r\n`); see lines.go      text
//
// Not covered: other binary-to-text encodings (ascii85, base32hex,
// Crockford's base32), encodings of a secret shorter than minEncodedLen
// bytes, base64 then percent-encoded or JSON-escaped (%2B, \/), encoded
// lines broken with more whitespace than a line break holds (see lines.go),
// with a '=' soft break or a bare "\r", or with the break escaped otherwise
// (\u000a, or twice for JSON in JSON: \\n), hex with a separator only between groups of bytes
// (xxd's default, dead beef), with other separators (0xde, 0xad; \xde\xad)
// or in mixed case, hex with separators broken into lines (a dump of a
// secret that runs on to its next line, or across the double space
// hexdump -C writes after 8 bytes), HTML numeric entities for
// other characters (&#60; for <), HTML in JSON written by other encoders
// than encoding/json, JSON escaped three
// or more times, URL encoding applied twice or mixed with JSON escaping,
// and escapers that mix styles within one string (for example upper- and
// lower-case hex in the same string).

// jsonStyle is one way of writing a string inside a JSON string literal.
// The backslash is always written as \\. Hex digits in \u escapes are
// lower case unless upper is set.
type jsonStyle struct {
	name string
	// quote is how '"' is written: `\"` or `\u0022`.
	quote string
	// short lists the control characters written as a two-character escape
	// (\b \f \n \r \t); every other control character is written \u00XX.
	short string
	// upper selects upper-case hex digits.
	upper bool
	// html lists the ASCII characters, besides '"', '\' and the controls,
	// written as \u00XX.
	html string
	// lineSep writes U+2028 and U+2029 as \u2028 and \u2029.
	lineSep bool
	// ascii writes DEL and every non-ASCII character as \uXXXX, characters
	// beyond U+FFFF as a surrogate pair (\ud83d\ude00).
	ascii bool
	// slash writes '/' as `\/`.
	slash bool
	// badUTF8 writes each byte that is not part of valid UTF-8 as \ufffd;
	// otherwise such bytes are copied.
	badUTF8 bool
}

const allShort = "\b\f\n\r\t"

// jsonStyles are the JSON string escapers a secret is looked for in. Each
// row is what a real encoder writes; rows that write a given secret the
// same way yield one form.
var jsonStyles = []jsonStyle{
	// encoding/json Marshal and Encoder (HTML-safe: \u003c \u003e \u0026).
	{name: "go", quote: `\"`, short: allShort, html: "<>&", lineSep: true, badUTF8: true},
	// encoding/json Encoder with SetEscapeHTML(false).
	{name: "go-nohtml", quote: `\"`, short: allShort, lineSep: true, badUTF8: true},
	// encoding/json before Go 1.22, which wrote \b and \f as \u0008, \u000c.
	{name: "go1.21", quote: `\"`, short: "\n\r\t", html: "<>&", lineSep: true, badUTF8: true},
	// The Go HTML-safe set with upper-case hex (\u003C), as PHP writes with
	// JSON_HEX_TAG|JSON_HEX_AMP|JSON_UNESCAPED_UNICODE.
	{name: "go-upper", quote: `\"`, short: allShort, upper: true, html: "<>&", lineSep: true, badUTF8: true},
	// JavaScript JSON.stringify, Python json.dumps(ensure_ascii=False),
	// Rust serde_json: only what JSON requires.
	{name: "js", quote: `\"`, short: allShort},
	// The same with upper-case hex (\u001F), as Java's Jackson writes.
	{name: "js-upper", quote: `\"`, short: allShort, upper: true},
	// Control characters all as \u00xx, no two-character escapes.
	{name: "hex", quote: `\"`},
	// The same with upper-case hex.
	{name: "hex-upper", quote: `\"`, upper: true},
	// Python json.dumps with its default ensure_ascii=True.
	{name: "ascii", quote: `\"`, short: allShort, ascii: true, badUTF8: true},
	// The same with upper-case hex.
	{name: "ascii-upper", quote: `\"`, short: allShort, upper: true, ascii: true, badUTF8: true},
	// PHP json_encode with default flags: \/ and \uXXXX.
	{name: "php", quote: `\"`, short: allShort, ascii: true, slash: true, badUTF8: true},
	// .NET System.Text.Json with its default encoder: \u0022 and
	// upper-case \u003C \u003E \u0026 \u0027 \u002B \u0060 \uXXXX.
	{name: "dotnet", quote: `\u0022`, short: allShort, upper: true, html: "<>&'+`", ascii: true, badUTF8: true},
}

// urlStyle is one way of percent-encoding a string. Bytes in keep and ASCII
// letters and digits are copied; a space is written as space; every other
// byte, including each byte of a non-ASCII character, is written %XX.
type urlStyle struct {
	name  string
	keep  string
	space string
}

// urlStyles are the percent-encoders a secret is looked for in, each with
// upper- and lower-case hex digits.
var urlStyles = []urlStyle{
	// net/url QueryEscape, Python quote_plus.
	{name: "query", keep: "-_.~", space: "+"},
	// net/url PathEscape.
	{name: "path", keep: "-_.~$&+:=@", space: "%20"},
	// JavaScript encodeURIComponent.
	{name: "component", keep: "-_.~!*'()", space: "%20"},
	// RFC 3986 unreserved only: PHP rawurlencode, Python quote(safe="").
	{name: "rfc3986", keep: "-_.~", space: "%20"},
	// WHATWG application/x-www-form-urlencoded (URLSearchParams), Java
	// URLEncoder.
	{name: "form", keep: "*-._", space: "+"},
}

// forms returns the distinct forms of value, the raw value first.
func forms(value string) []string {
	if plain(value) {
		return []string{value}
	}
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	add(value)
	var once []string
	for i := range jsonStyles {
		f := jsonStyles[i].escape(value)
		if !seen[f] {
			once = append(once, f)
		}
		add(f)
	}
	for _, inner := range once {
		for i := range jsonStyles {
			add(jsonStyles[i].escape(inner))
		}
	}
	for i := range urlStyles {
		add(urlStyles[i].escape(value, false))
		add(urlStyles[i].escape(value, true))
	}
	if strings.ContainsAny(value, htmlSpecial) {
		for _, q := range htmlQuotes {
			for _, a := range htmlApos {
				h := htmlEscape(value, q, a)
				add(h)
				// Escaped HTML kept in JSON by encoding/json, which writes
				// & as \u0026.
				add(jsonStyles[0].escape(h))
			}
		}
	}
	return out
}

// htmlSpecial are the characters HTML escapers replace by entities: every
// escaper writes &amp; &lt; &gt;, and they differ in how they write the
// quotes.
const htmlSpecial = `&<>"'`

var (
	// htmlQuotes: &#34; (Go's html and html/template), &quot; (Python's
	// html.escape, PHP's htmlspecialchars, most JavaScript libraries), and
	// the quote itself (escapers of text between tags: a browser's
	// innerHTML, Python's ElementTree).
	htmlQuotes = []string{"&#34;", "&quot;", `"`}
	// htmlApos: &#39; (Go, lodash), &#x27; (Python), &#039; (PHP), &apos;
	// (XML, PHP's ENT_HTML5), and the apostrophe itself.
	htmlApos = []string{"&#39;", "&#x27;", "&#039;", "&apos;", "'"}
)

// htmlEscape returns s as an HTML escaper writes it, with quote for the
// double quote and apos for the single quote.
func htmlEscape(s, quote, apos string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString(quote)
		case '\'':
			b.WriteString(apos)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// escape returns s as st writes it between the quotes of a JSON string.
func (st *jsonStyle) escape(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"':
				b.WriteString(st.quote)
			case c == '\\':
				b.WriteString(`\\`)
			case c == '/' && st.slash:
				b.WriteString(`\/`)
			case c < 0x20:
				if strings.IndexByte(st.short, c) >= 0 {
					b.WriteByte('\\')
					b.WriteByte(shortEscape(c))
				} else {
					st.writeU(&b, rune(c))
				}
			case c == 0x7f && st.ascii, strings.IndexByte(st.html, c) >= 0:
				st.writeU(&b, rune(c))
			default:
				b.WriteByte(c)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			if st.badUTF8 {
				st.writeU(&b, utf8.RuneError)
			} else {
				b.WriteByte(c)
			}
		case st.ascii && r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			st.writeU(&b, r1)
			st.writeU(&b, r2)
		case st.ascii, st.lineSep && (r == '\u2028' || r == '\u2029'):
			st.writeU(&b, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// writeU writes r (at most U+FFFF) as \uXXXX.
func (st *jsonStyle) writeU(b *strings.Builder, r rune) {
	digits := lowerHex
	if st.upper {
		digits = upperHex
	}
	b.WriteString(`\u`)
	b.WriteByte(digits[r>>12&0xf])
	b.WriteByte(digits[r>>8&0xf])
	b.WriteByte(digits[r>>4&0xf])
	b.WriteByte(digits[r&0xf])
}

// shortEscape returns the letter of the two-character escape of c.
func shortEscape(c byte) byte {
	switch c {
	case '\b':
		return 'b'
	case '\f':
		return 'f'
	case '\n':
		return 'n'
	case '\r':
		return 'r'
	}
	return 't'
}

const (
	lowerHex = "0123456789abcdef"
	upperHex = "0123456789ABCDEF"
)

// escape returns s percent-encoded by st, with lower-case hex if lower.
func (st *urlStyle) escape(s string, lower bool) string {
	digits := upperHex
	if lower {
		digits = lowerHex
	}
	var b strings.Builder
	b.Grow(len(s) * 3)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isAlnum(c) || strings.IndexByte(st.keep, c) >= 0:
			b.WriteByte(c)
		case c == ' ':
			b.WriteString(st.space)
		default:
			b.WriteByte('%')
			b.WriteByte(digits[c>>4])
			b.WriteByte(digits[c&0xf])
		}
	}
	return b.String()
}

// plain reports whether every style writes s as it is: s has only ASCII
// letters, digits and "-_.", as most API keys do.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is an ASCII letter or digit. No form escapes
// these, so every form of a secret contains each of its letters and digits.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// minEncodedLen is the length in bytes of the shortest secret whose
// encoded forms are looked for: from 7 bytes on, each form is at least 8
// characters, which ordinary base64 text matches by chance once in 64^8
// (base32 text once in 32^11, hex once in 16^14).
const minEncodedLen = 7

// groupEncoding is a binary-to-text encoding that writes groups of bytes as
// characters of bits bits each: a secret inside a longer encoded text
// starts 0 to group-1 bytes into a group.
type groupEncoding struct {
	encode func([]byte) string
	bits   int
	group  int
	lower  bool // also look for the form in lower case
}

var groupEncodings = []groupEncoding{
	{base64.RawStdEncoding.EncodeToString, 6, 3, false},
	{base64.RawURLEncoding.EncodeToString, 6, 3, false},
	// RFC 4648 base32: upper case as written by most encoders, lower case
	// as in DNS labels and some libraries.
	{base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString, 5, 5, true},
}

// encodedForms returns the forms value takes inside encoded text — base64
// in the standard and the URL-safe alphabet, base32 in upper and lower
// case, and hex in lower and upper case — distinct and not
// among have. Inside a longer base64 or base32 text, value starts some
// bytes into a group (0 to 2 for base64, 0 to 4 for base32), and in each
// case only the characters made of its bits alone are certain: those are
// the form (so "Basic " + base64("user:" + value) holds the form for an
// offset of 2). The character or two at each end that mix its bits with its
// neighbours' are left as they are. Hex has no groups: each byte is two
// characters of its own.
func encodedForms(value string, have []string) []string {
	if len(value) < minEncodedLen {
		return nil
	}
	var out []string
	add := func(f string) {
		if !slices.Contains(have, f) && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	buf := make([]byte, 4+len(value))
	for _, enc := range groupEncodings {
		for k := 0; k < enc.group; k++ {
			clear(buf[:k])
			copy(buf[k:], value)
			e := enc.encode(buf[:k+len(value)])
			// Character i holds bits [b·i, b·i+b) of the input; value's
			// bits are [8k, 8k+8n).
			f := e[(8*k+enc.bits-1)/enc.bits : 8*(k+len(value))/enc.bits]
			add(f)
			if enc.lower {
				add(strings.ToLower(f))
			}
		}
	}
	h := hex.EncodeToString([]byte(value))
	add(h)
	add(strings.ToUpper(h))
	return out
}

// hexSeparators are the bytes written between the bytes of a hex dump or
// fingerprint: de:ad:be:ef (key and certificate fingerprints, MAC
// addresses), de ad be ef (xxd -g1, od, hexdump) and de-ad-be-ef.
const hexSeparators = ": -"

// separatedHexForms returns the forms value takes in hex with a separator
// between every two bytes, for each of hexSeparators and in lower and
// upper case, distinct and not among have. Like encodedForms, it returns
// nothing for a value shorter than minEncodedLen bytes, whose forms would
// be shorter than 20 characters.
func separatedHexForms(value string, have []string) []string {
	if len(value) < minEncodedLen {
		return nil
	}
	var out []string
	b := make([]byte, 0, 3*len(value))
	for _, sep := range []byte(hexSeparators) {
		for _, digits := range []string{lowerHex, upperHex} {
			b = b[:0]
			for i := 0; i < len(value); i++ {
				if i > 0 {
					b = append(b, sep)
				}
				b = append(b, digits[value[i]>>4], digits[value[i]&0xf])
			}
			if f := string(b); !slices.Contains(have, f) && !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}
