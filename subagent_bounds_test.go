package toolrun_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// Background subagents start at nesting level 0 on goroutines of their
// own, so what bounds a model that always delegates is the threads'
// lineage: an agent that may create a background subagent of its own kind
// is refused once the chain is MaxNesting threads deep.
func TestBackgroundSubagentChainsAreBoundedByLineage(t *testing.T) {
	const giveUp = 100
	var generations atomic.Int64
	var refusals []string
	var mu sync.Mutex
	prov := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == toolrun.RoleTool {
			if last.ToolStatus == toolrun.StatusError {
				mu.Lock()
				refusals = append(refusals, last.Content)
				mu.Unlock()
			}
			return scripted.Text("delegated")
		}
		if generations.Add(1) > giveUp {
			return scripted.Text("the test gives up")
		}
		return scripted.Calls(scripted.Call("subagent_create", map[string]any{
			"agent": "rec", "message": "dig deeper", "attachments": []any{}, "name": "child"}))
	})
	reg := mustReg(t,
		&toolrun.Model{Name: "m", Provider: prov},
		&toolrun.Prompt{Name: "rp", Model: "m", IncludeChat: true, IncludePastTools: true},
		&toolrun.Agent{Name: "rec", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "rp", Subagents: []toolrun.SubagentRelationship{
			{Agent: "rec", ParentCommunication: "explicit", MaxInstances: 1}}}, SideB: toolrun.Side{Human: true}},
	)
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxNesting: 5, MaxTotalSteps: 1000})
	th, err := rt.NewThread(context.Background(), "rec", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	rt.Wait()
	// The root and five generations of children create; the sixth child
	// is refused.
	assert.Equal(t, int64(6), generations.Load(), "threads that asked to delegate")
	require.Len(t, refusals, 1)
	assert.Contains(t, refusals[0], `Subagent "rec" was not created: its thread would be 6 subagent levels below its root thread, past the limit of 5.`)
}

// Everything one Send starts shares its ceiling of model requests: a lead
// that answers each subagent's completion by creating another one (each
// completion starts a turn of the lead) stops once the requests of the
// lead's turns and of its subagents reach MaxTotalSteps.
func TestSubagentCompletionsShareTheSendsRequestCeiling(t *testing.T) {
	const giveUp = 100
	var leadRequests, childRequests atomic.Int64
	lead := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		leadRequests.Add(1)
		if last := req.Messages[len(req.Messages)-1]; last.Role == toolrun.RoleTool || leadRequests.Load() > giveUp {
			return scripted.Text("waiting for the worker")
		}
		return scripted.Calls(scripted.Call("subagent_create", map[string]any{
			"agent": "worker", "message": "work", "attachments": []any{}, "name": "w"}))
	})
	worker := scripted.NewFunc(nil, func(context.Context, *toolrun.Request) *scripted.Response {
		childRequests.Add(1)
		return scripted.Text("worked")
	})
	reg := mustReg(t,
		&toolrun.Model{Name: "lm", Provider: lead}, &toolrun.Model{Name: "cm", Provider: worker},
		&toolrun.Prompt{Name: "lp", Model: "lm", IncludeChat: true, IncludePastTools: true},
		&toolrun.Prompt{Name: "cp", Model: "cm", IncludeChat: true},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "cp"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lp", Subagents: []toolrun.SubagentRelationship{{Agent: "worker"}}}, SideB: toolrun.Side{Human: true}},
	)
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxTotalSteps: 30})
	th, err := rt.NewThread(context.Background(), "lead", nil)
	require.NoError(t, err)
	_, err = rt.Send(context.Background(), th.ID, "go")
	require.NoError(t, err)
	rt.Wait()
	assert.Equal(t, int64(30), leadRequests.Load()+childRequests.Load(), "the Send's requests, its subagents' and the turns they started")
	assert.Greater(t, childRequests.Load(), int64(5), "the loop ran before the ceiling stopped it")

	// A new Send starts a new execution with a ceiling of its own.
	before := leadRequests.Load() + childRequests.Load()
	_, err = rt.Send(context.Background(), th.ID, "again")
	require.NoError(t, err)
	rt.Wait()
	assert.Equal(t, int64(30), leadRequests.Load()+childRequests.Load()-before)
}

// At most MaxBackground background subagents run at once: one response
// asking for more gets error results naming the limit for the rest, and
// subagent_message is refused the same way while the runtime is full.
func TestBackgroundSubagentsAreBoundedByMaxBackground(t *testing.T) {
	const limit, asked = 4, 10
	release := make(chan struct{})
	var started atomic.Int64
	var calls []scripted.ToolCall
	for range asked {
		calls = append(calls, scripted.Call("subagent_create", map[string]any{
			"agent": "worker", "message": "work", "attachments": []any{}, "name": "w"}))
	}
	var firstRef string
	lead := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == toolrun.RoleUser && last.Content == "go":
			return scripted.Calls(calls...)
		case last.Role == toolrun.RoleTool && last.Name == "subagent_create":
			for _, m := range req.Messages {
				if _, ref, ok := strings.Cut(m.Content, "initiated successfully. Reference: "); ok && m.Role == toolrun.RoleTool {
					firstRef = ref
					break
				}
			}
			return scripted.Calls(scripted.Call("subagent_message", map[string]any{"referenceId": firstRef, "message": "more", "attachments": []any{}}))
		default:
			return scripted.Text("started")
		}
	})
	worker := scripted.NewFunc(nil, func(ctx context.Context, req *toolrun.Request) *scripted.Response {
		started.Add(1)
		return scripted.Text("done").WaitFunc(func(ctx context.Context) error {
			<-release
			return nil
		})
	})
	reg := mustReg(t,
		&toolrun.Model{Name: "lm", Provider: lead}, &toolrun.Model{Name: "cm", Provider: worker},
		&toolrun.Prompt{Name: "lp", Model: "lm", IncludeChat: true, IncludePastTools: true},
		&toolrun.Prompt{Name: "cp", Model: "cm", IncludeChat: true},
		&toolrun.Agent{Name: "worker", ExposeAsTool: true, SideA: toolrun.Side{Prompt: "cp"}, SideB: toolrun.Side{Human: true}},
		&toolrun.Agent{Name: "lead", SideA: toolrun.Side{Prompt: "lp", Subagents: []toolrun.SubagentRelationship{
			{Agent: "worker", ParentCommunication: "explicit"}}}, SideB: toolrun.Side{Human: true}},
	)
	rt := toolrun.NewRuntime(reg, &toolrun.RuntimeOptions{MaxBackground: limit})
	th, err := rt.NewThread(context.Background(), "lead", nil)
	require.NoError(t, err)
	reply, err := rt.Send(context.Background(), th.ID, "go")
	close(release)
	rt.Wait()
	require.NoError(t, err)

	var ok, refused int
	for _, m := range toolResults(reply.Messages, "subagent_create") {
		switch {
		case strings.HasPrefix(m.Content, "The subagent was initiated successfully"):
			ok++
		case m.ErrorCode == "max_background":
			refused++
			assert.Contains(t, m.Content, `Subagent "worker" was not created: 4 background subagents are running, the most this runtime runs at once.`)
		default:
			t.Errorf("unexpected subagent_create result %q", m.Content)
		}
	}
	assert.Equal(t, limit, ok)
	assert.Equal(t, asked-limit, refused)
	msgs := toolResults(reply.Messages, "subagent_message")
	require.Len(t, msgs, 1)
	assert.Equal(t, "max_background", msgs[0].ErrorCode, msgs[0].Content)
	assert.Contains(t, msgs[0].Content, "Message not sent to subagent "+firstRef+": 4 background subagents are running")

	assert.Equal(t, int64(limit), started.Load(), "worker sessions started")

	// The slots are given back when the subagents end.
	reply, err = rt.Send(context.Background(), th.ID, "go")
	rt.Wait()
	require.NoError(t, err)
	ok = 0
	for _, m := range toolResults(reply.Messages, "subagent_create") {
		if strings.HasPrefix(m.Content, "The subagent was initiated successfully") {
			ok++
		}
	}
	assert.GreaterOrEqual(t, ok, limit, "subagents created once the first ones ended")
}
