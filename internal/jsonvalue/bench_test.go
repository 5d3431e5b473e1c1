package jsonvalue

import (
	"encoding/json"
	"testing"
	"time"
)

// jsonRoundTrip is what the root package did before: json.Marshal, then
// json.Unmarshal into an any.
func jsonRoundTrip(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// cloneRecursive is the recursive deep copy the root package uses today.
func cloneRecursive(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneRecursive(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = cloneRecursive(e)
		}
		return a
	}
	return v
}

type issue struct {
	ID        int64     `json:"id"`
	Title     string    `json:"title"`
	State     string    `json:"state"`
	Labels    []string  `json:"labels"`
	Assignee  *user     `json:"assignee,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Comments  int       `json:"comments"`
	Draft     bool      `json:"draft,omitempty"`
}

type user struct {
	Login string `json:"login"`
	URL   string `json:"url"`
}

func benchValues() []struct {
	name string
	v    any
} {
	flat := map[string]any{
		"status": "failed", "code": 42.0, "retryable": true, "detail": nil,
		"tool": "get_issue", "attempt": 3.0, "host": "api.github.com", "path": "/repos/o/r/issues/1",
	}
	nested := map[string]any{
		"error": map[string]any{"type": "http", "status": 502.0, "message": "Bad Gateway"},
		"request": map[string]any{
			"method": "GET", "url": "https://api.github.com/repos/o/r/issues?state=open",
			"headers": map[string]any{"accept": "application/json", "user-agent": "toolrun"},
		},
		"attempts": []any{
			map[string]any{"at": "2026-03-14T09:26:53Z", "status": 502.0},
			map[string]any{"at": "2026-03-14T09:26:54Z", "status": 503.0},
			map[string]any{"at": "2026-03-14T09:26:56Z", "status": 502.0},
		},
		"labels": []any{"bug", "needs-triage", "p1"},
	}
	st := []issue{
		{ID: 48213, Title: "Build fails", State: "open", Labels: []string{"bug"}, Assignee: &user{"octocat", "https://api.github.com/users/octocat"},
			CreatedAt: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC), Comments: 3},
		{ID: 48214, Title: "Docs", State: "closed", Labels: []string{"docs", "good first issue"}, CreatedAt: time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)},
	}
	return []struct {
		name string
		v    any
	}{{"flat-map", flat}, {"nested-map", nested}, {"structs", st}}
}

func BenchmarkNormalize(b *testing.B) {
	for _, bv := range benchValues() {
		b.Run(bv.name+"/impl=Normalize", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Normalize("v", bv.v, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bv.name+"/impl=json-round-trip", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = jsonRoundTrip(bv.v)
			}
		})
	}
}

func BenchmarkClone(b *testing.B) {
	for _, bv := range benchValues()[:2] {
		b.Run(bv.name+"/impl=Clone", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = Clone(bv.v)
			}
		})
		b.Run(bv.name+"/impl=recursive", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink = cloneRecursive(bv.v)
			}
		})
	}
}
