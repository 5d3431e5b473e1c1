package toolrun

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Span names and attributes follow the OpenTelemetry GenAI semantic
// conventions: "execute_tool <name>" per tool call, "chat <model>" per model
// request.
const tracerName = "github.com/toolrun/toolrun"

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

var noopSpan trace.Span = noop.Span{}

// startToolSpan starts the span of one tool call.
func (e *Executor) startToolSpan(ctx context.Context, b *batch, c ToolCall) (context.Context, trace.Span) {
	if e.tracer == nil {
		return ctx, noopSpan
	}
	ctx, span := e.tracer.Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", c.Name),
			attribute.String("gen_ai.tool.call.id", c.ID),
			attribute.String("toolrun.thread.id", b.threadID),
		)
	}
	// The tool finds the span in its ctx and may record on it: what it
	// records is redacted like everything else that leaves a tool.
	ctx = trace.ContextWithSpan(ctx, redactingSpan{Span: span, red: func() redactor { return e.redactor(b) }})
	return ctx, span
}

// redactingSpan passes a span's recordings through redaction: attribute
// values and keys, event names and attributes, recorded errors, the status
// description and the span name.
type redactingSpan struct {
	trace.Span
	red func() redactor
}

func (s redactingSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.Span.SetAttributes(redactAttrs(s.red(), kv)...)
}

func (s redactingSpan) AddEvent(name string, opts ...trace.EventOption) {
	red := s.red()
	s.Span.AddEvent(red.String(name), redactEventOptions(red, opts)...)
}

func (s redactingSpan) RecordError(err error, opts ...trace.EventOption) {
	red := s.red()
	if err != nil {
		err = redactError(err, red)
	}
	s.Span.RecordError(err, redactEventOptions(red, opts)...)
}

func (s redactingSpan) SetStatus(code codes.Code, description string) {
	s.Span.SetStatus(code, s.red().String(description))
}

func (s redactingSpan) SetName(name string) { s.Span.SetName(s.red().String(name)) }

func (s redactingSpan) AddLink(l trace.Link) {
	l.Attributes = redactAttrs(s.red(), l.Attributes)
	s.Span.AddLink(l)
}

// redactEventOptions rebuilds event options with their attributes redacted.
func redactEventOptions(red redactor, opts []trace.EventOption) []trace.EventOption {
	if !red.Active() || len(opts) == 0 {
		return opts
	}
	cfg := trace.NewEventConfig(opts...)
	out := []trace.EventOption{trace.WithAttributes(redactAttrs(red, cfg.Attributes())...), trace.WithStackTrace(cfg.StackTrace())}
	if ts := cfg.Timestamp(); !ts.IsZero() {
		out = append(out, trace.WithTimestamp(ts))
	}
	return out
}

func redactAttrs(red redactor, kv []attribute.KeyValue) []attribute.KeyValue {
	if !red.Active() || len(kv) == 0 {
		return kv
	}
	out := make([]attribute.KeyValue, len(kv))
	for i, a := range kv {
		key := attribute.Key(red.String(string(a.Key)))
		switch a.Value.Type() {
		case attribute.STRING:
			out[i] = key.String(red.String(a.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := a.Value.AsStringSlice()
			for j := range ss {
				ss[j] = red.String(ss[j])
			}
			out[i] = key.StringSlice(ss)
		default:
			out[i] = attribute.KeyValue{Key: key, Value: a.Value}
		}
	}
	return out
}

// endToolSpan records the (redacted) outcome and ends the span.
func (e *Executor) endToolSpan(span trace.Span, res Result, b *batch) {
	if e.tracer == nil {
		return
	}
	if span.IsRecording() {
		red := e.redactor(b)
		span.SetAttributes(attribute.String("toolrun.tool.status", string(res.Status)))
		if res.IsError() {
			span.SetStatus(codes.Error, red.String(res.Error))
			if res.ErrorCode != "" {
				span.SetAttributes(attribute.String("error.type", red.String(res.ErrorCode)))
			}
		}
	}
	span.End()
}

// startChatSpan starts the span of one model request.
func (rt *Runtime) startChatSpan(ctx context.Context, ts *turnState, b *batch) (context.Context, trace.Span) {
	if rt.ex.tracer == nil {
		return ctx, noopSpan
	}
	ctx, span := rt.ex.tracer.Start(ctx, "chat "+ts.model.ID, trace.WithSpanKind(trace.SpanKindClient))
	// What the request records (a provider's error may quote what it was
	// sent) is redacted as a tool's span is.
	span = redactingSpan{Span: span, red: func() redactor { return rt.ex.redactor(b) }}
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.provider.name", ts.model.Provider.Name()),
			attribute.String("gen_ai.request.model", ts.model.ID),
			attribute.String("toolrun.thread.id", ts.th.ID),
			attribute.String("toolrun.prompt", ts.prompt.Name),
		)
	}
	return ctx, span
}
