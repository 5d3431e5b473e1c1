package main

import (
	"fmt"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/provider/scripted"
)

// DefaultMessage is the message the program sends when -message is not set.
const DefaultMessage = "Please triage the issue in acme/widgets where the app crashes when the config file is empty."

// ScriptedReply is the scripted model's final answer.
const ScriptedReply = "I added the labels bug and priority: high to acme/widgets#42: the app crashes on startup for everyone whose config file is empty."

// scriptedTriage returns a scripted model that plays the whole triage of
// DefaultMessage: search, read issue 42, label it, reply. Each response
// checks that the request carries what the previous step produced, as a
// real model would need it (includePastTools).
func scriptedTriage() *scripted.Provider {
	return scripted.New(
		scripted.Calls(scripted.Call(SearchGitHubIssues.Name, map[string]any{
			"owner": "acme", "repo": "widgets", "query": "crash empty config file",
		})).Expect(lastUserMessage),
		scripted.Calls(scripted.Call(GetGitHubIssue.Name, map[string]any{
			"owner": "acme", "repo": "widgets", "number": 42,
		})).Expect(resultContains(SearchGitHubIssues.Name, `"number":42`)),
		scripted.Calls(scripted.Call(LabelGitHubIssue.Name, map[string]any{
			"owner": "acme", "repo": "widgets", "number": 42, "category": "bug", "priority": "high",
		})).Expect(resultContains(GetGitHubIssue.Name, "panic: runtime error")),
		scripted.Text(ScriptedReply).Expect(resultContains(LabelGitHubIssue.Name, "Added the labels bug and priority: high to issue 42.")),
	)
}

// lastUserMessage checks that the request ends with the person's message.
func lastUserMessage(req *toolrun.Request) error {
	if n := len(req.Messages); n == 0 || req.Messages[n-1].Role != toolrun.RoleUser {
		return fmt.Errorf("the request does not end with a user message")
	}
	return nil
}

// resultContains checks that the request carries a result of the named
// tool, and that the latest one contains want.
func resultContains(tool, want string) func(*toolrun.Request) error {
	return func(req *toolrun.Request) error {
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == toolrun.RoleTool && m.Name == tool {
				if !strings.Contains(m.Content, want) {
					return fmt.Errorf("the %s result is %q, want it to contain %q", tool, m.Content, want)
				}
				return nil
			}
		}
		return fmt.Errorf("the request has no %s result", tool)
	}
}
