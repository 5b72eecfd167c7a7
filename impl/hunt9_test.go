package impl_test

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a mutant hunt of the front (front.go, front_pinned.go,
// front_portable.go), the superblock cache (sbcache.go) and snapshot.go.

// TestFrontFreesEmptySlice (STATS-EXACT, EMPTY): Allocator.Free of an
// object's slice resliced to length 0 frees the object: only a slice of no
// capacity is nothing to free. Slip: Free tests len(b) == 0 instead of
// cap(b) == 0 (per-P front, or the portable one), and leaks the object.
func TestFrontFreesEmptySlice(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	b, err := a.Alloc(64)
	must(t, err)
	must(t, a.Free(b[:0]))
	a.Flush()
	k := spec.SizeToClass(64)
	if c := a.Stats().Classes[k]; c.Allocs != 1 || c.Frees != 1 {
		t.Fatalf("after Free(b[:0]) and Flush: %d allocs, %d frees of class %d, want 1 and 1", c.Allocs, c.Frees, k)
	}
}

// TestSnapshotShowsHeldToken (FRONT-EXCLUSIVE): a snapshot shows each front
// cache's token as it is, so that frontIdle can see one left held: while
// WithFrontCache holds a per-P cache from outside its P, that cache's token is
// taken (tokenOutside), and no other's (the snapshot lists caches by ID, not
// in WithFrontCache's order). Slip: the snapshot leaves Token out
// (always 0), and frontIdle checks nothing.
func TestSnapshotShowsHeldToken(t *testing.T) {
	if portable {
		t.Skip("no per-P caches")
	}
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	var tokens []uint32
	a.WithFrontCache(0, func(*impl.Cache) {
		for _, c := range a.Snapshot().Caches {
			if c.Front {
				tokens = append(tokens, c.Token)
			}
		}
	})
	if held := len(tokens) - len(slices.DeleteFunc(slices.Clone(tokens), func(tok uint32) bool { return tok != 0 })); held != 1 {
		t.Fatalf("front caches' tokens %v while WithFrontCache holds front cache 0, want one held", tokens)
	}
	for _, c := range a.Snapshot().Caches {
		if c.Token != 0 {
			t.Fatalf("cache %d: token %d after WithFrontCache", c.ID, c.Token)
		}
	}
}

// TestFrontFreeDeclinedFillIsNoHit (FREE-INVALID, NO-OVERLAP): when the free
// fast path cannot fill its superblock-cache entry (the superblock is large,
// an orphan's, ...), the entry still holds another superblock's, of the same
// way; it is a hit only for the superblock its key names. The large object's
// free, at offset 0 of its superblock, would otherwise free object 0 of the
// small superblock the entry names, which is live. One P, so that every call
// meets the same per-P cache. Slip: the hit test looks at the key's "mine"
// bit only.
func TestFrontFreeDeclinedFillIsNoHit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 512 * spec.SuperblockSize}) // room for a large object in every way
	must(t, err)
	defer a.Close()
	x, err := a.Alloc(64)
	must(t, err)
	y, err := a.Alloc(64)
	must(t, err)
	must(t, a.Free(y)) // fills the entry of x's superblock: mine
	s := a.Snapshot()
	off := addrOf(x) - s.Base
	if off%spec.SuperblockSize != 0 {
		t.Fatalf("x is not object 0 of its superblock (offset %#x)", off)
	}
	way := int(off/spec.SuperblockSize) % s.Ways
	var large []byte
	for range 2 * s.Ways {
		b, err := a.Alloc(40_000)
		must(t, err)
		if int((addrOf(b)-s.Base)/spec.SuperblockSize)%s.Ways == way {
			large = b
			break
		}
	}
	if large == nil {
		t.Fatal("no large object in the way of x's superblock")
	}
	before := a.Stats().Large
	must(t, a.Free(large))
	if l := a.Stats().Large; l.Frees != before.Frees+1 {
		t.Fatalf("the large object's free freed no large object: %+v, before %+v", l, before)
	}
	if err := a.Free(x); err != nil {
		t.Fatalf("x, live, refused: %v", err)
	}
}

// notMineEntryBeforeWrap leaves cache d a "not mine" entry for superblock i,
// made by two remote frees of c's objects of size bytes at generation
// entryGen; then c releases the superblock, and its generation is fast-forwarded
// to DeadTag-1, the last period before the wrap.
func notMineEntryBeforeWrap(t *testing.T, a *impl.Allocator, size int) (c, d *impl.Cache, i int, entryGen uint32) {
	t.Helper()
	c, _ = a.NewCache()
	d, _ = a.NewCache()
	first := allocN(t, c, size)
	x := allocN(t, c, size)
	i = sbOf(a, x)
	entryGen = genOf(t, a, i)
	must(t, d.Free(first))
	must(t, d.Free(x)) // d's entry: "not mine", this class, this generation
	c.Flush()          // collected, empty, released
	must(t, impl.FastForward(a, i, impl.DeadTag-1))
	return c, d, i, entryGen
}

// TestStaleEntryAfterWrapSameLayout (CACHE-COHERENT, FREE-DOUBLE): an entry is
// current only for the remote set it was filled from. After the generation
// wraps (the set retired, a new one made) and comes back to the entry's, in a
// layout of the same class, so that the new set has as many words as the old,
// a remote free through the entry fails its CAS on the retired words; the
// entry is not current, so the free is judged by the header and succeeds.
// Slip: current() compares the sets' lengths, not their identity: the stale
// entry decides, and a live object's free is refused as a double free.
func TestStaleEntryAfterWrapSameLayout(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, d, i, entryGen := notMineEntryBeforeWrap(t, a, 64)
	for n := 0; genOf(t, a, i) != entryGen; n++ { // real periods across the wrap
		y := allocN(t, c, 64)
		if sbOf(a, y) != i || n == 3 {
			t.Fatalf("period %d after the fast-forward: superblock %d, generation %d", n, sbOf(a, y), genOf(t, a, i))
		}
		must(t, c.Free(y))
		c.Flush()
	}
	var ys [][]byte
	for range 10 {
		ys = append(ys, allocN(t, c, 64)) // class 64 again, at d's entry's generation
	}
	if sbOf(a, ys[0]) != i || genOf(t, a, i) != entryGen {
		t.Fatalf("the superblock was not reused at generation %d", entryGen)
	}
	if err := d.Free(ys[3]); err != nil {
		t.Fatalf("a remote free of a live object through an entry of the retired set: %v", err)
	}
	c.Flush()
	if err := c.Free(ys[3]); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("d's free did not free the object (the owner's Free: %v)", err)
	}
	for j, y := range ys {
		if err := c.Free(y); j != 3 && err != nil {
			t.Fatalf("object %d was live, Free: %v", j, err)
		}
	}
}
