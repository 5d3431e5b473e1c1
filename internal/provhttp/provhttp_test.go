package provhttp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toolrun/toolrun"
)

func TestBackoffRetryAfter(t *testing.T) {
	r := Retry{MaxWait: 10 * time.Second}
	d, ok := r.Backoff(0, 3*time.Second)
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d, "a Retry-After is used as is, without jitter")

	d, ok = r.Backoff(5, 11*time.Second)
	assert.False(t, ok, "a Retry-After beyond MaxWait gives up")
	assert.Equal(t, 11*time.Second, d)

	_, ok = Retry{}.Backoff(0, 61*time.Second)
	assert.False(t, ok, "the default MaxWait is one minute")
	_, ok = Retry{}.Backoff(0, time.Minute)
	assert.True(t, ok)
}

func TestBackoffExponentialJitterAndCap(t *testing.T) {
	r := Retry{BaseDelay: 100 * time.Millisecond, MaxWait: time.Second}
	for range 200 {
		for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
			want *= time.Millisecond
			d, ok := r.Backoff(attempt, 0)
			require.True(t, ok)
			assert.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
	// A huge attempt number must not overflow into a zero or negative wait.
	d, ok := r.Backoff(1000, 0)
	assert.True(t, ok)
	assert.GreaterOrEqual(t, d, 500*time.Millisecond)
	assert.LessOrEqual(t, d, time.Second)

	// Defaults: 500ms base.
	d, _ = Retry{}.Backoff(0, 0)
	assert.GreaterOrEqual(t, d, 250*time.Millisecond)
	assert.LessOrEqual(t, d, 500*time.Millisecond)
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	assert.Zero(t, RetryAfter(h(), now))
	assert.Equal(t, 2*time.Second, RetryAfter(h("Retry-After", "2"), now))
	assert.Equal(t, 1500*time.Millisecond, RetryAfter(h("Retry-After", " 1.5 "), now))
	assert.Zero(t, RetryAfter(h("Retry-After", "0"), now))
	assert.Zero(t, RetryAfter(h("Retry-After", "-3"), now))
	assert.Equal(t, 30*time.Second, RetryAfter(h("Retry-After", now.Add(30*time.Second).Format(http.TimeFormat)), now))
	assert.Zero(t, RetryAfter(h("Retry-After", now.Add(-time.Minute).Format(http.TimeFormat)), now), "a date in the past")
	assert.Zero(t, RetryAfter(h("Retry-After", "soon"), now))
	assert.Equal(t, 150*time.Millisecond, RetryAfter(h("Retry-After-Ms", "150", "Retry-After", "9"), now), "milliseconds win")
	assert.Equal(t, 9*time.Second, RetryAfter(h("Retry-After-Ms", "x", "Retry-After", "9"), now), "unreadable milliseconds fall back")
}

func TestRetryAfterTooLongForADurationGivesUp(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	longest := time.Duration(math.MaxInt64)
	for _, h := range []http.Header{
		{"Retry-After": {"10000000000"}},
		{"Retry-After": {"9223372036.854775807"}}, // just past the largest Duration
		{"Retry-After": {"Inf"}},
		{"Retry-After": {"infinity"}},
		{"Retry-After": {"1e400"}}, // too large for a float64
		{"Retry-After": {"Fri, 31 Dec 9999 23:59:59 GMT"}},
		{"Retry-After-Ms": {"1e13"}},
		{"Retry-After-Ms": {"+Inf"}},
		{"Retry-After-Ms": {"1e400"}, "Retry-After": {"1"}},
	} {
		d := RetryAfter(h, now)
		assert.Equal(t, longest, d, "%v", h)
		_, ok := Retry{}.Backoff(0, d)
		assert.False(t, ok, "%v: a wait longer than MaxWait gives up", h)
	}
	assert.Equal(t, 9223372036*time.Second, RetryAfter(http.Header{"Retry-After": {"9223372036"}}, now), "the longest whole number of seconds a Duration holds")
	for _, v := range []string{"NaN", "-Inf", "-1e400", "-10000000000", "1e-400"} {
		assert.Zero(t, RetryAfter(http.Header{"Retry-After": {v}}, now), "Retry-After %s", v)
		assert.Equal(t, 2*time.Second, RetryAfter(http.Header{"Retry-After-Ms": {v}, "Retry-After": {"2"}}, now),
			"Retry-After-Ms %s falls back to Retry-After", v)
	}
}

// script returns an AttemptFunc that returns the given results in turn and
// counts its calls.
type result struct {
	chunks []toolrun.Chunk
	err    error
}

func script(calls *int, results ...result) AttemptFunc {
	return func(ctx context.Context, yield func(toolrun.Chunk, error) bool) (yielded, stopped bool, err error) {
		r := results[*calls]
		*calls++
		for _, c := range r.chunks {
			yielded = true
			if !yield(c, nil) {
				return true, true, nil
			}
		}
		return yielded, false, r.err
	}
}

func collect(ctx context.Context, r Retry, a AttemptFunc) ([]toolrun.Chunk, []error) {
	var chunks []toolrun.Chunk
	var errs []error
	Stream(ctx, "test", slog.New(slog.DiscardHandler), r, a, func(c toolrun.Chunk, err error) bool {
		if err != nil {
			errs = append(errs, err)
		} else {
			chunks = append(chunks, c)
		}
		return true
	})
	return chunks, errs
}

var (
	fast      = Retry{BaseDelay: time.Millisecond, MaxWait: 10 * time.Millisecond}
	retryable = &toolrun.ProviderError{Provider: "test", Code: "server_error", Retryable: true}
	final     = &toolrun.ProviderError{Provider: "test", Code: "invalid_request"}
	chunk     = toolrun.Chunk{Text: "hi"}
)

func TestStreamRetriesUntilSuccess(t *testing.T) {
	var calls int
	chunks, errs := collect(context.Background(), fast, script(&calls,
		result{err: retryable}, result{err: retryable}, result{chunks: []toolrun.Chunk{chunk}}))
	assert.Equal(t, 3, calls)
	assert.Empty(t, errs)
	assert.Equal(t, []toolrun.Chunk{chunk}, chunks)
}

func TestStreamGivesUpAfterMaxRetries(t *testing.T) {
	var calls int
	_, errs := collect(context.Background(), fast, script(&calls,
		result{err: retryable}, result{err: retryable}, result{err: retryable}, result{}))
	assert.Equal(t, 3, calls, "MaxRetries 0 means 2 retries")
	assert.Equal(t, []error{retryable}, errs)

	calls = 0
	r := fast
	r.MaxRetries = -1
	_, errs = collect(context.Background(), r, script(&calls, result{err: retryable}, result{}))
	assert.Equal(t, 1, calls, "a negative MaxRetries disables retries")
	assert.Equal(t, []error{retryable}, errs)
}

func TestStreamDoesNotRetry(t *testing.T) {
	for name, res := range map[string]result{
		"non-retryable":  {err: final},
		"not a provider": {err: errors.New("boom")},
		"after a chunk":  {chunks: []toolrun.Chunk{chunk}, err: retryable},
	} {
		t.Run(name, func(t *testing.T) {
			var calls int
			_, errs := collect(context.Background(), fast, script(&calls, res, result{}))
			assert.Equal(t, 1, calls)
			assert.Equal(t, []error{res.err}, errs)
		})
	}
	t.Run("retry-after too long", func(t *testing.T) {
		var calls int
		long := &toolrun.ProviderError{Provider: "test", Retryable: true, RetryAfter: time.Hour}
		_, errs := collect(context.Background(), fast, script(&calls, result{err: long}, result{}))
		assert.Equal(t, 1, calls)
		assert.Equal(t, []error{long}, errs)
	})
}

func TestStreamStopsWhenConsumerStops(t *testing.T) {
	var calls, yields int
	Stream(context.Background(), "test", slog.New(slog.DiscardHandler), fast,
		script(&calls, result{chunks: []toolrun.Chunk{chunk, chunk}, err: retryable}),
		func(toolrun.Chunk, error) bool { yields++; return false })
	assert.Equal(t, 1, calls)
	assert.Equal(t, 1, yields, "nothing is yielded after the consumer stops")
}

func TestStreamCancelledDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls int
	a := func(ctx context.Context, yield func(toolrun.Chunk, error) bool) (bool, bool, error) {
		calls++
		cancel()
		return false, false, &toolrun.ProviderError{Retryable: true, RetryAfter: 50 * time.Millisecond}
	}
	start := time.Now()
	_, errs := collect(ctx, Retry{}, a)
	assert.Less(t, time.Since(start), 40*time.Millisecond)
	assert.Equal(t, 1, calls)
	assert.Equal(t, []error{context.Canceled}, errs)
}

func TestStreamLogsRetries(t *testing.T) {
	var buf strings.Builder
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var calls int
	Stream(context.Background(), "prov", log, fast, script(&calls, result{err: retryable}, result{}),
		func(toolrun.Chunk, error) bool { return true })
	assert.Contains(t, buf.String(), "retrying model request")
	assert.Contains(t, buf.String(), "provider=prov")
	assert.Contains(t, buf.String(), "attempt=1")
}

func TestIdleReader(t *testing.T) {
	pr, pw := io.Pipe()
	fired := make(chan struct{})
	ir := NewIdleReader(pr, 20*time.Millisecond, func() { close(fired); pw.Close() })
	defer ir.Stop()
	go func() { _, _ = pw.Write([]byte("x")) }()
	b := make([]byte, 1)
	n, err := ir.Read(b)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case <-fired:
	case <-time.After(time.Second):
		t.Fatal("onIdle not called")
	}
	_, err = ir.Read(b)
	assert.ErrorIs(t, err, io.EOF)
}

func TestIdleReaderStop(t *testing.T) {
	fired := make(chan struct{}, 1)
	ir := NewIdleReader(strings.NewReader(""), 10*time.Millisecond, func() { fired <- struct{}{} })
	ir.Stop()
	select {
	case <-fired:
		t.Fatal("onIdle called after Stop")
	case <-time.After(40 * time.Millisecond):
	}
}

func TestResponseError(t *testing.T) {
	resp := func(status int, body string, h http.Header) *http.Response {
		if h == nil {
			h = http.Header{}
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	}
	retry := func(s int) bool { return s >= 500 }
	decode := func(b []byte) (string, string, bool) {
		if strings.HasPrefix(string(b), "{") {
			return "", "decoded " + string(b), true
		}
		return "", "", false
	}
	code := func(s int) string { return "code" + http.StatusText(s) }

	e := ResponseError("p", resp(503, " {x} \n", http.Header{"Retry-After": {"2"}}), retry, decode, code)
	assert.Equal(t, &toolrun.ProviderError{Provider: "p", Status: 503, Code: "codeService Unavailable",
		Message: "decoded {x}", Retryable: true, RetryAfter: 2 * time.Second}, e)

	e = ResponseError("p", resp(400, strings.Repeat("a", 301), nil), retry, decode, code)
	assert.False(t, e.Retryable)
	assert.Equal(t, strings.Repeat("a", 300)+"…", e.Message)

	e = ResponseError("p", resp(404, "  ", nil), retry, decode, code)
	assert.Equal(t, "Not Found", e.Message)
	assert.Equal(t, "codeNot Found", e.Code)

	// An error body without a message ({"error":{}}) still says something.
	blank := func([]byte) (string, string, bool) { return "", " ", true }
	e = ResponseError("p", resp(500, `{"error":{}}`, nil), retry, blank, code)
	assert.Equal(t, "Internal Server Error: "+NoMessage, e.Message)
	e = ResponseError("p", resp(599, `{"error":{}}`, nil), retry, blank, code)
	assert.Equal(t, NoMessage, e.Message)
	assert.Equal(t, NoMessage, Message("\t"))
	assert.Equal(t, "m", Message("m"))
}

func TestTruncateKeepsWholeCharacters(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abc", 5, "abc"},
		{"abc", 2, "ab"},
		{"abc", 0, ""},
		{"x€€", 1, "x"},
		{"x€€", 2, "x"}, // € is 3 bytes
		{"x€€", 3, "x"},
		{"x€€", 4, "x€"},
		{"x€€", 6, "x€"},
		{"a😀b", 4, "a"}, // 😀 is 4 bytes
		{"a😀b", 5, "a😀"},
		{"ab\x80\x80\x80\x80cd", 4, "ab\x80\x80"}, // stray continuation bytes are cut anywhere
		{"a\xe2\x82", 2, "a\xe2"},                 // so is an unfinished character
	} {
		assert.Equal(t, c.want, Truncate(c.s, c.n), "Truncate(%q, %d)", c.s, c.n)
	}
}

func TestErrorMessagesCutOnACharacterBoundary(t *testing.T) {
	body := "x" + strings.Repeat("€", 200)
	resp := &http.Response{StatusCode: 500, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
	e := ResponseError("p", resp, func(int) bool { return true }, func([]byte) (string, string, bool) { return "", "", false },
		func(int) string { return "server_error" })
	assert.True(t, utf8.ValidString(e.Message), "message %q", e.Message)
	assert.Equal(t, "x"+strings.Repeat("€", 99)+"…", e.Message, "299 bytes: the 100th € would end past 300")

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	a := Attempt{Provider: "p", Client: srv.Client(), Endpoint: srv.URL}
	_, _, err := a.Do(context.Background(), nil, func(toolrun.Chunk, error) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, utf8.ValidString(pe.Message), "message %q", pe.Message)
	assert.Equal(t, `unexpected content type "text/html": x`+strings.Repeat("€", 170), pe.Message, "511 bytes of the body")
}

func TestAttemptIdleTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "v", r.Header.Get("X-Test"))
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	a := Attempt{
		Provider: "p", Client: srv.Client(), Endpoint: srv.URL,
		Header:      func(h http.Header) { h.Set("X-Test", "v") },
		IdleTimeout: 30 * time.Millisecond,
		Stream: func(_ string, body io.Reader, _ func(toolrun.Chunk) bool) error {
			_, err := io.ReadAll(body)
			return err
		},
	}
	yielded, stopped, err := a.Do(context.Background(), []byte("{}"), func(toolrun.Chunk, error) bool { return true })
	assert.False(t, yielded)
	assert.False(t, stopped)
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "stream_timeout", pe.Code)
	assert.True(t, pe.Retryable)
	assert.ErrorIs(t, err, ErrIdle)
}

func TestAttemptStatusAndContentType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			w.WriteHeader(429)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>")
	}))
	defer srv.Close()
	sentinel := &toolrun.ProviderError{Code: "from-error-func"}
	a := Attempt{Provider: "p", Client: srv.Client(), Endpoint: srv.URL + "/bad",
		Error: func(string, *http.Response) *toolrun.ProviderError { return sentinel }}
	_, _, err := a.Do(context.Background(), nil, func(toolrun.Chunk, error) bool { return true })
	assert.Same(t, sentinel, err)

	a.Endpoint = srv.URL
	_, _, err = a.Do(context.Background(), nil, func(toolrun.Chunk, error) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Contains(t, pe.Message, `"text/html"`)
}

func TestReadResponseLimit(t *testing.T) {
	x := strings.NewReader(strings.Repeat("x", 1<<10))
	b, err := ReadResponse("p", io.MultiReader(x, io.LimitReader(zeros{}, MaxResponse-1<<10)))
	require.NoError(t, err, "a body of exactly MaxResponse bytes is read")
	assert.Len(t, b, MaxResponse)

	_, err = ReadResponse("p", io.LimitReader(zeros{}, MaxResponse+1))
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_response", pe.Code)
	assert.Equal(t, "response larger than 64 MiB", pe.Message)

	_, err = ReadResponse("p", iotest.ErrReader(io.ErrUnexpectedEOF))
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "network", pe.Code)
	assert.True(t, pe.Retryable)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}

// stallAfter returns a server that sends the status, content type and one
// byte of body, and then sends nothing until the client goes away.
func stallAfter(status int, contentType string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "x")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
}

func TestAttemptIdleTimeoutCoversEveryBody(t *testing.T) {
	for _, c := range []struct {
		name, contentType string
		status            int
	}{
		{"error body", "application/json", 500},
		{"client error body", "text/plain", 400},
		{"unexpected content type", "text/html", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := stallAfter(c.status, c.contentType)
			defer srv.Close()
			a := Attempt{
				Provider: "p", Client: srv.Client(), Endpoint: srv.URL, IdleTimeout: 20 * time.Millisecond,
				Error: func(provider string, resp *http.Response) *toolrun.ProviderError {
					return ResponseError(provider, resp, func(int) bool { return false },
						func([]byte) (string, string, bool) { return "", "", false }, func(int) string { return "server_error" })
				},
			}
			// The deadline only keeps a broken Do from hanging the test.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _, err := a.Do(ctx, nil, func(toolrun.Chunk, error) bool { return true })
			var pe *toolrun.ProviderError
			require.ErrorAs(t, err, &pe, "a stalled body is ended by IdleTimeout, not by the context")
			assert.Equal(t, "stream_timeout", pe.Code)
			assert.True(t, pe.Retryable)
			assert.ErrorIs(t, err, ErrIdle)
		})
	}
}

func TestAttemptWholeErrorBodyIsNotATimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		_, _ = io.WriteString(w, "busy")
	}))
	defer srv.Close()
	a := Attempt{
		Provider: "p", Client: srv.Client(), Endpoint: srv.URL, IdleTimeout: time.Hour,
		Error: func(provider string, resp *http.Response) *toolrun.ProviderError {
			return ResponseError(provider, resp, func(int) bool { return true },
				func([]byte) (string, string, bool) { return "", "", false }, func(int) string { return "server_error" })
		},
	}
	_, _, err := a.Do(context.Background(), nil, func(toolrun.Chunk, error) bool { return true })
	var pe *toolrun.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, &toolrun.ProviderError{Provider: "p", Status: 503, Code: "server_error", Message: "busy", Retryable: true}, pe)
}
