package impl_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDebugWAFAtFormerTailNamesNoOldSite (DEBUG-POISON: a write after free is
// reported naming the site that had allocated the object): a large object
// whose first superblock was the tail of the large object freed there must
// not name the site of an object that started there before that one. x (one
// superblock, allocated by allocSiteA) lives at superblock 1 and is freed; y
// (two superblocks, allocated here) then takes superblocks 0 and 1, so 1 is
// its tail, and is freed; a byte is written after free into superblock 1;
// z (one superblock) takes superblock 1 and finds it. The report may name y's
// site, or none, never x's: x's memory was y's since. The real bug (adv19):
// a large object's tail superblocks kept the site they had as an earlier
// object's head, and allocLarge reported it (fixed; pinned as tailkeepssite).
func TestDebugWAFAtFormerTailNamesNoOldSite(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c := mustCache(t, a)
	defer c.Close()
	s := allocN(t, c, 64)
	x := allocSiteA(t, c, spec.SuperblockSize)
	if sbOf(a, s) != 0 || sbOf(a, x) != 1 {
		t.Fatalf("the small object is in superblock %d and x in %d, want 0 and 1", sbOf(a, s), sbOf(a, x))
	}
	must(t, c.Free(x))
	must(t, c.Free(s))
	c.Flush() // superblock 0 released: the pool is one run again
	y := allocN(t, c, 2*spec.SuperblockSize)
	if sbOf(a, y) != 0 {
		t.Fatalf("y starts at superblock %d, want 0", sbOf(a, y))
	}
	must(t, c.Free(y))
	sliceAt(y, addrOf(y)+spec.SuperblockSize+8, 1)[0] = 0x11 // into y's tail, after free
	s = allocN(t, c, 64)                                     // superblock 0 again
	z := allocN(t, c, spec.SuperblockSize)
	if sbOf(a, s) != 0 || sbOf(a, z) != 1 {
		t.Fatalf("the small object is in superblock %d and z in %d, want 0 and 1", sbOf(a, s), sbOf(a, z))
	}
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at byte 8 of z's superblock): %v", len(reports), reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As(reports[0], &we) || we.Addr != addrOf(z) || we.Offset != 8 {
		t.Fatalf("report %v, want a write after free at byte 8 of %#x", reports[0], addrOf(z))
	}
	if strings.Contains(we.Site, "allocSiteA") {
		t.Errorf("the write after free into y's tail names the site of x, which lived there before y:\n%s", we.Site)
	}
	must(t, c.Free(s))
	must(t, c.Free(z))
}

// TestReallocToMaxSmallLeavesNothingLive (CONSERVE): a Realloc to exactly
// MaxSmall that is refused (b was freed already) frees the small object it
// allocated. Slip (adv19): n == MaxSmall taken for large, so the new object is
// taken for a reserved large one, whose clean-up (freeReserved) refuses a
// small object: it stays live for good (reallocmaxsmalllarge).
func TestReallocToMaxSmallLeavesNothingLive(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	c := mustCache(t, a)
	x := allocN(t, c, 100)
	must(t, c.Free(x))
	if _, err := c.Realloc(x, spec.MaxSmall); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed slice to MaxSmall: %v, want ErrDoubleFree", err)
	}
	must(t, c.Close())
	if err := a.Close(); err != nil {
		t.Fatalf("Close after the refused Realloc: %v, want no leak", err)
	}
}

// TestRepooledSuperblockWaitsItsDecay (MEM-ACCOUNT, Options.Decay): a
// superblock that left the pool and came back waits the decay from its return.
// Slip (adv19): it keeps the time it was first pooled, and the next release
// returns it to the OS at once (pooledatstale).
func TestRepooledSuperblockWaitsItsDecay(t *testing.T) {
	a, c, clock, objs := decayClock(t, 2)
	must(t, c.Free(objs[0])) // t0: pooled
	*clock += int64(30 * time.Minute)
	x := allocSBs(t, c, 1) // t0+30m: the same superblock, back from the pool
	if addrOf(x) != addrOf(objs[0]) {
		t.Fatal("setup: the superblock freed was not taken back")
	}
	*clock += int64(40 * time.Minute)
	must(t, c.Free(x)) // t0+70m: pooled again; the release walks the pool (t0's deadline)
	if h := held(a); h != sbBytes {
		t.Fatalf("the pool holds %d bytes committed right after a release, want the superblock just pooled, %d", h, sbBytes)
	}
	must(t, c.Free(objs[1]))
}

// TestFrontDebugPinnedFreePoisons (DEBUG-POISON: in debug mode every freed
// object is poisoned by the freeing cache when it owns the superblock; a run
// that never writes after free gets no report). The Allocator's Free runs
// pinned to the P's cache when it can; in debug mode its miss fill
// (fillPinned) declines, so the free takes the slow path, which poisons.
// Forty 64-byte objects are allocated and freed through the Allocator and its
// caches flushed (the superblock released, its poison verified), then forty
// are allocated again (each one verified as it is handed out): no report.
// Slip (adv19): the pinned fill runs in debug mode too, and the pinned local
// free that follows frees without poisoning: every object reads as written
// after free (pinnedfilldebug). The portable build has no pinned path: the
// test passes there.
func TestFrontDebugPinnedFreePoisons(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	var objs [][]byte
	for range 40 {
		objs = append(objs, allocN(t, a, 64))
	}
	for _, b := range objs {
		must(t, a.Free(b))
	}
	a.Flush()
	objs = objs[:0]
	for range 40 {
		objs = append(objs, allocN(t, a, 64))
	}
	for _, b := range objs {
		must(t, a.Free(b))
	}
	a.Flush()
	if len(reports) != 0 {
		t.Fatalf("%d writes after free reported, none made; the first: %v", len(reports), reports[0])
	}
}
