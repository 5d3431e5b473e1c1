package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// drain runs a request of p to its end and returns its error.
func drain(ctx context.Context, p *Provider) error {
	req := &toolrun.Request{Model: "claude-test", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}}}
	for _, err := range p.Stream(ctx, req) {
		if err != nil {
			return err
		}
	}
	return nil
}

// A server that sends an error status and then stalls its body is cut off
// by IdleTimeout, as a stalled stream is.
func TestIdleTimeoutEndsAStalledErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `{"type":"error",`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	p := New(&Options{APIKey: "k", BaseURL: srv.URL, IdleTimeout: 20 * time.Millisecond, MaxRetries: -1})
	// The deadline only keeps a broken provider from hanging the test.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := drain(ctx, p)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "the stalled body was ended by the context: %v", err)
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "stream_timeout", pe.Code)
	assert.True(t, pe.Retryable)
}
