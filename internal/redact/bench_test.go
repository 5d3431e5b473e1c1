package redact

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// replacer is the redactor the root package used before this package, kept
// here as the baseline: one strings.Replacer over the raw, JSON-escaped
// (encoding/json's HTML-safe style) and URL-escaped forms.
type replacer struct{ r *strings.Replacer }

func newReplacer(secrets []Secret) replacer {
	type pair struct{ from, to string }
	var pairs []pair
	seen := map[string]bool{}
	for _, s := range secrets {
		if len(s.Value) < MinLen {
			continue
		}
		tok := "[REDACTED:" + s.Name + "]"
		for _, f := range []string{s.Value, jsonStyles[0].escape(s.Value), url.QueryEscape(s.Value), url.PathEscape(s.Value)} {
			if f != "" && !seen[f] {
				seen[f] = true
				pairs = append(pairs, pair{f, tok})
			}
		}
	}
	if len(pairs) == 0 {
		return replacer{}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if len(pairs[i].from) != len(pairs[j].from) {
			return len(pairs[i].from) > len(pairs[j].from)
		}
		return pairs[i].from < pairs[j].from
	})
	var args []string
	for _, p := range pairs {
		args = append(args, p.from, p.to)
	}
	return replacer{strings.NewReplacer(args...)}
}

func (r replacer) String(s string) string {
	if r.r == nil || s == "" {
		return s
	}
	return r.r.Replace(s)
}

var benchSecrets = []Secret{
	{"OPENAI_API_KEY", "sk-proj-Xq7vB2mK9pL4nR8tW1yZ3aC6dF0gH5jQ"},
	{"GITHUB_TOKEN", "ghp_R4nD0mT0k3nV4lu3F0rT3st1ngPurp0s3s"},
	{"SLACK_TOKEN", "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp"},
	{"SIGNING_KEY", "dGhpcyBpcyBhIHNlY3JldCB2YWx1ZQ+/abc=="},
	{"DB_PASSWORD", `p@ss"w0rd<&>!`},
	{"AWS_SECRET", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	{"STRIPE_KEY", "sk_live_51H8xYzABCdefGHIjklMNO"},
	{"DATABASE_URL", "postgres://app:S3cr3t%21@db:5432/app"},
	{"SESSION_JWT", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2ln"},
	{"PASSPHRASE", "ünïcode sëcret välue"},
}

// benchText returns about n bytes of what tool results look like: prose,
// JSON with escaped quotes, URLs and numbers.
func benchText(n int) string {
	const chunk = `The issue was triaged and labelled as a bug; the reporter says the ` +
		`build fails on Linux with "exit status 2". {"id": 48213, "state": "open", ` +
		`"title": "Build fails: \"undefined: foo\"", "url": "https://api.github.com/repos/o/r/issues/48213?page=2&per_page=30", ` +
		`"labels": ["bug", "needs-triage"], "created_at": "2026-03-14T09:26:53Z"}` + "\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(chunk)
	}
	return b.String()[:n]
}

type benchRedactor interface{ String(string) string }

func BenchmarkString(b *testing.B) {
	for _, size := range []int{200, 20 << 10} {
		for _, nsec := range []int{0, 1, 10} {
			for _, match := range []string{"none", "one"} {
				if nsec == 0 && match == "one" {
					continue
				}
				text := benchText(size)
				if match == "one" {
					// One occurrence of the first secret, JSON-escaped, in the middle.
					v := jsonStyles[0].escape(benchSecrets[0].Value)
					text = text[:size/2-len(v)/2] + v + text[size/2-len(v)/2+len(v):]
				}
				secrets := benchSecrets[:nsec]
				red, _ := New(secrets)
				impls := []struct {
					name string
					r    benchRedactor
				}{{"redact", red}, {"replacer", newReplacer(secrets)}}
				for _, impl := range impls {
					name := fmt.Sprintf("size=%d/secrets=%d/match=%s/impl=%s", size, nsec, match, impl.name)
					b.Run(name, func(b *testing.B) {
						if got := impl.r.String(text); (got != text) != (match == "one") {
							b.Fatalf("%s: redacted %v, want %v", impl.name, got != text, match == "one")
						}
						b.SetBytes(int64(len(text)))
						b.ReportAllocs()
						for b.Loop() {
							_ = impl.r.String(text)
						}
					})
				}
			}
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for _, nsec := range []int{1, 10} {
		secrets := benchSecrets[:nsec]
		b.Run(fmt.Sprintf("secrets=%d/impl=redact", nsec), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				New(secrets)
			}
		})
		b.Run(fmt.Sprintf("secrets=%d/impl=replacer", nsec), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				newReplacer(secrets)
			}
		})
	}
}

func BenchmarkValue(b *testing.B) {
	red, _ := New(benchSecrets)
	tree := map[string]any{
		"title": "Build fails", "state": "open", "id": 48213.0, "draft": false,
		"labels": []any{"bug", "needs-triage"},
		"user":   map[string]any{"login": "octocat", "url": "https://api.github.com/users/octocat"},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = red.Value(tree)
	}
}

// linesText returns about n bytes of log lines, most of which end and
// start with a letter or digit.
func linesText(n int) string {
	const chunk = "2026-03-14T09:26:53Z INFO handler finished request 48213 in 12ms\n" +
		"user session refreshed for account octocat\n" +
		"GET /repos/o/r/issues?page=2 200\n"
	return strings.Repeat(chunk, n/len(chunk)+1)[:n]
}

// mimeText returns about n bytes of base64 at 76 columns with CRLF line
// breaks, as MIME writes it, of data with secret in its middle.
func mimeText(n int, secret string) string {
	data := make([]byte, n*3/4)
	for i := range data {
		data[i] = byte(i*7 + i*i/13)
	}
	copy(data[len(data)/2:], secret)
	e := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	for len(e) > 76 {
		b.WriteString(e[:76])
		b.WriteString("\r\n")
		e = e[76:]
	}
	b.WriteString(e)
	return b.String()
}

// yamlText returns the base64 of mimeText with LF line breaks and each
// line indented by four spaces, as a YAML block scalar holds it.
func yamlText(n int, secret string) string {
	return "tls_key: |\n    " + strings.ReplaceAll(mimeText(n, secret), "\r\n", "\n    ")
}

// trailingText returns the base64 of mimeText with two spaces at the end
// of each line and LF line breaks, and a blank line after every tenth
// line.
func trailingText(n int, secret string) string {
	lines := strings.Split(mimeText(n, secret), "\r\n")
	for i := 9; i < len(lines)-1; i += 10 {
		lines[i] += "  \n"
	}
	return strings.Join(lines, "  \n")
}

// BenchmarkLines scans texts broken into lines: log lines, base64 at 76
// columns without a secret, and with the first secret in it (broken across
// a line on the code that finds it so), the same base64 with each line
// indented, and with spaces at the end of each line and blank lines.
func BenchmarkLines(b *testing.B) {
	const size = 20 << 10
	texts := []struct{ name, text string }{
		{"logs", linesText(size)},
		{"mime", mimeText(size, "")},
		{"mime+secret", mimeText(size, benchSecrets[0].Value)},
		{"indented", yamlText(size, "")},
		{"indented+secret", yamlText(size, benchSecrets[0].Value)},
		{"trailing", trailingText(size, "")},
		{"trailing+secret", trailingText(size, benchSecrets[0].Value)},
	}
	for _, nsec := range []int{1, 10} {
		red, _ := New(benchSecrets[:nsec])
		for _, tt := range texts {
			b.Run(fmt.Sprintf("text=%s/secrets=%d", tt.name, nsec), func(b *testing.B) {
				if got := red.String(tt.text); !strings.HasSuffix(tt.name, "+secret") && got != tt.text {
					b.Fatal("a text with no secret was changed")
				}
				b.SetBytes(int64(len(tt.text)))
				b.ReportAllocs()
				for b.Loop() {
					_ = red.String(tt.text)
				}
			})
		}
	}
}
