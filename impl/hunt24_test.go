package impl_test

// Tests of hunt24, a blind hunt of one-line slips over snapshot.go, stats.go,
// sbcache.go, superblock.go, front.go, errors.go, leaks.go and the backends.
// Each test names its rule and the slip it kills.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestSnapshotShowsClock (MEM-ACCOUNT: the check that no dirty superblock
// outstays its decay compares Snapshot.Now with PooledAt and Decay): the
// snapshot gives the Allocator's clock and its Decay as they are. Slip
// (snapnonow): Now left zero, so every pooled superblock looks freshly
// pooled and the decay check never fires.
func TestSnapshotShowsClock(t *testing.T) {
	a, _ := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Decay: time.Hour})
	t0 := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return t0 })
	s := a.Snapshot()
	if s.Now != t0 {
		t.Errorf("Snapshot.Now %d, the clock says %d", s.Now, t0)
	}
	if s.Decay != int64(time.Hour) {
		t.Errorf("Snapshot.Decay %d, Options.Decay %d", s.Decay, int64(time.Hour))
	}
}

// TestOneWayKeepsTheLastEntry (CACHE-COHERENT, Options.SuperblockCacheWays:
// "fewer ways only mask the index"): with one way, a free into superblock A
// and then one into B leave one entry, B's, at way 0, which the snapshot
// shows. Slip (waysunmasked): the cache indexes its entries by the superblock
// modulo 128 whatever the option, so A's entry stays beside B's, where the
// snapshot, walking the configured ways, never looks.
func TestOneWayKeepsTheLastEntry(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, SuperblockCacheWays: 1})
	x, err := c.Alloc(16)
	must(t, err)
	y, err := c.Alloc(4096)
	must(t, err)
	if sbOf(a, x) == sbOf(a, y) {
		t.Fatalf("setup: classes 16 and 4096 share superblock %d", sbOf(a, x))
	}
	must(t, c.Free(x))
	must(t, c.Free(y))
	for _, cs := range a.Snapshot().Caches {
		if cs.ID != c.ID() {
			continue
		}
		if len(cs.Entries) != 1 || cs.Entries[0].Way != 0 || cs.Entries[0].Superblock != sbOf(a, y) {
			t.Fatalf("one way, frees into superblocks %d then %d: entries %+v, want superblock %d's alone at way 0",
				sbOf(a, x), sbOf(a, y), cs.Entries, sbOf(a, y))
		}
		return
	}
	t.Fatalf("cache %d is not in the snapshot", c.ID())
}

// TestSmallPeriodKeepsRemoteSet (CACHE-COHERENT, ensureRemote: a set big
// enough is restamped and kept, only a too small or retired one is
// replaced): a superblock that goes small, back to the pool and small again
// in the same class makes no Go heap allocation. Slip (remotesetstrict): the
// set is kept only when strictly bigger than the class needs, so every
// small period of the same class allocates a new one.
func TestSmallPeriodKeepsRemoteSet(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	for _, n := range []int{16, 4096} {
		b, err := c.Alloc(n)
		must(t, err)
		must(t, c.Free(b))
		c.Flush()
		if got := testing.AllocsPerRun(100, func() {
			b, _ := c.Alloc(n)
			c.Free(b)
			c.Flush()
		}); got != 0 {
			t.Errorf("Alloc(%d), Free, Flush: %v Go allocations a small period", n, got)
		}
	}
}

// TestStatsStringFreesOnlyRow (Stats.String: "one row per class with
// activity"): a class whose Stats show frees and no allocations (a Stats
// the caller built, or a difference of two) still has its row. Slip: the
// row is skipped whenever Allocs is zero.
func TestStatsStringFreesOnlyRow(t *testing.T) {
	s := impl.Stats{Classes: []impl.ClassStats{{Class: 3, Size: 64, SlabObjects: 1024, Frees: 7}}}
	row := fmt.Sprintf("%5d %7d %7d %14d %14d ", 3, 64, 1024, 0, 7)
	if got := s.String(); !strings.Contains(got, row) {
		t.Errorf("Stats with class 3 at 0 allocs, 7 frees prints no row for it:\n%s", got)
	}
}

// TestFreeErrorTextLastClass (FREE-DOUBLE, FreeError.Error: the class and
// its size for a small object): a double free of an object of the last
// small class names that class, not a large object. Slip
// (freeerrlastclasslarge): Error takes every class from the last small one
// up for a large object.
func TestFreeErrorTextLastClass(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 8 * sbBytes})
	k := spec.NumClasses - 1
	b := allocN(t, c, spec.ClassSize(k))
	must(t, c.Free(b))
	want := fmt.Sprintf("(class %d, %d bytes)", k, spec.ClassSize(k))
	if err := c.Free(b); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("double free of a class-%d object: %v, want %q in it", k, err, want)
	}
}

// TestSnapshotSealedStackEmpty (CONSERVE: the checker takes every superblock
// on a notification stack for notified): a cache whose stack Close has
// sealed, as a snapshot at YieldCloseOrphaned sees it, has nothing on it.
// Slip (snapwalkssealed): the walk takes the seal for a superblock and lists
// it, so the checker finds superblock 0 on a stack it is not notified for;
// only the yield build's suite saw it.
func TestSnapshotSealedStackEmpty(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 8 * sbBytes})
	undo := impl.SealNotify(c)
	s := a.Snapshot()
	undo()
	for _, cs := range s.Caches {
		if cs.ID == c.ID() && len(cs.Notify) != 0 {
			t.Errorf("cache %d with its notification stack sealed: Notify %v, want none", c.ID(), cs.Notify)
		}
	}
}

// TestSnapshotShowsOtherRemoteSet (CACHE-COHERENT 3: invariants.coherent
// verifies every entry against its superblock's header): an entry whose
// remote words are another set's, of the same length
// (impl.OtherRemoteSet), shows SameRemote false. Slip (snapremoteptr): the
// snapshot compares only the count of words, the other half of what
// TestSnapshotShowsShortRemoteCount checks.
func TestSnapshotShowsOtherRemoteSet(t *testing.T) {
	sameRemoteShows(t, impl.OtherRemoteSet, "holding another set's remote words")
}

// snapEntry is cache c's entry for superblock s in a snapshot of a; the test
// fails when c has none.
func snapEntry(t *testing.T, a *impl.Allocator, c *impl.Cache, s int) impl.Entry {
	t.Helper()
	for _, cs := range a.Snapshot().Caches {
		for _, e := range cs.Entries {
			if cs.ID == c.ID() && e.Superblock == s {
				return e
			}
		}
	}
	t.Fatalf("cache %d has no entry for superblock %d", c.ID(), s)
	return impl.Entry{}
}
