// Command toolrun-sandbox-worker is a small helper binary for the sandbox
// package's worker mode. Point [sandbox.RunnerOptions.WorkerCommand] at it
// when the host binary should not re-execute itself as a worker (for
// example when its start-up is expensive or it is not available as a file):
//
//	go build -o /usr/local/bin/toolrun-sandbox-worker github.com/toolrun/toolrun/sandbox/cmd/toolrun-sandbox-worker
//	r := sandbox.New(&sandbox.RunnerOptions{WorkerCommand: []string{"/usr/local/bin/toolrun-sandbox-worker"}})
//
// The worker protocol is served by the sandbox package's init function when
// the environment variable TOOLRUN_SANDBOX_WORKER is "1", which the Runner
// sets; run by hand, the command only explains itself.
package main

import (
	"fmt"
	"os"

	"github.com/toolrun/toolrun/sandbox"
)

func main() {
	fmt.Fprintf(os.Stderr, "toolrun-sandbox-worker: started by the sandbox package with %s=1; it serves runs on stdin/stdout\n", sandbox.WorkerEnv)
	os.Exit(2)
}
