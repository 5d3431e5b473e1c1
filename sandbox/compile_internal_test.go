package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestKeyMemoGivesTheHashOfTheRequest checks the memo of request keys:
// the key of a request seen before is its hash; a request that differs in
// any part (source, filename, language, a module, an import's members) gets
// its own; a request's maps changed after it was seen do not bring back its
// old key; and a source too large to keep is hashed each time.
func TestKeyMemoGivesTheHashOfTheRequest(t *testing.T) {
	base := func() *compileRequest {
		return &compileRequest{source: "export default 1", filename: "a.ts", lang: LanguageTypeScript,
			modules: map[string]string{"./m": "export const m = 1"}, imports: map[string][]string{"h": {"f", "g"}}}
	}
	var m keyMemo
	b := base()
	assert.Equal(t, b.key(), m.key(b))
	assert.Equal(t, b.key(), m.key(base()), "a request seen before")
	variants := map[string]func(c *compileRequest){
		"source":   func(c *compileRequest) { c.source += " " },
		"filename": func(c *compileRequest) { c.filename = "b.ts" },
		"language": func(c *compileRequest) { c.lang = LanguageJavaScript },
		"module":   func(c *compileRequest) { c.modules["./m"] = "export const m = 2" },
		"modules":  func(c *compileRequest) { c.modules = nil },
		"import":   func(c *compileRequest) { c.imports["h"] = []string{"f"} },
		"imports":  func(c *compileRequest) { c.imports = nil },
	}
	for name, change := range variants {
		c := base()
		change(c)
		assert.NotEqual(t, b.key(), c.key(), name)
		assert.Equal(t, c.key(), m.key(c), name)
	}
	// The memo keeps copies: changing a request it saw does not change
	// what it remembers.
	seen := base()
	seen.source = "export default 3"
	k := m.key(seen)
	seen.modules["./m"] = "changed"
	seen.imports["h"][0] = "changed"
	assert.Equal(t, seen.key(), m.key(seen), "a changed request gets its own key")
	fresh := base()
	fresh.source = "export default 3"
	assert.Equal(t, k, m.key(fresh))

	big := base()
	big.source = strings.Repeat("x", keyMemoMaxBytes+1)
	assert.Equal(t, big.key(), m.key(big))
	for _, e := range m.ents {
		assert.NotEqual(t, big.source, e.req.source, "a large source is not kept")
	}
}
