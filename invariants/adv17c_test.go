package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestFlushedCatchesUnpublishedLocalFrees (STATS-EXACT): after a cache's
// Flush no superblock it owns keeps a local free unpublished (Flush publishes
// every LocalFreed). Slip flushedlocalfreed (adv17c 23): the check after
// Flush looks at the pending remote frees only.
func TestFlushedCatchesUnpublishedLocalFrees(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	a := h.LastAddr
	must(t, h.Alloc(id, 100, 1))
	must(t, h.Free(id, a))
	must(t, h.Flush(id))
	s := h.A.Snapshot()
	if vs := invariants.Flushed(s, []int{id}); len(vs) != 0 {
		t.Fatalf("a flushed cache fails: %v", vs)
	}
	n := 0
	for i := range s.Superblocks {
		if st := &s.Superblocks[i]; st.State == impl.SBSmall && st.Owner == id {
			st.LocalFreed = 1 // the freed object, never published
			n++
		}
	}
	if n == 0 {
		t.Fatal("the cache owns no small superblock")
	}
	fires(t, spec.RuleStatsExact, "local frees unpublished", invariants.Flushed(s, []int{id}))
}
