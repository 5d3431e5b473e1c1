package redact

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// FuzzRedact builds a Redactor for two random secrets and redacts a random
// text into which a form of each, encoded forms among them, has been put,
// an encoded form broken into lines, indented or not, with spaces before
// the newline and blank lines or not, when k says so.
// The result must equal the reference's; no form of a secret may be left
// outside a placeholder; and a text with no secret in it comes back as it
// is.
func FuzzRedact(f *testing.F) {
	f.Add("tok-1234", "1234-the-rest-of-the-long-key", "prefix tok-1234-the-rest-of-the-long-key suffix", uint8(0))
	f.Add(`pa"ss\word`, "<&>\u2028😀", `{"k":"x"}`, uint8(7))
	f.Add("abab", "baba", "abababab", uint8(3))
	f.Add("same", "same", "same same", uint8(1))
	f.Add("a b+c%d/e", "ünï", "https://h/p?q=", uint8(200))
	f.Add("\x00\x01\x02\x03", "\xff\xfe\xfd\xfc", "", uint8(9))
	f.Add("passw0rd!", "another-key", "Authorization: Basic dXNlcjpwYXNzdzByZCE=", uint8(0))
	f.Add("passw0rd!", "another-key", "-----BEGIN-----\r\ndXNlcjpw\r\nYXNzdzBy\r\nZCE=\r\n-----END-----", uint8(0))
	f.Add("sk-proj-Xq7vB2mK9", "ghp_R4nD0mT0k3n", `{"pem":"c2stcHJv\nai1YcTd2\nQjJtSzk="}`, uint8(12))
	f.Add("sk-proj-Xq7vB2mK9", "ghp_R4nD0mT0k3n", "key: |\n    c2stcHJv\n    ai1YcTd2\n    QjJtSzk=\n", uint8(36))
	f.Add("passw0rd!", "another-key", `{"k":"dXNlcjpw\n\tYXNzdzBy\n\tZCE="}`, uint8(158))
	f.Add("passw0rd!", "another-key", "dXNlcjpw  \nYXNzdzBy\t\n\nZCE=\n", uint8(236))
	f.Add("sk-proj-Xq7vB2mK9", "ghp_R4nD0mT0k3n", `{"pem":"c2stcHJv \n\nai1YcTd2\t\nQjJtSzk="}`, uint8(212))
	// A base32 form of B starts with the n of a `\n` between 0 and z.
	f.Add("0000000", "7 0+000", "0", uint8(158))
	// B's broken hex inside A's escaped form, whose n the last `\n` written
	// after B's placeholder then is.
	f.Add("n\xa8\xfc0000000000", "000000Z", "0000000000000", uint8(31))
	// B's hex broken into twelve lines between the space and the rest of
	// A: the breaks written after B's placeholder make one stretch longer
	// than a break, whose last space and A's rest spell A, which the text
	// never held.
	f.Add(" 0000", "000000000000*", "", uint8('$'))
	f.Add("\x00\x01\x02\x03\x04\x05\x06", "de:ad:be:ef", "00:01:02:03:04:05:06 ...", uint8(4))
	f.Fuzz(func(t *testing.T, a, b, text string, k uint8) {
		// Long inputs only slow the reference down.
		a, b, text = a[:min(len(a), 64)], b[:min(len(b), 64)], text[:min(len(text), 2048)]
		secrets := []Secret{{"A", a}, {"B", b}}
		r, skipped := New(secrets)
		var short []string
		for _, s := range secrets {
			if len(s.Value) < MinLen && !strings.Contains(strings.Join(short, ","), s.Name) {
				short = append(short, s.Name)
			}
		}
		if strings.Join(skipped, ",") != strings.Join(short, ",") {
			t.Fatalf("skipped %q, want %q", skipped, short)
		}
		if (r == nil) != (len(short) == 2) {
			t.Fatalf("New = %v with %d short secrets", r, len(short))
		}

		// Put a form of each long secret into the text.
		for i, s := range secrets {
			if len(s.Value) < MinLen {
				continue
			}
			fs := allForms(s.Value)
			form := fs[(int(k)+i*5)%len(fs)]
			if k&4 != 0 && slices.Contains(breakableForms(s.Value), form) {
				// Broken into lines k%7+1 characters wide, indented,
				// with spaces before the newline or a blank line after
				// it when k>>5 and the line's number say so.
				var b strings.Builder
				ws := []string{"", "    ", "\t", " \t", `\t`}
				for j := range len(form) {
					if j > 0 && j%(int(k)%7+1) == 0 {
						nl, line := lineBreaks[int(k>>3)%len(lineBreaks)], j/(int(k)%7+1)
						if k&64 != 0 {
							b.WriteString(ws[(int(k>>5)+line)%5])
						}
						b.WriteString(nl)
						if k&128 != 0 && line%2 == 1 {
							b.WriteString(nl)
						}
						b.WriteString(ws[int(k>>5)%5])
					}
					b.WriteByte(form[j])
				}
				form = b.String()
			}
			at := (int(k)*7 + i*13) % (len(text) + 1)
			text = text[:at] + form + text[at:]
		}

		got := r.String(text)
		if want := naiveRedact(secrets, text); got != want {
			t.Fatalf("String(%q)\n got %q\nwant %q", text, got, want)
		}
		if string(r.Bytes([]byte(text))) != got || string(r.AppendString(nil, text)) != got {
			t.Fatal("Bytes or AppendString differs from String")
		}
		for _, s := range secrets {
			if len(s.Value) < MinLen {
				continue
			}
			for _, form := range allForms(s.Value) {
				if at := leak(got, form); at >= 0 {
					t.Fatalf("form %q of %s survives at %d in %q", form, s.Name, at, got)
				}
			}
		}

		// Without the secrets, the text is returned as it is.
		plain := strings.ReplaceAll(strings.ReplaceAll(text, a, ""), b, "")
		if naiveRedact(secrets, plain) == plain {
			out := r.String(plain)
			if out != plain || (len(plain) > 0 && unsafe.StringData(out) != unsafe.StringData(plain)) {
				t.Fatalf("String changed %q, which holds no secret, to %q", plain, out)
			}
		}
	})
}

// writtenBreaks returns the length of the line breaks at out[x:] that a
// placeholder may be followed by: one break, or several written one after
// the other, which make stretches (see lineBreakAt) that may be longer
// than a single break can be. Each break holds a newline, so a stretch has
// no more than 64 bytes before its first newline and after its last, and
// no more than 128 between two of its newlines (the indentation of one
// break and what the next holds before its newline).
func writtenBreaks(out string, x int) int {
	n := 0
	for {
		k := stretchOfBreaks(out[x+n:])
		if k == 0 {
			return n
		}
		n += k
	}
}

// stretchOfBreaks returns the length of the stretch of one kind at the
// start of s that breaks written one after the other may make, or 0.
func stretchOfBreaks(s string) int {
	for _, k := range []struct {
		re *regexp.Regexp
		lf string
	}{{rawStretch, "\n"}, {escapedStretch, `\n`}} {
		m := k.re.FindString(s)
		first, last := strings.Index(m, k.lf), strings.LastIndex(m, k.lf)
		if first < 0 || first > 64 || len(m)-last-len(k.lf) > 64 {
			continue
		}
		ok := true
		for rest := m[first+len(k.lf):]; ok; {
			next := strings.Index(rest, k.lf)
			if next < 0 {
				break
			}
			ok = next <= 128
			rest = rest[next+len(k.lf):]
		}
		if ok {
			return len(m)
		}
	}
	return 0
}

// leak returns where form occurs in out without overlapping a placeholder
// or the line breaks right after one, or -1. Those breaks are the ones a
// broken occurrence had inside it, written back after its placeholder (see
// Redactor.ranges): they are part of the replacement, and a form they make
// with the text after them (the n of a `\n` and what follows it) was not
// in the text.
func leak(out, form string) int {
	var masked []bool
	for i := 0; i+len(form) <= len(out); i++ {
		k := strings.Index(out[i:], form)
		if k < 0 {
			return -1
		}
		i += k
		if masked == nil {
			masked = make([]bool, len(out))
			for j := 0; j < len(out); {
				p := strings.Index(out[j:], "[REDACTED:")
				if p < 0 {
					break
				}
				p += j
				e := strings.IndexByte(out[p:], ']')
				if e < 0 {
					break
				}
				for x := p; x <= p+e; x++ {
					masked[x] = true
				}
				for x := p + e + 1; x < p+e+1+writtenBreaks(out, p+e+1); x++ {
					masked[x] = true
				}
				j = p + 1
			}
		}
		hit := false
		for x := i; x < i+len(form); x++ {
			if masked[x] {
				hit = true
				break
			}
		}
		if !hit {
			return i
		}
	}
	return -1
}
