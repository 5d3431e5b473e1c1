package toolrun_test

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrun/toolrun"
)

// A secret with every character an encoder changes: quotes, backslash,
// the HTML-sensitive <, > and &, a control character, U+2028, a space and
// the bytes URL encoding changes.
const trickySecret = "tok\"en\\<&>\t\u2028 +%/?=é"

// secretForms are the forms a secret takes on its way out, each made by the
// encoder that writes it.
func secretForms() map[string]string {
	jsonHTML, _ := json.Marshal(trickySecret)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(trickySecret)
	twice, _ := json.Marshal(string(jsonHTML))
	unq := func(b []byte) string {
		return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(b)), `"`), `"`)
	}
	return map[string]string{
		"raw":                            trickySecret,
		"JSON (HTML-safe)":               unq(jsonHTML),
		"JSON (not HTML-safe)":           unq(plain.Bytes()),
		"JSON.stringify":                 jsStringify(trickySecret),
		"JSON escaped twice":             unq(twice),
		"query":                          url.QueryEscape(trickySecret),
		"query, lower hex":               lowerHex(url.QueryEscape(trickySecret)),
		"path":                           url.PathEscape(trickySecret),
		"encodeURIComponent":             encodeURIComponent(trickySecret),
		"RFC 3986, lower hex":            lowerHex(encodeURIComponent(trickySecret)),
		"base64":                         base64.StdEncoding.EncodeToString([]byte(trickySecret)),
		"base64, URL-safe":               base64.RawURLEncoding.EncodeToString([]byte("x" + trickySecret)),
		"HTTP Basic":                     "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+trickySecret)),
		"hex":                            hex.EncodeToString([]byte(trickySecret)),
		"hex, upper case":                strings.ToUpper(hex.EncodeToString([]byte(trickySecret))),
		"base64, MIME lines (76, CRLF)":  lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("m", 45)+trickySecret)), 76, "\r\n"),
		"base64, PEM lines (64)":         lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("p", 36)+trickySecret+"!")), 64, "\n"),
		"base64 lines in JSON (\\n)":     lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("j", 40)+trickySecret)), 64, `\n`),
		"base32 lines (7, CRLF in JSON)": lines(base32.StdEncoding.EncodeToString([]byte("ab"+trickySecret)), 7, `\r\n`),
		"hex, xxd -p lines (60)":         lines(hex.EncodeToString([]byte(strings.Repeat("x", 10)+trickySecret)), 60, "\n"),
		"indented base64 lines (YAML)":   "key: |\n    " + lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("y", 30)+trickySecret)), 32, "\n    "),
		"indented base64 (tab, CRLF)":    "\t" + lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("t", 20)+trickySecret)), 16, "\r\n\t"),
		"base64 lines, trailing spaces":  lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", 25)+trickySecret)), 40, "  \n"),
		"base64 lines, blank lines":      lines(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("b", 15)+trickySecret)), 24, "\r\n\r\n"),
		"hex, colons":                    sepHex("\x00"+trickySecret+"\xff", ":", false),
		"hex, spaces, upper":             sepHex(trickySecret, " ", true),
		"hex, dashes, upper":             sepHex("ab"+trickySecret, "-", true),
		"base32":                         base32.StdEncoding.EncodeToString([]byte("ab" + trickySecret)),
		"base32, lower case":             strings.ToLower(base32.StdEncoding.EncodeToString([]byte(trickySecret + "!"))),
		"HTML":                           html.EscapeString(trickySecret),
		"HTML, &quot;":                   strings.ReplaceAll(html.EscapeString(trickySecret), "&#34;", "&quot;"),
	}
}

// lines breaks s into lines of width characters with nl, as encoders
// that break their output write it.
func lines(s string, width int, nl string) string {
	var b strings.Builder
	for len(s) > width {
		b.WriteString(s[:width] + nl)
		s = s[width:]
	}
	b.WriteString(s)
	return b.String()
}

// sepHex writes s in hex, lower or upper case, with sep between bytes, as
// fingerprints and dumps do.
func sepHex(s, sep string, upper bool) string {
	parts := make([]string, len(s))
	for i := range len(s) {
		parts[i] = hex.EncodeToString([]byte{s[i]})
		if upper {
			parts[i] = strings.ToUpper(parts[i])
		}
	}
	return strings.Join(parts, sep)
}

// jsStringify writes s as JavaScript's JSON.stringify does: only quotes,
// backslashes and control characters are escaped; U+2028 stays as it is.
func jsStringify(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}

// encodeURIComponent percent-encodes every byte but A–Z a–z 0–9 - _ . ! ~ * ' ( ).
func encodeURIComponent(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func lowerHex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			b.WriteString("%" + strings.ToLower(s[i+1:i+3]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// strs collects every string inside v (structs, maps, slices, pointers).
func strs(v any) []string {
	var out []string
	var walk func(reflect.Value, int)
	walk = func(x reflect.Value, depth int) {
		if depth > 50 || !x.IsValid() {
			return
		}
		switch x.Kind() {
		case reflect.String:
			out = append(out, x.String())
		case reflect.Pointer, reflect.Interface:
			if !x.IsNil() {
				walk(x.Elem(), depth+1)
			}
		case reflect.Struct:
			for i := 0; i < x.NumField(); i++ {
				if x.Type().Field(i).IsExported() {
					walk(x.Field(i), depth+1)
				}
			}
		case reflect.Map:
			for _, k := range x.MapKeys() {
				walk(k, depth+1)
				walk(x.MapIndex(k), depth+1)
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < x.Len(); i++ {
				walk(x.Index(i), depth+1)
			}
		}
	}
	walk(reflect.ValueOf(v), 0)
	return out
}

// TestEveryFormOfASecretIsRedactedFromEveryExit: for each form a secret can
// take, a tool sends that form out of every exit; no exit may carry it, and
// the placeholder must show where it was.
func TestEveryFormOfASecretIsRedactedFromEveryExit(t *testing.T) {
	forms := secretForms()
	for formName, form := range forms {
		t.Run(formName, func(t *testing.T) {
			var logs bytes.Buffer
			rec := &eventRecorder{}
			var events []toolrun.Event
			var done []toolrun.ToolCallDone
			ex := newExec(t, &toolrun.ExecutorOptions{
				Env:            map[string]toolrun.EnvValue{"TOKEN": {Value: trickySecret, Type: toolrun.VarSecret}},
				Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				TracerProvider: rec,
				Hooks:          toolrun.Hooks{ToolCallDone: func(_ context.Context, _ string, ev toolrun.ToolCallDone) { done = append(done, ev) }},
			},
				&toolrun.RawFunc{Name: "leak", Execute: func(ctx context.Context, s toolrun.ThreadState, _ json.RawMessage) (toolrun.Result, error) {
					s.Emit("ev "+form, map[string]any{"k": form, form: 1})
					trace.SpanFromContext(ctx).SetAttributes(attribute.String("k", form))
					if err := s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleSystem, Content: form, Metadata: map[string]any{"k": form}}); err != nil {
						return toolrun.Result{}, err
					}
					return toolrun.Result{Status: toolrun.StatusError, Error: "error " + form, ErrorCode: "code " + form,
						ErrorData: map[string]any{"k": form, "list": []any{form}}, Stack: "stack " + form}, nil
				}},
				&toolrun.RawFunc{Name: "echo", Execute: func(ctx context.Context, s toolrun.ThreadState, _ json.RawMessage) (toolrun.Result, error) {
					return toolrun.Text("content " + form), nil
				}},
			)
			ex.Subscribe("t", func(ev toolrun.Event) { events = append(events, ev) })
			args, _ := json.Marshal(map[string]string{"arg": form})
			out := run(t, ex, "t", call("c1", "leak", string(args)), call("c2", "echo", ""))
			page, err := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
			require.NoError(t, err)

			exits := map[string]any{
				"stored messages (content, error, error_data, metadata)": page.Messages,
				"outcomes":            out,
				"events":              events,
				"done hook":           done,
				"spans":               rec.spans[0].attrs,
				"span names/statuses": []string{rec.spans[0].name, rec.spans[0].desc},
				"logs":                logs.String(),
			}
			for exit, v := range exits {
				for _, s := range strs(v) {
					for other, f := range forms {
						if len(f) >= 4 && strings.Contains(s, f) {
							t.Errorf("%s carries the %s form of the secret: %q", exit, other, s)
						}
					}
				}
			}
			all := strings.Join(strs(exits), "\n")
			assert.Contains(t, all, "[REDACTED:TOKEN]")
			assert.Contains(t, page.Messages[len(page.Messages)-1].Content, "[REDACTED:TOKEN]")
		})
	}
}

// Two secrets that overlap in a text must both go, whole.
func TestOverlappingSecretsAreRedactedWhole(t *testing.T) {
	ex := newExec(t, &toolrun.ExecutorOptions{Env: map[string]toolrun.EnvValue{
		"SHORT": {Value: "tok-1234"}, "LONG": {Value: "1234-the-rest-of-the-long-key"},
	}}, fn("leak", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("key tok-1234-the-rest-of-the-long-key end"), nil
	}))
	out := run(t, ex, "t", call("1", "leak", ""))
	c := out[0].Message.Content
	assert.NotContains(t, c, "1234")
	assert.NotContains(t, c, "rest-of")
	assert.Contains(t, c, "key [REDACTED:")
	assert.Contains(t, c, "] end")
}
