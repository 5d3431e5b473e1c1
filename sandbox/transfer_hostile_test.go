package sandbox

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestStackOverflowWhileExporting: a stack overflow in user code that runs
// after the entry returned (a getter of the result, the message getter or
// toString of what was thrown) ends the run with RangeError, as any other
// stack overflow does, not with an InternalError holding goja's stack.
func TestStackOverflowWhileExporting(t *testing.T) {
	bothModes(t, func(t *testing.T, r *Runner) {
		for _, src := range []string{
			`const f = () => f();
export default () => ({ get x() { return f(); } });`,
			`const f = () => f();
export default () => { const e = new Error("m"); Object.defineProperty(e, "message", { get: f }); throw e; };`,
			`const f = () => f();
export default () => { throw { toString: f }; };`,
		} {
			res := runCode(t, r, src, &Options{Language: LanguageJavaScript})
			requireStatus(t, res, StatusError)
			assert.Equal(t, "RangeError", res.Error.Name, "%s\n%v", src, res.Error)
			assert.Contains(t, res.Error.Message, "Maximum call stack size exceeded", src)
			assert.Equal(t, 1, res.Error.Line, "the position is in the user's source: %s", src)
		}
	})
}
