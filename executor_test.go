package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

type searchArgs struct {
	Query   string   `json:"query" jsonschema:"description=Search query"`
	Limit   int      `json:"limit,omitempty" jsonschema:"description=Maximum results,default=10,minimum=1"`
	Format  string   `json:"format" jsonschema:"enum=json,enum=text,enum=markdown"`
	Filters *filters `json:"filters,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

type filters struct {
	Category string  `json:"category,omitempty"`
	MinPrice float64 `json:"minPrice,omitempty"`
}

// newExec registers defs in a fresh registry and returns an executor over a
// memory store.
func newExec(t testing.TB, opts *toolrun.ExecutorOptions, defs ...toolrun.Definition) *toolrun.Executor {
	t.Helper()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(defs...))
	if opts == nil {
		opts = &toolrun.ExecutorOptions{}
	}
	if opts.Store == nil {
		opts.Store = toolrun.NewMemoryStore()
	}
	return toolrun.NewExecutor(reg, opts)
}

func call(id, name, args string) toolrun.ToolCall {
	return toolrun.ToolCall{ID: id, Name: name, Arguments: args}
}

// run runs one batch and returns the stored contents by call id.
func run(t testing.TB, ex *toolrun.Executor, thread string, calls ...toolrun.ToolCall) []toolrun.Outcome {
	t.Helper()
	out, err := ex.Run(context.Background(), thread, calls)
	require.NoError(t, err)
	return out
}

func searchTool(got *searchArgs) *toolrun.Func[searchArgs] {
	return &toolrun.Func[searchArgs]{
		Name:        "search",
		Description: "Search",
		Execute: func(ctx context.Context, s toolrun.ThreadState, a searchArgs) (toolrun.Result, error) {
			if got != nil {
				*got = a
			}
			return toolrun.Text("found " + a.Query), nil
		},
	}
}

func TestArgumentsEmptyTextMeansEmptyObject(t *testing.T) {
	called := false
	ex := newExec(t, nil, &toolrun.Func[struct{}]{Name: "ping", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
		called = true
		return toolrun.Text("pong"), nil
	}})
	out := run(t, ex, "t1", call("c1", "ping", "  \n"))
	require.True(t, called)
	assert.Equal(t, "pong", out[0].Message.Content)
	assert.Equal(t, toolrun.StatusSuccess, out[0].Message.ToolStatus)
}

func TestArgumentsNotJSONIsAnError(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	out := run(t, ex, "t1", call("c1", "search", `{"query": "x"`))
	m := out[0].Message
	assert.Equal(t, toolrun.StatusError, m.ToolStatus)
	assert.True(t, strings.HasPrefix(m.Content, "Failed to execute tool: Tool arguments are not valid JSON: "), m.Content)
}

func TestValidationFailureListsEveryLocationSorted(t *testing.T) {
	called := false
	tool := searchTool(nil)
	tool.Execute = func(context.Context, toolrun.ThreadState, searchArgs) (toolrun.Result, error) {
		called = true
		return toolrun.Text(""), nil
	}
	ex := newExec(t, nil, tool)
	out := run(t, ex, "t1", call("c1", "search", `{"query": 3, "format": "xml", "limt": 5, "filters": {"category": 1}}`))
	require.False(t, called, "execute must not run on invalid arguments")
	got := out[0].Result.Error
	require.True(t, strings.HasPrefix(got, "Tool argument validation failed: "), got)
	parts := strings.Split(strings.TrimPrefix(got, "Tool argument validation failed: "), "; ")
	require.GreaterOrEqual(t, len(parts), 4, got)
	paths := make([]string, len(parts))
	for i, p := range parts {
		require.True(t, strings.HasPrefix(p, "["), p)
		paths[i] = p[1:strings.IndexByte(p, ']')]
	}
	assert.IsNonDecreasing(t, paths)
	assert.Contains(t, paths, "root")             // the unknown key "limt"
	assert.Contains(t, paths, "query")            // wrong type
	assert.Contains(t, paths, "format")           // not in enum
	assert.Contains(t, paths, "filters.category") // nested, dot-joined
	assert.Contains(t, got, "limt", "the unknown key is named")
}

func TestValidationMissingRequiredField(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	out := run(t, ex, "t1", call("c1", "search", `{"format":"json"}`))
	assert.Equal(t, "Failed to execute tool: Tool argument validation failed: [query] required property is missing", out[0].Message.Content)
}

func TestValidationNullArguments(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	out := run(t, ex, "t1", call("c1", "search", `null`))
	assert.Contains(t, out[0].Message.Content, "Tool argument validation failed: [root] ")
}

func TestDefaultsAppliedBeforeDecoding(t *testing.T) {
	var got searchArgs
	ex := newExec(t, nil, searchTool(&got))
	run(t, ex, "t1", call("c1", "search", `{"query":"q","format":"json"}`))
	assert.Equal(t, 10, got.Limit, "the schema default reaches Execute")
	run(t, ex, "t1", call("c2", "search", `{"query":"q","format":"json","limit":3}`))
	assert.Equal(t, 3, got.Limit, "a given value wins over the default")
}

func TestRawFuncValidatesAgainstItsSchema(t *testing.T) {
	var got json.RawMessage
	ex := newExec(t, nil, &toolrun.RawFunc{
		Name:   "raw",
		Schema: `{"type":"object","properties":{"n":{"type":"integer","default":7},"s":{"type":"string"}},"required":["s"],"additionalProperties":false}`,
		Execute: func(ctx context.Context, s toolrun.ThreadState, args json.RawMessage) (toolrun.Result, error) {
			got = args
			return toolrun.Text("ok"), nil
		},
	})
	out := run(t, ex, "t1", call("c1", "raw", `{"s":"x"}`), call("c2", "raw", `{"n":1}`))
	assert.JSONEq(t, `{"s":"x","n":7}`, string(got))
	assert.Equal(t, "Failed to execute tool: Tool argument validation failed: [s] required property is missing", out[1].Message.Content)
}

func TestUnknownTool(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	out := run(t, ex, "t1", call("c1", "nope", `{}`))
	assert.Equal(t, "Failed to execute tool: Tool not found: nope", out[0].Message.Content)
}

func TestStoredContentTexts(t *testing.T) {
	ex := newExec(t, nil,
		&toolrun.Func[struct{}]{Name: "empty_ok", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{}, nil
		}},
		&toolrun.Func[struct{}]{Name: "padded", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Text("  hi \n"), nil
		}},
		&toolrun.Func[struct{}]{Name: "empty_err", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{Status: toolrun.StatusError}, nil
		}},
		&toolrun.Func[struct{}]{Name: "go_err", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{}, codedErr{"boom", "E_BOOM"}
		}},
		&toolrun.Func[struct{}]{Name: "rich_err", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{Status: toolrun.StatusError, Error: " bad ", ErrorCode: "E1", ErrorData: map[string]any{"k": "v"}, Stack: "stack"}, nil
		}},
	)
	out := run(t, ex, "t1", call("1", "empty_ok", ""), call("2", "padded", ""), call("3", "empty_err", ""), call("4", "go_err", ""), call("5", "rich_err", ""))
	assert.Equal(t, "Tool executed successfully", out[0].Message.Content)
	assert.Equal(t, "hi", out[1].Message.Content)
	assert.Equal(t, "Failed to execute tool: Tool execution failed", out[2].Message.Content)
	assert.Equal(t, "Failed to execute tool: boom", out[3].Message.Content)
	assert.Equal(t, "E_BOOM", out[3].Message.ErrorCode)
	m := out[4].Message
	assert.Equal(t, "Failed to execute tool: bad", m.Content)
	assert.Equal(t, "E1", m.ErrorCode)
	assert.Equal(t, map[string]any{"k": "v"}, m.ErrorData)
	assert.Equal(t, "stack", m.Stack)
	assert.NotContains(t, m.Content, "E1", "error_code is not sent to the model")
}

type codedErr struct{ msg, code string }

func (e codedErr) Error() string { return e.msg }
func (e codedErr) Code() string  { return e.code }

func TestPanicIsRecoveredAndBatchGoesOn(t *testing.T) {
	ex := newExec(t, nil,
		&toolrun.Func[struct{}]{Name: "bad", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			var m map[string]int
			m["x"] = 1 //lint:ignore SA5000 the runtime panic is what is tested
			return toolrun.Result{}, nil
		}},
		&toolrun.Func[struct{}]{Name: "good", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Text("fine"), nil
		}},
	)
	out := run(t, ex, "t1", call("1", "bad", ""), call("2", "good", ""))
	require.Len(t, out, 2)
	assert.Equal(t, "Failed to execute tool: tool panicked: assignment to entry in nil map", out[0].Message.Content)
	assert.Contains(t, out[0].Message.Stack, "goroutine", "stack kept in metadata")
	assert.NotContains(t, out[0].Message.Content, "goroutine", "stack not in content")
	assert.Equal(t, "fine", out[1].Message.Content)
}

func TestErrAbortStopsTheRun(t *testing.T) {
	ran := false
	ex := newExec(t, nil,
		&toolrun.Func[struct{}]{Name: "infra", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{}, fmt.Errorf("database down: %w", toolrun.ErrAbort)
		}},
		&toolrun.Func[struct{}]{Name: "after", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			ran = true
			return toolrun.Result{}, nil
		}},
	)
	out, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{call("1", "infra", ""), call("2", "after", "")})
	require.ErrorIs(t, err, toolrun.ErrAbort)
	assert.False(t, ran, "calls after the abort do not run")
	require.Len(t, out, 1)
	assert.Contains(t, out[0].Message.Content, "database down")
	page, err := ex.Store().ListMessages(context.Background(), "t1", toolrun.MessageQuery{})
	require.NoError(t, err)
	require.Len(t, page.Messages, 1, "the aborting call's result is stored")
}

func TestOtherErrorsDoNotAbort(t *testing.T) {
	ran := false
	ex := newExec(t, nil,
		&toolrun.Func[struct{}]{Name: "fails", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			return toolrun.Result{}, errors.New("ordinary")
		}},
		&toolrun.Func[struct{}]{Name: "after", Execute: func(context.Context, toolrun.ThreadState, struct{}) (toolrun.Result, error) {
			ran = true
			return toolrun.Result{}, nil
		}},
	)
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{call("1", "fails", ""), call("2", "after", "")})
	require.NoError(t, err)
	assert.True(t, ran)
}

var _ = sync.Mutex{}

func TestSyntaxErrorsTheFastScanLetsThroughAreStillReported(t *testing.T) {
	ex := newExec(t, nil, searchTool(nil))
	// A leading zero is not JSON; the argument scanner reads it as a number,
	// the decoder refuses it with the same "not valid JSON" text.
	out := run(t, ex, "t1", call("c1", "search", `{"query":"q","format":"json","limit":01}`))
	assert.True(t, strings.HasPrefix(out[0].Message.Content, "Failed to execute tool: Tool arguments are not valid JSON: "), out[0].Message.Content)
}
