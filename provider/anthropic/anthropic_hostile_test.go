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

// keys returns a server that sends the x-api-key and Api-Key headers of
// each request it receives to got.
func keys(got chan<- [2]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- [2]string{r.Header.Get("x-api-key"), r.Header.Get("Api-Key")}
		w.WriteHeader(400)
	}))
}

// A redirect does not take the API key, nor Options.Headers, to the host
// it names: the default client reports it, and a client of the user's
// follows it without them.
func TestRedirectDoesNotSendTheAPIKeyElsewhere(t *testing.T) {
	got := make(chan [2]string, 4)
	elsewhere := keys(got)
	defer elsewhere.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer api.Close()

	opts := Options{APIKey: "sk-ant-secret", Headers: map[string]string{"Api-Key": "gateway-secret"},
		BaseURL: api.URL, MaxRetries: -1}
	err := drain(context.Background(), New(&opts))
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "redirect", pe.Code)
	assert.Equal(t, http.StatusTemporaryRedirect, pe.Status)
	assert.Contains(t, pe.Message, elsewhere.URL+"/steal")
	assert.Empty(t, got, "the default client followed the redirect")
	for len(got) > 0 {
		<-got
	}

	opts.HTTPClient = &http.Client{}
	_ = drain(context.Background(), New(&opts))
	require.Len(t, got, 1, "the user's client follows the redirect")
	assert.Equal(t, [2]string{"", ""}, <-got, "the redirect target received the API key or a header of Options.Headers")
}
