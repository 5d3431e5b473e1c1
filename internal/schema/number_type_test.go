package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A json.Number field is advertised as a number (it was a string, so a
// model sending the number the field is for was refused), with the
// keywords its tags give.
func TestJSONNumberFieldsAreNumbers(t *testing.T) {
	type args struct {
		Amount json.Number            `json:"amount"`
		P      *json.Number           `json:"p,omitempty"`
		L      []json.Number          `json:"l,omitempty"`
		M      map[string]json.Number `json:"m,omitempty"`
		D      json.Number            `json:"d,omitempty" jsonschema:"default=2.5,minimum=0"`
		S      json.Number            `json:"s,omitempty,string"`
	}
	doc, err := ForType(reflect.TypeFor[args]())
	if err != nil {
		t.Fatal(err)
	}
	props := doc["properties"].(map[string]any)
	for path, got := range map[string]any{
		"amount": props["amount"].(map[string]any)["type"],
		"p":      props["p"].(map[string]any)["type"],
		"l[]":    props["l"].(map[string]any)["items"].(map[string]any)["type"],
		"m{}":    props["m"].(map[string]any)["additionalProperties"].(map[string]any)["type"],
		"d":      props["d"].(map[string]any)["type"],
	} {
		if got != "number" {
			t.Errorf("%s: type %v, want number", path, got)
		}
	}
	if d := props["d"].(map[string]any); d["minimum"] == nil || d["default"] == nil {
		t.Errorf("d lost its tags: %v", d)
	}
	// With ",string" encoding/json wants the number inside a string.
	if typ := props["s"].(map[string]any)["type"]; typ != "string" {
		t.Errorf("s (,string): type %v, want string", typ)
	}
	s, err := Compile("t", doc)
	if err != nil {
		t.Fatal(err)
	}
	a := NewArgs(s, reflect.TypeFor[args]())
	var got args
	if f := a.Decode(`{"amount":12.50,"p":1e3,"l":[1,2.0]}`, &got); f != nil {
		t.Fatalf("refused: %s", f.Message("Tool"))
	}
	if got.Amount != "12.50" || *got.P != "1e3" || !reflect.DeepEqual(got.L, []json.Number{"1", "2.0"}) || got.D != "2.5" {
		t.Errorf("decoded %+v", got)
	}
	if f := a.Decode(`{"amount":"12.50"}`, new(args)); f == nil || FormatIssues(f.Issues) != "[amount] got string, want number" {
		t.Errorf("a string for a number: %v", f)
	}
}
