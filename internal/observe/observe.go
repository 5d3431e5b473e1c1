// Package observe lets package toolruntest watch what a tool does through
// the production ThreadState without an exported hook: the observer rides
// in the context of the run, and the root package reports to it.
package observe

import "context"

// Observer receives what tools of a run do. Values are the root package's
// types (Result, ToolCall, Message, Event), passed as any because this
// package cannot name them. Methods may be called from several goroutines.
type Observer interface {
	// Invoked reports an InvokeTool call and its (redacted) result.
	Invoked(name, args string, result any)
	// Queued reports a call a tool queued.
	Queued(call any)
	// Injected reports a message a tool injected, as stored.
	Injected(message any)
	// Wrote reports a file a tool wrote.
	Wrote(path string)
	// Emitted reports an event a tool emitted, as subscribers get it.
	Emitted(event any)
}

type key struct{}

// With returns ctx carrying o.
func With(ctx context.Context, o Observer) context.Context { return context.WithValue(ctx, key{}, o) }

// From returns the observer ctx carries, or nil.
func From(ctx context.Context) Observer {
	o, _ := ctx.Value(key{}).(Observer)
	return o
}
