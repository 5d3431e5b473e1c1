package openai

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

type strictFilter struct {
	State string `json:"state,omitempty"`
	Since string `json:"since,omitempty"`
}

type strictSearch struct {
	Query  string        `json:"query"`
	Limit  int           `json:"limit,omitempty" jsonschema:"default=10"`
	Label  string        `json:"label,omitempty"`
	Filter *strictFilter `json:"filter,omitempty"`
}

// In strict mode OpenAI's schemas make every optional property required and
// nullable, so the model sends null for what it leaves out. Those nulls must
// not fail validation against the tool's own schema: they are removed and
// the defaults applied, for any struct with optional fields.
func TestStrictModeNullsForOptionalFieldsReachTheToolAsAbsent(t *testing.T) {
	srv := newServer(t, sseReply(t, "strict_nulls.sse"), sseReply(t, "text.sse"))
	var got []strictSearch
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "m", Provider: testProvider(srv.URL, func(o *Options) { o.Strict = true }), ID: "gpt-test"},
		&toolrun.Func[strictSearch]{Name: "search_issues", Description: "Search issues", Execute: func(ctx context.Context, s toolrun.ThreadState, a strictSearch) (toolrun.Result, error) {
			got = append(got, a)
			return toolrun.Text("found 2"), nil
		}},
		&toolrun.Prompt{Name: "p", Model: "m", IncludeChat: true, IncludePastTools: true, Tools: []toolrun.PromptTool{toolrun.Use("search_issues")}},
		&toolrun.Agent{Name: "a", SideA: toolrun.Side{Prompt: "p"}, SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "a", nil)
	require.NoError(t, err)
	reply, err := rt.Send(context.Background(), th.ID, "find the crash")
	require.NoError(t, err)

	// The tool was advertised in strict form: every property required, the
	// optional ones nullable.
	var req struct {
		Tools []struct {
			Function struct {
				Strict     bool `json:"strict"`
				Parameters struct {
					Required   []string                  `json:"required"`
					Properties map[string]map[string]any `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	require.NoError(t, json.Unmarshal(<-srv.bodies, &req))
	require.Len(t, req.Tools, 1)
	fn := req.Tools[0].Function
	assert.True(t, fn.Strict)
	assert.ElementsMatch(t, []string{"query", "limit", "label", "filter"}, fn.Parameters.Required)
	assert.Contains(t, fn.Parameters.Properties["limit"]["type"], "null")

	require.Len(t, got, 1, "the tool ran: %v", reply.Messages)
	assert.Equal(t, strictSearch{Query: "crash on start", Limit: 10, Filter: &strictFilter{State: "open"}}, got[0])
	for _, m := range reply.Messages {
		if m.Role == toolrun.RoleTool {
			assert.Equal(t, toolrun.StatusSuccess, m.ToolStatus, m.Content)
		}
	}
}
