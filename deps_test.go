package toolrun_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A program that imports toolrun links neither the sandbox nor its engines
// (goja, esbuild): only programs that set a sandbox CodeRunner pay for
// them, in binary size and start-up.
func TestRootPackageDoesNotLinkTheSandbox(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goCmd, "list", "-deps", "github.com/toolrun/toolrun").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"github.com/toolrun/toolrun/sandbox", "github.com/dop251/goja", "github.com/evanw/esbuild"} {
			if dep == heavy || strings.HasPrefix(dep, heavy+"/") {
				t.Errorf("toolrun depends on %s", dep)
			}
		}
	}
}
