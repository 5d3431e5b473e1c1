// Package sandbox runs model- or user-written JavaScript and TypeScript as
// hostile input: nothing the code does may crash, hang or starve the host
// process. A [Runner] is the code runner behind ThreadState.RunCode in the
// toolrun root package (it implements toolrun.CodeRunner: set
// ExecutorOptions.CodeRunner to Default()), and it can be used on its own.
// The root package does not import this one, so only programs that use the
// sandbox link it.
//
// # Quick start
//
//	r := sandbox.New(nil) // worker mode, pool of 2, 256 MiB per run
//	defer r.Close()
//	run := r.Start(ctx, `
//	    import {readFile} from "fs";
//	    export async function main(path: string) {
//	        const text = await readFile(path);
//	        report({read: path});
//	        return text.length;
//	    }`, &sandbox.Options{
//	        Execute: &sandbox.Execute{Fn: "main", Args: []any{"notes.txt"}},
//	        Imports: map[string]map[string]any{"fs": {
//	            "readFile": sandbox.HostFunc(func(ctx context.Context, args []any) (any, error) {
//	                return "hello", nil
//	            }),
//	        }},
//	        Report:  func(v any) { log.Println("report", v) },
//	        Timeout: 10 * time.Second,
//	    })
//	res, _ := run.Wait(ctx) // res.Status == sandbox.StatusSuccess, res.Value == 5.0
//
// [Runner.Start] never blocks on the code and never returns nil; the [Run]
// handle can be waited on ([Run.Wait], [Run.Done]), asked whether it is
// [Run.Running], read for live [Run.Reports] and stopped with
// [Run.Terminate]. Cancelling the context given to Start terminates the
// run too; a context that has ended already gives a run settled as
// terminated, with nothing started for it. Options given as data (a map with the reference's keys) go
// through [Runner.StartMap] or [OptionsFromMap]; an unknown key is a
// link_error "Unknown runCode option: <key>".
//
// # Results
//
// A run ends with one of five statuses: success, error (the code threw),
// link_error (the code never ran: invalid options named
// "InvalidCodeExecutionOptions", a syntax or TypeScript error, an
// unresolvable module, a missing export), memory (the run went over its
// memory limit) and terminated (Terminate, Timeout or the context). Errors
// carry name, message, stack and the line and column in the user's source
// (through the bundle's source map); the message then starts with
// "Line <n> of <filename>: ". Waiting never fails for these: they are
// results, not Go errors.
//
// # Entry and modules
//
// The source is a module. Execute.Fn (default "default") names the export
// to evaluate: a function is called with Execute.Args and awaited, any other
// value is returned (and passing args to it is an error). The Modules
// option supplies relative modules ("./lib/util.ts"), resolved with the
// extensions .ts, .tsx, .js, .mjs, .json and /index.*; a specifier escaping
// the root is an error. Imports supplies bare specifiers ("fs") as
// namespaces of values and host functions. TypeScript (the default
// language) and module graphs are bundled by esbuild into one script that
// runs inside an async function, so top-level await works in every module
// of the graph. Bundles are cached by content hash in an LRU bounded by
// entries ([RunnerOptions.CacheSize], default 256) and by bytes
// ([RunnerOptions.CacheBytes], default 64 MiB, estimated from the bundle's
// code and source map, plus 16 times the code for the goja program an
// in-process runner keeps; a bundle whose program does not fit is kept
// without it, and one that does not fit at all is not kept), so a repeated
// run skips esbuild. Compile errors are cached too.
//
// # Compiling
//
// The entry source and the modules together may hold at most
// [RunnerOptions.MaxSourceBytes] bytes (default [DefaultMaxSourceBytes],
// 4 MiB; specifiers count too); a larger run ends at once with link_error
// "SourceTooLarge", naming the limit. A source not in the cache is compiled
// in a worker process, under the run's limits, never in the host: parsers
// recurse, and nesting is not only brackets (unary operators, conditional
// chains, arrow functions, new, templates, blocks all nest), so no count
// made before parsing bounds their stack, and a Go stack overflow cannot
// be recovered. The worker compiles with a 32 MiB goroutine stack limit
// (several thousand levels of any kind of nesting fit), then parses and
// compiles the bundle with goja under the same limit, so a bundle the host
// accepts is one goja's parser has already handled with that stack. A
// source that needs more stack kills the worker: the run ends with
// link_error RangeError "Maximum call stack size exceeded while compiling"
// (cached like other compile errors). A compile that needs more memory
// than the run's limit (esbuild is quadratic on some inputs) ends with
// status memory; Terminate, Timeout and the context kill a compiling
// worker at once, as esbuild cannot be interrupted. The host keeps the
// bundle in its cache and sends it to workers that do not hold it yet.
// In worker mode the compile runs on the worker that then runs the code;
// in in-process mode on a small pool of compile-only workers (at most
// runtime.NumCPU at once, one kept warm). [RunnerOptions.CompileInHost]
// compiles in the host instead, for trusted sources only; it is implied in
// in-process mode where child processes are unavailable (js, wasip1).
// Compile errors of a source not cached settle the [Run] once known, not
// inside Start.
//
// # Values
//
// Values are copied across the boundary, never shared: null (nil),
// undefined ([Undefined]), booleans, finite numbers (float64 in Go; any Go
// integer or float goes in), strings, arrays ([]any; other Go slices go
// in), plain objects (map[string]any; Go structs go in shaped by their JSON
// encoding), Dates (time.Time), Maps ([Map]), Sets ([Set]), Uint8Array
// ([]byte), other typed arrays ([TypedArray]), ArrayBuffer ([ArrayBuffer])
// and bigint (*big.Int). Anything else — functions, symbols, class
// instances, cycles, NaN, an object that only has the prototype of a Map,
// Set, typed array or ArrayBuffer — is "SerializationError: value is not
// transferable". Copying a value out runs the code's getters, and a
// Proxy's traps, once for each place the value holds them (an object that
// appears twice is copied twice), and no other code of it (not a Date's
// valueOf, not an iterator); what they throw ends the copy as it was
// thrown, and the calls, reports and logs they make count against the same
// limits. A Go map's keys arrive as own
// properties, "__proto__" included. [HostFunc] values in Imports and Globals become async
// functions inside the sandbox; each call goes to the host (in worker mode
// over the pipe), runs the Go function with a context that ends with the
// run, and settles the promise. A returned error re-surfaces as an error
// with the same name ([NamedError], [Error]) and message; a panic is
// recovered and becomes an error. Once the run has settled its bridges are
// unavailable ("BridgeUnavailable") and the host function is not called.
//
// # Isolation
//
// Every run gets a fresh goja realm, in which no other code has run,
// holding only the ECMAScript intrinsics:
// process, global, window, self, document, require, Deno, Bun, fetch,
// Request, Response, URL, URLSearchParams, WebSocket, WebAssembly, crypto,
// setTimeout, setInterval, setImmediate, performance, atob, btoa,
// TextEncoder, TextDecoder, Atomics and SharedArrayBuffer are undefined
// unless supplied through Globals. The Function, AsyncFunction and
// GeneratorFunction constructors — however reached, including
// (function(){}).constructor — and eval throw EvalError "Dynamic code loading
// is disabled" (AsyncFunction and GeneratorFunction exist only once code
// makes an async or generator function, so they are locked down in runs
// whose bundle has such functions — "async" in its text, a generator in its
// syntax tree — and creating them is skipped otherwise). console.* is
// captured into Result.Logs (an argument that cannot be copied is logged
// as its text, or as "[object <class>]" when making its text throws);
// report(value) exists only when Options.Report
// is set. The code can reach nothing of the host but copies of the values
// and the bridged functions it was given. The bundle runs in a plain
// function, or an async one when it awaits at top level; either way the
// entry is called after the module code and its promise jobs have run.
//
// # Worker mode and limits
//
// In the default [ModeWorker] each run executes in a child worker process,
// kept warm in a small pool ([RunnerOptions.PoolSize]) so a run pays no
// process start (about 0.1 ms per trivial run, about 10 µs per bridged
// call and 10 µs per call of a Promise.all batch, against a raw pipe round
// trip of 3–30 µs on the shared test VM; see BENCHMARKS.md). While a
// bridged call is outstanding, the side waiting for the other polls its
// pipe for up to [RunnerOptions.SpinWait] (50 µs, on Linux) before it
// sleeps, which saves the wake-up of a sleeping thread when the answer
// comes soon. At most [RunnerOptions.MaxWorkers] runs execute at once;
// more wait for a worker. Any binary that imports this
// package can be its own worker: the package's init function checks the
// environment variable TOOLRUN_SANDBOX_WORKER ([WorkerEnv]) and, when it is
// "1", serves the worker protocol (length-prefixed binary frames; see
// wire.go) on stdin/stdout, with terminate requests also on a control pipe
// at file descriptor 3, and exits without running main. By default the Runner
// re-executes os.Executable() with that variable set — this works for
// ordinary programs and for go test binaries alike. Keep init functions of
// the host program from writing to stdout. To use a separate helper
// binary instead, build cmd/toolrun-sandbox-worker (or any main package
// importing this one) and set [RunnerOptions.WorkerCommand].
//
// Limits in worker mode:
//   - Memory: per run (and per compile), the worker sets a Go memory limit, lowers its
//     RLIMIT_DATA (on Linux) to its current size plus the run's limit plus
//     headroom, and watches its heap; going over the limit interrupts the
//     code (status memory). An allocation too large to attempt fails against
//     RLIMIT_DATA and kills the worker; the parent sees the death, reports
//     status memory, and replaces the worker. Default limit 256 MiB
//     ([RunnerOptions.DefaultMemoryLimit], [Options.MemoryLimitBytes]).
//   - Time: Terminate, Options.Timeout and context cancellation interrupt the
//     JavaScript (within microseconds for JS loops); a builtin that cannot be
//     interrupted (a catastrophic regular expression, a huge String.repeat)
//     is ended by killing the worker after [RunnerOptions.TerminateGrace]
//     (default 300 ms).
//   - Stack: Options.MaxCallStackSize (default 10000 frames) bounds
//     recursion, which fails with RangeError "Maximum call stack size
//     exceeded".
//
// Any worker death (crash, OOM kill) settles its run — memory when the
// worker ran out of memory, error "WorkerCrashed" otherwise — and never
// reaches the host as a panic. A worker killed with SIGKILL by another
// process counts as out of memory, as the kills of the system's
// out-of-memory killer are, unless the kernel says (on Linux, in
// /proc/vmstat) that this killer has killed no process since the worker
// started: then the run ends with "WorkerCrashed", whose message says so.
//
// A new worker first says it is ready, and the pool hands out only workers
// that have. One that has not said so within
// [RunnerOptions.WorkerStartTimeout] (default [DefaultWorkerStartTimeout],
// 10 s) — a WorkerCommand that is not a worker, a worker wedged while
// starting — is killed and reaped, and the run that waited for it ends
// with error "WorkerUnavailable" naming the timeout (one that exits before
// it is ready: "WorkerCrashed"); the pool goes on starting workers for
// later runs. Saying it is ready, a worker says the version of the worker
// protocol it speaks: one of another version (a worker binary of another
// toolrun release, set as WorkerCommand) is killed and reaped at once, and
// the run ends with error "WorkerUnavailable" naming both versions, where
// it used to wait for answers that never came. Once a worker has taken a run, the run's own limits bound the
// wait for it: Terminate, Timeout or the context end the run, and a worker
// that has not let go of it TerminateGrace later (it stopped answering, or
// stopped reading) is killed. A killed worker's pipes are closed by the
// host at once, so that a WorkerCommand that wraps the worker (a jail, a
// shell) and leaves a child holding them does not keep the worker, its
// run's slot or the host's goroutines waiting for that child. A run with no Timeout and a context that
// never ends waits for as long as its worker lives: the host cannot tell a
// worker that stopped answering from code that computes, or awaits a host
// function, for a long time.
//
// # What reaches the host
//
// Everything a run hands the host is bounded, in both modes, so sandbox
// code cannot make the host hold big copies. Sizes are measured as a cost
// close to the memory of the Go value (16 bytes per scalar or element, 32
// plus the key per object member, plus the bytes of strings and buffers):
//   - Result: at most 64 MiB; larger fails with RangeError "Value too
//     large to transfer".
//   - Bridged calls: the arguments of one call at most 64 MiB, of all the
//     calls the host has not answered yet at most 64 MiB together, and at
//     most 1000 such calls; a call past a limit rejects with RangeError
//     ("Value too large to transfer", "Too much data in pending host
//     calls", "Too many pending host calls") and never reaches the host.
//   - Output: at most 10000 reports and 1000 log entries, and 16 MiB of
//     both together, per run; report() past the limit throws, a log entry
//     past it is dropped.
//   - Errors: texts are cut on a UTF-8 boundary, ending with "… [cut]":
//     name to 256 bytes, message and stack to 64 KiB each, filename and
//     specifier to 4 KiB. Texts are cut, not refused, as they only
//     describe a failure; values, whose meaning cutting would change,
//     fail instead.
//
// The host does not trust its workers: the engine enforces these limits
// where the values are made, and the host checks them again on what it
// reads. It refuses a frame longer than the largest an honest worker
// sends (64 MiB plus 1 MiB, or 8 times MaxSourceBytes plus 1 MiB for a
// compiled bundle) before allocating it, charges every value it decodes
// against the 64 MiB budget before building it (so a frame of 8 million
// nulls cannot become 128 MiB of Go values), and cuts error texts as it
// decodes them. A worker that sends more than a run's limits allow, or
// anything malformed, is killed and its run ends with error
// "WorkerProtocolError".
//
// A [HostFunc] that panics rejects its call with "host function panicked:
// <value>"; the value is formatted so that a String or Error method that
// panics again cannot escape. A HostFunc that ends its goroutine with
// runtime.Goexit rejects its call too.
//
// # In-process mode
//
// [ModeInProcess] runs the code in the host process: a trivial run costs
// about 20 µs and a bridged call about 5 µs. It is for trusted code and for
// platforms without child processes. What it still protects: compiling
// happens in a worker process as in worker mode (unless CompileInHost or
// no child processes), so a deeply nested source cannot overflow the host's
// stack, and goja's parser runs in the host only on a bundle a worker has
// parsed with a 32 MiB stack (the host's own limit, 1 GB by default, must
// stay well above that; see debug.SetMaxStack); what reaches the host is
// bounded as described above; JavaScript recursion is bounded by
// MaxCallStackSize; a panicking HostFunc is contained. What it does not
// protect: termination and timeouts only interrupt JavaScript (a run stuck
// in a builtin is reported terminated after the grace period while its
// goroutine keeps a CPU until it finishes on its own), memory limits are
// not enforced — a memory bomb such as 'x'.repeat(2**40) can kill the whole
// process, and the memory of the realm and of goja's program for a large
// bundle is host memory — and Go recursion inside goja's builtins is not
// bounded: a regular expression compiled at run time from a string (new
// RegExp, RegExp.prototype.compile, String.prototype.match, matchAll and
// search, and the species constructors of split and matchAll, which can be
// made to take any string) with groups nested about half a million deep
// overflows the host's stack in regexp2, reading a property through a
// chain of some ten million Proxies wrapping one another recurses in goja
// once per Proxy and overflows it too, and any goja bug reachable from
// JavaScript is a bug in the host. (Regular expression literals are
// compiled with the bundle, in the compiling worker.) With CompileInHost (or without child processes) a deeply
// nested source kills the host; MaxSourceBytes only limits how much memory
// the compile can take.
//
// # Concurrency
//
// [Runner] and [Run] are safe for concurrent use. Report callbacks of one
// run are called one at a time, in order.
package sandbox
