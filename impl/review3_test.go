package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDefaultWaysHoldLiveSetOf128 (CACHE-COHERENT: 128 ways by default): frees
// that go round 128 consecutive superblocks, again and again, all hit the
// superblock cache after the first round. With 64 ways every one of them
// would evict another's entry and miss.
func TestDefaultWaysHoldLiveSetOf128(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	per := spec.ClassObjects(spec.SizeToClass(1000))
	const sbs = 128
	objs := make([][]byte, sbs*per)
	for i := range objs {
		objs[i], err = c.Alloc(1000)
		must(t, err)
	}
	if s := a.Stats(); s.SmallSuperblocks != sbs {
		t.Fatalf("%d small superblocks, want %d", s.SmallSuperblocks, sbs)
	}
	round := func(r int) {
		for s := range sbs {
			must(t, c.Free(objs[s*per+r]))
		}
	}
	round(0)
	c.Flush()
	before := a.Stats().SuperblockCacheMisses
	for r := 1; r < 4; r++ {
		round(r)
	}
	c.Flush()
	if m := a.Stats().SuperblockCacheMisses - before; m != 0 {
		t.Fatalf("%d superblock cache misses freeing round %d superblocks whose entries were filled, want 0 (the default has 128 ways)", m, sbs)
	}
	for s := range sbs {
		for r := 4; r < per; r++ {
			must(t, c.Free(objs[s*per+r]))
		}
	}
	must(t, c.Close())
}

// TestRefillReusesJustTakenGroup (MEM-ACCOUNT, nextGroup): a refill takes a
// group handed out before, with a free object, ahead of a fresh one, even when
// it is the group just taken (the one before the cursor): freeing one object
// of the first group and allocating past the held group gives that object
// back instead of touching the next group's fresh pages.
func TestRefillReusesJustTakenGroup(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	objs := make([][]byte, 32)
	for i := range objs { // the first group of a fresh superblock of 8-byte objects
		objs[i], err = c.Alloc(8)
		must(t, err)
	}
	must(t, c.Free(objs[0]))
	b, err := c.Alloc(8) // the held group is empty: a refill
	must(t, err)
	if addrOf(b) != addrOf(objs[0]) {
		t.Fatalf("the refill after freeing one object of the only dirty group returned %#x, want the freed %#x (a fresh group's pages were touched)", addrOf(b), addrOf(objs[0]))
	}
	objs[0] = b
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}

// TestFreshGroupsInAddressOrder (MEM-ACCOUNT, nextGroup): with no group handed
// out before holding a free object, a refill takes the first fresh group, the
// one right after those handed out: a superblock's pages are touched in order,
// from its start, as far as its live set needs and no further.
func TestFreshGroupsInAddressOrder(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	objs := make([][]byte, 4*32)
	for i := range objs {
		objs[i], err = c.Alloc(8)
		must(t, err)
		if i > 0 && addrOf(objs[i]) != addrOf(objs[0])+uintptr(8*i) {
			t.Fatalf("object %d of a fresh superblock at %#x, want %#x (the groups in address order)", i, addrOf(objs[i]), addrOf(objs[0])+uintptr(8*i))
		}
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}

// TestOwnerFreedClearedOnAcquire (LIFECYCLE, ownerFreed): ownerFreed says the
// current owner freed into the superblock since it took it, so taking one from
// the pool or adopting an orphan at refill clears it. A superblock whose last
// owner freed into it (a previous small life, or the life before Close) and
// that its new owner only fills is orphaned as any other full superblock when
// the new owner acquires the next one.
func TestOwnerFreedClearedOnAcquire(t *testing.T) {
	per := spec.ClassObjects(spec.SizeToClass(1000))
	fill := func(t *testing.T, c *impl.Cache, n int) [][]byte { return allocObjects(t, c, 1000, n) }
	t.Run("pool", func(t *testing.T) {
		a, err := impl.New(impl.Options{Reserve: 64 << 20})
		must(t, err)
		defer a.Close()
		old, _ := a.NewCache()
		for _, b := range fill(t, old, per) { // its owner frees into it: ownerFreed
			must(t, old.Free(b))
		}
		must(t, old.Close()) // empty: back to the pool
		c, _ := a.NewCache()
		objs := fill(t, c, per+1) // the same superblock, full, then a second
		if s := a.Stats(); s.OrphanedSuperblocks != 1 {
			t.Fatalf("%d orphaned superblocks after a cache filled one from the pool and acquired the next, want 1", s.OrphanedSuperblocks)
		}
		for _, b := range objs {
			must(t, c.Free(b))
		}
		must(t, c.Close())
	})
	t.Run("orphan", func(t *testing.T) {
		a, err := impl.New(impl.Options{Reserve: 64 << 20})
		must(t, err)
		defer a.Close()
		old, _ := a.NewCache()
		objs := fill(t, old, per)
		must(t, old.Free(objs[0])) // its owner frees into it: ownerFreed at Close
		must(t, old.Close())       // an orphan with one free object
		c, _ := a.NewCache()
		objs = append(objs[1:], fill(t, c, 2)...) // adopts it at refill, fills it, acquires the next
		if s := a.Stats(); s.OrphanedSuperblocks != 1 {
			t.Fatalf("%d orphaned superblocks after a cache adopted an orphan at refill, filled it and acquired the next, want 1", s.OrphanedSuperblocks)
		}
		for _, b := range objs {
			must(t, c.Free(b))
		}
		must(t, c.Close())
	})
}

// TestOrphanFullDropsOwnersEntry (CACHE-COHERENT, orphanFull): the owner's
// superblock cache may hold a "mine" entry for a full superblock it never
// freed into (a bad free filled it); orphaning the superblock must drop the
// entry, or the old owner's next free into it hits and frees locally into an
// orphan instead of adopting it.
func TestOrphanFullDropsOwnersEntry(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	per := spec.ClassObjects(spec.SizeToClass(1000))
	objs := make([][]byte, per)
	for i := range objs { // one superblock, full
		objs[i], err = c.Alloc(1000)
		must(t, err)
	}
	if err := c.Free(objs[0][8:]); !errors.Is(err, impl.ErrInvalidPointer) { // fills c's entry
		t.Fatalf("free inside an object: %v, want ErrInvalidPointer", err)
	}
	b, err := c.Alloc(1000) // acquires a second superblock: the full one is orphaned
	must(t, err)
	if s := a.Stats(); s.OrphanedSuperblocks != 1 {
		t.Fatalf("%d orphaned superblocks, want 1", s.OrphanedSuperblocks)
	}
	must(t, c.Free(objs[0])) // into the orphan: adopts it
	if s := a.Stats(); s.OrphanedSuperblocks != 0 {
		t.Fatalf("the old owner freed into its orphaned superblock: %d orphaned superblocks, want 0 (adopted on free)", s.OrphanedSuperblocks)
	}
	for _, o := range append(objs[1:], b) {
		must(t, c.Free(o))
	}
	must(t, c.Close())
}
