package impl_test

// Tests of hunt21, a mutation sweep (relational flips, ±1, && and ||,
// dropped statements, swapped operands) over the code changed since the
// sweeps of hunt17-19 (the report queue and its deliveries, adoption by
// period, the stats' two passes, the quarantine's eviction) and over files
// no sweep had covered (the backends, the portable front, the check build's
// assertions, spec). Each test names its rule and the slip it kills.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestOddFreeIntoOrphanAdoptsNothing (FREE-INVALID): an address that is not
// a slot start is refused before it can adopt an orphan, however it misses
// the slots; review9's cases are 8 past a slot start and the tail, both
// even. One byte past a slot start is judged by every bit of the offset: a
// slot test that read the offset with its lowest bit masked off takes it for
// the slot start, adopts the orphan (a new owner, OrphanedSuperblocks down)
// and only the owned path then refuses it. Slip: the miss path's offset
// within the superblock masked with SuperblockSize-2 (orphanslotmask).
func TestOddFreeIntoOrphanAdoptsNothing(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache()
	freer, _ := a.NewCache()
	x := allocN(t, owner, 48)
	must(t, owner.Close()) // x's superblock an orphan, x live
	if err := freer.Free(sliceAt(x, addrOf(x)+1, 1)); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("free of a slot start + 1 in an orphan: %v, want ErrInvalidPointer", err)
	}
	if got := a.Stats().OrphanedSuperblocks; got != 1 {
		t.Fatalf("OrphanedSuperblocks %d after a refused free into the orphan, want 1 (it was adopted)", got)
	}
	must(t, freer.Free(x))
	must(t, freer.Close())
}

// TestInPlaceReallocDeliversItsReports (DEBUG-POISON: a write after free is
// reported to OnError "once the call that found it has done its work"): a
// Realloc that grows a large object in place, over a superblock written
// after its free, finds the write while it checks the poison of what it
// takes; OnError has heard of it when the Realloc returns, through the
// Allocator and through a Cache. TestFrontCallsDeliverTheirReports covers
// a Realloc that moves. Slip: the Allocator's Realloc does not deliver when
// it returns b's own address (frontinplacenodeliver): the report waits for
// whatever call comes next. (The Cache's is killed by
// TestDebugGrowInPlaceVerifiesTakenSuperblock too.)
func TestInPlaceReallocDeliversItsReports(t *testing.T) {
	for _, viaCache := range []bool{false, true} {
		var reports []error
		a := newDebugReporting(t, &reports)
		var al interface {
			Alloc(int) ([]byte, error)
			Free([]byte) error
			Realloc([]byte, int) ([]byte, error)
		} = a
		if viaCache {
			c, err := a.NewCache()
			must(t, err)
			defer c.Close()
			al = c
		}
		big, err := al.Alloc(spec.SuperblockSize) // one superblock
		must(t, err)
		next, err := al.Alloc(spec.SuperblockSize) // the one after it
		must(t, err)
		if addrOf(next) != addrOf(big)+spec.SuperblockSize {
			t.Fatalf("setup: the second large object at %#x, not after the first (%#x)", addrOf(next), addrOf(big))
		}
		must(t, al.Free(next))
		next[:cap(next)][5] = 1 // after free
		r, err := al.Realloc(big, 2*spec.SuperblockSize)
		must(t, err)
		if addrOf(r) != addrOf(big) {
			t.Fatalf("setup: the Realloc moved (%#x, was %#x)", addrOf(r), addrOf(big))
		}
		if len(reports) != 1 || !errors.Is(reports[0], impl.ErrWriteAfterFree) {
			t.Errorf("cache %v: a Realloc grown in place over a superblock written after its free returned with reports %v, want one write after free", viaCache, reports)
		}
		must(t, al.Free(r))
	}
}

// TestPanickingLeftoverReportInCacheRealloc (CONSERVE): after OnError
// panicked on one report, the reports still queued go to the next call that
// ends; when that is a Cache's Realloc that allocated (here of nil, an
// Alloc) and OnError panics again, the Realloc never returns its new object,
// and the new object (an ordinary small one, not reserved) must be freed.
// The two reports are two remote double frees found by one refill; the
// Realloc's own Alloc takes its fast path (the class warmed first), so only
// the Realloc's delivery meets the leftover report. Slips: Cache.Realloc
// hands the object it allocated to freeReserved, which frees only a large or
// guarded object (reallocnewreserved), or takes the new object for b and only
// delivers.
func TestPanickingLeftoverReportInCacheRealloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	warm := allocN(t, c, 200) // the Realloc's class: its held group filled
	objs := allocObjects(t, c, 1024, 32)
	for _, o := range objs[:2] {
		must(t, c.Free(o))
		must(t, d.Free(o)) // a double free, pending
	}
	recovered(t, "the Alloc whose refill finds two double frees", impl.ErrDoubleFree, func() { c.Alloc(1024) })
	recovered(t, "the Realloc that ends with the second report queued", impl.ErrDoubleFree, func() { c.Realloc(nil, 200) })
	if got := live(a); got != 31 {
		t.Errorf("after the panics: %d objects live, want 31 (objs[2:] and warm; the Realloc's new object leaked)", got)
	}
	for _, o := range append(objs[2:], warm) {
		must(t, c.Free(o))
	}
	closeClean(t, a, c, d)
}

// TestAllocAfterSampledReallocNotReserved (FREE-DOUBLE, CONSERVE): a moving
// Realloc in sampled guard mode allocates its new object "reserving", so
// that a guarded one stays reserved until the Realloc returns it; the flag
// ends with that allocation. A guarded object a later Alloc returns is the
// caller's at once, and its free is accepted. Every allocation is guarded
// here (SampleRate 1). Slip: allocReserving never clears the flag
// (reservingkept): every later guarded object is born reserved, its free
// refused as a double free, and it stays live for good.
func TestAllocAfterSampledReallocNotReserved(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	b := allocN(t, c, 64)
	r, err := c.Realloc(b, 200)
	must(t, err)
	x := allocN(t, c, 64)
	if g := a.Stats().Guard.Allocs; g != 3 {
		t.Fatalf("setup: %d allocations guarded, want 3 (b, the Realloc's, x)", g)
	}
	if err := c.Free(x); err != nil {
		t.Errorf("free of a guarded object Alloc returned after a Realloc: %v", err)
	}
	must(t, c.Free(r))
}

// TestCloseUnmapsReservation (MEM-ACCOUNT; Allocator.Close "releases the
// reservation"): after Close no mapping of the process covers the
// reservation's address space; a program that makes and closes Allocators
// would otherwise lose Reserve bytes of address space to each. Only the
// mmap backend maps (the Go-heap one, under -race, holds a heap slice): an
// Allocator in guard mode says which (GuardProtects). Slip: the mmap
// backend's release takes its mapping for already released and unmaps
// nothing (unmapskipped).
func TestCloseUnmapsReservation(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true}})
	must(t, err)
	if !a.GuardProtects() {
		a.Close()
		t.Skip("the Go-heap backend maps nothing of its own")
	}
	x, err := a.Alloc(64)
	must(t, err)
	p := addrOf(x)
	mapped := func() bool {
		maps, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Skipf("no /proc/self/maps: %v", err)
		}
		for _, l := range strings.Split(string(maps), "\n") {
			var lo, hi uintptr
			if _, err := fmt.Sscanf(l, "%x-%x", &lo, &hi); err == nil && lo <= p && p < hi {
				return true
			}
		}
		return false
	}
	if !mapped() {
		t.Fatalf("setup: %#x, an object of the open Allocator, is in no mapping", p)
	}
	must(t, a.Free(x))
	a.Close()
	if mapped() {
		t.Errorf("after Close the reservation (object at %#x) is still mapped", p)
	}
}

// TestFrontAllocCapacityIsUsable (REFINES, ALIGN: an object's capacity is
// spec.Usable(n, 1) for Alloc): the Allocator's own Alloc serves every size
// with the smallest class that holds it, whatever the front (per-P caches,
// or the portable build's shards), not a class of a stricter alignment. A
// size of 8 is where they part: class 8, where 16-byte alignment needs 16.
// Slip: the portable front's Alloc asks its shard for an alignment of 16,
// not 1 (portablealloc16).
func TestFrontAllocCapacityIsUsable(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	for _, n := range []int{1, 8, 24, 40, 56, 72, 100, 1000, spec.MaxSmall} {
		b := allocN(t, a, n)
		if cap(b) != spec.Usable(n, 1) {
			t.Errorf("Alloc(%d): capacity %d, want spec.Usable(%d, 1) = %d", n, cap(b), n, spec.Usable(n, 1))
		}
		must(t, a.Free(b))
	}
}
