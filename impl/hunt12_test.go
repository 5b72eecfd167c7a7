package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a mutant hunt of the partial threshold (LIFECYCLE, partialMin),
// the sparse refill (OOM-REAL) and the limits of the free path (STATS-LAG).

// TestFreeLimitsOffCurrent (STATS-LAG, LIFECYCLE): the local frees into a
// superblock that is not current are published when they reach its limit: on
// the full list the free that makes it partial, on the partial list the free
// that empties it, and never later than the batch of 64. The limits are
// restated here from the rule, free by free, for a class of 4096 objects (a
// sixteenth is 256, past the batch) and one of 256 (a sixteenth is 16): S is
// filled, left for another superblock (an orphan, full) and freed into by its
// cache (adopted back on the first free). Slips: the full list's limit is not
// capped at the batch (fulllimitnocap), nor the partial list's
// (partiallimitnocap), and 64 frees wait unpublished; the full list's limit is
// one free early (fulllimitearly); a partial superblock gets the full list's
// limit, and every free into it publishes (partiallimitfull).
func TestFreeLimitsOffCurrent(t *testing.T) {
	const batch = 64
	for _, tc := range []struct{ size, frees int }{{16, 256 + 2*batch + 10}, {256, 256}} {
		k := spec.SizeToClass(tc.size)
		objects := spec.ClassObjects(k)
		pmin := max(1, objects/16)
		a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		objs := allocObjects(t, c, tc.size, objects)
		s := sbOf(a, objs[0])
		if sbOf(a, objs[objects-1]) != s {
			t.Fatalf("setup: %d objects of %d bytes span two superblocks", objects, tc.size)
		}
		allocN(t, c, tc.size) // S ran out: it is filed full and orphaned
		nfree, local := 0, 0  // S's published free count and its local frees
		for i, b := range objs[:tc.frees] {
			must(t, c.Free(b))
			local++
			limit := objects - nfree // the free that empties it
			if nfree < pmin {
				limit = pmin - nfree // the free that makes it partial
			}
			limit = min(limit, batch)
			if local >= limit {
				nfree, local = nfree+local, 0
			}
			st := sbState(t, a, s)
			if nfree == objects {
				if st.State == impl.SBSmall {
					t.Errorf("%d B: S still small after its last free", tc.size)
				}
				break
			}
			want := "full"
			if nfree >= pmin {
				want = "partial"
			}
			if st.LocalFreed != local || st.NFree != nfree || st.List != want || st.Owner != c.ID() {
				t.Fatalf("%d B, after %d frees into S (partial at %d free): %d published, %d local, filed %q, owner %d; want %d, %d, %q, cache %d",
					tc.size, i+1, pmin, st.NFree, st.LocalFreed, st.List, st.Owner, nfree, local, want, c.ID())
			}
		}
		a.Close() // objects live: it says so
	}
}

// TestRefillTakesCurrentsLocalFrees (MEM-ACCOUNT, CONSERVE): a refill whose
// current superblock has free objects only as local frees not yet published
// (nfree 0, localFreed 5) takes them, and takes no superblock from the pool.
// Slip: nextGroup's early return reads the published count only, finds none
// free, and the refill commits a fresh superblock (nextgroupnfree).
func TestRefillTakesCurrentsLocalFrees(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	objs := fillSuperblocks(t, a, c, 1)[0] // S, current, every object handed out
	s := sbOf(a, objs[0])
	freed := map[uintptr]bool{}
	for _, b := range objs[10:15] {
		must(t, c.Free(b))
		freed[addrOf(b)] = true
	}
	if st := sbState(t, a, s); !st.Current || st.LocalFreed != 5 {
		t.Fatalf("setup: S current %v with %d local frees, want current with 5", st.Current, st.LocalFreed)
	}
	before := a.Stats().SmallSuperblocks
	for i := range 5 {
		b := allocN(t, c, pSize)
		if !freed[addrOf(b)] {
			t.Fatalf("allocation %d returned %#x in superblock %d, not one of the 5 objects free in the current superblock %d", i, addrOf(b), sbOf(a, b), s)
		}
	}
	if after := a.Stats().SmallSuperblocks; after != before {
		t.Fatalf("%d small superblocks after the refill, had %d: it left S's free objects for the pool", after, before)
	}
}

// TestSparseRefillKeepsHeldGroups (LIFECYCLE, OOM-REAL): with the reservation
// used up, a refill that finds what it needs among the cache's own sparse
// superblocks (fewer than a sixteenth free) takes it without flushing: the
// flush that gives back every class's held group and walks every superblock
// comes only before the refill gives up, not on every refill of a full
// reservation. Two ways the free object of S (filed full when the refill
// moved to a partial superblock P) can wait: a local free (S stays the
// cache's, ownerFreed: Cache.sparse takes it), and a remote free the owner
// collected (S is orphaned by the acquisition and adopted back). The held
// group of another class shows a flush: its 31 objects would be debited.
// Slips: the refill looks at its sparse superblocks only after the flush
// (sparseafterflush); acquire orphans the cache's full superblocks only after
// looking for an orphan to adopt, so its own are found only after a flush
// (orphanfullafteradopt).
func TestSparseRefillKeepsHeldGroups(t *testing.T) {
	for _, remote := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 3 * spec.SuperblockSize, Retain: -1})
		must(t, err)
		c, _ := a.NewCache()
		e, _ := a.NewCache()
		j := spec.SizeToClass(64)
		allocN(t, c, 64) // J: a held group of 31 objects of class j
		p := fillSuperblocks(t, a, c, 1)[0]
		s := allocObjects(t, c, pSize, pObjects) // P orphaned, S from the pool
		for _, b := range p[:pMin] {
			must(t, c.Free(b)) // adopts P back: partial
		}
		allocN(t, c, pSize) // S ran out: P current, S filed full
		if st := sbState(t, a, sbOf(a, s[0])); st.List != "full" || st.Owner != c.ID() {
			t.Fatalf("setup: S filed %q, owner %d; want cache %d's, full", st.List, st.Owner, c.ID())
		}
		if remote {
			must(t, e.Free(s[7]))
		} else {
			must(t, c.Free(s[7]))
		}
		allocObjects(t, c, pSize, pMin-1) // P runs out
		held := a.Stats().Classes[j].Allocs
		b := allocN(t, c, pSize)
		if addrOf(b) != addrOf(s[7]) {
			t.Fatalf("remote %v: the refill at a full reservation returned %#x, want S's free object %#x", remote, addrOf(b), addrOf(s[7]))
		}
		if got := a.Stats().Classes[j].Allocs; got != held {
			t.Errorf("remote %v: class %d's Allocs went from %d to %d: the refill flushed, though one of its own superblocks had a free object", remote, j, held, got)
		}
		a.Close() // objects live: it says so
	}
}
