package toolrun

import "context"

// offerLifecycle adds the subagent lifecycle tools a side may use (reference H1).
func (rt *Runtime) offerLifecycle(ctx context.Context, ts *turnState) error {
	return nil
}

// lifecycle runs subagents, subagent_create and subagent_message.
func (rt *Runtime) lifecycle(ctx context.Context, ts *turnState, b *batch, name, args string) Result {
	return Errorf("Tool not found: %s", name)
}
