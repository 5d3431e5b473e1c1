// Package provhttp holds the HTTP plumbing the model providers share: the
// default client, the retry policy and driver, one streamed request
// (Attempt), the idle-timeout reader, non-2xx error bodies and Retry-After
// parsing.
//
// Everything that differs between providers stays with them and is passed
// in: endpoints and headers, the status-to-code mapping, which statuses and
// error types are retryable, how an error body is decoded, and the response
// parsers.
package provhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolrun/toolrun"
)

// NewClient returns an HTTP client whose dialling (including the TLS
// handshake) is bounded by connect and whose wait for the response headers
// is bounded by header; 0 (or less) means 10 seconds and 2 minutes. The
// whole request is bounded by its context only. The client follows no
// redirect: Attempt.Do reports a redirect as an error naming its target,
// so that neither the API key nor the prompt goes to an address the
// server chose.
func NewClient(connect, header time.Duration) *http.Client {
	if connect <= 0 {
		connect = 10 * time.Second
	}
	if header <= 0 {
		header = 2 * time.Minute
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = connect
	t.ResponseHeaderTimeout = header
	return &http.Client{Transport: t, CheckRedirect: refuseRedirect}
}

// refuseRedirect is the CheckRedirect of NewClient's client: the redirect
// response itself is returned.
func refuseRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Retry is a retry policy. The zero value is the default policy.
type Retry struct {
	// MaxRetries is how often a retryable failure is retried; 0 means 2,
	// a negative value disables retries.
	MaxRetries int
	// BaseDelay is the first backoff delay, doubled on each retry and
	// jittered; 0 (or less) means 500ms.
	BaseDelay time.Duration
	// MaxWait is the longest wait before a retry; 0 (or less) means
	// 1 minute.
	MaxWait time.Duration
}

func (r Retry) maxRetries() int {
	if r.MaxRetries == 0 {
		return 2
	}
	return r.MaxRetries
}

// Backoff returns the wait before retry number attempt+1 (attempt counts
// from 0). A positive retryAfter (the server's Retry-After) is returned as
// is, with false when it is longer than MaxWait: the caller should give
// up. Otherwise the wait is BaseDelay doubled attempt times, capped at
// MaxWait, and jittered to a random value in [d/2, d].
func (r Retry) Backoff(attempt int, retryAfter time.Duration) (time.Duration, bool) {
	maxWait := r.MaxWait
	if maxWait <= 0 {
		maxWait = time.Minute
	}
	if retryAfter > 0 {
		return retryAfter, retryAfter <= maxWait
	}
	base := r.BaseDelay
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	d := base << min(attempt, 16)
	if d > maxWait || d <= 0 {
		d = maxWait
	}
	// Jitter: a random wait in [d/2, d].
	return d/2 + rand.N(d/2+1), true
}

// AttemptFunc sends a request once and streams its response to yield.
// yielded reports whether any chunk was yielded; stopped whether the
// consumer stopped the iteration (yield returned false).
type AttemptFunc func(ctx context.Context, yield func(toolrun.Chunk, error) bool) (yielded, stopped bool, err error)

// Stream runs attempt, retrying under r while the failure is a retryable
// *toolrun.ProviderError and no chunk was yielded, and yields the final
// error, if any, as the last element. A cancelled ctx ends the stream with
// ctx.Err(), also during the wait between attempts. Each retry is logged
// at info level to log, which must not be nil.
func Stream(ctx context.Context, provider string, log *slog.Logger, r Retry, attempt AttemptFunc, yield func(toolrun.Chunk, error) bool) {
	maxRetries := r.maxRetries()
	for n := 0; ; n++ {
		yielded, stopped, err := attempt(ctx, yield)
		if stopped || err == nil {
			return
		}
		if ctx.Err() != nil {
			yield(toolrun.Chunk{}, ctx.Err())
			return
		}
		pe, _ := err.(*toolrun.ProviderError)
		if yielded || pe == nil || !pe.Retryable || n >= maxRetries {
			yield(toolrun.Chunk{}, err)
			return
		}
		wait, ok := r.Backoff(n, pe.RetryAfter)
		if !ok {
			yield(toolrun.Chunk{}, err)
			return
		}
		log.LogAttrs(ctx, slog.LevelInfo, "retrying model request",
			slog.String("provider", provider), slog.Int("attempt", n+1),
			slog.Duration("wait", wait), slog.String("error", err.Error()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			yield(toolrun.Chunk{}, ctx.Err())
			return
		case <-t.C:
		}
	}
}

// Parser reads a response body and yields its chunks; it stops when yield
// returns false.
type Parser func(provider string, body io.Reader, yield func(toolrun.Chunk) bool) error

// Attempt describes one provider's streamed POST request.
type Attempt struct {
	Provider string
	Client   *http.Client
	Endpoint string
	// Header sets the provider's request headers (after Content-Type
	// and Accept, which Do sets). When Client follows a redirect to
	// another origin (scheme, host and port), the headers Header sets,
	// other than Content-Type and Accept, are not sent there: they carry
	// the provider's credentials.
	Header func(http.Header)
	// IdleTimeout, when positive, ends a response that sends nothing for
	// this long with a retryable error of Code "stream_timeout". It
	// covers the body of an error status too.
	IdleTimeout time.Duration
	// Error turns a response with a status of 400 or more into an error.
	// A 3xx response (a redirect the client did not follow) is an error
	// of Code "redirect" that Do makes itself.
	Error func(provider string, resp *http.Response) *toolrun.ProviderError
	// JSON parses an "application/json" body, Stream a
	// "text/event-stream" body or one without a Content-Type.
	JSON, Stream Parser
}

// ErrIdle is the Err of the "stream_timeout" error Attempt.Do returns.
var ErrIdle = errors.New("stream idle timeout")

// Do sends body once and streams the response to yield; it is an
// AttemptFunc once body is bound. Transport failures are retryable
// *toolrun.ProviderError values of Code "network"; when parent is
// cancelled, the error is parent.Err(). Client is not changed: Do sends
// through a copy whose CheckRedirect keeps the provider's headers from
// other origins and then applies Client's own.
func (a *Attempt) Do(parent context.Context, body []byte, yield func(toolrun.Chunk, error) bool) (yielded, stopped bool, err error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.Endpoint, bytes.NewReader(body))
	if err != nil {
		return false, false, &toolrun.ProviderError{Provider: a.Provider, Code: "invalid_request", Message: err.Error(), Err: err}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	own := http.Header{}
	if a.Header != nil {
		a.Header(own)
	}
	for k, v := range own {
		hreq.Header[k] = v
	}
	client := *a.Client
	client.CheckRedirect = sameOriginOnly(a.Client.CheckRedirect, own)
	resp, err := client.Do(hreq)
	if err != nil {
		if parent.Err() != nil {
			return false, false, parent.Err()
		}
		return false, false, &toolrun.ProviderError{Provider: a.Provider, Code: "network", Message: err.Error(), Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	// The idle timer covers every read of the body, an error body too: a
	// server that sends the headers and then stalls is cut off either way.
	rb := &watchedBody{r: resp.Body, c: resp.Body}
	if a.IdleTimeout > 0 {
		ir := NewIdleReader(resp.Body, a.IdleTimeout, func() { cancel(ErrIdle) })
		defer ir.Stop()
		rb.r = ir
	}
	resp.Body = rb
	timedOut := func() *toolrun.ProviderError {
		return &toolrun.ProviderError{Provider: a.Provider, Code: "stream_timeout", Retryable: true,
			Message: fmt.Sprintf("no data from the server for %s", a.IdleTimeout), Err: ErrIdle}
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return false, false, redirectError(a.Provider, resp)
	}
	if resp.StatusCode >= 400 {
		e := a.Error(a.Provider, resp)
		if rb.err != nil && parent.Err() != nil {
			return false, false, parent.Err()
		}
		if rb.err != nil && context.Cause(ctx) == ErrIdle {
			return false, false, timedOut()
		}
		return false, false, e
	}
	y := func(c toolrun.Chunk) bool {
		yielded = true
		if !yield(c, nil) {
			stopped = true
			return false
		}
		return true
	}
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	switch {
	case strings.HasPrefix(ct, "application/json"):
		err = a.JSON(a.Provider, rb, y)
	case ct == "" || strings.HasPrefix(ct, "text/event-stream"):
		err = a.Stream(a.Provider, rb, y)
	default:
		// The bytes past 512 show whether the 512th ends a character.
		snippet, _ := io.ReadAll(io.LimitReader(rb, 512+utf8.UTFMax))
		err = &toolrun.ProviderError{Provider: a.Provider, Status: resp.StatusCode, Code: "invalid_response",
			Message: fmt.Sprintf("unexpected content type %q: %s", ct, strings.TrimSpace(Truncate(string(snippet), 512)))}
	}
	if stopped {
		return yielded, true, nil
	}
	if err != nil && parent.Err() != nil {
		return yielded, false, parent.Err()
	}
	if err != nil && context.Cause(ctx) == ErrIdle {
		return yielded, false, timedOut()
	}
	return yielded, false, err
}

// sameOriginOnly returns a CheckRedirect that removes the headers in own,
// other than Content-Type and Accept, from a redirected request to another
// origin than the first request's, and then applies next (nil means the
// http.Client default: at most 10 redirects).
func sameOriginOnly(next func(*http.Request, []*http.Request) error, own http.Header) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if origin(req.URL) != origin(via[0].URL) {
			for k := range own {
				if k == "Content-Type" || k == "Accept" {
					continue
				}
				delete(req.Header, k)
				req.Header.Del(k)
			}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// origin returns the scheme, host and port of u, in lower case and with
// the scheme's default port when u names none.
func origin(u *url.URL) string {
	scheme, port := strings.ToLower(u.Scheme), u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// redirectError reports a 3xx response, naming the address it redirects
// to (its Location, at most 300 bytes of it and "…").
func redirectError(provider string, resp *http.Response) *toolrun.ProviderError {
	e := &toolrun.ProviderError{Provider: provider, Status: resp.StatusCode, Code: "redirect"}
	loc := resp.Header.Get("Location")
	if u, err := resp.Location(); err == nil {
		loc = u.String()
	}
	if loc == "" {
		e.Message = fmt.Sprintf("unexpected %d %s response, with no Location", resp.StatusCode, http.StatusText(resp.StatusCode))
		return e
	}
	if len(loc) > 300 {
		loc = Truncate(loc, 300) + "…"
	}
	e.Message = fmt.Sprintf("the server redirected the request to %q, and redirects are not followed: set the base URL to the address meant", loc)
	return e
}

// watchedBody is a response body that keeps the first error a Read
// returned other than io.EOF, to tell a body that was cut off from one
// that was read to its end.
type watchedBody struct {
	r   io.Reader
	c   io.Closer
	err error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *watchedBody) Close() error { return b.c.Close() }

// MaxResponse is the size limit of a whole (non-streamed) response body.
const MaxResponse = 64 << 20

// ReadResponse reads a whole (non-streamed) response body. A body larger
// than MaxResponse is an "invalid_response" *toolrun.ProviderError that
// says so, and a read error a retryable one of Code "network".
func ReadResponse(provider string, body io.Reader) ([]byte, error) {
	// One byte past the limit shows whether the body goes on.
	b, err := io.ReadAll(io.LimitReader(body, MaxResponse+1))
	if err != nil {
		return nil, &toolrun.ProviderError{Provider: provider, Code: "network", Retryable: true, Message: err.Error(), Err: err}
	}
	if len(b) > MaxResponse {
		return nil, &toolrun.ProviderError{Provider: provider, Code: "invalid_response",
			Message: fmt.Sprintf("response larger than %d MiB", MaxResponse>>20)}
	}
	return b, nil
}

// IdleReader wraps a reader and calls onIdle when no Read has returned
// for its duration. Call Stop when done with it.
type IdleReader struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

// NewIdleReader returns an IdleReader over r that calls onIdle (in its
// own goroutine) once d passes without a Read returning.
func NewIdleReader(r io.Reader, d time.Duration, onIdle func()) *IdleReader {
	return &IdleReader{r: r, d: d, t: time.AfterFunc(d, onIdle)}
}

// Read reads from the underlying reader and restarts the idle timer.
func (i *IdleReader) Read(b []byte) (int, error) {
	n, err := i.r.Read(b)
	i.t.Reset(i.d)
	return n, err
}

// Stop stops the idle timer.
func (i *IdleReader) Stop() { i.t.Stop() }

// ResponseError turns a non-2xx response into a *toolrun.ProviderError. It
// reads up to 1 MiB of the body and sets Status, Retryable (from
// retryable) and RetryAfter. decode extracts the code and message of a
// body the provider recognises; otherwise the message is the trimmed body
// (at most 300 bytes and "…", cut as Truncate cuts) or, for an empty body,
// the status text. An empty code becomes code(status).
func ResponseError(provider string, resp *http.Response, retryable func(status int) bool,
	decode func(body []byte) (code, message string, ok bool), code func(status int) string) *toolrun.ProviderError {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &toolrun.ProviderError{
		Provider:   provider,
		Status:     resp.StatusCode,
		Retryable:  retryable(resp.StatusCode),
		RetryAfter: RetryAfter(resp.Header, time.Now()),
	}
	var ok bool
	if e.Code, e.Message, ok = decode(bytes.TrimSpace(b)); ok && strings.TrimSpace(e.Message) == "" {
		e.Message = NoMessage
		if t := http.StatusText(resp.StatusCode); t != "" {
			e.Message = t + ": " + NoMessage
		}
	} else if !ok {
		e.Code = ""
		e.Message = strings.TrimSpace(string(b))
		if len(e.Message) > 300 {
			e.Message = Truncate(e.Message, 300) + "…"
		}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	if e.Code == "" {
		e.Code = code(resp.StatusCode)
	}
	return e
}

// Truncate returns s when it is at most n bytes long, and otherwise its
// first n bytes, less those of a UTF-8 character that the cut would split,
// so that a cut valid UTF-8 text stays valid. Bytes that are not part of a
// valid character are cut like single characters.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	// The character the byte at n belongs to starts at most UTFMax-1 bytes
	// before it.
	for i := n; i > n-utf8.UTFMax && i >= 0; i-- {
		if utf8.RuneStart(s[i]) {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size > n {
				return s[:i]
			}
			break
		}
	}
	return s[:n]
}

// NoMessage is the message of an error a provider reported without one
// (an error object with no "message", or a blank one).
const NoMessage = "the provider reported an error without a message"

// Message returns msg, or NoMessage when msg is blank.
func Message(msg string) string {
	if strings.TrimSpace(msg) == "" {
		return NoMessage
	}
	return msg
}

// RetryAfter reads the "Retry-After-Ms" header (milliseconds) or else
// "Retry-After" (seconds or an HTTP date, relative to now); 0 when absent,
// unreadable (NaN is), or not in the future. A wait longer than the
// largest Duration (an infinity, or a number too large even for a float64)
// is the largest Duration, so that Backoff gives up on it.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, ok := number(v); ok && ms > 0 {
			return duration(ms, time.Millisecond)
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, ok := number(v); ok && !strings.ContainsAny(v, ", ") {
		return duration(secs, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// number reads the number v starts with, as fmt's %g verb reads it. A
// number too large for a float64 is read as the infinity of its sign.
func number(v string) (float64, bool) {
	var f float64
	_, err := fmt.Sscanf(v, "%g", &f)
	if errors.Is(err, strconv.ErrRange) {
		// Only a number too large gives ErrRange: one too small reads as 0.
		if strings.HasPrefix(v, "-") {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	return f, err == nil
}

// duration returns n units as a Duration: 0 when n is not positive (or is
// NaN), and the largest Duration when n units are more than it holds (a
// conversion would overflow to a negative Duration).
func duration(n float64, unit time.Duration) time.Duration {
	if !(n > 0) {
		return 0
	}
	d := n * float64(unit)
	if d >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(d)
}
