package bench

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The workloads as go test benchmarks, for benchstat:
//
//	go test -run XX -bench . -count 6 > new.txt
//
// larson and xmalloc-test run b.N operations (ns/op is per free+alloc, per
// free); the pair loops b.N pairs; threadtest, linux-scalability and the cache
// benchmarks one whole run of QuickParams per op (they also report ns/pair).
// Names: BenchmarkLarson/sizes=8-1000/alloc=refalloc-cache/threads=2.

func BenchmarkLarson(b *testing.B) {
	runBench(b, "larson-", "sizes", func(p *Params, n int) { p.LarsonOps = int64(n) })
}

func BenchmarkXmalloc(b *testing.B) {
	runBench(b, "xmalloc-test-", "size", func(p *Params, n int) { p.XMFrees = int64(n) })
}

func BenchmarkThreadtest(b *testing.B)       { runBench(b, "threadtest-", "size", nil) }
func BenchmarkLinuxScalability(b *testing.B) { runBench(b, "linux-scalability-", "size", nil) }
func BenchmarkCacheThrash(b *testing.B)      { runBench(b, "cache-thrash", "", nil) }
func BenchmarkCacheScratch(b *testing.B)     { runBench(b, "cache-scratch", "", nil) }
func BenchmarkGrowCycle(b *testing.B)        { runBench(b, "grow-cycle", "", nil) }
func BenchmarkFillMixed(b *testing.B)        { runBench(b, "fill-mixed", "", nil) }

func BenchmarkPair(b *testing.B) {
	runBench(b, "pair-", "size", func(p *Params, n int) { p.PairKeepN, p.PairBatchN, p.PairExactN = n, n, true })
}

// runBench runs every workload whose name starts with prefix, the rest of the
// name becoming sub-benchmark key; perOp, when set, makes b.N the workload's
// operation count, otherwise each of the b.N iterations is one whole run.
func runBench(b *testing.B, prefix, key string, perOp func(*Params, int)) {
	for _, w := range Workloads(QuickParams()) {
		name, ok := strings.CutPrefix(w.Name, prefix)
		if !ok {
			continue
		}
		sub := ""
		if key != "" {
			sub = key + "=" + name + "/"
			if prefix == "pair-" {
				size, mode, _ := strings.Cut(name, "-")
				sub = fmt.Sprintf("size=%s/mode=%s/", size, mode)
			}
		}
		for _, k := range Kinds {
			if k.PairOnly && prefix != "pair-" {
				continue
			}
			for _, threads := range []int{1, 2} {
				if w.SingleThreaded && threads > 1 {
					continue
				}
				b.Run(fmt.Sprintf("%salloc=%s/threads=%d", sub, k.Name, threads), func(b *testing.B) {
					benchOne(b, w.Name, k, threads, perOp)
				})
			}
		}
	}
}

func benchOne(b *testing.B, name string, k Kind, threads int, perOp func(*Params, int)) {
	p := QuickParams()
	if perOp != nil {
		perOp(&p, b.N)
	}
	var w Workload
	for _, x := range Workloads(p) {
		if x.Name == name {
			w = x
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(min(w.Procs(threads), runtime.NumCPU())))
	a, err := k.New(Config{RemoteFrees: w.RemoteFrees})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	env := &Env{Alloc: a, Threads: threads, OnStart: b.StartTimer, OnStop: b.StopTimer}
	b.StopTimer()
	b.ResetTimer()
	runs := b.N
	if perOp != nil {
		runs = 1
	}
	var ops int64
	var value float64
	for range runs {
		r := w.Run(env)
		ops += r.Ops
		value += r.Value
	}
	b.ReportMetric(value/float64(runs), w.Metric)
	if perOp == nil {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(ops), "ns/pair")
	}
}
