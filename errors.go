package toolrun

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrAbort, wrapped in an error returned by a tool's Execute, stops the
	// whole run on purpose: the tool's error result is stored, the remaining
	// calls of the batch are not run, and the caller of Executor.Run (or of
	// the runtime) gets the error. Use it for infrastructure failures the model
	// cannot fix. Nothing else aborts a run.
	ErrAbort = errors.New("toolrun: run aborted by tool")

	// ErrVariableNotFound is returned by ThreadState.Env for a name that no
	// link of the env chain resolves.
	ErrVariableNotFound = errors.New("toolrun: environment variable not found")

	// ErrNotFound is returned by stores for a thread, file, value or child
	// entry that does not exist.
	ErrNotFound = errors.New("toolrun: not found")

	// ErrThreadExists is returned by Store.CreateThread for an id already in use.
	ErrThreadExists = errors.New("toolrun: thread already exists")

	// ErrDuplicateToolResult is returned by Store.AppendMessages when a
	// tool-result message names a tool-call id that already has a stored
	// result on the thread. Nothing of that append is stored.
	ErrDuplicateToolResult = errors.New("toolrun: a result for this tool call is already stored")

	// ErrThreadTerminated is returned when work is asked of a terminated thread.
	ErrThreadTerminated = errors.New("toolrun: thread is terminated")

	// ErrUnstorable is wrapped by a store that refuses a record because of a
	// value it cannot hold (a byte its columns refuse, a size over its
	// limit), as opposed to failing. The executor then stores a short error
	// result in place of the refused one, so the call is not run again, and
	// the batch goes on.
	ErrUnstorable = errors.New("toolrun: the store cannot hold this value")

	// ErrNotDeclared is returned by ThreadState.QueueTool for a target outside
	// the running tool's uses list. Its message names the target and the
	// allowed tools.
	ErrNotDeclared = errors.New("toolrun: tool not declared in uses")
)

// StoreError reports that a store operation failed. Executor.Run and the
// runtime return it (wrapped) when a result could not be persisted: the batch
// stops there, so nothing runs whose result could not be stored.
type StoreError struct {
	Op  string // the store operation, such as "append tool result"
	Err error
}

// Error names the operation and the store's error.
func (e *StoreError) Error() string { return "toolrun: store: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the store's error.
func (e *StoreError) Unwrap() error { return e.Err }

// RegistrationError reports why a definition was refused by the registry.
type RegistrationError struct {
	Name   string // the definition's name (possibly qualified), or "" if it has none
	Reason string
}

// Error names the definition and the reason it was refused.
func (e *RegistrationError) Error() string {
	if e.Name == "" {
		return "toolrun: register: " + e.Reason
	}
	return fmt.Sprintf("toolrun: register %q: %s", e.Name, e.Reason)
}

// notDeclaredMessage is the text of a uses-list refusal (spec section 2.1):
// QueueTool returns it as an error, InvokeTool as an error result.
func notDeclaredMessage(name string, allowed []string) string {
	list := "(none)"
	if len(allowed) > 0 {
		list = joinComma(allowed)
	}
	return fmt.Sprintf("Tool %q is not declared in the current tool's uses list. Allowed tools: %s", name, list)
}

type notDeclaredError struct{ msg string }

func (e *notDeclaredError) Error() string        { return e.msg }
func (e *notDeclaredError) Is(target error) bool { return target == ErrNotDeclared }

func joinComma(s []string) string {
	n := 0
	for _, x := range s {
		n += len(x) + 2
	}
	b := make([]byte, 0, n)
	for i, x := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, x...)
	}
	return string(b)
}
