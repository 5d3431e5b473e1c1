package anthropic

import (
	"context"
	"encoding/json"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/provhttp"
)

// DefaultBaseURL is the Anthropic API root.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultVersion is the anthropic-version header sent by default.
const DefaultVersion = "2023-06-01"

// DefaultMaxTokens is the max_tokens sent when Options.MaxTokens is 0.
const DefaultMaxTokens = 4096

// Options configure a Provider. A nil *Options is the zero value.
type Options struct {
	// Name is the provider name used in errors and logs; "" means "anthropic".
	Name string
	// APIKey is sent as the x-api-key header.
	APIKey string
	// BaseURL is the API root the path "/v1/messages" is added to; ""
	// means DefaultBaseURL.
	BaseURL string
	// Version is the anthropic-version header; "" means DefaultVersion.
	Version string
	// MaxTokens is the response token limit (max_tokens, which the API
	// requires); 0 means DefaultMaxTokens.
	MaxTokens int
	// Headers are added to every request after the defaults, such as
	// "anthropic-beta" for beta features.
	Headers map[string]string
	// ExtraBody holds fields merged into the top level of every request
	// body, replacing fields of the same name: "thinking", "temperature",
	// "metadata", and so on. Values must encode to JSON. Note that extended
	// thinking combined with tool use needs the thinking blocks (with their
	// signatures) sent back with the tool_use turn, which toolrun messages
	// do not carry yet: such follow-up requests are refused by the API.
	ExtraBody map[string]any
	// ProviderTools are the server tools offered through the
	// ProviderTools method and sent, when a request selects one, as given.
	// nil means the default set: [WebSearch] with no use limit. An empty
	// non-nil slice offers none.
	ProviderTools []ProviderTool
	// HTTPClient sends the requests; nil means a client built from
	// ConnectTimeout and HeaderTimeout, which are otherwise ignored. A
	// redirect this client follows to another origin (scheme, host and
	// port) carries neither the API key nor Headers. The default client
	// follows no redirect: a redirect is an error of Code "redirect" that
	// names its target.
	HTTPClient *http.Client
	// ConnectTimeout bounds dialling (including TLS); 0 means 10 seconds.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the response headers; 0 means 2
	// minutes. The whole request is bounded by the context only.
	HeaderTimeout time.Duration
	// IdleTimeout ends a response whose stream sends nothing (not even a
	// keep-alive) for this long, with a retryable *toolrun.ProviderError
	// of Code "stream_timeout"; the body of an error status is covered
	// too. 0 means no limit. Time the consumer spends on a chunk counts
	// too, so leave room for it.
	IdleTimeout time.Duration
	// MaxRetries is how often a retryable failure (network errors, 408,
	// 409, 429, 5xx, 529 overloaded, an overloaded error event) is retried
	// while no chunk was yielded; 0 means 2, negative disables retries.
	MaxRetries int
	// RetryBaseDelay is the first backoff delay, doubled on each retry and
	// jittered; 0 means 500ms. A Retry-After header replaces it.
	RetryBaseDelay time.Duration
	// MaxRetryWait is the longest wait before a retry; a Retry-After
	// asking for more ends the retries with the error. 0 means 1 minute.
	MaxRetryWait time.Duration
	// Logger receives warnings (dropped schema keywords) and retry
	// notices; nil logs nothing.
	Logger *slog.Logger
}

// ProviderTool is a server tool Anthropic runs itself.
type ProviderTool struct {
	// Name is the tool's name, as prompts select it ("provider:<Name>").
	Name string
	// Description tells users (not the model) what the tool does.
	Description string
	// Tool is the entry added verbatim to the request's "tools" array.
	Tool json.RawMessage
	// Models lists the model ids the tool is available for; empty means all.
	Models []string
}

// WebSearch returns the web_search server tool (web_search_20250305).
// maxUses limits the searches per request; 0 means no limit.
func WebSearch(maxUses int) ProviderTool {
	t := map[string]any{"type": "web_search_20250305", "name": "web_search"}
	if maxUses > 0 {
		t["max_uses"] = maxUses
	}
	b, _ := json.Marshal(t)
	return ProviderTool{Name: "web_search", Description: "Anthropic web search: the model searches the web and cites its sources", Tool: b}
}

// Provider is a client of the Anthropic Messages API. It implements
// toolrun.Provider and toolrun.ProviderToolLister and is safe for
// concurrent use.
type Provider struct {
	name     string
	opts     Options
	endpoint string
	client   *http.Client
	log      *slog.Logger
	schemas  sync.Map // schemaKey -> json.RawMessage
}

var (
	_ toolrun.Provider           = (*Provider)(nil)
	_ toolrun.ProviderToolLister = (*Provider)(nil)
)

// New returns a Provider configured by opts (nil means defaults). The
// options are copied.
func New(opts *Options) *Provider {
	p := &Provider{}
	if opts != nil {
		p.opts = *opts
	}
	p.name = p.opts.Name
	if p.name == "" {
		p.name = "anthropic"
	}
	if p.opts.ProviderTools == nil {
		p.opts.ProviderTools = []ProviderTool{WebSearch(0)}
	}
	base := p.opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	p.endpoint = strings.TrimRight(base, "/") + "/v1/messages"
	p.client = p.opts.HTTPClient
	if p.client == nil {
		p.client = provhttp.NewClient(p.opts.ConnectTimeout, p.opts.HeaderTimeout)
	}
	p.log = p.opts.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Name returns the provider name ("anthropic" unless Options.Name is set).
func (p *Provider) Name() string { return p.name }

// ProviderTools returns the server tools available for modelID.
func (p *Provider) ProviderTools(modelID string) []toolrun.ToolSpec {
	var out []toolrun.ToolSpec
	for _, t := range p.opts.ProviderTools {
		if len(t.Models) == 0 || contains(t.Models, modelID) {
			out = append(out, toolrun.ToolSpec{Name: t.Name, Description: t.Description, ProviderExecuted: true, Provider: p.name})
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Stream sends req to the Messages API with streaming on and yields the
// response. Failures are *toolrun.ProviderError values, except a cancelled
// ctx, which ends the sequence with ctx.Err(). Retryable failures are
// retried (see Options.MaxRetries) as long as no chunk was yielded.
func (p *Provider) Stream(ctx context.Context, req *toolrun.Request) iter.Seq2[toolrun.Chunk, error] {
	return func(yield func(toolrun.Chunk, error) bool) {
		body, err := p.requestBody(req)
		if err != nil {
			yield(toolrun.Chunk{}, err)
			return
		}
		r := provhttp.Retry{MaxRetries: p.opts.MaxRetries, BaseDelay: p.opts.RetryBaseDelay, MaxWait: p.opts.MaxRetryWait}
		provhttp.Stream(ctx, p.name, p.log, r, func(ctx context.Context, yield func(toolrun.Chunk, error) bool) (bool, bool, error) {
			return p.attempt(ctx, body, yield)
		}, yield)
	}
}

// attempt sends the request once and streams the response to yield.
// yielded reports whether any chunk was yielded; stopped whether the
// consumer stopped the iteration.
func (p *Provider) attempt(ctx context.Context, body []byte, yield func(toolrun.Chunk, error) bool) (yielded, stopped bool, err error) {
	a := provhttp.Attempt{
		Provider: p.name,
		Client:   p.client,
		Endpoint: p.endpoint,
		Header: func(h http.Header) {
			version := p.opts.Version
			if version == "" {
				version = DefaultVersion
			}
			h.Set("anthropic-version", version)
			if p.opts.APIKey != "" {
				h.Set("x-api-key", p.opts.APIKey)
			}
			for k, v := range p.opts.Headers {
				h.Set(k, v)
			}
		},
		IdleTimeout: p.opts.IdleTimeout,
		Error:       httpError,
		JSON:        parseMessage,
		Stream:      parseStream,
	}
	return a.Do(ctx, body, yield)
}

// wireError is the "error" object of an error body or error event.
type wireError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// httpError turns a non-2xx response into a *toolrun.ProviderError, taking
// the code and message from an Anthropic error body when there is one.
func httpError(provider string, resp *http.Response) *toolrun.ProviderError {
	return provhttp.ResponseError(provider, resp, retryableStatus, decodeErrorBody, statusCode)
}

// decodeErrorBody reads an Anthropic error body: the error's type and
// message, the request id appended to the message.
func decodeErrorBody(b []byte) (code, message string, ok bool) {
	var env struct {
		Error     *wireError `json:"error"`
		RequestID string     `json:"request_id"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
		return "", "", false
	}
	code, message = env.Error.Type, env.Error.Message
	if env.RequestID != "" {
		message += " (request " + env.RequestID + ")"
	}
	return code, message, true
}

func retryableStatus(s int) bool {
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// retryableType reports whether an error type names a passing condition.
func retryableType(t string) bool {
	switch t {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}

func statusCode(s int) string {
	switch s {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if s >= 500 {
		return "api_error"
	}
	return ""
}
