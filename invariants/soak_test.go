package invariants_test

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/invariants"
)

// TestStressOracle: many goroutines with their own caches hand blocks to each
// other (scattered remote frees) and use the goroutine-safe Allocator, in a
// reservation small enough to force superblock reuse across classes and owners,
// with caches closed and reopened; every barrier checks a Snapshot against the
// model (STATS-LEAD with held counts, STATS-LAG, CONSERVE, CACHE-COHERENT,
// NO-OVERLAP, REFINES), flush barriers STATS-EXACT, and the end EMPTY. Objects'
// fills are checked before every free (INTEGRITY). Run it under -race and
// -tags refalloc_check.
func TestStressOracle(t *testing.T) {
	for _, ways := range []int{1, 16} {
		rep, err := invariants.Soak(invariants.SoakConfig{
			Goroutines: 8,
			Duration:   1500 * time.Millisecond,
			Reserve:    24 << 20,
			Ways:       ways,
			CheckEvery: 25 * time.Millisecond,
			FlushEvery: 3,
			Seed:       uint64(time.Now().UnixNano()),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ways %d: %d ops, %d remote frees, %d OOM, %d reopens, %d checks, hit rate %.3f",
			ways, rep.Ops, rep.RemoteFrees, rep.OOMs, rep.Reopens, rep.Checks, rep.HitRate())
		for _, v := range rep.Violations {
			t.Errorf("%s: %s (seed %d, at %v)", v.Rule, v.Detail, v.Seed, v.At)
		}
		if rep.Checks < 10 || rep.RemoteFrees == 0 || rep.Reopens == 0 || rep.FlushChecks == 0 {
			t.Errorf("the soak did too little to mean anything:\n%v", rep)
		}
	}
}
