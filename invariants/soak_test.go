package invariants_test

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestStressOracle: many goroutines with their own caches hand blocks to each
// other (scattered remote frees) and use the goroutine-safe Allocator, in a
// reservation small enough to force superblock reuse across classes and owners,
// with caches closed and reopened, in three runs with a pool that returns
// memory at every release past a small Retain (MEM-ACCOUNT); every barrier
// checks a Snapshot against the model (STATS-LEAD with held counts, STATS-LAG,
// CONSERVE, CACHE-COHERENT, NO-OVERLAP, REFINES), flush barriers STATS-EXACT,
// and the end EMPTY. Objects' fills are checked before every free and at every
// barrier (INTEGRITY). Stale
// and double frees race the reuse of their addresses, judged per address at
// the barriers (FREE-DOUBLE); half the calls go through the Allocator's
// methods, some from goroutines that come and go; Flush, Trim and Stats run
// while others allocate; every way count, debug mode in half the runs, and
// guard mode (GUARD-FAULT) in two: some small allocations sampled, or all. Run
// it under -race and -tags refalloc_check.
func TestStressOracle(t *testing.T) {
	for _, tc := range []struct {
		ways   int
		debug  bool
		guard  impl.GuardOptions
		retain int // with it, Decay -1: the pool returns memory at every release
	}{
		{1, false, impl.GuardOptions{}, 0},
		{8, true, impl.GuardOptions{}, -1},
		{64, false, impl.GuardOptions{Enabled: true, SampleRate: 7, QuarantineObjects: 64}, 2 * spec.SuperblockSize},
		{32, true, impl.GuardOptions{}, 0},
		{16, true, impl.GuardOptions{Enabled: true, SampleRate: 1}, 0},
		{128, false, impl.GuardOptions{}, 2 * spec.SuperblockSize},
	} {
		ways := tc.ways
		decay := time.Duration(0)
		if tc.retain != 0 {
			decay = -1
		}
		rep, err := invariants.Soak(invariants.SoakConfig{
			Goroutines: 8,
			Duration:   1200 * time.Millisecond,
			MinOps:     30_000, // under -race on a loaded machine 1.2 s can be too few
			Reserve:    24 << 20,
			Ways:       ways,
			Debug:      tc.debug,
			Guard:      tc.guard,
			Retain:     tc.retain,
			Decay:      decay,
			CheckEvery: 25 * time.Millisecond,
			FlushEvery: 3,
			Seed:       uint64(time.Now().UnixNano()),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ways %d debug %v guard %+v retain %d: %d ops, %d remote frees, %d bad and stale frees, %d Allocator calls, %d OOM, %d reopens, %d checks, hit rate %.3f",
			ways, tc.debug, tc.guard, tc.retain, rep.Ops, rep.RemoteFrees, rep.BadFrees, rep.FrontCalls, rep.OOMs, rep.Reopens, rep.Checks, rep.HitRate())
		for _, v := range rep.Violations {
			t.Errorf("%s: %s (seed %d, at %v)", v.Rule, v.Detail, v.Seed, v.At)
		}
		soakDidWhatItClaims(t, rep, ways)
	}
}

// soakDidWhatItClaims fails t unless the soak did enough to mean anything and
// its driver did what it claims: the way count asked for, calls on the
// Allocator's methods and from goroutines that come and go, Reallocs and
// aligned allocations, objects handed to another worker, bad frees of both
// kinds, every edge size, and checks after a full flush (STATS-EXACT).
func soakDidWhatItClaims(t *testing.T, rep *invariants.SoakReport, ways int) {
	t.Helper()
	if rep.Checks < 10 || rep.RemoteFrees == 0 || rep.Reopens == 0 || rep.FlushChecks == 0 || rep.BadFrees == 0 {
		t.Errorf("the soak did too little to mean anything:\n%v", rep)
	}
	if rep.Edges != rep.EdgeSizes || rep.EdgeSizes == 0 {
		t.Errorf("the soak allocated %d of the %d edge sizes it draws; want all", rep.Edges, rep.EdgeSizes)
	}
	if rep.Ways != ways || rep.FrontCalls == 0 || rep.ShortLived == 0 || rep.Reallocs == 0 || rep.Aligned == 0 || rep.Handoff == 0 || rep.BadForeign == 0 {
		t.Errorf("the soak ran %d ways (want %d), %d Allocator calls, %d short-lived goroutines, %d reallocs, %d aligned allocations, %d objects handed over, %d bad frees of another Allocator's objects; want each > 0:\n%v",
			rep.Ways, ways, rep.FrontCalls, rep.ShortLived, rep.Reallocs, rep.Aligned, rep.Handoff, rep.BadForeign, rep)
	}
}

// TestSoakDriverDoesWhatItClaims: one short soak, with a way count other than
// impl's default, does everything TestStressOracle's six long ones claim to
// do (soakDidWhatItClaims) and finds nothing. It is TestStressOracle's
// driver check at a fraction of its time: a slip in the driver (a dropped
// kind of call, the default way count) fails here in well under a second.
func TestSoakDriverDoesWhatItClaims(t *testing.T) {
	const ways = 8 // not impl's default (128): a soak that ignores Ways shows 128
	rep, err := invariants.Soak(invariants.SoakConfig{
		Goroutines: 4,
		Duration:   50 * time.Millisecond,
		MinOps:     20_000, // enough for every edge size: one allocation in 8 is at an edge
		Reserve:    24 << 20,
		Ways:       ways,
		Retain:     2 * spec.SuperblockSize,
		Decay:      -1,
		CheckEvery: 10 * time.Millisecond,
		FlushEvery: 3,
		Seed:       uint64(time.Now().UnixNano()),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("%s: %s (seed %d, at %v)", v.Rule, v.Detail, v.Seed, v.At)
	}
	t.Logf("%d ops, %d checks, %d edges", rep.Ops, rep.Checks, rep.EdgeSizes)
	soakDidWhatItClaims(t, rep, ways)
}
