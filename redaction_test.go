package toolrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

const leakSecret = "tok-9f8e7d6c5b4a"

// secretExec is an executor whose instance env holds TOKEN = leakSecret.
func secretExec(t *testing.T, opts *toolrun.ExecutorOptions, defs ...toolrun.Definition) *toolrun.Executor {
	t.Helper()
	if opts == nil {
		opts = &toolrun.ExecutorOptions{}
	}
	opts.Env = map[string]toolrun.EnvValue{"TOKEN": {Value: leakSecret, Type: toolrun.VarSecret}}
	return newExec(t, opts, defs...)
}

// noLeak fails when v, encoded as JSON, contains the secret.
func noLeak(t *testing.T, what string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err, what)
	assert.NotContains(t, string(b), leakSecret, "%s leaks the secret: %s", what, b)
	assert.NotContains(t, string(b), "9f8e7d6c5b4a", "%s leaks part of the secret: %s", what, b)
}

func TestQueuedCallArgumentsAreRedactedWhereStoredAndReturned(t *testing.T) {
	var got []string
	ex := secretExec(t, nil,
		fn("charge", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			tok, _ := s.Env(ctx, "TOKEN")
			return toolrun.Text("queued"), s.QueueTool("notify", map[string]string{"auth": tok})
		}),
		&toolrun.RawFunc{Name: "notify", Execute: func(ctx context.Context, s toolrun.ThreadState, args json.RawMessage) (toolrun.Result, error) {
			got = append(got, string(args))
			return toolrun.Text("sent"), nil
		}},
	)
	out := run(t, ex, "t", call("c1", "charge", ""))
	require.Len(t, out, 2)
	assert.Equal(t, []string{`{"auth":"` + leakSecret + `"}`}, got, "the queued tool itself gets the real arguments")
	noLeak(t, "the queuing call's stored bookkeeping", out[0].Message.Metadata)
	noLeak(t, "the queued call in the Outcome", out[1].Call)
	noLeak(t, "the queued call's stored message", out[1].Message)
	assert.Contains(t, out[1].Call.Arguments, "[REDACTED:TOKEN]")
}

func TestResumedQueuedCallWhoseArgumentsHeldASecretIsRefusedNotGuessed(t *testing.T) {
	ctx := context.Background()
	st := toolrun.NewMemoryStore()
	ran := 0
	defs := []toolrun.Definition{
		fn("charge", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			tok, _ := s.Env(ctx, "TOKEN")
			if err := s.QueueTool("notify", map[string]string{"auth": tok}); err != nil {
				return toolrun.Result{}, err
			}
			return toolrun.Text("queued"), s.QueueTool("plain", nil)
		}),
		fn("notify", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			ran++
			return toolrun.Text("sent"), nil
		}),
		fn("plain", func(context.Context, toolrun.ThreadState) (toolrun.Result, error) {
			return toolrun.Text("plain ran"), nil
		}),
	}
	// A crash after the queuing call's result was stored: store only that.
	first := secretExec(t, nil, defs...)
	out := run(t, first, "t", call("c1", "charge", ""))
	require.NoError(t, st.CreateThread(ctx, &toolrun.Thread{ID: "t"}))
	m := *out[0].Message
	m.Seq = 0
	require.NoError(t, st.AppendMessages(ctx, "t", &m))

	ran = 0
	resumed := secretExec(t, &toolrun.ExecutorOptions{Store: st}, defs...)
	out = run(t, resumed, "t", call("c1", "charge", ""))
	require.Len(t, out, 3)
	assert.True(t, out[0].Resumed)
	assert.Equal(t, 0, ran, "the call must not run with placeholders for its secret")
	assert.True(t, out[1].Result.IsError())
	assert.Contains(t, out[1].Message.Content, "was not resumed: its arguments contained a secret")
	assert.Equal(t, "plain ran", out[2].Message.Content, "a queued call without secrets resumes")
}

func TestAttachmentAndRefTextsAreRedacted(t *testing.T) {
	var done []toolrun.ToolCallDone
	ex := secretExec(t, &toolrun.ExecutorOptions{Hooks: toolrun.Hooks{
		ToolCallDone: func(_ context.Context, _ string, ev toolrun.ToolCallDone) { done = append(done, ev) },
	}}, fn("report", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		tok, _ := s.Env(ctx, "TOKEN")
		return toolrun.Result{
			Status:      toolrun.StatusError,
			Error:       "partial",
			ErrorCode:   "code-" + tok,
			SubagentID:  "child-" + tok,
			Attachments: []toolrun.Attachment{{Name: "report-" + tok + ".txt", MimeType: "text/x-" + tok, Data: []byte("x")}},
			Refs:        []toolrun.AttachmentRef{{ID: "r-" + tok, Type: "file", Path: "/attachments/" + tok + ".png", Name: tok + ".png", Description: "made with " + tok}},
		}, nil
	}))
	out := run(t, ex, "t", call("1", "report", ""))
	noLeak(t, "the stored message", out[0].Message)
	noLeak(t, "the outcome's result", out[0].Result)
	noLeak(t, "the done hook", done)
	assert.Contains(t, out[0].Message.Content, `Attachment path for "report-[REDACTED:TOKEN].txt"`)
	assert.Equal(t, "code-[REDACTED:TOKEN]", out[0].Result.ErrorCode)
	assert.Equal(t, "child-[REDACTED:TOKEN]", out[0].Message.SubagentID)
}

func TestInjectMessageRedactsAttachmentsAndKeepsToolCalls(t *testing.T) {
	ex := secretExec(t, nil, fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		tok, _ := s.Env(ctx, "TOKEN")
		return toolrun.Text("ok"), s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleAssistant, Content: "see",
			ToolCalls:   []toolrun.ToolCall{{ID: "x1", Name: "lookup", Arguments: `{"key":"` + tok + `"}`}},
			Attachments: []toolrun.AttachmentRef{{ID: "a", Type: "file", Path: "/attachments/a.txt", Name: "for-" + tok + ".txt"}}})
	}))
	run(t, ex, "t", call("1", "inject", ""))
	page, err := ex.Store().ListMessages(context.Background(), "t", toolrun.MessageQuery{})
	require.NoError(t, err)
	var injected *toolrun.Message
	for i := range page.Messages {
		if page.Messages[i].Role == toolrun.RoleAssistant {
			injected = &page.Messages[i]
		}
	}
	require.NotNil(t, injected)
	noLeak(t, "the injected message", injected)
	require.Len(t, injected.ToolCalls, 1, "tool calls are kept, not dropped")
	assert.Equal(t, `{"key":"[REDACTED:TOKEN]"}`, injected.ToolCalls[0].Arguments)
}

func TestWhatAToolRecordsOnItsSpanIsRedacted(t *testing.T) {
	rec := &eventRecorder{}
	ex := secretExec(t, &toolrun.ExecutorOptions{TracerProvider: rec}, fn("traced", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		tok, _ := s.Env(ctx, "TOKEN")
		span := trace.SpanFromContext(ctx)
		span.SetAttributes(attribute.String("token", tok), attribute.StringSlice("list", []string{"a", tok}), attribute.Int("n", 1))
		span.AddEvent("used "+tok, trace.WithAttributes(attribute.String("k", tok)))
		span.RecordError(errors.New("failed with "+tok), trace.WithAttributes(attribute.String("e", tok)))
		span.SetStatus(codes.Error, "status "+tok)
		span.SetName("renamed " + tok)
		return toolrun.Text("ok"), nil
	}))
	run(t, ex, "t", call("1", "traced", ""))
	require.Len(t, rec.spans, 1)
	s := rec.spans[0]
	noLeak(t, "span attributes", s.attrs)
	noLeak(t, "span events", s.events)
	noLeak(t, "span name and status", []string{s.name, s.desc})
	assert.Equal(t, "[REDACTED:TOKEN]", s.attrs["token"])
	assert.Equal(t, int64(1), s.attrs["n"], "non-string attributes pass unchanged")
	assert.Contains(t, s.events, "error: failed with [REDACTED:TOKEN] e=[REDACTED:TOKEN]")
}

func TestShortSecretIsReportedAtWarnWithoutALoggerConfigured(t *testing.T) {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	toolrun.NewExecutor(toolrun.NewRegistry(nil), &toolrun.ExecutorOptions{Env: map[string]toolrun.EnvValue{"PIN": {Value: "123"}, "LONG": {Value: "long-enough"}}})
	assert.Contains(t, buf.String(), "level=WARN")
	assert.Contains(t, buf.String(), "shorter than 4 bytes is not redacted")
	assert.Contains(t, buf.String(), "name=PIN")
	assert.NotContains(t, buf.String(), "LONG")
	assert.NotContains(t, buf.String(), "123", "the warning names the variable, never its value")
}

// eventRecorder records spans with their events, for the span tests.
type eventRecorder struct {
	recorder
	spans []*eventSpan
}

type eventSpan struct {
	recSpan
	events []string
}

func (r *eventRecorder) Tracer(string, ...trace.TracerOption) trace.Tracer { return evTracer{r: r} }

type evTracer struct {
	trace.Tracer
	r *eventRecorder
}

func (t evTracer) Start(ctx context.Context, name string, _ ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := &eventSpan{recSpan: recSpan{name: name, attrs: map[string]any{}}}
	t.r.spans = append(t.r.spans, s)
	return trace.ContextWithSpan(ctx, s), s
}

func (s *eventSpan) SetName(n string) { s.name = n }

func (s *eventSpan) AddEvent(name string, opts ...trace.EventOption) {
	s.events = append(s.events, name+attrText(opts))
}

func (s *eventSpan) RecordError(err error, opts ...trace.EventOption) {
	s.events = append(s.events, "error: "+err.Error()+attrText(opts))
}

func attrText(opts []trace.EventOption) string {
	var sb strings.Builder
	cfg := trace.NewEventConfig(opts...)
	for _, a := range cfg.Attributes() {
		sb.WriteString(" " + string(a.Key) + "=" + a.Value.String())
	}
	return sb.String()
}

// A non-blocking child whose run fails reports its error into the parent's history redacted.
func TestBackgroundChildFailureIsRedacted(t *testing.T) {
	lead, child := scripted.New(), scripted.New()
	reg := toolrun.NewRegistry(nil)
	require.NoError(t, reg.Register(
		&toolrun.Model{Name: "lm", Provider: lead},
		&toolrun.Model{Name: "cm", Provider: child},
		fn("boom", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
			v, _ := s.Env(ctx, "TOKEN")
			return toolrun.Result{}, fmt.Errorf("%w: login with %s refused", toolrun.ErrAbort, v)
		}),
		&toolrun.Prompt{Name: "cp", Model: "cm", IncludeChat: true, Tools: []toolrun.PromptTool{toolrun.Use("boom")}},
		&toolrun.Prompt{Name: "lp", Model: "lm", IncludeChat: true, IncludePastTools: true},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "cp"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lp", Subagents: []toolrun.SubagentRelationship{{Agent: "worker"}}},
			SideB: toolrun.Side{Human: true}},
	))
	rt := toolrun.NewRuntime(reg, nil)
	th, err := rt.NewThread(context.Background(), "lead", &toolrun.ThreadOptions{Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	require.NoError(t, err)
	lead.Add(scripted.Calls(scripted.Call("subagent_create", map[string]any{"agent": "worker", "message": "go", "attachments": []any{}, "name": "w"})),
		scripted.Text("started"), scripted.Text("noted"))
	child.Add(scripted.Calls(scripted.Call("boom", nil)))
	_, err = rt.Send(context.Background(), th.ID, "hi")
	require.NoError(t, err)
	rt.Wait()
	page, err := rt.Store().ListMessages(context.Background(), th.ID, toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	for _, m := range page.Messages {
		assert.NotContains(t, m.Content, reviewSecret, "parent message %s (%s)", m.ID, m.Role)
	}
}

// An ErrAbort error's text reaches the caller redacted.
func TestAbortErrorIsRedacted(t *testing.T) {
	ex := toolrun.NewExecutor(mustReg(t, fn("boom", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{}, fmt.Errorf("%w: login with %s refused", toolrun.ErrAbort, reviewSecret)
	})), &toolrun.ExecutorOptions{
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "boom", Arguments: "{}"}})
	require.ErrorIs(t, err, toolrun.ErrAbort)
	assert.NotContains(t, err.Error(), reviewSecret)
}

// error_data values of any Go type (map[string]string, []map[string]any, structs) are redacted.
func TestErrorDataNestedTypesAreRedacted(t *testing.T) {
	st := toolrun.NewMemoryStore()
	ex := toolrun.NewExecutor(mustReg(t, fn("fail", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Result{Status: toolrun.StatusError, Error: "request failed",
			ErrorData: map[string]any{
				"headers":  map[string]string{"Authorization": "Bearer " + reviewSecret},
				"attempts": []map[string]any{{"url": "https://x/?key=" + reviewSecret}},
			}}, nil
	})), &toolrun.ExecutorOptions{Store: st,
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	out, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "fail", Arguments: "{}"}})
	require.NoError(t, err)
	b, _ := json.Marshal(out[0].Message.Metadata)
	assert.NotContains(t, string(b), reviewSecret)
}

// InjectMessage stores content and metadata redacted.
func TestInjectMessageIsRedacted(t *testing.T) {
	st := toolrun.NewMemoryStore()
	ex := toolrun.NewExecutor(mustReg(t, fn("inject", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("ok"), s.InjectMessage(ctx, toolrun.Message{Role: toolrun.RoleSystem, Content: "key=" + reviewSecret,
			Metadata: map[string]any{"k": reviewSecret}})
	})), &toolrun.ExecutorOptions{Store: st,
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}}})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "inject", Arguments: "{}"}})
	require.NoError(t, err)
	page, err := st.ListMessages(context.Background(), "t1", toolrun.MessageQuery{IncludeSilent: true, MaxDepth: -1})
	require.NoError(t, err)
	b, _ := json.Marshal(page.Messages)
	assert.NotContains(t, string(b), reviewSecret)
}

// The ToolCallDone hook receives the result redacted.
func TestToolCallDoneHookIsRedacted(t *testing.T) {
	var got string
	ex := toolrun.NewExecutor(mustReg(t, fn("leak", func(ctx context.Context, s toolrun.ThreadState) (toolrun.Result, error) {
		return toolrun.Text("token is " + reviewSecret), nil
	})), &toolrun.ExecutorOptions{
		Env: map[string]toolrun.EnvValue{"TOKEN": {Value: reviewSecret}},
		Hooks: toolrun.Hooks{ToolCallDone: func(ctx context.Context, _ string, ev toolrun.ToolCallDone) {
			got = ev.Result.Result
		}},
	})
	_, err := ex.Run(context.Background(), "t1", []toolrun.ToolCall{{ID: "c1", Name: "leak", Arguments: "{}"}})
	require.NoError(t, err)
	assert.NotContains(t, got, reviewSecret)
}

const reviewSecret = "s3cr3t-value-123"
