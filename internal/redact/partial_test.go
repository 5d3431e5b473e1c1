package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// partialSecrets are the secrets the Partial tests cut: letters and
// digits (one form, and its encoded forms), the tricky ones, and one
// whose forms start alike.
func partialSecrets() []string {
	return append([]string{"sk-live-0123456789abcdefghij", "tok-1234"}, trickySecrets...)
}

// TestPartialHidesTheStartOfEveryForm cuts every form of every secret
// after each of its bytes: the start of a form that ends a text, from
// MinLen bytes on, becomes the placeholder, as a whole form does.
func TestPartialHidesTheStartOfEveryForm(t *testing.T) {
	const lead = "text: "
	for _, secret := range partialSecrets() {
		r := mustNew(t, Secret{"S", secret})
		for _, f := range allForms(secret) {
			for k := 1; k <= len(f); k++ {
				text := lead + f[:k]
				got := r.Partial(text)
				want := text
				if k >= MinLen {
					want = lead + testPlaceholder
				}
				if got != want {
					t.Fatalf("secret %q, form %q cut after %d bytes: Partial(%q)\n got %q\nwant %q", secret, f, k, text, got, want)
				}
			}
		}
	}
}

// TestPartialHidesTheStartOfBrokenForms cuts the breakable forms of
// secrets broken into lines, with every kind of line break, after each
// byte: inside a break, a backslash escape of one included, too. The
// characters of the form become the placeholder, followed by the breaks
// between them and the piece of a break the text ends with.
func TestPartialHidesTheStartOfBrokenForms(t *testing.T) {
	const lead = "key: "
	breaks := []string{"\n", "\r\n", `\n`, `\r\n`, "\n  ", `\n\t`, "  \n\n\t", ` \n\n `}
	for _, secret := range []string{"sk-live-0123456789abcdefghij", "all\"\\\x00<>&\u2028😀 +%/é'`"} {
		r := mustNew(t, Secret{"S", secret})
		for _, f := range breakableForms(secret) {
			for _, br := range breaks {
				for _, w := range []int{1, 3, 7} {
					// The form's characters and, every w of them, the break;
					// gaps holds the breaks alone.
					var text, gaps strings.Builder
					type cut struct{ n, chars, gaps int }
					var cuts []cut
					chars := 0
					for k := range len(f) {
						if k > 0 && k%w == 0 {
							for i := range len(br) {
								text.WriteByte(br[i])
								gaps.WriteByte(br[i])
								cuts = append(cuts, cut{text.Len(), chars, gaps.Len()})
							}
						}
						text.WriteByte(f[k])
						chars++
						cuts = append(cuts, cut{text.Len(), chars, gaps.Len()})
					}
					whole, allGaps := text.String(), gaps.String()
					for _, c := range cuts {
						if c.chars == len(f) {
							break
						}
						in := lead + whole[:c.n]
						want := in
						if c.chars >= MinLen {
							want = lead + testPlaceholder + allGaps[:c.gaps]
						}
						if got := r.Partial(in); got != want {
							t.Fatalf("secret %q, form %q, break %q every %d, cut after %d bytes: Partial(%q)\n got %q\nwant %q", secret, f, br, w, c.n, in, got, want)
						}
					}
				}
			}
		}
	}
}

// TestPartialRedactsAsStringDoes checks that Partial replaces what String
// replaces, and only adds the start of a form at the end.
func TestPartialRedactsAsStringDoes(t *testing.T) {
	a, b := Secret{"A", "tok-1234"}, Secret{"B", "1234-the-rest-of-the-long-key"}
	r := mustNew(t, a, b)
	for _, c := range []struct{ in, want string }{
		{"no secret here", "no secret here"},
		{"a tok-1234 and more", "a [REDACTED:A] and more"},
		{"a tok-1234 and tok-", "a [REDACTED:A] and [REDACTED:A]"},
		{"tok-1234tok-", "[REDACTED:A]"},                  // touching: one range
		{"tok-1234-the-rest", "[REDACTED:A][REDACTED:B]"}, // B cut short
		{"x tok-123", "x [REDACTED:A]"},                   // a start inside no other
		{"ends with tok", "ends with tok"},                // shorter than MinLen
		{`"tok-12\n`, `"tok-12\n`},                        // a form is never broken
		{"1234-the-rest-of-the-long-key", "[REDACTED:B]"}, // whole
		{"1234-the-rest-of-the-long-ke", "[REDACTED:B]"},  // all but one byte
		{"x 1234-the-rest-of-the-long-key!", "x [REDACTED:B]!"},
	} {
		if got := r.Partial(c.in); got != c.want {
			t.Errorf("Partial(%q) = %q, want %q", c.in, got, c.want)
		}
		if !strings.HasSuffix(c.in, "tok-") && !strings.HasSuffix(c.in, "123") && !strings.HasSuffix(c.in, "-rest") && !strings.HasSuffix(c.in, "-ke") {
			if got, want := r.Partial(c.in), r.String(c.in); got != want {
				t.Errorf("Partial(%q) = %q, String = %q", c.in, got, want)
			}
		}
	}
	var nilR *Redactor
	if got := nilR.Partial("tok-12"); got != "tok-12" {
		t.Errorf("a nil Redactor's Partial = %q", got)
	}
}

// TestPartialWithoutSecretReturnsTheInputWithoutAllocating checks the
// path of the texts that end with nothing of a secret.
func TestPartialWithoutSecretReturnsTheInputWithoutAllocating(t *testing.T) {
	r := mustNew(t, Secret{"A", "tok-1234"}, Secret{"B", `pa"ss<word>`}, Secret{"C", "sk-abcdefghijklmnop"})
	text := strings.Repeat("Some text with tok-123 and pa ss and sk-abc, \\\"quoted\\\" %22 \\u0022.\n", 40)
	for _, s := range []string{text, text + "QUJD\n", text + `ab\`} {
		if got := r.Partial(s); got != s {
			t.Fatalf("Partial changed a text with no secret: %q", got[len(got)-40:])
		}
		if n := testing.AllocsPerRun(100, func() { _ = r.Partial(s) }); n != 0 {
			t.Errorf("Partial allocates %v times on a text with no secret", n)
		}
	}
}

// TestPartialNamesASecretWhoseFormStartsSo checks the placeholder of a
// start that two secrets' forms share.
func TestPartialNamesASecretWhoseFormStartsSo(t *testing.T) {
	r := mustNew(t, Secret{"A", "shared-prefix-aaaa"}, Secret{"B", "shared-prefix-bbbb"})
	for _, c := range []struct{ in, want string }{
		{"x shared-prefix-a", "x [REDACTED:A]"},
		{"x shared-prefix-b", "x [REDACTED:B]"},
	} {
		if got := r.Partial(c.in); got != c.want {
			t.Errorf("Partial(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	got := r.Partial("x shared-pre")
	if got != "x [REDACTED:A]" && got != "x [REDACTED:B]" {
		t.Errorf("Partial(%q) = %q, want one of the two placeholders", "x shared-pre", got)
	}
}

// TestPartialAgainstTheReference checks Partial on random secrets over a
// small alphabet, in texts made of pieces of their forms that end with a
// start of one: no end of what Partial returns is the start of a form, of
// MinLen bytes or more, and a text that ends with none is redacted as
// String redacts it.
func TestPartialAgainstTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const alphabet = "ab1\"\\< %+/\n"
	randString := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	// startAtEnd returns the length of the longest start of a form of
	// secrets, of MinLen bytes or more and shorter than the form, that
	// ends s.
	startAtEnd := func(secrets []Secret, s string) int {
		n := 0
		for _, sec := range secrets {
			for _, f := range allForms(sec.Value) {
				for k := MinLen; k < len(f); k++ {
					if k > n && strings.HasSuffix(s, f[:k]) {
						n = k
					}
				}
			}
		}
		return n
	}
	for iter := 0; iter < 3000; iter++ {
		var secrets []Secret
		for i := rng.IntN(3) + 1; i > 0; i-- {
			secrets = append(secrets, Secret{string(rune('A' + rng.IntN(4))), randString(rng.IntN(6) + MinLen)})
		}
		var text strings.Builder
		for i := rng.IntN(6) + 1; i > 0; i-- {
			if rng.IntN(2) == 0 {
				fs := allForms(secrets[rng.IntN(len(secrets))].Value)
				f := fs[rng.IntN(len(fs))]
				if rng.IntN(2) == 0 { // a piece of a form
					f = f[:rng.IntN(len(f))]
				}
				text.WriteString(f)
			} else {
				text.WriteString(randString(rng.IntN(6)))
			}
		}
		r, _ := New(secrets)
		s := text.String()
		got := r.Partial(s)
		if n := startAtEnd(secrets, got); n > 0 {
			t.Fatalf("secrets %q: Partial(%q) = %q ends with %d bytes of a form", secrets, s, got, n)
		}
		if r.String(got) != got {
			t.Fatalf("secrets %q: Partial(%q) = %q has a secret in it", secrets, s, got)
		}
		breakable := false
		for _, sec := range secrets {
			breakable = breakable || len(sec.Value) >= 7
		}
		if startAtEnd(secrets, s) == 0 && !breakable {
			if want := r.String(s); got != want {
				t.Fatalf("secrets %q: Partial(%q) = %q, String = %q", secrets, s, got, want)
			}
		}
	}
}
