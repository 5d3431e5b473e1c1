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
	return ctx, span
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
func (rt *Runtime) startChatSpan(ctx context.Context, ts *turnState) (context.Context, trace.Span) {
	if rt.ex.tracer == nil {
		return ctx, noopSpan
	}
	ctx, span := rt.ex.tracer.Start(ctx, "chat "+ts.model.ID, trace.WithSpanKind(trace.SpanKindClient))
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
