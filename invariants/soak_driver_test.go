package invariants_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestSoakReportsWhatItFinds: the soak's own checks at its end reach its
// report. An object left live when the workers are done is an EMPTY
// violation, and a write after free the allocator reported to OnError in
// debug mode is a DEBUG-POISON one (the soak makes neither; a test makes
// both, after its workers stopped).
func TestSoakReportsWhatItFinds(t *testing.T) {
	rep, err := invariants.SoakAtEnd(invariants.SoakConfig{
		Goroutines: 2, Duration: time.Millisecond, MaxOps: 500, Reserve: 8 << 20, Debug: true,
		CheckEvery: time.Millisecond, Seed: 1,
	}, func(sh *invariants.Shared) {
		if _, ok := sh.Alloc(nil, invariants.Front, 100, 1, 7); !ok { // left live
			t.Fatal("Alloc(100) failed")
		}
		c, id, err := sh.OpenCache()
		if err != nil {
			t.Fatal(err)
		}
		o, ok := sh.Alloc(c, id, 3000, 1, 9)
		if !ok {
			t.Fatal("Alloc(3000) failed")
		}
		sh.Free(c, id, o)
		o.B[:1][0] ^= 0xff // after its free: a write after free
		// The cache gives its superblock back, empty: its release checks
		// the poison of every object it handed out.
		sh.CloseCache(c, id)
	})
	if err != nil {
		t.Fatal(err)
	}
	var empty, waf bool
	for _, v := range rep.Violations {
		// CheckEmpty's own words: Close's report of the leak is not the check.
		empty = empty || v.Rule == spec.RuleEmpty && strings.Contains(v.Detail, "1 objects live (model: 1)")
		waf = waf || v.Rule == spec.RuleDebugPoison && strings.Contains(v.Detail, "write after free")
	}
	if !empty || !waf {
		t.Errorf("the soak reported EMPTY %v, a write after free %v; want both:\n%v", empty, waf, rep)
	}
}

// TestSoakEdges: the sizes the soak draws at the edges are EdgeSizes' own, all
// but the reservation's (every class's size and one more, MaxSmall and one
// more, the page edges up to three superblocks).
func TestSoakEdges(t *testing.T) {
	const reserve = 24 << 20
	got := invariants.SoakEdges(reserve)
	for _, n := range invariants.EdgeSizes(reserve) {
		if n < reserve-1 && !slices.Contains(got, n) {
			t.Errorf("the soak never draws the edge size %d", n)
		}
	}
	for _, n := range []int{spec.ClassSize(0), spec.MaxSmall, spec.MaxSmall + 1, 3*spec.SuperblockSize + 1} {
		if !slices.Contains(got, n) {
			t.Errorf("the soak never draws %d", n)
		}
	}
}
