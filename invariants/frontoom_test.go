package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestUnroutedFrontOOMJudgesEveryInternalCache (OOM-REAL): a call through the
// Allocator's methods that runs out flushes every internal cache and looks
// again (impl's Allocator.outOfMemory), so the harness judges its
// out-of-memory by each internal cache, not by any one: here the reservation
// is full (a small object through the front, a large one) and one internal
// cache holds the rest of the small object's group, so the judge must say
// so, though every other internal cache is idle and shows the state an
// out-of-memory leaves. Slip frontoomanyone: any one idle cache passes it
// (and impl's frontoomownflush passed the machines).
func TestUnroutedFrontOOMJudgesEveryInternalCache(t *testing.T) {
	h, err := invariants.NewHarness(impl.Options{Reserve: 2 * spec.SuperblockSize})
	must(t, err)
	defer h.Close()
	must(t, h.Alloc(invariants.Front, 100, 1))
	must(t, h.Alloc(invariants.Front, spec.SuperblockSize, 1))
	s := h.A.Snapshot()
	if len(s.FreeRuns) != 0 {
		t.Fatalf("the reservation of two superblocks is not full: free runs %v", s.FreeRuns)
	}
	front := 0
	for _, c := range s.Caches {
		if c.Front {
			front++
		}
	}
	if front < 2 {
		t.Fatalf("%d internal caches: want an idle one beside the one that served", front)
	}
	fires(t, spec.RuleOOMReal, "holding", h.CheckUnroutedFrontOOM(s, 100, 1))
}
