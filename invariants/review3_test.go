package invariants_test

import (
	"sort"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestOrphanFullKeepsListLinked (LIFECYCLE, orphanFull): the full superblocks
// a refill keeps (ownerFreed) stay a well-linked full list. Two of them are
// kept, then each becomes partial by a free of its owner and is unlinked: a
// kept superblock with a stale or missing prev link would drop the other from
// the list, or leave itself on the full list while partial.
func TestOrphanFullKeepsListLinked(t *testing.T) {
	h, err := invariants.NewHarness(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer h.Close()
	id, err := h.NewCache()
	must(t, err)
	per := spec.ClassObjects(spec.SizeToClass(1000))
	alloc := func() uintptr {
		seen := map[uintptr]bool{}
		for _, a := range h.Live() {
			seen[a] = true
		}
		must(t, h.Alloc(id, 1000, 1))
		for _, a := range h.Live() {
			if !seen[a] {
				return a
			}
		}
		t.Fatal("no new object")
		return 0
	}
	check := func(when string) {
		t.Helper()
		if err := h.Check(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	var objs []uintptr
	for sbs := range 2 {
		for range per { // a superblock, full
			objs = append(objs, alloc())
		}
		// The owner frees into it and takes the slot back: full, ownerFreed.
		i := sbs * per
		must(t, h.Free(id, objs[i]))
		objs[i] = alloc()
	}
	objs = append(objs, alloc()) // a third superblock: the refill keeps both full ones
	check("after the refill kept two full superblocks")
	sort.Slice(objs, func(i, j int) bool { return objs[i] < objs[j] })
	// objs[:per] and objs[per:2*per] are the two kept superblocks (lowest first).
	must(t, h.Free(id, objs[2*per-1])) // the second becomes partial
	check("after the second kept superblock became partial")
	must(t, h.Free(id, objs[per-1])) // then the first
	check("after the first kept superblock became partial")
	must(t, h.FreeAll())
	check("after freeing everything")
}
