package impl_test

// From adv5, an outside round of hand-written semantic bugs in the front,
// Realloc and the pool's Retain: each test names its rule and the slip that
// passed the suite before it.

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestRetainNotWholeSuperblocks (MEM-ACCOUNT, Options.Retain: "how many bytes
// of empty superblocks ... the pool keeps committed ... for good"): a Retain
// that is not a multiple of the superblock size keeps the whole superblocks
// that fit in it, never more bytes than it says. Retain 1.5 superblocks keeps
// one; two pooled for past the decay go back. Slip: Retain rounded up to
// superblocks, so the pool keeps two for good (retainroundup).
func TestRetainNotWholeSuperblocks(t *testing.T) {
	const retain = sbBytes + sbBytes/2
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: retain, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c, _ := a.NewCache()
	anchor := allocN(t, c, 16) // superblock 0
	must(t, c.Free(allocSBs(t, c, 2)))
	clock += int64(2 * time.Hour)
	impl.DecayNow(a)
	if h := held(a); h > retain {
		t.Fatalf("two superblocks pooled for twice the decay: the pool holds %d bytes committed, Retain is %d", h, retain)
	}
	must(t, c.Free(anchor))
	must(t, c.Close())
}

// TestFlushReachesCachesOfPsGone (STATS-EXACT, FRONT-EXCLUSIVE: "the caches
// of Ps that went away keep what they hold until Flush or Trim"): after
// GOMAXPROCS is lowered, Allocator.Flush still flushes the per-P cache of a P
// that no longer runs: its held group is given back and its local frees
// published, so the statistics are exact. Slip: Flush walks only the caches
// of the Ps GOMAXPROCS says run (flushrunningps).
func TestFlushReachesCachesOfPsGone(t *testing.T) {
	needClassCounters(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // at least 2 per-P caches: index 1 is one
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	a.WithFrontCache(1, func(c *impl.Cache) {
		b, err := c.Alloc(16) // a held group of 32, one handed out
		must(t, err)
		must(t, c.Free(b)) // a local free, unpublished
	})
	runtime.GOMAXPROCS(1) // P 1 goes away; its cache keeps what it holds
	a.Flush()
	if s := a.Stats().Classes[spec.SizeToClass(16)]; s.Allocs != 1 || s.Frees != 1 {
		t.Fatalf("after Flush: Allocs %d Frees %d, want 1 and 1 (the cache of the P gone was not flushed)", s.Allocs, s.Frees)
	}
}

// TestPanickingReportInFrontRealloc (CONSERVE, DEBUG-POISON): as
// TestPanickingReportInReallocsLargeAlloc, through the Allocator's own
// Realloc, which delivers once it has given its cache up: an OnError that
// panics there unwinds the Realloc after it freed b and before it returned
// the new object, which must then be freed, not left live with nobody
// holding it. Slip: the front's Realloc delivers with deliver, not
// deliverAlloc (frontreallocdeliver).
func TestPanickingReportInFrontRealloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true, OnError: func(err error) { panic(err) }})
	must(t, err)
	b := allocN(t, a, 100)
	big := allocN(t, a, spec.SuperblockSize)
	must(t, a.Free(big))
	big[5] = 1 // after its free
	recovered(t, "the Allocator's Realloc whose new object holds the write after free", impl.ErrWriteAfterFree, func() { a.Realloc(b, spec.SuperblockSize) })
	if st := a.Stats(); st.Large.LiveObjects != 0 {
		t.Errorf("after the panic: %d large objects live, want 0 (the new object leaked)", st.Large.LiveObjects)
	}
	a.Flush()
	closeClean(t, a)
}

// TestReallocAfterGuardedReallocNotReserved (CONSERVE, FREE-DOUBLE: "A moving
// Realloc that does not return its new object frees it"): in guard mode a
// moving Realloc's new small object is reserved only when it is guarded.
// After one whose new object was guarded, a Realloc of a freed slice whose
// new object is not guarded fails, and frees that new object as any other:
// nothing stays live. Slip: allocReserving leaves gotReserved as the guarded
// Realloc set it, so the failing one frees its unguarded new object as a
// reserved large one, which does nothing, and it leaks (gotreservedkept).
func TestReallocAfterGuardedReallocNotReserved(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1000}})
	must(t, err)
	c, _ := a.NewCache()
	guarded := false
	for i := 0; i < 20000 && !guarded; i++ {
		r, err := c.Realloc(allocN(t, c, 16), 100)
		must(t, err)
		guarded = guardObject(a, r)
		must(t, c.Free(r))
	}
	if !guarded {
		t.Fatal("no moving Realloc got a guarded new object in 20000")
	}
	x := allocN(t, c, 16)
	must(t, c.Free(x))
	if _, err := c.Realloc(x, 3000); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed object: %v, want ErrDoubleFree", err)
	}
	if n := live(a); n != 0 {
		t.Fatalf("after a Realloc of a freed object failed: %d objects live, want 0 (its new object was not freed)", n)
	}
	closeClean(t, a, c)
}

// guardObject reports whether b is a live guarded small object of a: the start
// of a guard superblock.
func guardObject(a *impl.Allocator, b []byte) bool {
	for _, st := range a.Snapshot().Superblocks {
		if st.State == impl.SBGuard && st.Addr == addrOf(b) {
			return true
		}
	}
	return false
}
