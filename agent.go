package toolrun

// Agent is an agent definition (spec defineAgent): two sides that take
// turns on a thread. Side A is usually prompt-backed; side B is a human or
// another prompt.
//
// An Agent must not be modified after it is registered.
type Agent struct {
	Name string
	// SideA and SideB are the two sides; each is prompt-backed (Prompt set)
	// or human (Human true).
	SideA Side
	SideB Side
	// MaxSessionTurns ends the session after this many side turns; 0 means
	// no limit, and a negative value is refused at registration.
	MaxSessionTurns int
	// ExposeAsTool lets prompts list the agent in Tools (a handoff) and
	// relationships name it (a subagent).
	ExposeAsTool bool
	// ToolDescription describes the agent when offered as a tool.
	ToolDescription string
	// Env holds agent-level default env values (secret, second link of the
	// env chain).
	Env map[string]string
}

func (a *Agent) definitionName() string { return a.Name }

// Side is one side of an agent.
type Side struct {
	// Prompt names the registered prompt that backs the side.
	Prompt string
	// Human marks a side played by a person: its turn is a message sent
	// with Runtime.Send.
	Human bool
	// StopOnResponse ends the side's turn when the model answers with text
	// and no tool calls. nil means true (the default).
	StopOnResponse *bool
	// StopTool ends the turn when this tool is called;
	// StopToolResponseProperty names its string argument that becomes the
	// turn's reply.
	StopTool                 string
	StopToolResponseProperty string
	// MaxSteps caps the model requests of one turn; 0 means no cap (the
	// runtime's global ceiling still applies), and a negative value is
	// refused at registration.
	MaxSteps int
	// SessionStop, SessionFail and SessionStatus bind tools that end the
	// session successfully, end it as failed, or report status to the parent.
	SessionStop   *SessionBinding
	SessionFail   *SessionBinding
	SessionStatus *SessionBinding
	// Subagents are the relationships the side owns: the child agents it
	// may create with subagent_create.
	Subagents []SubagentRelationship
}

func (s *Side) stopOnResponse() bool { return s.StopOnResponse == nil || *s.StopOnResponse }

// SessionBinding binds a tool to a session action.
type SessionBinding struct {
	// Name is the tool's name.
	Name string
	// MessageProperty names an argument whose value replaces the result
	// content (strings trimmed, other values as JSON).
	MessageProperty string
	// AttachmentsProperty names an argument holding attachment paths that
	// must exist in the thread.
	AttachmentsProperty string
}

// SubagentRelationship declares a child agent a side may create (spec
// Subagents).
type SubagentRelationship struct {
	// Agent names a registered agent with ExposeAsTool.
	Agent string
	// As is the relationship name the model uses; "" means Agent.
	As string
	// Blocking makes subagent_create wait for the child's session and
	// return its outcome; otherwise the child runs in the background and
	// reports to the parent when done.
	Blocking bool
	// MaxInstances caps the live (not terminated) children of this
	// relationship; 0 means no cap, and a negative value is refused at
	// registration.
	MaxInstances int
	Description  string
	// Hidden relationships are not offered to subagent_create's enum.
	Hidden bool
	// Optional names an env flag: the relationship exists for a turn only
	// when that env value resolves to "true", "1" or "yes" (any case);
	// otherwise it is neither offered nor creatable.
	Optional string
	// ScopedEnv names parent env values copied into each child, including
	// scoped ones.
	ScopedEnv []string
	// ParentCommunication is "implicit" (default: completions are reported
	// to the parent) or "explicit" (they are not).
	ParentCommunication string
}

func (r *SubagentRelationship) name() string {
	if r.As != "" {
		return r.As
	}
	return r.Agent
}
