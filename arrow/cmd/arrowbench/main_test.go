package main

import "testing"

// Every workload on every allocator of this build, at a tiny size, in
// process: it computes what it checks and leaves nothing allocated.
func TestWorkloads(t *testing.T) {
	p := Params{Int64Values: 5000, Strings: 2000, Rows: 3000, Rounds: 2, ParquetChunk: 1000}
	for _, w := range workloads {
		for _, k := range allocKinds {
			r := measure(Spec{Workload: w.name, Alloc: k.name, Params: p})
			if r.Err != "" {
				t.Errorf("%s on %s: %s", w.name, k.name, r.Err)
			} else if r.ElapsedS <= 0 || r.PeakRSS < 0 {
				t.Errorf("%s on %s: elapsed %v s, peak RSS %d", w.name, k.name, r.ElapsedS, r.PeakRSS)
			}
		}
	}
}

func TestMeasureFails(t *testing.T) {
	if r := measure(Spec{Workload: "int64-builder", Alloc: "nope"}); r.Err == "" {
		t.Error("an unknown allocator measured")
	}
	if r := measure(Spec{Workload: "nope", Alloc: "go"}); r.Err == "" {
		t.Error("an unknown workload measured")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
