package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
)

// TestStepReallocOnOwner (REFINES: Cache.Realloc in place, CACHE-COHERENT):
// an OpRealloc of mode 0 resizes a live object on the cache that allocated
// it, whatever cache the command's selector picks (adv18: with it resized on
// the selected cache, mode 0 was mode 1, and no program resized an object on
// its owner but by chance).
func TestStepReallocOnOwner(t *testing.T) {
	var got []observed
	observe = func(_ *invariants.Harness, o observed) {
		if o.Call == "realloc" {
			got = append(got, o)
		}
	}
	defer func() { observe = nil }()
	// Alloc 100 bytes on the first cache; Realloc it to 200, mode 0, with
	// the second cache selected.
	p := Program{Cmds: []Cmd{{Op: OpAlloc, Cache: 0, Size: 100}, {Op: OpRealloc, Cache: 1, Size: 200}}}
	if err := Run(p); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].N != 0 || got[0].ID != got[0].Owner {
		t.Errorf("the mode-0 realloc: %+v; want one, on the object's owner", got)
	}
}

// TestConcurrentReopenAndStaleFront (LIFECYCLE: a cache closed while others
// run, its superblocks orphaned; FREE-DOUBLE through Allocator.Free): a
// concurrent program's COpReopen closes its worker's cache and opens another,
// and a COpStale with b odd frees through the Allocator's methods.
func TestConcurrentReopenAndStaleFront(t *testing.T) {
	var n concCounts
	concEnd = func(_ *invariants.Shared, c concCounts) { n = c }
	defer func() { concEnd = nil }()
	if err := RunConcurrent([]byte{0,
		0, COpAlloc, 10, 0, 0, COpAlloc, 20, 0, 0, COpReopen, 0, 0, 0, COpFree, 0, 0, 0, COpStale, 0, 1, 1, COpBarrier, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Reopen == 0 || n.StaleFront == 0 {
		t.Errorf("%d caches closed and reopened, %d stale frees through the Allocator; want both > 0", n.Reopen, n.StaleFront)
	}
}
