package impl_test

import (
	"errors"
	"math/bits"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Direct tests for four slips that only invariants' rapid drivers killed
// (adv17a 14, 17, 28; adv17b 08), after a minute or more of TestBoundaries
// or TestExploreSeeds: each now fails here in milliseconds.

// TestMissBatchesExact (STATS-EXACT, STATS-LAG: Stats.SuperblockCacheMisses):
// a cache's superblock-cache misses are published in batches of 64 as each
// fills, and the rest at a flush. 150 remote frees into 150 superblocks of
// another cache miss once each: after the 64th Stats shows exactly 64 (a full
// batch is published, nothing is left unpublished), and after the flush
// exactly 150. Slips: the full batch is not reset, so the flush publishes it
// again (missnoreset: 214); a batch is published as 63 (missbatchshort).
func TestMissBatchesExact(t *testing.T) {
	const n = 150
	a, err := impl.New(impl.Options{Reserve: (n + 8) * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	per := spec.ClassObjects(spec.SizeToClass(spec.MaxSmall))
	var objs [][]byte
	for i, b := range allocObjects(t, c, spec.MaxSmall, n*per) {
		if i%per == 0 { // the first object of each superblock
			objs = append(objs, b)
		}
	}
	if sbOf(a, objs[0]) == sbOf(a, objs[1]) || sbOf(a, objs[n-2]) == sbOf(a, objs[n-1]) {
		t.Fatalf("objects of class %d are not %d to a superblock", spec.SizeToClass(spec.MaxSmall), per)
	}
	c.Flush()
	before := a.Stats().SuperblockCacheMisses
	for i, b := range objs {
		must(t, d.Free(b)) // remote: c owns the superblock, d has never seen it
		if i == 63 {
			if got := a.Stats().SuperblockCacheMisses - before; got != 64 {
				t.Fatalf("after 64 misses and no flush, Stats.SuperblockCacheMisses grew by %d, want 64: a full batch is published whole", got)
			}
		}
	}
	d.Flush()
	if got := a.Stats().SuperblockCacheMisses - before; got != n {
		t.Fatalf("after %d misses and a flush, Stats.SuperblockCacheMisses grew by %d, want %d", n, got, n)
	}
}

// TestTakeGroupPublishesCollectedFrees (STATS-EXACT: Stats' Frees): a refill
// that takes a group with a remote free pending collects that free and
// publishes it, so that Frees is exact after a flush. c hands out group 0 of
// its superblock whole; d frees object 0 (remote: pending in the group's word)
// and c object 1 (local); c's next Alloc takes group 0 again (its first dirty
// group with a free object), collecting object 0's free, and returns it.
// Slip: takeGroup collects without publishing (takegroupunpublished): Frees
// stays 1.
func TestTakeGroupPublishesCollectedFrees(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	k := spec.SizeToClass(64)
	objs := allocObjects(t, c, 64, 32) // group 0, handed out whole
	must(t, d.Free(objs[0]))
	must(t, c.Free(objs[1]))
	if b := allocN(t, c, 64); addrOf(b) != addrOf(objs[0]) {
		t.Fatalf("the refill after group 0's frees returned %#x, want object 0 at %#x (group 0 taken again)", addrOf(b), addrOf(objs[0]))
	}
	c.Flush()
	d.Flush()
	if got := a.Stats().Classes[k].Frees; got != 2 {
		t.Fatalf("class %d Frees = %d after a remote and a local free and a flush, want 2: the refill collected the remote one (STATS-EXACT)", k, got)
	}
}

// TestReusedBitmapRefilled (CONSERVE): a superblock used by a layout with
// fewer groups and then by one with more (64 B: 32 full groups; 96 B: 22, the
// last of 10 objects; 64 B again) offers every object of each layout: with a
// reservation of one superblock, the third cache allocates all 1024 objects of
// 64 B, and after its first the free bits number what the header counts.
// Slip: initSmall reuses the free bitmap without refilling it
// (initsmallstalebits): group 21 keeps the 96 B layout's 10 bits, 22 short of
// the count (the allocations past them would spin on a group the count says
// is there).
func TestReusedBitmapRefilled(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	for _, size := range []int{64, 96} {
		c, _ := a.NewCache()
		must(t, c.Free(allocN(t, c, size)))
		must(t, c.Close()) // S is empty: back to the pool
	}
	c, _ := a.NewCache()
	defer c.Close()
	n := spec.ClassObjects(spec.SizeToClass(64))
	seen := map[uintptr]bool{addrOf(allocN(t, c, 64)): true}
	for _, s := range a.Snapshot().Superblocks {
		free := 0
		for _, w := range s.Free {
			free += bits.OnesCount32(w)
		}
		if s.Index == 0 && free != s.NFree+s.LocalFreed {
			t.Fatalf("superblock 0 of 64 B, after a layout of 96 B: %d free bits, the header counts %d+%d (CONSERVE)", free, s.NFree, s.LocalFreed)
		}
	}
	for i := 1; i < n; i++ {
		b, err := c.Alloc(64)
		if err != nil {
			t.Fatalf("allocation %d of %d of 64 B from the one superblock: %v (CONSERVE: every object of the layout is free)", i+1, n, err)
		}
		if seen[addrOf(b)] {
			t.Fatalf("allocation %d returned %#x twice", i+1, addrOf(b))
		}
		seen[addrOf(b)] = true
	}
	if _, err := c.Alloc(64); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("allocation %d from a superblock of %d objects: %v, want ErrOutOfMemory", n+1, n, err)
	}
}

// TestLargeFreePoisonsWholeRun (DEBUG-POISON): in debug mode a freed large
// object poisons its whole run, not only its usable bytes, so that the next
// use of the run verifies poison everywhere and reports nothing when nothing
// was written after the free. A 64 KiB+1 object's run is two superblocks, its
// usable size far less; the next large object of two superblocks takes the
// same run. Slip: the free poisons the usable bytes only
// (largefreepoisonusable): the run's untouched tail is found unpoisoned and
// reported as a write after free nobody made.
func TestLargeFreePoisonsWholeRun(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 2 * spec.SuperblockSize, Debug: true, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	b := allocN(t, c, spec.SuperblockSize+1)
	if cap(b) >= 2*spec.SuperblockSize {
		t.Fatalf("a large object of %d bytes has capacity %d: no run bytes past its usable size", len(b), cap(b))
	}
	must(t, c.Free(b))
	must(t, c.Free(allocN(t, c, 2*spec.SuperblockSize)))
	c.Flush()
	if len(reports) != 0 || a.Stats().WriteAfterFrees != 0 {
		t.Fatalf("nothing was written after the free, but %d reports (%v), Stats.WriteAfterFrees %d", len(reports), reports, a.Stats().WriteAfterFrees)
	}
}
