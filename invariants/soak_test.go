package invariants_test

import (
	"fmt"
	"strings"
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
		seed := uint64(time.Now().UnixNano())
		rep, err := invariants.Soak(invariants.SoakConfig{
			Goroutines: 8,
			Duration:   1200 * time.Millisecond,
			MinOps:     30_000, // under -race on a loaded machine 1.2 s can be too few
			MinChecks:  10,     // what soakDidWhatItClaims asks, however slow each check
			Reserve:    24 << 20,
			Ways:       ways,
			Debug:      tc.debug,
			Guard:      tc.guard,
			Retain:     tc.retain,
			Decay:      decay,
			CheckEvery: 25 * time.Millisecond,
			FlushEvery: 3,
			Seed:       seed,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d, ways %d debug %v guard %+v retain %d: %d ops, %d remote frees, %d bad and stale frees, %d Allocator calls, %d OOM, %d reopens, %d checks, hit rate %.3f",
			seed, ways, tc.debug, tc.guard, tc.retain, rep.Ops, rep.RemoteFrees, rep.BadFrees, rep.FrontCalls, rep.OOMs, rep.Reopens, rep.Checks, rep.HitRate())
		for _, v := range rep.Violations {
			t.Errorf("%s: %s (seed %d, at %v)", v.Rule, v.Detail, v.Seed, v.At)
		}
		soakDidWhatItClaims(t, rep, ways)
	}
}

// soakDidWhatItClaims fails t unless the soak did enough to mean anything and
// its driver did what it claims: the way count asked for, calls on the
// Allocator's methods and from goroutines that come and go, Reallocs and
// aligned allocations up to 4096 bytes, objects handed to another worker,
// bad frees of both kinds, every edge size, and checks after a full flush
// (STATS-EXACT).
func soakDidWhatItClaims(t *testing.T, rep *invariants.SoakReport, ways int) {
	t.Helper()
	// Each claim by name, so that a failure says which one first: the report
	// that follows is long, and a log cut short loses its end.
	var missed []string
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"10 checks", rep.Checks >= 10},
		{"remote frees", rep.RemoteFrees > 0},
		{"reopened caches", rep.Reopens > 0},
		{"checks after a full flush", rep.FlushChecks > 0},
		{"bad frees", rep.BadFrees > 0},
		{fmt.Sprintf("every edge size (%d of %d allocated)", rep.Edges, rep.EdgeSizes), rep.Edges == rep.EdgeSizes && rep.EdgeSizes > 0},
		{fmt.Sprintf("%d ways (ran %d)", ways, rep.Ways), rep.Ways == ways},
		{"Allocator calls", rep.FrontCalls > 0},
		{"short-lived goroutines", rep.ShortLived > 0},
		{"reallocs", rep.Reallocs > 0},
		{"aligned allocations", rep.Aligned > 0},
		{"objects handed over", rep.Handoff > 0},
		{"bad frees of another Allocator's objects", rep.BadForeign > 0},
		// adv18b: Trim while the others run (MEM-ACCOUNT, mutant
		// soaknotrim), large sizes off the edges (LARGE-EXACT, soaknolarge),
		// stale frees inside a held object (FREE-INVALID, soaknointerior),
		// frees from goroutines that come and go (REFINES, soakshortnofree).
		{"Trim calls", rep.Trims > 0},
		{"large sizes drawn", rep.Large > 0},
		{"stale frees inside a held object", rep.Interior > 0},
		{"frees from short-lived goroutines", rep.ShortFrees > 0},
		// adv20: every alignment up to 4096 (ALIGN, mutant soakalignnarrow).
		{fmt.Sprintf("4096-byte alignment (the largest asked: %d)", rep.MaxAlign), rep.MaxAlign == 4096},
	} {
		if !c.ok {
			missed = append(missed, c.name)
		}
	}
	if len(missed) > 0 {
		t.Errorf("the soak did not do what its driver claims: missed %s (%d ops)\n%v", strings.Join(missed, ", "), rep.Ops, rep)
	}
}

// TestSoakDriverDoesWhatItClaims: one short soak, with a way count other than
// impl's default, does everything TestStressOracle's six long ones claim to
// do (soakDidWhatItClaims) and finds nothing. It is TestStressOracle's
// driver check at a fraction of its time: a slip in the driver (a dropped
// kind of call, the default way count) fails here in well under a second.
func TestSoakDriverDoesWhatItClaims(t *testing.T) {
	const ways = 8 // not impl's default (128): a soak that ignores Ways shows 128
	seed := uint64(time.Now().UnixNano())
	rep, err := invariants.Soak(invariants.SoakConfig{
		Goroutines: 4,
		Duration:   50 * time.Millisecond,
		MinOps:     20_000, // enough for every edge size: one allocation in 8 is at an edge
		MinChecks:  10,
		Reserve:    24 << 20,
		Ways:       ways,
		Retain:     2 * spec.SuperblockSize,
		Decay:      -1,
		CheckEvery: 10 * time.Millisecond,
		FlushEvery: 3,
		Seed:       seed,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Violations {
		t.Errorf("%s: %s (seed %d, at %v)", v.Rule, v.Detail, v.Seed, v.At)
	}
	t.Logf("seed %d: %d ops, %d checks, %d edges", seed, rep.Ops, rep.Checks, rep.EdgeSizes)
	soakDidWhatItClaims(t, rep, ways)
}
