package toolrun

import (
	"context"
	"log/slog"
	"net/url"
	"sort"
	"strings"
)

// VarType is the display type of an environment value.
type VarType string

// The variable types of the spec.
const (
	// VarText values may be shown.
	VarText VarType = "text"
	// VarSecret values are redacted from everything that leaves a tool and
	// should be encrypted at rest. It is the default type.
	VarSecret VarType = "secret"
)

// Variable declares an environment variable a tool or prompt needs (spec
// VariableDefinition).
type Variable struct {
	Name string  `json:"name"`
	Type VarType `json:"type"`
	// Required variables are resolved through the env chain before Execute;
	// if one does not resolve, Execute is not called and the call's result is
	// an error naming it.
	Required bool `json:"required"`
	// Scoped blocks inheritance from the parent thread's env for this name;
	// the value still flows down from the thread where it is provided.
	Scoped      bool   `json:"scoped,omitempty"`
	Description string `json:"description"`
}

// redactMinLen is the shortest secret value that is redacted: replacing a
// one- to three-character value everywhere would garble unrelated text.
const redactMinLen = 4

// warnShortSecret logs, at Warn, that a secret value is too short to be
// redacted. where says how it was set ("thread env", "agent defaults" …).
func warnShortSecret(ctx context.Context, log *slog.Logger, where, name string, v EnvValue) {
	if typeOr(v.Type) == VarSecret && v.Value != "" && len(v.Value) < redactMinLen {
		log.WarnContext(ctx, "toolrun: secret value shorter than 4 bytes is not redacted: use a longer value, or type text if it may be shown",
			"name", name, "set_in", where)
	}
}

// redactor replaces secret values by [REDACTED:<NAME>] in text, including
// their JSON-escaped and URL-encoded forms. The zero value redacts nothing.
type redactor struct {
	r *strings.Replacer
}

// newRedactor builds a redactor for secrets (name → value).
func newRedactor(secrets map[string]string) redactor {
	type pair struct{ from, to string }
	var pairs []pair
	seen := map[string]bool{}
	for name, v := range secrets {
		if len(v) < redactMinLen {
			continue
		}
		tok := "[REDACTED:" + name + "]"
		forms := []string{v, jsonEscape(v), url.QueryEscape(v), url.PathEscape(v)}
		for _, f := range forms {
			if f == "" || seen[f] {
				continue
			}
			seen[f] = true
			pairs = append(pairs, pair{f, tok})
		}
	}
	if len(pairs) == 0 {
		return redactor{}
	}
	// Longest first, so a secret that contains another is replaced whole.
	sort.Slice(pairs, func(i, j int) bool {
		if len(pairs[i].from) != len(pairs[j].from) {
			return len(pairs[i].from) > len(pairs[j].from)
		}
		return pairs[i].from < pairs[j].from
	})
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.from, p.to)
	}
	return redactor{r: strings.NewReplacer(args...)}
}

// active reports whether the redactor has anything to replace.
func (r redactor) active() bool { return r.r != nil }

// String redacts s.
func (r redactor) String(s string) string {
	if r.r == nil || s == "" {
		return s
	}
	return r.r.Replace(s)
}

// Value redacts every string inside a JSON-like value, returning a copy
// when anything may change.
func (r redactor) Value(v any) any {
	if r.r == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		return r.String(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[r.String(k)] = r.Value(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = r.Value(e)
		}
		return a
	case []string:
		a := make([]string, len(x))
		for i, e := range x {
			a[i] = r.String(e)
		}
		return a
	}
	return v
}

// jsonEscape returns s as it appears inside a JSON string literal.
func jsonEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
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
		case '<':
			b.WriteString(`\u003c`)
		case '>':
			b.WriteString(`\u003e`)
		case '&':
			b.WriteString(`\u0026`)
		default:
			if c < 0x20 {
				const hex = "0123456789abcdef"
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteRune(c)
			}
		}
	}
	return b.String()
}
