package impl_test

// From an independent mutant hunt: each test names the one-line slip that
// passed the suite before it.

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestClosedCacheKeepsNoEntry (CACHE-COHERENT, LIFECYCLE): Close empties every
// way of the superblock cache, so a free through the closed cache misses and
// says ErrClosed; with one way the only entry is the last one (slip: Close
// clears the ways below wayMask, leaving a "mine" entry that frees locally
// into what is now an orphan).
func TestClosedCacheKeepsNoEntry(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, SuperblockCacheWays: 1})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	x, y := allocN(t, c, 64), allocN(t, c, 64)
	must(t, c.Free(x)) // fills the entry, mine
	must(t, c.Close())
	if err := c.Free(y); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("Free through a closed cache: %v, want ErrClosed", err)
	}
	d, err := a.NewCache()
	must(t, err)
	must(t, d.Free(y)) // y is still live: its orphan takes the free
	d.Flush()
	if s := a.Stats(); s.DoubleFrees != 0 || s.SmallSuperblocks != 0 {
		t.Fatalf("after freeing y: %d double frees, %d small superblocks", s.DoubleFrees, s.SmallSuperblocks)
	}
}

// TestRemoteFreeAfterAllocatorClose (FREE-DOUBLE, LIFECYCLE): after
// Allocator.Close every remote word reads pending, so a remote free through a
// current entry finds its object pending; it must say ErrClosed, not
// ErrDoubleFree (slip: freeRemote asks only whether the cache is closed).
func TestRemoteFreeAfterAllocatorClose(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	c, err := a.NewCache()
	must(t, err)
	d, err := a.NewCache()
	must(t, err)
	x, y := allocN(t, c, 64), allocN(t, c, 64)
	must(t, d.Free(x)) // d's entry for c's superblock, not mine, current
	if err := a.Close(); !errors.Is(err, impl.ErrLeaked) {
		t.Fatalf("Close with y live: %v, want ErrLeaked", err)
	}
	if err := d.Free(y); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("remote Free after Allocator.Close: %v, want ErrClosed", err)
	}
}

// TestRefillTakesCollectedRemoteFree (LIFECYCLE, MEM-ACCOUNT): a refill whose
// current superblock is full drains its stack, and a remote free that drain
// collects into the current superblock is the next object handed out (slip:
// no second look at the current superblock after the drain, so the refill
// files it full and acquires a fresh superblock from the pool: twice the
// memory for one free object).
func TestRefillTakesCollectedRemoteFree(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	k := spec.SizeToClass(4096)
	var objs [][]byte
	for range spec.ClassObjects(k) { // the whole superblock, in one group
		objs = append(objs, allocN(t, c, 4096))
	}
	must(t, d.Free(objs[5])) // remote: pending, announced on c's stack
	b := allocN(t, c, 4096)
	if &b[0] != &objs[5][0] {
		t.Errorf("the refill after a remote free returned %p, want the freed %p", &b[0], &objs[5][0])
	}
	if s := a.Stats(); s.SmallSuperblocks != 1 {
		t.Errorf("%d small superblocks, want 1: the refill took a new one", s.SmallSuperblocks)
	}
}
