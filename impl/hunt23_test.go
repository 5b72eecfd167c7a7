package impl_test

// Tests of hunt23, running the rest of hunt22's queue of one-line slips over
// snapshot.go, cache.go, large.go, stats.go, errors.go, leaks.go and
// realloc.go. Each test names its rule and the slip it kills.

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestSnapshotCachesByID (STATS-EXACT, Allocator.Snapshot: "Caches: the
// open caches, by ID"): with two caches of a user's besides the Allocator's
// own. Slip: openCaches sorts the caches by descending ID (snapcachesdesc).
func TestSnapshotCachesByID(t *testing.T) {
	a, c1 := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	c2, err := a.NewCache()
	must(t, err)
	s := a.Snapshot()
	if len(s.Caches) < 2 {
		t.Fatalf("Snapshot.Caches with two caches open: %d caches", len(s.Caches))
	}
	for i := 1; i < len(s.Caches); i++ {
		if s.Caches[i-1].ID >= s.Caches[i].ID {
			t.Fatalf("Snapshot.Caches IDs %d then %d, want ascending", s.Caches[i-1].ID, s.Caches[i].ID)
		}
	}
	must(t, c1.Close())
	must(t, c2.Close())
}

// TestSnapshotCacheCounters (STATS-EXACT, CacheState: Allocs and Frees are
// the cache's own published counters per class): a cache that allocated
// three objects and freed one, flushed. Slip: a cache's snapshot gives its
// Frees as Allocs and its Allocs as Frees (snapallocsfrees).
func TestSnapshotCacheCounters(t *testing.T) {
	needClassCounters(t)
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	var bs [3][]byte
	for i := range bs {
		var err error
		bs[i], err = c.Alloc(24)
		must(t, err)
	}
	must(t, c.Free(bs[0]))
	c.Flush()
	found := 0
	for _, cs := range a.Snapshot().Caches {
		if cs.ID != c.ID() {
			continue
		}
		found++
		var allocs, frees uint64
		for k := range cs.Allocs {
			allocs, frees = allocs+cs.Allocs[k], frees+cs.Frees[k]
		}
		if allocs != 3 || frees != 1 {
			t.Fatalf("cache %d after 3 allocations, 1 free and Flush: Snapshot gives Allocs %d, Frees %d, want 3, 1", cs.ID, allocs, frees)
		}
	}
	if found != 1 {
		t.Fatalf("cache %d appears %d times in Snapshot.Caches, want once", c.ID(), found)
	}
	must(t, c.Free(bs[1]))
	must(t, c.Free(bs[2]))
	must(t, c.Close())
}

// TestReallocForeignRefusals (FREE-INVALID, Cache.Realloc; what the model
// refuses before it looks at b comes first): Realloc of a slice not of the
// Allocator says ErrClosed on a closed cache of an open Allocator, and for a
// size of exactly the reservation (not too large: an Alloc of it can succeed)
// ErrInvalidPointer. Slips: the foreign check asks only whether the
// Allocator closed (reallocforeignopen); it refuses a size equal to the
// reservation as too large (reallocforeignsize).
func TestReallocForeignRefusals(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	foreign := make([]byte, 8)
	size := int(a.Snapshot().Size)
	if _, err := c.Realloc(foreign, size); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("Realloc of a Go slice to the reservation's %d bytes: %v, want ErrInvalidPointer", size, err)
	}
	must(t, c.Close())
	if _, err := c.Realloc(foreign, 16); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("Realloc of a Go slice on a closed cache: %v, want ErrClosed", err)
	}
}

// TestFlushAfterAllocatorClose (REFINES: every call after Close is refused;
// Cache.Flush, which returns nothing, does nothing): a cache that holds
// groups of several classes, with remote frees pending in its superblocks
// and, in debug mode, freed objects to poison, is flushed after its
// Allocator's Close, as are the freeing cache and the front. Slip
// (flushafterclose): Flush checks only the cache's own Close and walks the
// released reservation: a fault (hunt23's c27b, which only TestMachine saw,
// by crashing the test binary).
func TestFlushAfterAllocatorClose(t *testing.T) {
	for _, debug := range []bool{false, true} {
		a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Debug: debug})
		d, err := a.NewCache()
		must(t, err)
		for _, n := range []int{16, 64, 1000, 4096} {
			for i := range 40 {
				b := allocN(t, c, n)
				switch i % 3 {
				case 0:
					must(t, d.Free(b)) // remote: pending in c's superblock
				case 1:
					must(t, c.Free(b))
				} // else live at Close
			}
		}
		if err := a.Close(); !errors.Is(err, impl.ErrLeaked) {
			t.Fatalf("debug %v: Close with objects live: %v, want ErrLeaked", debug, err)
		}
		for name, f := range map[string]func(){"the owner's": c.Flush, "the remote freer's": d.Flush, "the Allocator's": a.Flush} {
			if err := noFault(func() error { f(); return nil }); err != nil {
				t.Errorf("debug %v: %s Flush after the Allocator's Close: %v", debug, name, err)
			}
		}
	}
}

// TestLeaksNameEveryKindsClass (EMPTY: Leaks lists each live object as it
// is): a large object leaks as class spec.Large with its usable bytes, and a
// guarded small one (a superblock of its own) as its own size class with its
// usable bytes, each the cap of the slice Alloc returned. Slips
// (leaklargeclass, leakguardclass): a large leak's Class is -1, a guarded
// one's spec.Large; only TestMachine's model comparison saw them (hunt23's
// k01, k02). Slip (leaklargesize, hunt24): a large leak's Size is its count
// of superblocks.
func TestLeaksNameEveryKindsClass(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 32 * sbBytes, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	defer c.Close()
	guarded := allocN(t, c, 100) // SampleRate 1: guarded
	big := allocN(t, c, 3*spec.SuperblockSize)
	type leak struct{ class, size int }
	want := map[uintptr]leak{addrOf(guarded): {spec.SizeToClass(100), cap(guarded)}, addrOf(big): {spec.Large, cap(big)}}
	leaks := a.Leaks()
	if len(leaks) != len(want) {
		t.Fatalf("Leaks lists %d objects, want %d: %v", len(leaks), len(want), leaks)
	}
	for _, l := range leaks {
		if w, ok := want[l.Addr]; !ok || l.Class != w.class || l.Size != w.size {
			t.Errorf("Leaks lists %#x as class %d of %d bytes, want %+v (found: %v)", l.Addr, l.Class, l.Size, w, ok)
		}
	}
	must(t, c.Free(guarded))
	must(t, c.Free(big))
}
