package toolrun_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// recorder is a minimal recording TracerProvider for tests.
type recorder struct {
	embedded.TracerProvider
	mu    sync.Mutex
	spans []*recSpan
}

type recTracer struct {
	embedded.Tracer
	r *recorder
}

type recSpan struct {
	noop.Span
	name   string
	attrs  map[string]any
	status codes.Code
	desc   string
	ended  bool
}

func (r *recorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return recTracer{r: r} }

func (t recTracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &recSpan{name: name, attrs: map[string]any{}}
	t.r.mu.Lock()
	t.r.spans = append(t.r.spans, s)
	t.r.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

func (s *recSpan) IsRecording() bool { return true }
func (s *recSpan) SetAttributes(kv ...attribute.KeyValue) {
	for _, a := range kv {
		s.attrs[string(a.Key)] = a.Value.AsInterface()
	}
}
func (s *recSpan) SetStatus(c codes.Code, d string) { s.status, s.desc = c, d }
func (s *recSpan) End(...trace.SpanEndOption)       { s.ended = true }

func TestSpansForModelRequestsAndToolCallsWithSecretsRedacted(t *testing.T) {
	rec := &recorder{}
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	require.NoError(t, w.reg.Register(fn("leaky", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		tok, _ := s.Env(ctx, "TOKEN")
		return toolrun.Errorf("bad token %s", tok), nil
	})))
	p, _ := w.reg.Prompt("triager")
	p.Tools = append(p.Tools, toolrun.Use("leaky"))
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{TracerProvider: rec,
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: "tok-very-secret"}}})
	w.p.Add(scripted.Calls(scripted.Call("get_issue", map[string]any{"number": 1}), scripted.Call("leaky", nil)), scripted.Text("done"))
	_, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.NoError(t, err)
	var names []string
	for _, s := range rec.spans {
		names = append(names, s.name)
		assert.True(t, s.ended, s.name)
	}
	assert.Equal(t, []string{"chat test-model", "execute_tool get_issue", "execute_tool leaky", "chat test-model"}, names)
	tool := rec.spans[1]
	assert.Equal(t, "execute_tool", tool.attrs["gen_ai.operation.name"])
	assert.Equal(t, "get_issue", tool.attrs["gen_ai.tool.name"])
	assert.NotEmpty(t, tool.attrs["gen_ai.tool.call.id"])
	leaky := rec.spans[2]
	assert.Equal(t, codes.Error, leaky.status)
	assert.Equal(t, "bad token [REDACTED:TOKEN]", leaky.desc)
	assert.Equal(t, "test-model", rec.spans[0].attrs["gen_ai.request.model"])
	assert.Equal(t, "scripted", rec.spans[0].attrs["gen_ai.provider.name"])
}

// A failed model request's error is redacted on its chat span, as it is
// where it stops the run: a provider's error may quote what it was sent.
func TestChatSpanStatusOfAFailedRequestIsRedacted(t *testing.T) {
	rec := &recorder{}
	w := newWorld(t, triagePrompt(), toolrun.Side{})
	w.rt = toolrun.NewRuntime(w.reg, &toolrun.RuntimeOptions{TracerProvider: rec,
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: "tok-very-secret"}}})
	w.p.Add(scripted.Fail("invalid value tok-very-secret in messages[1].content", nil))
	_, err := w.rt.Send(context.Background(), w.thread(t), "x")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "tok-very-secret")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.NotEmpty(t, rec.spans)
	chat := rec.spans[0]
	assert.Equal(t, "chat test-model", chat.name)
	assert.Equal(t, codes.Error, chat.status)
	assert.Contains(t, chat.desc, "invalid value [REDACTED:TOKEN]")
	assert.NotContains(t, chat.desc, "tok-very-secret")
}
