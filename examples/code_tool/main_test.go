package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toolrun/toolrun"
)

// The word count runs in the sandbox and reads the thread's file through
// the bridged readFile; the endless loop is terminated by its timeout.
func TestCodeTool(t *testing.T) {
	out, err := run(context.Background())
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.Equal(t, toolrun.StatusSuccess, out[0].Message.ToolStatus)
	assert.JSONEq(t, `{"words":9}`, out[0].Message.Content)
	assert.Equal(t, toolrun.StatusError, out[1].Message.ToolStatus)
	assert.Equal(t, "Failed to execute tool: terminated: Code execution timed out after 2s", out[1].Message.Content)
}
