package toolrun

import "testing"

// TestValidTextCopiesWhatItFixes: validText fixes a message's own strings
// in place, but copies a slice of calls or attachments before it changes
// an element, so that a slice the caller still holds keeps its bytes; a
// message already valid keeps its slices.
func TestValidTextCopiesWhatItFixes(t *testing.T) {
	const bad, fixed = "x\xff", "x\ufffd"
	calls := []ToolCall{{ID: "c1", Name: "t", Arguments: `{"a":"` + bad + `"}`}}
	refs := []AttachmentRef{{ID: "a1", Type: "file", Path: "/f", Name: bad}}
	m := &Message{Content: bad, Stack: bad, ToolCalls: calls, QueuedCalls: calls, Attachments: refs}
	validText(m)
	if m.Content != fixed || m.Stack != fixed {
		t.Errorf("strings not fixed: %q %q", m.Content, m.Stack)
	}
	if m.ToolCalls[0].Arguments != `{"a":"`+fixed+`"}` || m.QueuedCalls[0].Arguments != m.ToolCalls[0].Arguments {
		t.Errorf("calls not fixed: %q %q", m.ToolCalls[0].Arguments, m.QueuedCalls[0].Arguments)
	}
	if m.Attachments[0].Name != fixed {
		t.Errorf("attachment not fixed: %q", m.Attachments[0].Name)
	}
	if calls[0].Arguments != `{"a":"`+bad+`"}` || refs[0].Name != bad {
		t.Errorf("the caller's slices changed: %q %q", calls[0].Arguments, refs[0].Name)
	}

	ok := []ToolCall{{ID: "c2", Name: "t", Arguments: "{}"}}
	m = &Message{Content: "fine", ToolCalls: ok}
	validText(m)
	if &m.ToolCalls[0] != &ok[0] {
		t.Error("a valid message's calls were copied")
	}
	if n := testing.AllocsPerRun(100, func() { validText(m) }); n != 0 {
		t.Errorf("validText of a valid message allocates %v times", n)
	}
}
