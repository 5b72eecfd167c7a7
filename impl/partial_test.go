package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// The partial threshold (LIFECYCLE, OOM-REAL): an owned superblock is partial,
// where a refill looks, once a sixteenth of its objects are free; with fewer
// it waits on the full list, and is taken only when nothing outside (a partial
// orphan, the pool, any orphan with a free object) can serve. The class used
// here, 256 bytes, has 256 objects a superblock: 16 free make it partial. The
// threshold is restated here from the rule, never read from impl.

const (
	pSize    = 256
	pObjects = 256
	pMin     = pObjects / 16
)

// fillSuperblocks allocates n whole superblocks of pSize bytes through c, the
// objects of each in order.
func fillSuperblocks(t *testing.T, a *impl.Allocator, c *impl.Cache, n int) [][][]byte {
	t.Helper()
	if spec.ClassObjects(spec.SizeToClass(pSize)) != pObjects {
		t.Fatalf("class of %d bytes has %d objects, want %d", pSize, spec.ClassObjects(spec.SizeToClass(pSize)), pObjects)
	}
	sbs := make([][][]byte, n)
	for i := range sbs {
		sbs[i] = allocObjects(t, c, pSize, pObjects)
		for _, b := range sbs[i][1:] {
			if sbOf(a, b) != sbOf(a, sbs[i][0]) {
				t.Fatalf("superblock %d's objects span two superblocks", i)
			}
		}
	}
	return sbs
}

// TestPartialAtThreshold (LIFECYCLE): a full superblock its owner frees into
// stays on the full list until exactly a sixteenth of its objects are free,
// and is partial from that free on. Slip: partial takes one more
// (partialminexcl).
func TestPartialAtThreshold(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	sbs := fillSuperblocks(t, a, c, 2) // S, the first, orphaned full as the second was acquired
	s := sbOf(a, sbs[0][0])
	for i, b := range sbs[0][:pMin-1] { // the first adopts S back
		must(t, c.Free(b))
		if st := sbState(t, a, s); st.List != "full" {
			t.Fatalf("after %d frees S is filed %q, want full (partial at %d)", i+1, st.List, pMin)
		}
	}
	must(t, c.Free(sbs[0][pMin-1]))
	if st := sbState(t, a, s); st.List != "partial" || st.NFree+st.LocalFreed != pMin {
		t.Fatalf("after %d frees S is filed %q with %d+%d free, want partial with %d", pMin, st.List, st.NFree, st.LocalFreed, pMin)
	}
}

// TestSparseWaitsWhilePoolServes (LIFECYCLE): a refill whose current
// superblock ran out takes a fresh superblock from the pool rather than one of
// its own with fewer than a sixteenth of its objects free, and one with a
// sixteenth free rather than the pool. Slip: every superblock with a free
// object is partial (partialminone).
func TestSparseWaitsWhilePoolServes(t *testing.T) {
	for _, free := range []int{pMin - 1, pMin} {
		a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		sbs := fillSuperblocks(t, a, c, 2) // the second is current, with nothing free
		s := sbOf(a, sbs[0][0])
		for _, b := range sbs[0][:free] {
			must(t, c.Free(b))
		}
		before := a.Stats().SmallSuperblocks
		var got []int
		for range free {
			got = append(got, sbOf(a, allocN(t, c, pSize)))
		}
		after := a.Stats().SmallSuperblocks
		for i, g := range got {
			switch {
			case free < pMin && g == s:
				t.Errorf("%d free: allocation %d took S, with %d of %d objects free, while the pool had room", free, i, free, pObjects)
			case free >= pMin && g != s:
				t.Errorf("%d free: allocation %d went to superblock %d, want S (%d), partial", free, i, g, s)
			}
		}
		if free < pMin && after != before+1 || free >= pMin && after != before {
			t.Errorf("%d free in S: %d small superblocks after the refills, had %d", free, after, before)
		}
		a.Close() // objects live: it says so
	}
}

// TestSparseServesAtOOM (OOM-REAL): with the reservation full, a refill takes
// one of its own superblocks with fewer than a sixteenth of its objects free,
// and every free object of the class is handed out before ErrOutOfMemory.
// Slip: the refill never takes a sparse superblock of its own
// (nosparserefill).
func TestSparseServesAtOOM(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 3 * spec.SuperblockSize, Retain: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	sbs := fillSuperblocks(t, a, c, 3)
	if _, err := c.Alloc(pSize); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("Alloc with the reservation full: %v, want ErrOutOfMemory", err)
	}
	freed := map[uintptr]bool{}
	for _, b := range []([]byte){sbs[0][3], sbs[0][200], sbs[1][7], sbs[2][255]} {
		must(t, c.Free(b))
		freed[addrOf(b)] = true
	}
	for i, n := 0, len(freed); i < n; i++ {
		b, err := c.Alloc(pSize)
		if err != nil {
			t.Fatalf("Alloc %d of %d with objects of the class free: %v (OOM-REAL)", i, n, err)
		}
		if !freed[addrOf(b)] {
			t.Fatalf("Alloc returned %#x, which was not free", addrOf(b))
		}
		delete(freed, addrOf(b))
	}
	if _, err := c.Alloc(pSize); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("Alloc with every object live: %v, want ErrOutOfMemory", err)
	}
}

// TestSparseOrphanServesAtOOM (OOM-REAL): with the reservation full, a refill
// adopts an orphan with fewer than a sixteenth of its objects free. Slip:
// acquire adopts only orphans with a sixteenth free (nosparseadopt).
func TestSparseOrphanServesAtOOM(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 3 * spec.SuperblockSize, Retain: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	sbs := fillSuperblocks(t, a, c, 3)
	must(t, c.Free(sbs[1][100]))
	must(t, c.Free(sbs[1][101]))
	must(t, c.Close()) // every superblock an orphan, one with 2 free
	d, _ := a.NewCache()
	defer d.Close()
	for i := range 2 {
		b, err := d.Alloc(pSize)
		if err != nil {
			t.Fatalf("Alloc %d with 2 objects free in an orphan: %v (OOM-REAL)", i, err)
		}
		if sbOf(a, b) != sbOf(a, sbs[1][0]) {
			t.Fatalf("Alloc returned an object of superblock %d, want the orphan %d", sbOf(a, b), sbOf(a, sbs[1][0]))
		}
	}
	if _, err := d.Alloc(pSize); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("Alloc with every object live: %v, want ErrOutOfMemory", err)
	}
}

// TestOrphanFullKeepsUnpublishedFrees (STATS-EXACT, LIFECYCLE): a superblock
// on its owner's full list can hold local frees not yet published (fewer than
// a sixteenth of it free: its limit is the free that makes it partial). When
// the owner acquires another superblock of the class (orphanFull), those are
// frees into it: it stays the owner's, and after Flush Stats counts them; and
// its limit is set anew, so it is partial at the free that brings it to a
// sixteenth, acquires between or not. S here is filed full when the refill
// moves on to a partial superblock, without a free of its owner's (ownerFreed
// false), and then freed into. Slips: orphanFull orphans it with its frees
// unpublished, and no Flush ever publishes them (orphanfullunfolded);
// orphanFull publishes them but leaves the limit counting from before, and
// every acquire restarts the count (orphanfulllimit).
func TestOrphanFullKeepsUnpublishedFrees(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	p := fillSuperblocks(t, a, c, 1)[0] // P, orphaned full as S is acquired
	first := allocN(t, c, pSize)        // S, from the pool
	sObjs := append([][]byte{first}, allocObjects(t, c, pSize, pObjects-1)...)
	s := sbOf(a, first)
	for _, b := range sObjs {
		if sbOf(a, b) != s {
			t.Fatalf("setup: S's objects span superblocks")
		}
	}
	for _, b := range p[:pMin] {
		must(t, c.Free(b)) // adopts P back, partial
	}
	live := 2*pObjects - pMin
	allocN(t, c, pSize) // S ran out: the refill takes P, files S full
	live++
	if st := sbState(t, a, s); st.List != "full" || st.Owner != c.ID() {
		t.Fatalf("setup: S filed %q, owner %d, want full, cache %d's", st.List, st.Owner, c.ID())
	}
	for _, b := range sObjs[:5] {
		must(t, c.Free(b))
		live--
	}
	if st := sbState(t, a, s); st.List != "full" || st.LocalFreed != 5 {
		t.Fatalf("setup: S filed %q with %d unpublished frees, want full with 5", st.List, st.LocalFreed)
	}
	allocObjects(t, c, pSize, pMin) // P runs out: acquire, orphanFull
	live += pMin
	if st := sbState(t, a, s); st.Owner != c.ID() || st.List != "full" {
		t.Fatalf("S owner %d filed %q after the acquire, want cache %d's, full (its owner freed into it)", st.Owner, st.List, c.ID())
	}
	c.Flush()
	k := spec.SizeToClass(pSize)
	if cs := a.Stats().Classes[k]; cs.Allocs-cs.Frees != uint64(live) {
		t.Fatalf("after Flush Stats says %d allocs, %d frees (%d live), want %d live (STATS-EXACT)", cs.Allocs, cs.Frees, cs.Allocs-cs.Frees, live)
	}
	// Its limit counts from the fold: the free that brings it to a
	// sixteenth free makes it partial, as if no acquire had come between,
	// and further acquires (each a refill of another superblock) do not
	// start the count again.
	for i, b := range sObjs[5 : pMin-1] {
		must(t, c.Free(b))
		if i%3 == 0 {
			allocObjects(t, c, pSize, pObjects) // a superblock more: orphanFull again
		}
		if st := sbState(t, a, s); st.List != "full" {
			t.Fatalf("S filed %q with %d free, want full (partial at %d)", st.List, st.NFree+st.LocalFreed, pMin)
		}
	}
	must(t, c.Free(sObjs[pMin-1]))
	if st := sbState(t, a, s); st.List != "partial" || st.Owner != c.ID() {
		t.Fatalf("S filed %q, owner %d, with %d free, want cache %d's, partial (LIFECYCLE)", st.List, st.Owner, st.NFree+st.LocalFreed, c.ID())
	}
}

// TestOrphanPartialBeforePool (LIFECYCLE): a refill adopts an orphan with a
// sixteenth of its objects free before it takes a superblock from the pool,
// and takes the pool's before an orphan with fewer. Slips: the orphan must
// have one more than a sixteenth free; orphans with any free object are
// adopted before the pool.
func TestOrphanPartialBeforePool(t *testing.T) {
	for _, free := range []int{pMin - 1, pMin} {
		a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		sbs := fillSuperblocks(t, a, c, 2)
		s := sbOf(a, sbs[0][0])
		for _, b := range sbs[0][:free] {
			must(t, c.Free(b)) // the first adopts S back: c's again
		}
		must(t, c.Close()) // S an orphan with free objects free
		d, _ := a.NewCache()
		before := a.Stats().SmallSuperblocks
		got := sbOf(a, allocN(t, d, pSize))
		after := a.Stats().SmallSuperblocks
		switch {
		case free >= pMin && (got != s || after != before):
			t.Errorf("%d free in orphan S: the refill took superblock %d (S is %d), %d small superblocks (had %d); want S adopted", free, got, s, after, before)
		case free < pMin && (got == s || after != before+1):
			t.Errorf("%d free in orphan S: the refill took superblock %d (S is %d), %d small superblocks (had %d); want one from the pool", free, got, s, after, before)
		}
		a.Close() // objects live: it says so
	}
}

// TestZeroDirtyEveryClassExact (ZEROED, INTEGRITY): for every class, an
// object handed out again over dirty memory reads zero over its whole
// capacity, and its neighbours, live, keep every byte: zero's overlapping
// stores cover [p, p+size) and nothing past it. Every other object of a
// superblock is freed and allocated again, so each new object lies between
// two live ones.
func TestZeroDirtyEveryClassExact(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 128 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	for k := range spec.NumClasses {
		size := spec.ClassSize(k)
		n := min(spec.ClassObjects(k), 64)
		objs := allocObjects(t, c, size, n)
		for _, b := range objs {
			b = b[:cap(b)]
			for i := range b {
				b[i] = 0xAA
			}
		}
		for i := 1; i < n; i += 2 {
			must(t, c.Free(objs[i]))
		}
		for i := 1; i < n; i += 2 {
			b := allocN(t, c, size)
			b = b[:cap(b)]
			for j, x := range b {
				if x != 0 {
					t.Fatalf("class %d (%d B): byte %d of a new object reads %#x, want 0", k, size, j, x)
				}
			}
		}
		for i := 0; i < n; i += 2 {
			b := objs[i][:cap(objs[i])]
			for j, x := range b {
				if x != 0xAA {
					t.Fatalf("class %d (%d B): byte %d of a live neighbour reads %#x, want 0xaa", k, size, j, x)
				}
			}
		}
		c.Flush()
	}
}

// TestSnapshotShowsStaleFreeWord (CACHE-COHERENT): a mine entry keeps a
// pointer to its superblock's free bitmap; the snapshot compares it with the
// header's, so that invariants.coherent sees an entry whose bitmap is not the
// superblock's (a fill that kept an old period's). Slip: the snapshot says
// SameFree for any entry that has a bitmap.
func TestSnapshotShowsStaleFreeWord(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	x := allocN(t, c, pSize)
	y := allocN(t, c, pSize)
	must(t, c.Free(y)) // fills c's mine entry for the superblock
	s := sbOf(a, x)
	entryOf := func() impl.Entry { return snapEntry(t, a, c, s) }
	if e := entryOf(); !e.Mine || !e.SameFree {
		t.Fatalf("setup: entry %+v, want mine with the header's free bitmap", e)
	}
	if !impl.StaleFreeWord(c, s) {
		t.Fatal("setup: no mine entry to make stale")
	}
	if e := entryOf(); e.SameFree {
		t.Fatalf("an entry pointing at another free bitmap shows SameFree: %+v", e)
	}
}
