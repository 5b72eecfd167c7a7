package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
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

// TestFrontOOMJudgesServingCache (OOM-REAL): after an out-of-memory of a call
// on Front that the harness routed to one internal cache (every other call,
// Allocator.WithFrontCache), the harness judges that cache's state, not "any
// internal cache": an idle one always shows the state an out-of-memory
// leaves, so "any" let a Realloc or Alloc on Front give up holding objects
// (impl mutant largeoomnoflush through a Front Realloc passed, and the
// harness had judged a Front Realloc's out-of-memory by the pool alone). A
// call through the Allocator's methods may have run on any of them. The
// Allocs that fill the reservation and the Reallocs after run out of memory
// and must pass.
// Slip frontoomanycache: a routed call is judged by any internal cache.
func TestFrontOOMJudgesServingCache(t *testing.T) {
	h, err := invariants.NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer h.Close()
	h.CheckEachStep = true
	must(t, h.Alloc(invariants.Front, 100, 1)) // the first call on Front is routed
	s := h.A.Snapshot()
	ids := h.OOMIDs(s, invariants.Front)
	front := 0
	for _, c := range s.Caches {
		if c.Front {
			front++
		}
	}
	if len(ids) != 1 || front == 0 {
		t.Fatalf("a routed call on Front is judged by caches %v of %d internal ones, want the one it ran on", ids, front)
	}
	must(t, h.Alloc(invariants.Front, 100, 1)) // through the Allocator's methods: any
	if ids := h.OOMIDs(h.A.Snapshot(), invariants.Front); len(ids) != front {
		t.Fatalf("a call through the Allocator's methods is judged by caches %v, want all %d internal ones", ids, front)
	}
	var small []uintptr
	for range 3 {
		must(t, h.Alloc(invariants.Front, 100, 1))
		small = append(small, h.LastAddr)
	}
	// Fill the pool, whatever internal caches served the small ones: each
	// out-of-memory on the way is judged too.
	for _, n := range []int{3 * spec.SuperblockSize, spec.SuperblockSize} {
		for i := 0; h.LastErr == nil; i++ {
			if i > 16 {
				t.Fatalf("%d allocations of %d bytes in a reservation of 16 superblocks", i, n)
			}
			must(t, h.Alloc(invariants.Front, n, 1))
		}
		h.LastErr = nil
	}
	for _, a := range small {
		must(t, h.Realloc(invariants.Front, a, 2*spec.SuperblockSize))
		if invariants.Kind(h.LastErr) != oracle.OutOfMemory {
			t.Fatalf("Realloc to two superblocks in a full reservation: %v", h.LastErr)
		}
	}
}
