package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a mutant hunt of guard mode, debug mode, the statistics, leaks,
// remote frees and the superblock headers (guard.go, debug.go, stats.go,
// leaks.go, remote.go, superblock.go, sbcache.go).

// heapQuarantineOfOne returns an Allocator in guard mode under the Go-heap
// backend (in debug mode if debug), every small allocation guarded and a
// quarantine of one object, whose OnError reports are appended to *reports,
// and a cache of it; both are closed when t ends.
func heapQuarantineOfOne(t *testing.T, debug bool, reports *[]error) (*impl.Allocator, *impl.Cache) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true, Debug: debug,
		OnError: func(err error) { *reports = append(*reports, err) },
		Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	c, err := a.NewCache()
	must(t, err)
	t.Cleanup(func() { c.Close() })
	return a, c
}

// TestGuardedAllocNamesFreedObjectsSite (DEBUG-POISON, GUARD-FAULT): a
// guarded allocation that finds the poison of its superblock written reports
// the site that allocated the object freed there, not its own. Go-heap
// backend, debug mode, every small allocation guarded, a quarantine of one
// object: x (allocated in allocHere) is freed, pushed out of the quarantine by
// the free of y, and written at byte 5 while pooled; the next guarded
// allocation takes x's superblock and reports the write with allocHere's
// stack, as a 64-byte object of the 64-byte class. Slips: allocGuarded
// verifies the poison with the new allocation's site; it verifies through
// the large objects' check, which named a 64-byte object of class
// spec.Large (review23: guardedwaflarge).
func TestGuardedAllocNamesFreedObjectsSite(t *testing.T) {
	var reports []error
	_, c := heapQuarantineOfOne(t, true, &reports)
	x := allocHere(t, c, 64)
	must(t, c.Free(x))
	must(t, c.Free(allocN(t, c, 64))) // pushes x out of the quarantine
	if len(reports) != 0 {
		t.Fatalf("reports before any write after free: %v", reports)
	}
	x[:cap(x)][5] = 1 // a write after free, into the pool
	z := allocN(t, c, 64)
	if addrOf(z) != addrOf(x) {
		t.Fatalf("the guarded allocation is at %#x, not on x's superblock at %#x", addrOf(z), addrOf(x))
	}
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(x) || waf.Offset != 5 {
		t.Fatalf("reports %v, want the write at byte 5 of %#x", reports, addrOf(x))
	}
	if !strings.Contains(waf.Site, "impl_test.allocHere") {
		t.Errorf("the report names the site\n%s\nnot allocHere, where the freed object was allocated", waf.Site)
	}
	if k := spec.SizeToClass(64); waf.Size != 64 || waf.Class != k {
		t.Errorf("the report names a %d-byte object of class %d, want a 64-byte one of class %d", waf.Size, waf.Class, k)
	}
	must(t, c.Free(z))
}

// freeUnprotectable makes a's backend refuse to protect memory (skipping t
// where guard mode cannot protect at all), and frees x, a guarded 64-byte
// object of c, a cache of a closed when t ends.
func freeUnprotectable(t *testing.T, a *impl.Allocator) (c *impl.Cache, x []byte) {
	t.Helper()
	needProtect(t, a)
	impl.RefuseProtect(a)
	c, err := a.NewCache()
	must(t, err)
	t.Cleanup(func() { c.Close() })
	x = allocN(t, c, 64)
	must(t, c.Free(x))
	return c, x
}

// TestGuardUnprotectableFreeIsPooled (GUARD-FAULT, FREE-DOUBLE, MEM-ACCOUNT):
// a guarded small object whose memory the kernel refuses to protect is not
// quarantined but pooled as without guard mode: a free of its start again is
// a double free (its superblock keeps the guarded object's mark in the pool),
// and it is pooled dirty, so Trim gives it back: Committed 0 with nothing
// live. Slips: freeGuarded pools it with no class mark (the stale free is
// ErrInvalidPointer); or does not count it as dirty in the pool (Trim keeps
// it committed).
func TestGuardUnprotectableFreeIsPooled(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c, x := freeUnprotectable(t, a)
	if s := a.Stats(); s.Guard.Quarantined != 0 || s.Guard.LiveObjects != 0 || s.Guard.Superblocks != 0 || s.Committed != spec.SuperblockSize {
		t.Fatalf("after the free that could not protect: %+v, committed %d; want nothing quarantined or live, one superblock committed", s.Guard, s.Committed)
	}
	if err := c.Free(x); !errors.Is(err, impl.ErrDoubleFree) {
		t.Errorf("the free of the pooled guarded object's start again: %v, want ErrDoubleFree", err)
	}
	must(t, a.Trim())
	if s := a.Stats(); s.Committed != 0 {
		t.Errorf("Committed %d after Trim with nothing live, want 0", s.Committed)
	}
}

// TestGuardUnprotectableFreePoisonsSuperblock (DEBUG-POISON, GUARD-FAULT): in
// debug mode a guarded small object pooled because its memory could not be
// protected leaves its whole superblock poisoned, as every dirty pooled
// superblock is: the large object that takes the superblock next finds all
// its poison and reports no write after free. Slip: freeGuarded poisons only
// the object's usable bytes.
func TestGuardUnprotectableFreePoisonsSuperblock(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) },
		Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1}})
	must(t, err)
	defer a.Close()
	c, x := freeUnprotectable(t, a)
	big := allocN(t, c, spec.SuperblockSize)
	if addrOf(big) != addrOf(x) {
		t.Fatalf("the large object is at %#x, not on the pooled superblock at %#x", addrOf(big), addrOf(x))
	}
	if len(reports) != 0 || a.Stats().WriteAfterFrees != 0 {
		t.Fatalf("no write after free was made; reports %v, Stats.WriteAfterFrees %d", reports, a.Stats().WriteAfterFrees)
	}
	must(t, c.Free(big))
}

// TestGuardHeapBackendChecksLastByte (GUARD-FAULT, DEBUG-POISON): under the
// Go-heap backend a quarantined object is poisoned to its last usable byte,
// and every one of them is verified as it leaves the quarantine. A 64-byte
// object filled to its capacity, freed and pushed out of the quarantine
// untouched, gives no report; one written at byte 63 after its free gives
// one, naming its address, byte 63, size 64 and class. Slips: the quarantine
// poisons one byte short (a false report); the release verifies one byte
// short, or notPoison's fast comparison leaves the last byte out (no report);
// the report says class Large.
func TestGuardHeapBackendChecksLastByte(t *testing.T) {
	var reports []error
	a, c := heapQuarantineOfOne(t, false, &reports)
	x := allocN(t, c, 64)
	for i := range x[:cap(x)] {
		x[:cap(x)][i] = 0x11
	}
	must(t, c.Free(x))
	must(t, c.Free(allocN(t, c, 64))) // pushes x out of the quarantine
	if len(reports) != 0 {
		t.Fatalf("an object filled before its free and not touched after: reports %v", reports)
	}
	y := allocN(t, c, 64)
	must(t, c.Free(y))
	y[:cap(y)][63] = 1                // a write after free at the last byte
	must(t, c.Free(allocN(t, c, 64))) // pushes y out of the quarantine
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) {
		t.Fatalf("reports %v, want the write at byte 63 of %#x", reports, addrOf(y))
	}
	if waf.Addr != addrOf(y) || waf.Offset != 63 || waf.Size != 64 || waf.Class != spec.SizeToClass(64) {
		t.Errorf("report %+v, want address %#x, offset 63, size 64, class %d", *waf, addrOf(y), spec.SizeToClass(64))
	}
	if s := a.Stats(); s.WriteAfterFrees != 1 {
		t.Errorf("Stats.WriteAfterFrees %d, want 1", s.WriteAfterFrees)
	}
}

// TestGuardQuarantineBytesRoundedUp (GUARD-FAULT): QuarantineBytes is rounded
// up to whole superblocks: 2 superblocks and a byte bound the quarantine at 3,
// and three guarded objects freed are all kept. Slip: initGuard rounds down.
func TestGuardQuarantineBytesRoundedUp(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineBytes: 2*spec.SuperblockSize + 1})
	if g := a.Snapshot().Guard; g.QuarantineBytes != 3*65536 {
		t.Fatalf("QuarantineBytes %d, want %d (3 superblocks)", g.QuarantineBytes, 3*65536)
	}
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	for range 3 {
		must(t, c.Free(allocN(t, c, 64)))
	}
	if g := a.Stats().Guard; g.Quarantined != 3 || g.QuarantinedBytes != 3*65536 || g.Released != 0 {
		t.Errorf("after 3 guarded frees: %+v, want 3 quarantined (196608 bytes), none released", g)
	}
}

// TestExplainReleasedObject (GUARD-FAULT): ExplainAddr finds an object that has
// left the quarantine among the last ones released, and says so (Released);
// the one still in quarantine is not marked released. Slip: the search of the
// released objects leaves Released false.
func TestExplainReleasedObject(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 1})
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	x := allocN(t, c, 64)
	must(t, c.Free(x))
	y := allocN(t, c, 64)
	must(t, c.Free(y)) // pushes x out of the quarantine
	e, ok := a.ExplainAddr(addrOf(x) + 10)
	if !ok || e.Object != addrOf(x) || e.Offset != 10 || e.Size != 64 || !e.Released {
		t.Errorf("ExplainAddr of byte 10 of the released object: %+v %v, want object %#x, offset 10, size 64, released", e, ok, addrOf(x))
	}
	e, ok = a.ExplainAddr(addrOf(y))
	if !ok || e.Object != addrOf(y) || e.Released {
		t.Errorf("ExplainAddr of the quarantined object: %+v %v, want object %#x, not released", e, ok, addrOf(y))
	}
}

// TestGenerationWrapInGuardedLife (CACHE-COHERENT 2): when the generation wraps
// at the end of a guarded large object's life (its free quarantines it), the
// superblock's remote set is retired as at the end of any other period, so an
// entry kept from 2^32 periods before fails its CAS in the next small period
// instead of freeing a live object of the new layout. Slip: the end of a
// guarded run (endRun) does not retire the set at the wrap.
func TestGenerationWrapInGuardedLife(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	wrapInLargeLife(t, a, func(c *impl.Cache, big []byte) {
		must(t, c.Free(big))                               // quarantined (every large object is guarded)
		must(t, c.Free(allocN(t, c, spec.SuperblockSize))) // pushes big out of the quarantine
	})
}

// wrapInLargeLife makes the period that wraps the generation of a superblock
// a 64 KiB object's, which end frees (and brings back to the pool), and checks
// that an entry another cache kept from the superblock's first small period
// (class 48) does not act on the next one (class 64, at the entry's
// generation): its free of object 3 frees object 3, and every other object of
// the new layout stays live.
func wrapInLargeLife(t *testing.T, a *impl.Allocator, end func(c *impl.Cache, big []byte)) {
	t.Helper()
	c, d, i, entryGen := notMineEntryBeforeWrap(t, a, 48)
	big := allocN(t, c, spec.SuperblockSize) // the period that wraps is a large one
	if sbOf(a, big) != i {
		t.Fatal("the large object is not on the superblock")
	}
	end(c, big)
	if g := genOf(t, a, i); g != entryGen {
		t.Fatalf("generation %d after the wrap, want %d", g, entryGen)
	}
	var ys [][]byte
	for range 10 {
		ys = append(ys, allocN(t, c, 64)) // class 64, at d's entry's generation
	}
	if sbOf(a, ys[0]) != i {
		t.Fatal("the superblock was not reused")
	}
	// Offset 192 is object 4 of class 48 and object 3 of class 64.
	must(t, d.Free(ys[3]))
	c.Flush()
	if err := c.Free(ys[3]); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("d's free of object 3 did not free it (the owner's Free: %v)", err)
	}
	for j, y := range ys {
		if err := c.Free(y); j != 3 && err != nil {
			t.Fatalf("object %d of class 64 was live, Free: %v", j, err)
		}
	}
}

// TestDirtySuperblockLastObjectZeroed (ZEROED): a superblock carved from dirty
// memory counts every object as maybe dirty, the last one too. The 1952-byte
// class has 33 objects, the last alone in group 1; a 64 KiB large object is
// filled with 0xa5 and freed (pooled committed), and the 33 objects carved
// from its superblock must all read zero. Slip: initSmall marks a dirty
// superblock's last object as never handed out (zeroedFrom n-1), so the
// refill takes group 1 as fresh and does not clear it.
func TestDirtySuperblockLastObjectZeroed(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	big := allocN(t, c, spec.SuperblockSize)
	for i := range big {
		big[i] = 0xa5
	}
	must(t, c.Free(big))
	for j := range 33 {
		b := allocN(t, c, 1952)
		if cap(b) != 1952 || addrOf(b) != addrOf(big)+uintptr(j*1952) {
			t.Fatalf("allocation %d: %d bytes at %#x, want object %d of the dirty superblock at %#x", j, cap(b), addrOf(b), j, addrOf(big)+uintptr(j*1952))
		}
		for i, x := range b[:cap(b)] {
			if x != 0 {
				t.Fatalf("object %d of 33: byte %d is %#x, want 0", j, i, x)
			}
		}
	}
}

// TestStatsStringClassAndGuardLines (STATS-LEAD, STATS-LAG, GUARD-FAULT):
// Stats.String prints a class's row with its upper bound of live objects
// (Allocs - Frees), and the guard line whenever a guard counter is set, a
// quarantine of large objects alone too (no small allocation guarded), with
// the objects released in their place. Slips: the row prints Allocs as the
// live bound; the guard line is printed only when small allocations were
// guarded; it prints Allocs where the released objects go.
func TestStatsStringClassAndGuardLines(t *testing.T) {
	s := impl.Stats{
		Classes: []impl.ClassStats{{Class: 3, Size: 48, SlabObjects: 1365, Allocs: 10, Frees: 4}},
		Guard:   impl.GuardStats{Quarantined: 2, QuarantinedBytes: 3 << 16, Released: 5},
	}
	out := s.String()
	for _, want := range []string{
		"    3      48    1365             10              4            6\n",
		"guard: 0 small allocations guarded, 0 live (0 bytes, 0 superblocks); quarantine: 2 objects, 196608 bytes; 5 released\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Stats.String has no line %q:\n%s", want, out)
		}
	}
}

// TestExplainNamesLatestReleased (GUARD-FAULT): of the objects released from
// the quarantine that held an address, ExplainAddr names the latest. With a
// quarantine of two objects, guarded objects x0..x65 cycle over superblocks
// 0, 1, 2; after the free of x65, 64 objects have been released, x0 (112
// bytes) the oldest of those kept, and the latest on x0's superblock is x63
// (64 bytes). Slip: the search of the released objects starts one slot past
// the newest, at the oldest kept, and names x0.
func TestExplainNamesLatestReleased(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 2})
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	var first []byte
	for i := range 66 {
		n := 64
		if i == 0 {
			n = 100
		}
		x := allocN(t, c, n)
		if got := sbOf(a, x); got != i%3 {
			t.Fatalf("guarded object %d on superblock %d, want %d", i, got, i%3)
		}
		if i == 0 {
			first = x
		}
		must(t, c.Free(x))
	}
	if g := a.Stats().Guard; g.Released != 64 || g.Quarantined != 2 {
		t.Fatalf("guard stats %+v, want 64 released and 2 quarantined", g)
	}
	e, ok := a.ExplainAddr(addrOf(first))
	if !ok || e.Object != addrOf(first) || e.Size != 64 || !e.Released {
		t.Fatalf("ExplainAddr of superblock 0's start: %+v %v; want the 64-byte object released last there (x63), not x0 of 112 bytes", e, ok)
	}
}

//go:noinline
func allocLargeHere(t *testing.T, c *impl.Cache) []byte { return allocN(t, c, spec.SuperblockSize) }

// TestWriteAfterSmallLifeNamesNoStaleSite (DEBUG-POISON): a write after free
// found when a large object takes back a superblock whose last life was small
// does not name the site of an older large object there. In debug mode a
// 64 KiB object allocated in allocLargeHere is freed; the superblock is
// carved for 64-byte objects, x (allocated in allocHere) is freed, the
// superblock released, and x's first byte written; the next 64 KiB object
// takes the superblock and reports the write. The report must not name
// allocLargeHere, whose object had been freed long before. (The bug: a small
// period kept the header's site of the last large life, and the report named
// it as the site that had allocated the memory written.)
func TestWriteAfterSmallLifeNamesNoStaleSite(t *testing.T) {
	var reports []error
	a := newDebugReporting(t, &reports)
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	big := allocLargeHere(t, c)
	must(t, c.Free(big))
	x := allocHere(t, c, 64)
	if addrOf(x) != addrOf(big) {
		t.Fatalf("the small superblock is at %#x, not on the freed large object at %#x", addrOf(x), addrOf(big))
	}
	must(t, c.Free(x))
	c.Flush() // releases the superblock, poisoned
	x[0] = 1  // a write after free, into the pool
	next := allocN(t, c, spec.SuperblockSize)
	if addrOf(next) != addrOf(big) {
		t.Fatalf("the large object is at %#x, not on the released superblock at %#x", addrOf(next), addrOf(big))
	}
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(x) || waf.Offset != 0 {
		t.Fatalf("reports %v, want the write at byte 0 of %#x", reports, addrOf(x))
	}
	if strings.Contains(waf.Site, "allocLargeHere") {
		t.Errorf("the report names the site of the large object freed before the small life:\n%s", waf.Site)
	}
	must(t, c.Free(next))
}
