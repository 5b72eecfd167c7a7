package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestQuarantineBoundedWhenReleaseFails (GUARD-FAULT): the quarantine holds
// at most QuarantineObjects objects, also when its oldest object cannot
// leave it (the kernel refuses to make its memory accessible again). A free
// that would exceed the bound then cannot make room, and its object is
// pooled as one the kernel refuses to protect is, not quarantined past the
// bound. quarantine protected the new object first and, finding it could
// not evict, quarantined it anyway: every guarded free while the oldest was
// stuck grew the quarantine (and the kernel's mappings) without bound.
func TestQuarantineBoundedWhenReleaseFails(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 2})
	needProtect(t, a)
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	var objs [][]byte
	for range 5 {
		objs = append(objs, allocN(t, c, 64))
	}
	must(t, c.Free(objs[0]))
	must(t, c.Free(objs[1]))
	undo := impl.RefuseRestore(a, nil)
	for _, b := range objs[2:] {
		must(t, c.Free(b))
		if g := a.Stats().Guard; g.Quarantined > 2 {
			undo()
			t.Fatalf("guard stats %+v: %d objects quarantined, the bound is 2", g, g.Quarantined)
		}
	}
	undo()
	// The objects that could not be quarantined were pooled: accessible,
	// and a free of their start again is a double free.
	for _, b := range objs[2:] {
		if r := touch(a, b, 0, false); r != nil {
			t.Errorf("an object pooled for want of room in the quarantine faulted: %v", r)
		}
		if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
			t.Errorf("the free of a pooled guarded object's start again: %v, want ErrDoubleFree", err)
		}
	}
}

// TestQuarantineReleasesPastStuckOldest (GUARD-FAULT, OOM-REAL): when the
// kernel refuses to restore the access of the quarantine's oldest object,
// the next oldest leaves in its place: a later guarded free is still
// quarantined (its object faults at an access), and an allocation that finds
// no free run gets the memory of every object but the stuck one. evictOldest
// tried only the oldest: one stuck object left every later guarded free
// unprotected and pooled, and made allocations fail with the rest of the
// quarantine's memory idle.
func TestQuarantineReleasesPastStuckOldest(t *testing.T) {
	a, c := stuckable(t)
	var objs [][]byte
	for range 3 {
		objs = append(objs, allocN(t, c, 64)) // a guarded superblock each
	}
	must(t, c.Free(objs[0]))
	must(t, c.Free(objs[1]))
	undo := impl.RefuseRestore(a, objs[0])
	defer undo()
	must(t, c.Free(objs[2])) // objs[1] makes room, objs[0] being stuck
	if g := a.Stats().Guard; g.Quarantined != 2 || g.Released != 1 {
		t.Errorf("guard stats %+v: want 2 quarantined (the stuck oldest and the last), 1 released", g)
	}
	// The one that left is the one taken off the list (hunt21): the stuck one
	// stays listed, marked, where a later eviction can try it again. Taking
	// the list's head off instead forgets the stuck object (its superblock
	// quarantined for good, in no list) and keeps listing the one already
	// pooled, which a later eviction would pool a second time. Slip:
	// evictwrongentry.
	q := a.Snapshot().Guard.Quarantine
	sbOf := func(p uintptr) uintptr { return p >> spec.SuperblockShift }
	if len(q) != 2 || sbOf(q[0].Addr) != sbOf(addrOf(objs[0])) || !q[0].Stuck ||
		sbOf(q[1].Addr) != sbOf(addrOf(objs[2])) || q[1].Stuck {
		t.Fatalf("quarantine %+v: want objs[0] (%#x, stuck) then objs[2] (%#x); objs[1] (%#x) left",
			q, addrOf(objs[0]), addrOf(objs[2]), addrOf(objs[1]))
	}
	if r := touch(a, objs[2], 0, false); r == nil {
		t.Errorf("the last object freed, with room made past the stuck oldest, does not fault")
	}
	// Three superblocks are free or quarantined, one stuck: a large object of
	// three fits once the quarantine gives up all it can.
	b, err := c.Alloc(3*spec.SuperblockSize - 100)
	if err != nil {
		t.Fatalf("Alloc of 3 superblocks with one stuck in quarantine and 3 to be had: %v", err)
	}
	must(t, c.Free(b))
}

// TestOOMLeavesOnlyStuckQuarantined (OOM-REAL, GUARD-FAULT): before an
// allocation fails for want of memory the quarantine gives up every object
// it can; what stays is only what the kernel refused to make accessible
// again, and the snapshot says so (Quarantined.Stuck), so that
// invariants.CheckOOM can tell it from memory the allocator failed to use.
// Here every restore is refused: the two quarantined objects stay, marked
// stuck, the large allocation that needs their superblocks fails, and the
// check finds nothing wrong; the same snapshot with one of them not marked
// is a violation. Slips: the mark never set (stuckunmarked); CheckOOM
// blaming stuck objects too (oomstuckblamed), a false violation.
func TestOOMLeavesOnlyStuckQuarantined(t *testing.T) {
	a, c := stuckable(t)
	x, y := allocN(t, c, 64), allocN(t, c, 64) // a guarded superblock each
	must(t, c.Free(x))
	must(t, c.Free(y))
	undo := impl.RefuseRestore(a, nil)
	defer undo()
	const n = 3*spec.SuperblockSize - 100 // needs a quarantined superblock
	if _, err := c.Alloc(n); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("Alloc(%d) with 2 of 4 superblocks stuck in quarantine: %v, want ErrOutOfMemory", n, err)
	}
	s := a.Snapshot()
	q := s.Guard.Quarantine
	if len(q) != 2 || !q[0].Stuck || !q[1].Stuck {
		t.Fatalf("quarantine after the out-of-memory %+v: want both objects, marked stuck", q)
	}
	if vs := invariants.CheckOOM(s, []int{c.ID()}, n, 1); len(vs) > 0 {
		t.Fatalf("CheckOOM with only stuck objects in quarantine: %v", vs)
	}
	q[1].Stuck = false
	if vs := invariants.CheckOOM(s, []int{c.ID()}, n, 1); len(vs) == 0 {
		t.Fatal("CheckOOM with a quarantined object that could have been released finds nothing")
	}
}

// stuckable is a cache of an Allocator of four superblocks in guard mode
// (every small allocation guarded, a quarantine of two objects) whose
// backend can protect memory: where the tests make the kernel refuse to
// restore access (RefuseRestore).
func stuckable(t *testing.T) (*impl.Allocator, *impl.Cache) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize, Retain: -1,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 2, QuarantineBytes: 4 * spec.SuperblockSize}})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	needProtect(t, a)
	c, err := a.NewCache()
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return a, c
}
