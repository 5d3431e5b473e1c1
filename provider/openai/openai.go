package openai

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

// DefaultBaseURL is the OpenAI API base URL.
const DefaultBaseURL = "https://api.openai.com/v1"

// OpenRouterBaseURL is the OpenRouter API base URL.
const OpenRouterBaseURL = "https://openrouter.ai/api/v1"

// Options configure a Provider. The zero value talks to OpenAI without an
// API key; a nil *Options is the zero value.
type Options struct {
	// Name is the provider name used in errors and logs; "" means "openai".
	Name string
	// APIKey is sent as "Authorization: Bearer <key>"; "" sends no
	// Authorization header (local servers such as Ollama and vLLM).
	APIKey string
	// BaseURL is the API root the path "/chat/completions" is added to;
	// "" means DefaultBaseURL.
	BaseURL string
	// Headers are added to every request, after the defaults (so they may
	// replace them). OpenRouter reads "HTTP-Referer" and "X-Title" for
	// app attribution.
	Headers map[string]string
	// ExtraBody holds fields merged into the top level of every request
	// body, replacing fields of the same name: OpenRouter's "provider"
	// routing preferences, "models", "reasoning", "transforms"; "max_tokens"
	// or "max_completion_tokens"; "temperature"; and so on. Values must
	// encode to JSON.
	ExtraBody map[string]any
	// ProviderTools are the tools this server executes itself. They are
	// offered through the ProviderTools method and, when a request selects
	// one, sent as given.
	ProviderTools []ProviderTool
	// Strict sends tools with "strict": true, their schemas rewritten to
	// OpenAI's strict rules. A tool whose schema strict mode cannot express
	// (free-form maps, recursion) is sent non-strict with a warning.
	Strict bool
	// NoTypeArrays rewrites JSON Schema type arrays into anyOf, for
	// OpenAI-compatible servers that reject them.
	NoTypeArrays bool
	// HTTPClient sends the requests; nil means a client built from
	// ConnectTimeout and HeaderTimeout. A non-nil client is used as is and
	// those two options are ignored, except that a redirect it follows to
	// another origin (scheme, host and port) carries neither the API key
	// nor Headers. The default client follows no redirect: a redirect is
	// an error of Code "redirect" that names its target.
	HTTPClient *http.Client
	// ConnectTimeout bounds dialling a connection (including TLS); 0 means
	// 10 seconds.
	ConnectTimeout time.Duration
	// HeaderTimeout bounds the wait for the response headers once the
	// request is sent; 0 means 2 minutes. The whole request is bounded by
	// the context only.
	HeaderTimeout time.Duration
	// IdleTimeout ends a response whose stream sends nothing (not even a
	// keep-alive) for this long, with a retryable *toolrun.ProviderError
	// of Code "stream_timeout"; the body of an error status is covered
	// too. 0 means no limit. Time the consumer spends on a chunk counts
	// too, so leave room for it.
	IdleTimeout time.Duration
	// MaxRetries is how often a failed request is retried when the
	// failure is retryable (network errors, 408, 409, 429, 5xx) and no
	// chunk was yielded yet; 0 means 2, a negative value disables retries.
	MaxRetries int
	// RetryBaseDelay is the first backoff delay, doubled on each retry
	// and jittered; 0 means 500ms. A Retry-After header replaces it.
	RetryBaseDelay time.Duration
	// MaxRetryWait is the longest wait before a retry; a Retry-After
	// asking for more ends the retries with the error. 0 means 1 minute.
	MaxRetryWait time.Duration
	// Logger receives warnings (dropped schema keywords) and retry
	// notices; nil logs nothing.
	Logger *slog.Logger
}

// ProviderTool is a tool the server executes itself.
type ProviderTool struct {
	// Name is the tool's name, as prompts select it ("provider:<Name>").
	Name string
	// Description tells users (not the model) what the tool does.
	Description string
	// Tool is the entry added verbatim to the request's "tools" array, or
	// nil for none.
	Tool json.RawMessage
	// Body holds fields merged into the top level of the request when the
	// tool is selected, such as OpenRouter's {"plugins": [{"id": "web"}]}.
	Body map[string]any
	// Models lists the model ids the tool is available for; empty means all.
	Models []string
}

// OpenRouter returns Options for OpenRouter with the given API key. Add
// attribution headers and routing preferences to the result:
//
//	opts := openai.OpenRouter(key)
//	opts.Headers = map[string]string{"HTTP-Referer": "https://example.com", "X-Title": "Example"}
//	opts.ExtraBody = map[string]any{"provider": map[string]any{"order": []string{"anthropic"}}}
func OpenRouter(key string) *Options {
	return &Options{Name: "openrouter", APIKey: key, BaseURL: OpenRouterBaseURL}
}

// Provider is an OpenAI-compatible chat-completions client. It implements
// toolrun.Provider and toolrun.ProviderToolLister and is safe for
// concurrent use.
var _ toolrun.NullableOptionals = (*Provider)(nil)

// NullableOptionals reports whether Options.Strict is set: strict mode
// sends optional properties as required and nullable, so the model's null
// means "not given".
func (p *Provider) NullableOptionals(string) bool { return p.opts.Strict }

type Provider struct {
	name     string
	opts     Options
	endpoint string
	client   *http.Client
	log      *slog.Logger
	schemas  sync.Map // schemaKey -> schemaEntry
}

var (
	_ toolrun.Provider           = (*Provider)(nil)
	_ toolrun.ProviderToolLister = (*Provider)(nil)
)

// New returns a Provider configured by opts (nil means defaults). The
// options are copied; changing them later has no effect.
func New(opts *Options) *Provider {
	p := &Provider{}
	if opts != nil {
		p.opts = *opts
	}
	p.name = p.opts.Name
	if p.name == "" {
		p.name = "openai"
	}
	base := p.opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	p.endpoint = strings.TrimRight(base, "/") + "/chat/completions"
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

// Name returns the provider name ("openai" unless Options.Name is set).
func (p *Provider) Name() string { return p.name }

// ProviderTools returns the provider-executed tools available for modelID.
func (p *Provider) ProviderTools(modelID string) []toolrun.ToolSpec {
	var out []toolrun.ToolSpec
	for _, t := range p.opts.ProviderTools {
		if t.availableFor(modelID) {
			out = append(out, toolrun.ToolSpec{Name: t.Name, Description: t.Description, ProviderExecuted: true, Provider: p.name})
		}
	}
	return out
}

func (t *ProviderTool) availableFor(model string) bool {
	if len(t.Models) == 0 {
		return true
	}
	for _, m := range t.Models {
		if m == model {
			return true
		}
	}
	return false
}

// Stream sends req to the chat-completions endpoint with streaming on and
// yields the response. Failures are *toolrun.ProviderError values, except
// a cancelled ctx, which ends the sequence with ctx.Err(). Retryable
// failures are retried (see Options.MaxRetries) as long as no chunk was
// yielded.
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
			if p.opts.APIKey != "" {
				h.Set("Authorization", "Bearer "+p.opts.APIKey)
			}
			for k, v := range p.opts.Headers {
				h.Set(k, v)
			}
		},
		IdleTimeout: p.opts.IdleTimeout,
		Error:       httpError,
		JSON:        parseCompletion,
		Stream:      parseStream,
	}
	return a.Do(ctx, body, yield)
}

// httpError turns a non-2xx response into a *toolrun.ProviderError, taking
// the code and message from an OpenAI-style error body when there is one.
func httpError(provider string, resp *http.Response) *toolrun.ProviderError {
	return provhttp.ResponseError(provider, resp, retryableStatus, decodeErrorBody, statusCode)
}

// decodeErrorBody reads an OpenAI-style {"error": {...}} body.
func decodeErrorBody(b []byte) (code, message string, ok bool) {
	var env struct {
		Error *wireError `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
		return "", "", false
	}
	code, message = env.Error.codeAndMessage()
	return code, message, true
}

func retryableStatus(s int) bool {
	return s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// statusCode names an HTTP status for ProviderError.Code when the body has none.
func statusCode(s int) string {
	switch s {
	case 400:
		return "invalid_request"
	case 401:
		return "authentication_error"
	case 402:
		return "payment_required"
	case 403:
		return "permission_denied"
	case 404:
		return "not_found"
	case 408:
		return "timeout"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_exceeded"
	case 529:
		return "overloaded"
	}
	if s >= 500 {
		return "server_error"
	}
	return ""
}
