package toolrun

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"sync"

	"github.com/toolrun/toolrun/internal/redact"
)

// VarType is the display type of an environment value. Only VarText
// values may be shown: a value of any other type, the empty one included,
// is treated as secret. The runtime's writes of env values (Runtime.SetEnv,
// ThreadOptions.Env, ThreadState.SetEnv) refuse a type that is neither.
type VarType string

// The variable types of the spec.
const (
	// VarText values may be shown.
	VarText VarType = "text"
	// VarSecret values are redacted from everything that leaves a tool and
	// should be encrypted at rest. It is the default type.
	VarSecret VarType = "secret"
)

// Variable declares an environment variable a tool or prompt needs (spec
// VariableDefinition).
type Variable struct {
	Name string  `json:"name"`
	Type VarType `json:"type"`
	// Required variables are resolved through the env chain before Execute;
	// if one does not resolve, Execute is not called and the call's result is
	// an error naming it.
	Required bool `json:"required"`
	// Scoped blocks inheritance from the parent thread's env for this name;
	// the value still flows down from the thread where it is provided.
	Scoped      bool   `json:"scoped,omitempty"`
	Description string `json:"description"`
}

// redactMinLen is the shortest secret value that is redacted: replacing a
// one- to three-character value everywhere would garble unrelated text.
const redactMinLen = redact.MinLen

// warnShortSecret logs, at Warn, that a secret value is too short to be
// redacted. where says how it was set ("thread env", "agent defaults" …).
func warnShortSecret(ctx context.Context, log *slog.Logger, where, name string, v EnvValue) {
	if typeOr(v.Type) != VarText && v.Value != "" && len(v.Value) < redactMinLen {
		log.WarnContext(ctx, "toolrun: secret value shorter than 4 bytes is not redacted: use a longer value, or type text if it may be shown",
			"name", name, "set_in", where)
	}
}

// redactor replaces the secret values a thread knows by [REDACTED:<NAME>]
// in every form they can take on the way out (see internal/redact). A nil
// redactor redacts nothing.
type redactor = *secretRedactor

// secretRedactor is a redactor and the secrets it was built from: a batch
// whose env dropped a secret builds its next redactor with them still in
// (see Executor.redactor). It is immutable and shared through the cache.
type secretRedactor struct {
	r       *redact.Redactor
	secrets []redact.Secret // sorted by name, then value
}

// Active reports whether r has anything to redact (r is not nil).
func (r *secretRedactor) Active() bool { return r != nil }

// String returns s with every secret replaced (see redact.Redactor.String).
func (r *secretRedactor) String(s string) string {
	if r == nil {
		return s
	}
	return r.r.String(s)
}

// Partial returns s, the first part of a text that still streams, with
// every secret replaced, and one its end cuts too (see
// redact.Redactor.Partial).
func (r *secretRedactor) Partial(s string) string {
	if r == nil {
		return s
	}
	return r.r.Partial(s)
}

// Value returns the JSON tree v with every secret replaced (see
// redact.Redactor.Value).
func (r *secretRedactor) Value(v any) any {
	if r == nil {
		return v
	}
	return r.r.Value(v)
}

// redactors caches the redactors of the secret sets in use: building one
// compiles every form of every secret into an automaton, which costs far
// more than a call, while a thread's secrets rarely change.
var redactors = newRedactorCache(256)

// redactorCache is a bounded cache of redactors keyed by a digest of their
// secret set. It is safe for concurrent use.
type redactorCache struct {
	mu    sync.Mutex
	max   int
	items map[[32]byte]*list.Element
	order *list.List // most recently used first
}

type cachedRedactor struct {
	key [32]byte
	red redactor
}

func newRedactorCache(max int) *redactorCache {
	return &redactorCache{max: max, items: map[[32]byte]*list.Element{}, order: list.New()}
}

// get returns the redactor of secrets, which must be sorted by name, then value.
func (c *redactorCache) get(secrets []redact.Secret) redactor {
	if len(secrets) == 0 {
		return nil
	}
	// Each name and value is preceded by its length, so that no two sets
	// share an encoding (a separator byte can be part of a name or value).
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range secrets {
		h.Write(binary.AppendUvarint(n[:0], uint64(len(s.Name))))
		h.Write([]byte(s.Name))
		h.Write(binary.AppendUvarint(n[:0], uint64(len(s.Value))))
		h.Write([]byte(s.Value))
	}
	var key [32]byte
	h.Sum(key[:0])
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*cachedRedactor).red
	}
	c.mu.Unlock()
	var red redactor
	if r, _ := redact.New(secrets); r != nil {
		red = &secretRedactor{r: r, secrets: secrets}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*cachedRedactor).red
	}
	c.items[key] = c.order.PushFront(&cachedRedactor{key: key, red: red})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cachedRedactor).key)
	}
	return red
}
