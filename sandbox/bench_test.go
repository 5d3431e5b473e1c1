package sandbox

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/proccpu"
)

func benchRun(b *testing.B, r *Runner, src string, opts *Options) {
	b.Helper()
	res, err := r.Start(context.Background(), src, opts).Wait(context.Background())
	if err != nil || res.Status != StatusSuccess {
		b.Fatalf("run failed: %v %v", res.Status, res.Error)
	}
}

const trivialJS = "export default () => 1 + 1;"

// BenchmarkTrivialInProcess runs a trivial program in-process, through
// Start and Wait. x_fresh_realm is its time over freshRealm's, measured in
// the same rounds: what the sandbox adds (isolation, set-up, the run's
// goroutine and its result) to goja's own cost of a new realm that
// evaluates the same function and calls it. cpu_ns/op is the CPU time
// the process spent per run (the collector's included), where it can be
// read, and cpu_x_fresh_realm the same ratio in CPU time: the time per run
// is less than its CPU time when work is done on another CPU meanwhile.
func BenchmarkTrivialInProcess(b *testing.B) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	opts := &Options{Language: LanguageJavaScript}
	benchRun(b, r, trivialJS, opts)
	const round = 500
	var base, cpu, baseCPU time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= round {
		n := min(left, round)
		c := proccpu.Used()
		for i := 0; i < n; i++ {
			benchRun(b, r, trivialJS, opts)
		}
		b.StopTimer()
		start, c2 := time.Now(), proccpu.Used()
		cpu += c2 - c
		for i := 0; i < n; i++ {
			freshRealm(b, false)
		}
		base += time.Since(start)
		baseCPU += proccpu.Used() - c2
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_fresh_realm")
	if cpu > 0 && baseCPU > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu_ns/op")
		b.ReportMetric(float64(cpu)/float64(baseCPU), "cpu_x_fresh_realm")
	}
}

// BenchmarkTrivialInProcessParallel runs the trivial program in-process
// from 8 goroutines a CPU at once, each starting a run and waiting for it:
// the CPUs are all taken, where polling for a run or a result can only take
// CPU from the runs. ns/op is the time per run over all goroutines.
func BenchmarkTrivialInProcessParallel(b *testing.B) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	opts := &Options{Language: LanguageJavaScript}
	benchRun(b, r, trivialJS, opts)
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			benchRun(b, r, trivialJS, opts)
		}
	})
}

// BenchmarkTrivialCodeRunner runs the trivial program in-process as
// ThreadState.RunCode does, through the Runner's toolrun.CodeRunner and
// the CodeRun's Wait. x_start_wait is its time over Start and Wait's,
// measured in the same rounds: what the adapter adds.
func BenchmarkTrivialCodeRunner(b *testing.B) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	opts := &Options{Language: LanguageJavaScript}
	copts := &toolrun.CodeOptions{Language: LanguageJavaScript}
	ctx := context.Background()
	run := func() {
		if res := r.RunCode(ctx, trivialJS, copts).Wait(ctx); res.Status != toolrun.CodeStatusSuccess {
			b.Fatalf("run failed: %v %v", res.Status, res.Error)
		}
	}
	run()
	const round = 500
	var base time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for left := b.N; left > 0; left -= round {
		n := min(left, round)
		for i := 0; i < n; i++ {
			run()
		}
		b.StopTimer()
		start := time.Now()
		for i := 0; i < n; i++ {
			benchRun(b, r, trivialJS, opts)
		}
		base += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(base), "x_start_wait")
}

// trivialProg is trivialJS's function as plain goja evaluates it.
var trivialProg = goja.MustCompile("trivial.js", "(function () { return () => 1 + 1; })()", true)

// freshRealm is goja's own work for a trivial run: a new realm, the
// program, the call; with noGoError, the realm's GoError global is deleted
// first, as the sandbox does.
func freshRealm(b *testing.B, noGoError bool) {
	rt := goja.New()
	if noGoError {
		rt.GlobalObject().Delete("GoError")
	}
	v, err := rt.RunProgram(trivialProg)
	if err != nil {
		b.Fatal(err)
	}
	f, _ := goja.AssertFunction(v)
	if out, err := f(goja.Undefined()); err != nil || out.ToInteger() != 2 {
		b.Fatalf("fresh realm: %v %v", out, err)
	}
}

// BenchmarkFreshRealm is the floor under BenchmarkTrivialInProcess: goja
// alone, and goja with GoError deleted (goja builds Error, its prototype and
// GoError to delete it).
func BenchmarkFreshRealm(b *testing.B) {
	for _, c := range []struct {
		name      string
		noGoError bool
	}{{"bare", false}, {"no_GoError", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				freshRealm(b, c.noGoError)
			}
		})
	}
}

func BenchmarkTrivialWarmWorker(b *testing.B) {
	r := New(&RunnerOptions{PoolSize: 2})
	defer r.Close()
	opts := &Options{Language: LanguageJavaScript}
	for i := 0; i < 4; i++ {
		benchRun(b, r, trivialJS, opts)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, r, trivialJS, opts)
	}
}

const tsBench = `import {scale} from "./lib/math";
interface Item { name: string; qty: number }
export default function main(items: Item[], factor: number): number {
  return items.reduce((sum: number, it: Item) => sum + scale(it.qty, factor), 0);
}`

func BenchmarkCachedTypeScriptInProcess(b *testing.B) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	opts := &Options{
		Modules: map[string]string{"./lib/math.ts": "export const scale = (n: number, f: number): number => n * f;"},
		Execute: &Execute{Args: []any{[]any{map[string]any{"name": "a", "qty": 2}}, 3}},
	}
	benchRun(b, r, tsBench, opts)
	builds := r.cache.builds.Load()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, r, tsBench, opts)
	}
	b.StopTimer()
	if r.cache.builds.Load() != builds {
		b.Fatal("cached runs invoked esbuild")
	}
}

func BenchmarkCachedTypeScriptWorker(b *testing.B) {
	r := New(&RunnerOptions{PoolSize: 2})
	defer r.Close()
	opts := &Options{
		Modules: map[string]string{"./lib/math.ts": "export const scale = (n: number, f: number): number => n * f;"},
		Execute: &Execute{Args: []any{[]any{map[string]any{"name": "a", "qty": 2}}, 3}},
	}
	for i := 0; i < 4; i++ {
		benchRun(b, r, tsBench, opts)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, r, tsBench, opts)
	}
}

func BenchmarkUncachedTypeScriptCompile(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, err := compile(&compileRequest{source: tsBench, filename: "<runCode>", lang: LanguageTypeScript,
			modules: map[string]string{"./lib/math.ts": "export const scale = (n: number, f: number): number => n * f;"}})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchUncached runs a source that is not in the cache each op: the
// compile in a worker process (esbuild, then goja's check), the bundle's
// trip back to the host and the run.
func benchUncached(b *testing.B, mode Mode) {
	r := New(&RunnerOptions{Mode: mode, PoolSize: 2})
	defer r.Close()
	opts := &Options{
		Modules: map[string]string{"./lib/math.ts": "export const scale = (n: number, f: number): number => n * f;"},
		Execute: &Execute{Args: []any{[]any{map[string]any{"name": "a", "qty": 2}}, 3}},
	}
	benchRun(b, r, tsBench+"\n// warm", opts)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, r, tsBench+"\n// "+strconv.Itoa(i), opts)
	}
}

// BenchmarkUncachedTypeScriptRunInProcess is an in-process run of a source
// not seen before (compiled in a worker).
func BenchmarkUncachedTypeScriptRunInProcess(b *testing.B) { benchUncached(b, ModeInProcess) }

// BenchmarkUncachedTypeScriptRunWorker is the same in worker mode (compiled
// on the worker that runs it).
func BenchmarkUncachedTypeScriptRunWorker(b *testing.B) { benchUncached(b, ModeWorker) }

func benchBridge(b *testing.B, mode Mode) { benchBridgeSpin(b, mode, 0) }

func benchBridgeSpin(b *testing.B, mode Mode, spin time.Duration) {
	r := New(&RunnerOptions{Mode: mode, PoolSize: 1, SpinWait: spin})
	defer r.Close()
	echo := HostFunc(func(ctx context.Context, args []any) (any, error) { return args[0], nil })
	src := "import {echo} from 'h';\nexport default async (n: number) => { let s = 0; for (let i = 0; i < n; i++) s += await echo(i) as number; return s; }"
	opts := func(n int) *Options {
		return &Options{Language: LanguageTypeScript, Execute: &Execute{Args: []any{n}}, Imports: map[string]map[string]any{"h": {"echo": echo}}}
	}
	benchRun(b, r, src, opts(10))
	b.ResetTimer()
	benchRun(b, r, src, opts(b.N))
}

// BenchmarkBridgedCallWorker measures one bridged host call round trip
// (sandbox -> pipe -> Go function -> pipe -> sandbox) per op.
func BenchmarkBridgedCallWorker(b *testing.B) { benchBridge(b, ModeWorker) }

// BenchmarkBridgedCallWorkerNoSpin is BenchmarkBridgedCallWorker with
// RunnerOptions.SpinWait negative: both sides sleep as soon as their pipe
// is empty.
func BenchmarkBridgedCallWorkerNoSpin(b *testing.B) { benchBridgeSpin(b, ModeWorker, -1) }

// BenchmarkBridgedCallInProcess is the same without a process boundary.
func BenchmarkBridgedCallInProcess(b *testing.B) { benchBridge(b, ModeInProcess) }

// BenchmarkConcurrentBridgedCallsWorker runs four runs at once, each on
// its own worker making one bridged call after another; an op is one call
// (of any run). With two CPUs there are more processes wanting a CPU than
// CPUs, which is where polling for an answer can cost more than it saves.
func BenchmarkConcurrentBridgedCallsWorker(b *testing.B) { benchConcurrentBridge(b, 0) }

// BenchmarkConcurrentBridgedCallsWorkerNoSpin is the same with polling
// off.
func BenchmarkConcurrentBridgedCallsWorkerNoSpin(b *testing.B) { benchConcurrentBridge(b, -1) }

func benchConcurrentBridge(b *testing.B, spin time.Duration) {
	const runs = 4
	r := New(&RunnerOptions{PoolSize: runs, SpinWait: spin})
	defer r.Close()
	echo := HostFunc(func(ctx context.Context, args []any) (any, error) { return args[0], nil })
	src := "import {echo} from 'h';\nexport default async (n: number) => { let s = 0; for (let i = 0; i < n; i++) s += await echo(i) as number; return s; }"
	opts := func(n int) *Options {
		return &Options{Language: LanguageTypeScript, Execute: &Execute{Args: []any{n}}, Imports: map[string]map[string]any{"h": {"echo": echo}}}
	}
	startAll := func(n int) {
		var all []*Run
		for i := 0; i < runs; i++ {
			all = append(all, r.Start(context.Background(), src, opts(n)))
		}
		for _, run := range all {
			if res, err := run.Wait(context.Background()); err != nil || res.Status != StatusSuccess {
				b.Fatalf("run failed: %v %v", res.Status, res.Error)
			}
		}
	}
	startAll(10)
	b.ResetTimer()
	startAll((b.N + runs - 1) / runs)
}

func benchParallelBridge(b *testing.B, mode Mode) {
	r := New(&RunnerOptions{Mode: mode, PoolSize: 1})
	defer r.Close()
	echo := HostFunc(func(ctx context.Context, args []any) (any, error) { return args[0], nil })
	src := `import {echo} from 'h';
export default async (n: number) => {
  let s = 0;
  for (let i = 0; i < n; i++) {
    const ps = [];
    for (let j = 0; j < 100; j++) ps.push(echo(j));
    for (const v of await Promise.all(ps)) s += v as number;
  }
  return s;
}`
	opts := func(n int) *Options {
		return &Options{Execute: &Execute{Args: []any{n}}, Imports: map[string]map[string]any{"h": {"echo": echo}}}
	}
	benchRun(b, r, src, opts(2))
	b.ResetTimer()
	benchRun(b, r, src, opts(b.N))
}

// BenchmarkParallelBridgedCallsWorker measures 100 bridged calls made at
// once and awaited with Promise.all, per op, from a worker.
func BenchmarkParallelBridgedCallsWorker(b *testing.B) { benchParallelBridge(b, ModeWorker) }

// BenchmarkParallelBridgedCallsInProcess is the same in-process.
func BenchmarkParallelBridgedCallsInProcess(b *testing.B) { benchParallelBridge(b, ModeInProcess) }

// pingPongEnv makes the test binary an echo process for
// BenchmarkPipePingPong.
const pingPongEnv = "TOOLRUN_SANDBOX_BENCH_ECHO"

func init() {
	if os.Getenv(pingPongEnv) == "1" {
		// Off the main goroutine, which is locked to its thread during
		// init (as a worker serves its protocol).
		go echo()
		select {}
	}
}

func echo() {
	in := newSpinReader(os.Stdin, spinWaitFromEnv(), func() bool { return true })
	var b [8]byte
	for {
		if _, err := io.ReadFull(in, b[:]); err != nil {
			os.Exit(0)
		}
		if _, err := os.Stdout.Write(b[:]); err != nil {
			os.Exit(0)
		}
	}
}

// BenchmarkPipePingPong is the floor under a bridged call: 8 bytes to a
// child process and back over the same kind of pipes, the reply read by
// the goroutine that wrote (no protocol, no goroutine hand-off).
func BenchmarkPipePingPong(b *testing.B) { benchPingPong(b, 0) }

// BenchmarkPipePingPongSpin is the same with both sides polling their
// pipe for up to DefaultSpinWait before they sleep, as the host and a
// worker do while a bridged call is outstanding.
func BenchmarkPipePingPongSpin(b *testing.B) { benchPingPong(b, DefaultSpinWait) }

func benchPingPong(b *testing.B, spin time.Duration) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), pingPongEnv+"=1", spinEnv+"="+spin.String())
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	_ = pw.Close()
	defer func() { _ = in.Close(); _ = cmd.Wait(); _ = pr.Close() }()
	out := newSpinReader(pr, spin, func() bool { return true })
	var buf [8]byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := in.Write(buf[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(out, buf[:]); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTerminate measures the time from Terminate to a settled run while
// the code is stuck in src (after it has reported once).
func benchTerminate(b *testing.B, src string) {
	r := New(&RunnerOptions{PoolSize: 2})
	defer r.Close()
	benchRun(b, r, trivialJS, nil)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		started := make(chan struct{}, 1)
		run := r.Start(context.Background(), src, &Options{Report: func(any) {
			select {
			case started <- struct{}{}:
			default:
			}
		}})
		<-started
		time.Sleep(5 * time.Millisecond) // let it get stuck
		b.StartTimer()
		t0 := time.Now()
		run.Terminate("bench")
		<-run.Done()
		total += time.Since(t0)
		b.StopTimer()
		if res, _ := run.Result(); res.Status != StatusTerminated {
			b.Fatalf("status %s %v", res.Status, res.Error)
		}
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/terminate")
}

func BenchmarkTerminateJSLoop(b *testing.B) {
	benchTerminate(b, "export default () => { report(0); for(;;){} }")
}

func BenchmarkTerminateRunawayBuiltin(b *testing.B) {
	benchTerminate(b, "export default () => { report(0); return /^((a+)+)\\2x$/.test('a'.repeat(60)); }")
}
