package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// A redirect does not take the API key, nor Options.Headers (Azure's
// api-key), to the address it names: the default client reports it, and a
// client of the user's follows it without them.
func TestRedirectDoesNotSendTheAPIKeyElsewhere(t *testing.T) {
	got := make(chan [2]string, 4)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- [2]string{r.Header.Get("Authorization"), r.Header.Get("api-key")}
		w.WriteHeader(400)
	}))
	defer elsewhere.Close()
	// The same host on another port: Go itself would send Authorization.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusPermanentRedirect)
	}))
	defer api.Close()

	opts := Options{APIKey: "sk-secret", Headers: map[string]string{"api-key": "azure-secret"},
		BaseURL: api.URL, MaxRetries: -1}
	drain := func(p *Provider) error {
		req := &toolrun.Request{Model: "gpt-test", Messages: []toolrun.Message{{Role: toolrun.RoleUser, Content: "hi"}}}
		for _, err := range p.Stream(context.Background(), req) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := drain(New(&opts))
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "redirect", pe.Code)
	assert.Equal(t, http.StatusPermanentRedirect, pe.Status)
	assert.Contains(t, pe.Message, elsewhere.URL+"/steal")
	assert.Empty(t, got, "the default client followed the redirect")
	for len(got) > 0 {
		<-got
	}

	opts.HTTPClient = &http.Client{}
	_ = drain(New(&opts))
	require.Len(t, got, 1, "the user's client follows the redirect")
	assert.Equal(t, [2]string{"", ""}, <-got, "the redirect target received the API key or a header of Options.Headers")
}
