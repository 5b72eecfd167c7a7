//go:build refalloc_yield

package impl_test

// This file sorts before hunt12_test.go on purpose: under a mutant whose
// refill goes round for good (sparseempty, adoptemptyorphan), loopGuard fails
// a test here before TestSparseRefillKeepsHeldGroups, which has no guard
// outside the yield builds, hangs.

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// sparseAtFullReservation makes an Allocator of two superblocks (closed when
// t ends) and a cache c that owns both: S, its current superblock, every
// object handed out, which it has freed into since it took it (ownerFreed),
// and T, an orphan with every object handed out. s are S's objects. A refill
// that goes round for good fails t (loopGuard).
func sparseAtFullReservation(t *testing.T) (a *impl.Allocator, c *impl.Cache, s [][]byte) {
	t.Helper()
	g := new(loopGuard)
	impl.SetScheduler(g)
	defer impl.SetScheduler(nil)
	alloc := func() []byte {
		t.Helper()
		b, err := g.alloc(c)
		must(t, err)
		return b
	}
	a, err := impl.New(impl.Options{Reserve: 2 * spec.SuperblockSize, Retain: -1})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	c, _ = a.NewCache()
	for range pObjects {
		s = append(s, alloc())
	}
	for range pObjects {
		alloc() // S orphaned full at the first, T from the pool
	}
	must(t, c.Free(s[0])) // adopts S back: full, one local free
	if b := alloc(); addrOf(b) != addrOf(s[0]) {
		// T orphaned full; S, sparse, is the only one with a free object
		t.Fatalf("setup: the refill at a full reservation returned %#x, want S's free object %#x", addrOf(b), addrOf(s[0]))
	}
	if st := sbState(t, a, sbOf(a, s[0])); !st.Current || st.Owner != c.ID() {
		t.Fatalf("setup: S current %v, owner %d; want cache %d's current", st.Current, st.Owner, c.ID())
	}
	return a, c, s
}

// TestSparseAfterOOMFlush (OOM-REAL): a refill at a full reservation finds
// nothing (S, its sparse superblock, has no free object yet: a remote free
// into it lands while the refill is about to acquire) and flushes, which
// collects that remote free; the second round must look at its own sparse
// superblocks again, and hand the object out instead of ErrOutOfMemory.
// Slip: the refill looks at them only before the flush (sparseonlyfirst).
func TestSparseAfterOOMFlush(t *testing.T) {
	a, c, s := sparseAtFullReservation(t)
	d, _ := a.NewCache()
	var b []byte
	err := during(t, newPause(impl.YieldRefillAcquire), func() (err error) {
		b, err = c.Alloc(pSize)
		return err
	}, func() {
		must(t, d.Free(s[5])) // remote: pending in S, announced to c
	})
	if err != nil {
		t.Fatalf("Alloc with S's object %#x freed by another cache: %v (OOM-REAL)", addrOf(s[5]), err)
	}
	if addrOf(b) != addrOf(s[5]) {
		t.Fatalf("Alloc returned %#x, want S's free object %#x", addrOf(b), addrOf(s[5]))
	}
}

// refillLoops is what loopGuard panics with.
var refillLoops = errors.New("a refill went round more than 100 times")

// loopGuard is an impl.Scheduler that panics, with refillLoops, when one
// call passes YieldRefillAcquire more than 100 times: a refill goes round
// twice at most (the flush before ErrOutOfMemory, OOM-REAL), and one that
// takes a superblock without a free object goes round for good.
type loopGuard struct{ n atomic.Int32 }

func (g *loopGuard) Yield(point string) {
	if point == impl.YieldRefillAcquire && g.n.Add(1) > 100 {
		panic(refillLoops)
	}
}

func (g *loopGuard) Bucket() uint32 { return 0 }

// alloc allocates pSize bytes through c, with g the scheduler, and returns
// refillLoops if the refill went round for good.
func (g *loopGuard) alloc(c *impl.Cache) (b []byte, err error) {
	g.n.Store(0)
	defer func() {
		if r := recover(); r != nil {
			if r != refillLoops {
				panic(r)
			}
			err = refillLoops
		}
	}()
	return c.Alloc(pSize)
}

// TestRefillNeverTakesFullSuperblock (OOM-REAL): at a full reservation where
// the cache's sparse superblock S and the orphan T have no free object, a
// refill answers ErrOutOfMemory; it takes neither, since taking a superblock
// with no free object gives no group, and the refill goes round again for
// good. Slips: Cache.sparse takes one of its own superblocks with no free
// object (sparseempty); acquire adopts an orphan with no free object when
// nothing else serves (adoptemptyorphan).
func TestRefillNeverTakesFullSuperblock(t *testing.T) {
	_, c, _ := sparseAtFullReservation(t)
	g := new(loopGuard)
	impl.SetScheduler(g)
	defer impl.SetScheduler(nil)
	if _, err := g.alloc(c); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("Alloc with no object of the class free: %v, want ErrOutOfMemory", err)
	}
}
