package invariants_test

import (
	"math/bits"
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv12a, an adversarial round of one-line slips in the checkers:
// each breaks a good snapshot the way a wrong allocator would, where only the
// slipped check can see it, and wants the rule.

// TestLifecycleCatchesEmptyByLocalFrees (LIFECYCLE: an owner releases a
// superblock at the free that empties it): an owned, partial superblock whose
// every object is free, some of them local frees not yet published
// (LocalFreed), is empty and must have been released. Slip (adv12a a14):
// lifecycle's empty test counts the published free objects (NFree) only, so
// a superblock emptied by local frees and kept by its owner passed.
func TestLifecycleCatchesEmptyByLocalFrees(t *testing.T) {
	h, id := setup(t)
	var objs []uintptr
	for range 40 {
		must(t, h.Alloc(id, 4096, 1)) // 16 a superblock, as in TestLifecycleCatchesMisfiled
		objs = append(objs, h.LastAddr)
	}
	must(t, h.Free(id, objs[0]))
	must(t, h.Free(id, objs[16]))
	for range 9 {
		must(t, h.Alloc(id, 4096, 1))
	}
	k := spec.SizeToClass(4096)
	for _, local := range []int{1, 3, 15} {
		s := clean(t, h)
		c := &s.Caches[len(s.Caches)-1]
		if len(c.Partial[k]) != 1 {
			t.Fatalf("partial %v", c.Partial[k])
		}
		var st *impl.SuperblockState
		for i := range s.Superblocks {
			if s.Superblocks[i].Index == c.Partial[k][0] {
				st = &s.Superblocks[i]
			}
		}
		st.Free[0], st.NFree, st.LocalFreed, st.Live = 1<<16-1, st.Objects-local, local, 0
		expect(t, spec.RuleLifecycle, invariants.Check(s, h.M))
	}
}

// TestGuardCatchesQuarantineBytesBySuperblocks (GUARD-FAULT: the quarantine
// holds at most QuarantineBytes of superblocks): guardSetup's quarantine is a
// small guarded object (one superblock) and a large one of 150 000 bytes
// (three), four superblocks; a bound of two superblocks' bytes is exceeded,
// though it is as many bytes as the quarantine has objects times a
// superblock. Slip (adv12a a18): guarded compares the objects' count, not
// their superblocks, with the byte bound, so a quarantine of large objects
// past QuarantineBytes passed.
func TestGuardCatchesQuarantineBytesBySuperblocks(t *testing.T) {
	h, _ := guardSetup(t)
	s := clean(t, h)
	sbs := 0
	for _, q := range s.Guard.Quarantine {
		sbs += q.Superblocks
	}
	if len(s.Guard.Quarantine) != 2 || sbs != 4 {
		t.Fatalf("setup: %d quarantined objects in %d superblocks, want 2 in 4", len(s.Guard.Quarantine), sbs)
	}
	s.Guard.QuarantineBytes = len(s.Guard.Quarantine) * s.SuperblockSize
	expect(t, spec.RuleGuardFault, invariants.Check(s, h.M))
	s = clean(t, h)
	s.Guard.QuarantineBytes = sbs * s.SuperblockSize // exactly full: no violation
	if vs := invariants.Check(s, h.M); len(vs) != 0 {
		t.Fatalf("a quarantine exactly at its byte bound: %v", vs)
	}
}

// TestEmptyCatchesLargeSuperblockKept (EMPTY: after everything was freed and
// flushed no superblock is in use): a superblock kept as a large object's
// head or tail after its object was freed, out of the pool and counted in
// use (so that the pool, the tiling and Stats all agree and Check sees
// nothing), is reported by CheckEmpty, though no object is live. Slip
// (adv12a a30): CheckEmpty looks for small superblocks only, so a large run
// never given back to the pool passed.
func TestEmptyCatchesLargeSuperblockKept(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 3*spec.SuperblockSize, 1))
	must(t, h.Alloc(id, 100, 1))
	must(t, h.FreeAll())
	for _, state := range []impl.SBState{impl.SBLargeHead, impl.SBLargeTail} {
		s := h.A.Snapshot()
		if vs := invariants.CheckEmpty(s, h.M); len(vs) != 0 {
			t.Fatalf("the emptied allocator fails: %v", vs)
		}
		if len(s.Superblocks) == 0 {
			t.Fatal("no superblock header in the snapshot")
		}
		st := &s.Superblocks[0]
		var runs []impl.Run
		for _, r := range s.FreeRuns {
			if st.Index < r.Start || st.Index >= r.Start+r.N {
				runs = append(runs, r)
				continue
			}
			if n := st.Index - r.Start; n > 0 {
				runs = append(runs, impl.Run{Start: r.Start, N: n})
			}
			if n := r.Start + r.N - st.Index - 1; n > 0 {
				runs = append(runs, impl.Run{Start: st.Index + 1, N: n})
			}
		}
		s.FreeRuns = runs
		st.State = state
		if !st.Dirty {
			st.Dirty = true
			s.Stats.Committed += uint64(s.SuperblockSize)
		}
		s.Stats.LargeSuperblocks++
		s.Stats.InUse += uint64(s.SuperblockSize)
		if vs := invariants.Check(s, h.M); len(vs) != 0 {
			t.Fatalf("%v kept: Check sees %v; only EMPTY should", state, vs)
		}
		expect(t, spec.RuleEmpty, invariants.CheckEmpty(s, h.M))
	}
}

// TestOOMCatchesOwnSparseSuperblock (OOM-REAL: no superblock of the class
// that the cache owns has a free object, however few): an out-of-memory while
// the cache owns a superblock of the request's class with one free object, or
// three (fewer than the sixteenth that makes it partial, LIFECYCLE), is
// refused; with none free it is accepted. Slip (adv12a a33): CheckOOM counted
// an owned superblock as room only from LIFECYCLE's partial threshold on,
// so a refill that gave up without taking its own sparse superblock (the
// sparse path of OOM-REAL) passed.
func TestOOMCatchesOwnSparseSuperblock(t *testing.T) {
	h, id := setup(t)
	for range 10 {
		must(t, h.Alloc(id, 1024, 1)) // 64 a superblock: a sixteenth is 4
	}
	k := spec.SizeToClass(1024)
	for _, free := range []int{0, 1, 3} {
		s := clean(t, h)
		s.FreeRuns = nil
		s.Caches[len(s.Caches)-1].Held = nil
		found := false
		for i := range s.Superblocks {
			st := &s.Superblocks[i]
			if st.State != impl.SBSmall || st.Class != k || st.Owner != id {
				continue
			}
			found = true
			for g := range st.Free {
				st.Free[g] = 0
			}
			st.Free[1] = 1<<free - 1
			st.NFree, st.LocalFreed = free, 0
		}
		if !found {
			t.Fatal("no class-1024 superblock of the cache")
		}
		vs := invariants.CheckOOM(s, []int{id}, 1024, 1)
		if free == 0 && len(vs) != 0 {
			t.Fatalf("a full superblock: %v", vs)
		}
		if free > 0 {
			expect(t, spec.RuleOOMReal, vs)
		}
	}
}

// TestStatsTableCatchesWrongClassRow (REFINES: Stats.Classes is the size-class
// table, one row per class): a Stats whose class row has the wrong slab
// object count, size or class index, or a row too few, is reported, and
// the table as it is passes. Slip (adv12a a31): Harness.Stats compared each
// row's class and size but not SlabObjects, so a Stats that misreports how
// many objects a superblock of a class holds passed every driver.
func TestStatsTableCatchesWrongClassRow(t *testing.T) {
	h, _ := setup(t)
	st := h.A.Stats()
	if vs := invariants.StatsTable(st, h.M.Size()); len(vs) != 0 {
		t.Fatalf("the allocator's own Stats: %v", vs)
	}
	for _, k := range []int{0, spec.SizeToClass(4096), spec.NumClasses - 1} {
		for name, breakIt := range map[string]func(c *impl.ClassStats){
			"slab objects one more": func(c *impl.ClassStats) { c.SlabObjects++ },
			"slab objects one less": func(c *impl.ClassStats) { c.SlabObjects-- },
			"size":                  func(c *impl.ClassStats) { c.Size += 16 },
			"class":                 func(c *impl.ClassStats) { c.Class++ },
		} {
			bad := st
			bad.Classes = slices.Clone(st.Classes)
			breakIt(&bad.Classes[k])
			if vs := invariants.StatsTable(bad, h.M.Size()); len(vs) == 0 {
				t.Errorf("class %d, %s: no violation", k, name)
			}
		}
	}
	bad := st
	bad.Classes = st.Classes[:spec.NumClasses-1]
	if vs := invariants.StatsTable(bad, h.M.Size()); len(vs) == 0 {
		t.Error("a class row missing: no violation")
	}
}

// TestOOMCatchesOrphanWithPendingFrees (OOM-REAL: no orphan has a remote
// free pending, the second look collects them): an out-of-memory while an
// orphan of another class than the request's holds a remote free of a live
// object, pending and announced, is refused; the same orphan without it is
// accepted. Slip (adv12a a34): CheckOOM's orphan walk skipped the pending
// test, so a refill that gave up without collecting the orphans' remote
// frees (which may empty one and give its superblock back) passed.
func TestOOMCatchesOrphanWithPendingFrees(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id) // one class-4096 superblock: 11 live, 4 held, 1 free
	for _, pending := range []bool{false, true} {
		s := clean(t, h)
		s.FreeRuns = nil
		c := &s.Caches[len(s.Caches)-1]
		held := c.Held[0]
		c.Held = nil
		for i := range s.Superblocks {
			st := &s.Superblocks[i]
			if st.Index != held.Superblock {
				continue
			}
			st.Owner, st.Orphan, st.List = -1, true, "orphan"
			st.Free[held.Group] |= held.Bits // given back: free objects of class 4096, not the request's
			st.NFree += bits.OnesCount32(held.Bits)
			if pending {
				live := uint32(1<<st.Objects-1) &^ st.Free[0]
				st.Pending[0] = live & -live // the first live object, freed remotely
				st.Notified = true
			}
		}
		vs := invariants.CheckOOM(s, []int{id}, 100, 1)
		if !pending && len(vs) != 0 {
			t.Fatalf("an orphan of another class, nothing pending: %v", vs)
		}
		if pending {
			expect(t, spec.RuleOOMReal, vs)
		}
	}
}
