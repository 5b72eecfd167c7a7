//go:build !refalloc_portable

package impl

// From the adv12b mutant hunt: each test names the one-line slip that passed
// the suite before it.

import (
	"runtime"
	"testing"
)

// TestProcCachesForEveryCPU (FRONT-EXCLUSIVE, procCaches.init): the per-P
// caches are made at New for max(GOMAXPROCS, NumCPU) Ps, so a program that
// lowers GOMAXPROCS before New and raises it later, up to its CPUs, still
// finds a cache on every P (slip: made for GOMAXPROCS at New only; after
// GOMAXPROCS goes back up, every call on the Ps past it locks a shard). It
// needs two CPUs to see the difference.
func TestProcCachesForEveryCPU(t *testing.T) {
	cpus := runtime.NumCPU()
	if cpus < 2 {
		t.Skip("one CPU: GOMAXPROCS cannot be lowered below the CPUs")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if n := len(a.front.procs.slots); n < cpus {
		t.Fatalf("New at GOMAXPROCS 1 on %d CPUs made %d per-P caches, want one for each CPU", cpus, n)
	}
	runtime.GOMAXPROCS(cpus)
	for p := range cpus {
		if a.front.procs.slots[p].c.a != a || !a.front.procs.slots[p].c.front {
			t.Fatalf("P %d's cache is not a front cache of the Allocator", p)
		}
	}
}
