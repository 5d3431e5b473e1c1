package provhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

// seen is what a server received in one request.
type seen struct {
	path   string
	header http.Header
	body   string
}

// recorder returns a server that records each request on got and answers
// with an empty event stream.
func recorder(got chan<- seen) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.URL.Path, r.Header.Clone(), string(b)}
		w.Header().Set("Content-Type", "text/event-stream")
	}))
}

// redirector returns a server that redirects every request to target.
func redirector(target string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
}

func credentialed(client *http.Client, endpoint string) *Attempt {
	return &Attempt{
		Provider: "p", Client: client, Endpoint: endpoint,
		Header: func(h http.Header) {
			h.Set("Authorization", "Bearer sk-secret")
			h.Set("X-Api-Key", "sk-secret")
			h.Set("Api-Key", "azure-secret")
			h.Set("Accept", "text/event-stream")
		},
		Stream: func(_ string, body io.Reader, _ func(toolrun.Chunk) bool) error {
			_, err := io.ReadAll(body)
			return err
		},
	}
}

func TestDefaultClientReportsARedirectInsteadOfFollowingIt(t *testing.T) {
	got := make(chan seen, 4)
	target := recorder(got)
	defer target.Close()
	api := redirector(target.URL + "/elsewhere")
	defer api.Close()

	_, _, err := credentialed(NewClient(0, 0), api.URL).Do(context.Background(), []byte(`{"prompt":"private"}`),
		func(toolrun.Chunk, error) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "redirect", pe.Code)
	assert.Equal(t, http.StatusTemporaryRedirect, pe.Status)
	assert.False(t, pe.Retryable)
	assert.Contains(t, pe.Message, `"`+target.URL+`/elsewhere"`, "the error names where the server redirected to")
	assert.Empty(t, got, "the redirect target received a request")
}

func TestUserClientSendsTheProviderHeadersOnlyToTheSameOrigin(t *testing.T) {
	got := make(chan seen, 4)
	target := recorder(got)
	defer target.Close()
	// Another port of the same host is another origin.
	api := redirector(target.URL + "/elsewhere")
	defer api.Close()

	var hops int
	check := func(*http.Request, []*http.Request) error { hops++; return nil }
	client := &http.Client{CheckRedirect: check}
	_, _, err := credentialed(client, api.URL).Do(context.Background(), []byte(`{}`), func(toolrun.Chunk, error) bool { return true })
	require.NoError(t, err)
	require.Len(t, got, 1)
	s := <-got
	assert.Equal(t, "/elsewhere", s.path)
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		assert.Empty(t, s.header.Values(h), "%s went to another origin", h)
	}
	assert.Equal(t, "application/json", s.header.Get("Content-Type"))
	assert.Equal(t, "text/event-stream", s.header.Get("Accept"))
	assert.Equal(t, 1, hops, "the client's own CheckRedirect is still applied")
	assert.Equal(t, reflect.ValueOf(check).Pointer(), reflect.ValueOf(client.CheckRedirect).Pointer(),
		"the user's client is not changed")

	// A redirect within the origin keeps them.
	same := httptest.NewServer(nil)
	defer same.Close()
	same.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/moved" {
			http.Redirect(w, r, "/moved", http.StatusPermanentRedirect)
			return
		}
		got <- seen{r.URL.Path, r.Header.Clone(), ""}
		w.Header().Set("Content-Type", "text/event-stream")
	})
	_, _, err = credentialed(&http.Client{}, same.URL).Do(context.Background(), []byte(`{}`), func(toolrun.Chunk, error) bool { return true })
	require.NoError(t, err)
	require.Len(t, got, 1)
	s = <-got
	assert.Equal(t, "/moved", s.path)
	assert.Equal(t, "Bearer sk-secret", s.header.Get("Authorization"))
	assert.Equal(t, "sk-secret", s.header.Get("X-Api-Key"))
	assert.Equal(t, "azure-secret", s.header.Get("Api-Key"))
}

func TestUserClientThatRefusesRedirectsGetsARedirectError(t *testing.T) {
	api := redirector("https://example.invalid/v1")
	defer api.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, _, err := credentialed(client, api.URL).Do(context.Background(), nil, func(toolrun.Chunk, error) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "redirect", pe.Code)
	assert.Equal(t, http.StatusTemporaryRedirect, pe.Status)
	assert.Contains(t, pe.Message, `"https://example.invalid/v1"`)
}

func TestOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://api.example.com/v1", "https://API.example.com:443/other", true},
		{"http://127.0.0.1:8080/a", "http://127.0.0.1:8080/b", true},
		{"http://127.0.0.1:8080/a", "http://127.0.0.1:8081/a", false},
		{"https://api.example.com/", "http://api.example.com/", false},
		{"https://api.example.com/", "https://evil.api.example.com/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		a, err := http.NewRequest("GET", c.a, nil)
		require.NoError(t, err)
		b, err := http.NewRequest("GET", c.b, nil)
		require.NoError(t, err)
		assert.Equal(t, c.same, origin(a.URL) == origin(b.URL), "%s and %s", c.a, c.b)
	}
}
