package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/bench"
)

func tinyParams() bench.Params {
	p := bench.QuickParams()
	p.LarsonSeconds = 0.05
	p.LarsonChunks = 500
	p.LSIterations = 5000
	p.PairKeepN, p.PairBatchN = 5000, 5000
	return p
}

// TestMeasure runs the child's measurement in-process, in both modes.
func TestMeasure(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, s := range []Spec{
		{Mode: "suite", Workload: "pair-64-keep1", Alloc: bench.GoHeap, Threads: 1},
		{Mode: "sweep", Workload: sweepWorkload, Alloc: bench.RefallocCache, Threads: 1, Ways: 8},
		{Mode: "memory", Workload: "linux-scalability-64", Alloc: bench.RefallocCache, Threads: 2},
		{Mode: "memory", Workload: "larson-100-200", Alloc: bench.Modernc, Threads: 2},
	} {
		s.Params = tinyParams()
		m, err := measure(s)
		if err != nil {
			t.Fatalf("%+v: %v", s, err)
		}
		if m.Value <= 0 || m.Ops <= 0 || m.ElapsedS <= 0 || m.ForeignPct < 0 || m.ForeignPct > 100 {
			t.Errorf("%s %s: implausible measurement %+v", s.Workload, s.Alloc, m)
		}
		if s.Mode == "sweep" && (m.SmallFrees == 0 || m.Misses > m.SmallFrees) {
			t.Errorf("sweep: %d misses of %d small frees", m.Misses, m.SmallFrees)
		}
		if s.Mode != "memory" {
			continue
		}
		if m.PeakLive <= 0 || m.PeakRSS < 0 || m.BaseRSS <= 0 {
			t.Errorf("%s %s: memory %+v", s.Workload, s.Alloc, m)
		}
		if s.Alloc == bench.RefallocCache {
			if m.FreeCommitted <= 0 || m.TrimCommitted != 0 || (m.TrimResRSS != 0 && !raceBuild) {
				t.Errorf("refalloc after free: Committed %d; after Trim: Committed %d, reservation RSS %d (want 0)",
					m.FreeCommitted, m.TrimCommitted, m.TrimResRSS)
			}
		} else if m.FreeCommitted != -1 {
			t.Errorf("%s has no Committed, got %d", s.Alloc, m.FreeCommitted)
		}
	}
}

func TestAnchors(t *testing.T) {
	dir := t.TempDir()
	csv := "workload,threads,metric,allocator,run,value\n" +
		"larson-8-1000,2,Mops/s,glibc,1,40\nlarson-8-1000,2,Mops/s,mimalloc,1,150\nlarson-8-1000,2,Mops/s,mimalloc,2,170\n" +
		"larson-8-1000,2,Mops/s,mimalloc,3,10\npair-64-keep1,1,ns,glibc,1,11\npair-64-keep1,1,ns,tcmalloc,1,5\n"
	path := filepath.Join(dir, "c.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := readAnchors(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := a.best("larson-8-1000", 2, "Mops/s"); !ok || b.alloc != "mimalloc" || b.value != 150 {
		t.Errorf("best larson = %+v, want mimalloc's median 150", b)
	}
	if b, ok := a.best("pair-64-keep1", 1, "ns"); !ok || b.alloc != "tcmalloc" {
		t.Errorf("best pair = %+v, want tcmalloc (lower is better)", b)
	}
	if _, ok := a.get("larson-8-1000", 1, "Mops/s", "mimalloc"); ok {
		t.Error("found an anchor that is not there")
	}
	// The real file, when bench/c has produced it, must parse.
	if _, err := os.Stat("../../results/c-anchors.csv"); err == nil {
		if _, err := readAnchors("../../results/c-anchors.csv"); err != nil {
			t.Error(err)
		}
	}
}

func TestSpreadAndFormat(t *testing.T) {
	s := spreadOf([]float64{3, 1, 2, 10})
	if s.med != 2.5 || s.min != 1 || s.max != 10 || s.n != 4 {
		t.Errorf("spread %+v", s)
	}
	if !math.IsNaN(spreadOf(nil).med) || spreadOf(nil).String() != "n/a" {
		t.Error("empty spread")
	}
	for v, want := range map[float64]string{166.4: "166", 17.44: "17.4", 1.234: "1.23", 0.0839: "0.084", 0.00123: "0.00123"} {
		if got := fmtVal(v); got != want {
			t.Errorf("fmtVal(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-larson-seconds", "0.25", "-workloads", "pair-*", "-allocators", "go-heap"})
	if err != nil {
		t.Fatal(err)
	}
	if o.params.LarsonSeconds != 0.25 || o.params.TTIterations != bench.QuickParams().TTIterations || o.runs != 3 {
		t.Errorf("quick flags: %+v runs %d", o.params, o.runs)
	}
	if o.allocators[0] != bench.RefallocCache {
		t.Errorf("refalloc-cache must always run: %v", o.allocators)
	}
	for _, w := range o.selectedWorkloads(o.workloads) {
		if !strings.HasPrefix(w.Name, "pair-") {
			t.Errorf("selected %s", w.Name)
		}
	}
	if _, err := parseFlags([]string{"-workloads", "nosuch"}); err == nil {
		t.Error("unknown workload accepted")
	}
}
