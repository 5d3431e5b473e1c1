package sandbox

import (
	"context"
	"testing"
	"time"
)

func benchRun(b *testing.B, r *Runner, src string, opts *Options) {
	b.Helper()
	res, err := r.Start(context.Background(), src, opts).Wait(context.Background())
	if err != nil || res.Status != StatusSuccess {
		b.Fatalf("run failed: %v %v", res.Status, res.Error)
	}
}

const trivialJS = "export default () => 1 + 1;"

func BenchmarkTrivialInProcess(b *testing.B) {
	r := New(&RunnerOptions{Mode: ModeInProcess})
	opts := &Options{Language: LanguageJavaScript}
	benchRun(b, r, trivialJS, opts)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		benchRun(b, r, trivialJS, opts)
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

func benchBridge(b *testing.B, mode Mode) {
	r := New(&RunnerOptions{Mode: mode, PoolSize: 1})
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

// BenchmarkBridgedCallInProcess is the same without a process boundary.
func BenchmarkBridgedCallInProcess(b *testing.B) { benchBridge(b, ModeInProcess) }

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
