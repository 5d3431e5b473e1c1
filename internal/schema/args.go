package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/toolrun/toolrun/internal/argdecode"
)

// Args is the one route from a call's argument text to the value a tool
// receives, for every kind of tool: the text is checked against the schema
// (every failing location reported), the schema's defaults are applied,
// and the result is decoded. Compile it once per tool with NewArgs; it is
// immutable and safe for concurrent use.
//
// Inside, the quickest route that gives the same result is taken: a text
// checked without building values and decoded by an argdecode plan in one
// pass (typed tools); the scan with a patch of the missing defaults; the
// full validator, which also words the failures; and, for defaults inside
// arrays, defaults applied to a generic value that is encoded again. A new
// keyword or Go type is taught here, in one place.
type Args struct {
	s    *Schema         // nil: the text is not validated
	typ  reflect.Type    // the Go type of typed tools, nil otherwise
	plan *argdecode.Plan // nil: no plan for typ (or no typ)
}

// NewArgs returns the route for arguments validated by s (nil: not
// validated) and decoded into values of type t (nil: handed on as JSON text
// or as a generic object).
func NewArgs(s *Schema, t reflect.Type) *Args {
	a := &Args{s: s, typ: t}
	if t != nil && s != nil {
		a.plan = argdecode.Compile(t, s.Doc())
	}
	return a
}

// Schema returns the schema the arguments are validated against, or nil.
func (a *Args) Schema() *Schema { return a.s }

// Failure says why argument text was refused. Exactly one field is set.
type Failure struct {
	// Syntax is the JSON parser's error: the text is not JSON.
	Syntax error
	// Issues are the validation failures, sorted by path.
	Issues []Issue
	// Decode is the error of decoding checked text into the tool's Go type
	// (a value the schema lets through that the type cannot hold).
	Decode error
}

// Message words the failure for the model, for a tool of the given kind
// ("Tool", "Prompt tool"): "<kind> arguments are not valid JSON: <parser
// message>", "<kind> argument validation failed: [path] message; …" or
// "<kind> arguments do not decode: <error>".
func (f *Failure) Message(kind string) string {
	switch {
	case f.Syntax != nil:
		return kind + " arguments are not valid JSON: " + f.Syntax.Error()
	case len(f.Issues) > 0:
		return kind + " argument validation failed: " + FormatIssues(f.Issues)
	case f.Decode != nil:
		return kind + " arguments do not decode: " + f.Decode.Error()
	}
	return kind + " arguments were refused"
}

// FormatIssues formats issues as "[path] message; [path] message". It is
// the one wording of validation failures.
func FormatIssues(issues []Issue) string {
	var sb strings.Builder
	for i, is := range issues {
		if i > 0 {
			sb.WriteString("; ")
		}
		sb.WriteString(is.String())
	}
	return sb.String()
}

// Decode checks text (empty or blank text means {}) against the schema,
// applies its defaults and stores the result in dst, which is one of:
//   - *T, T the Args's type (typed tools);
//   - *json.RawMessage: the JSON text, defaults merged in (text without a
//     schema is handed on as it came, once it is known to be JSON);
//   - *map[string]any: a generic object (null for the JSON null).
//
// It returns nil on success, else the failure; dst is then unspecified.
func (a *Args) Decode(text string, dst any) *Failure {
	text = strings.TrimSpace(text)
	if text == "" {
		text = "{}"
	}
	switch d := dst.(type) {
	case *json.RawMessage:
		raw, _, f := a.checked(text, false)
		*d = raw
		return f
	case *map[string]any:
		v, f := a.generic(text)
		if f != nil {
			return f
		}
		m, _ := v.(map[string]any)
		*d = m
		return nil
	}
	return a.typed(text, dst)
}

// typed decodes into dst, a pointer to a value of a.typ.
func (a *Args) typed(text string, dst any) *Failure {
	if a.plan != nil {
		// The quickest route: check the text without building values; the
		// plan decodes it and adds the defaults.
		if ok, _, supported := a.s.Check(text); supported && ok {
			if a.plan.Decode(text, reflect.ValueOf(dst).Elem()) {
				return nil
			}
			// Text the plan leaves to encoding/json (a syntax error the scan
			// let through, a number too big for its field, a duplicate key
			// …): the general route, with its errors.
			reflect.ValueOf(dst).Elem().SetZero()
		}
	}
	raw, patch, f := a.checked(text, true)
	if f != nil {
		return f
	}
	if err := argdecode.Unmarshal(raw, dst); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return &Failure{Syntax: err}
		}
		if is, ok := numberIssue(err); ok {
			return &Failure{Issues: []Issue{is}}
		}
		return &Failure{Decode: err}
	}
	if patch != nil {
		if err := json.Unmarshal(patch, dst); err != nil {
			return &Failure{Decode: err}
		}
	}
	return nil
}

// generic returns the checked value with the defaults applied.
func (a *Args) generic(text string) (any, *Failure) {
	v, err := Decode([]byte(text))
	if err != nil {
		return nil, &Failure{Syntax: err}
	}
	if a.s == nil {
		return v, nil
	}
	exact, _ := decodeExact([]byte(text))
	if issues := a.s.Validate(exact); len(issues) > 0 {
		return nil, &Failure{Issues: issues}
	}
	a.s.ApplyDefaults(v)
	return v, nil
}

// checked validates text and returns the JSON to decode and, for typed
// callers, a patch of the missing defaults to decode on top of it (nil
// when none). For other callers defaults are merged into the JSON itself.
func (a *Args) checked(text string, typed bool) (raw []byte, patch []byte, f *Failure) {
	raw = []byte(text)
	s := a.s
	if s != nil && (typed || json.Valid(raw)) {
		// Validate the text directly, without generic values. Typed callers
		// skip json.Valid: their decoder reports a syntax error itself.
		if ok, p, supported := s.Scan(text); supported && ok {
			if p == nil {
				return raw, nil, nil
			}
			if typed {
				if b, err := json.Marshal(p); err == nil {
					return raw, b, nil
				}
			}
		}
	}
	v, err := decodeExact(raw)
	if err != nil {
		return nil, nil, &Failure{Syntax: err}
	}
	if s == nil {
		return raw, nil, nil
	}
	if issues := s.Validate(v); len(issues) > 0 {
		return nil, nil, &Failure{Issues: issues}
	}
	if !s.HasDefaults() {
		return raw, nil, nil
	}
	p, full := s.DefaultsPatch(v)
	if p == nil && !full {
		return raw, nil, nil
	}
	if typed && !full {
		if b, err := json.Marshal(p); err == nil {
			return raw, b, nil
		}
	}
	s.ApplyDefaults(v)
	if raw, err = json.Marshal(v); err != nil {
		return nil, nil, &Failure{Decode: err}
	}
	return raw, nil, nil
}

// numberIssue words encoding/json's refusal of a number for a Go number
// type (one the schema let through: 1e400 for a float64) as a validation
// issue, in the words the model reads elsewhere, naming the range the
// field holds.
func numberIssue(err error) (Issue, bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type == nil {
		return Issue{}, false
	}
	lit, ok := strings.CutPrefix(te.Value, "number ")
	if !ok {
		return Issue{}, false
	}
	var want string
	switch t := te.Type; t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		shift := 64 - t.Bits()
		want = fmt.Sprintf("an integer from %d to %d", int64(math.MinInt64)>>shift, int64(math.MaxInt64)>>shift)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		want = fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32:
		want = fmt.Sprintf("a number from %g to %g", -math.MaxFloat32, math.MaxFloat32)
	case reflect.Float64:
		want = fmt.Sprintf("a number from %g to %g", -math.MaxFloat64, math.MaxFloat64)
	default:
		return Issue{}, false
	}
	if strings.ContainsAny(lit, ".eE") && strings.HasPrefix(want, "an integer") {
		// Taken where Unmarshal could follow the field (1.0 for an int);
		// elsewhere (a name fields share) the model must write it plainly.
		want += ", written without a fraction or exponent"
	}
	path := te.Field
	if path == "" {
		path = "root"
	}
	return Issue{Path: path, Message: fmt.Sprintf("got %s, want %s", lit, want)}, true
}
