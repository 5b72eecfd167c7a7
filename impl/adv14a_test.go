package impl_test

// Tests from the adv14a round: each kills a one-line slip of an earlier blind
// adversary round that only a fuzz-driven or a slow invariants test caught.

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReleasedSmallSuperblockDecays (MEM-ACCOUNT, Options.Decay): a small
// superblock released to the pool decays like any pooled superblock. Retain
// none, Decay an hour on a test clock: a large object freed at t0 has waited
// Decay by t0+2h, when the release of an emptied small superblock walks the
// pool; the walk returns the large object's superblock and keeps the small
// one, young, setting the next deadline from it; at t0+4h the timer returns
// it. Slip (adv14a 15, releasepooledfirst): releaseLocked does the decay
// bookkeeping (pooled) before it puts the superblock in the pool's runs, so
// the walk does not see it, finds nothing young, and sets no deadline: the
// timer then never walks, and the superblock stays committed for good.
func TestReleasedSmallSuperblockDecays(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -1, Decay: time.Hour})
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	small := allocN(t, c, 64) // a small superblock of its own, before the large one
	small[0] = 1
	must(t, c.Free(allocSBs(t, c, 1))) // t0: pooled, arms the timer
	if h := held(a); h != sbBytes {
		t.Fatalf("setup: the pool holds %d bytes committed, want the large object's superblock", h)
	}
	clock += int64(2 * time.Hour)
	must(t, c.Free(small))
	c.Flush() // t0+2h: releases the emptied small superblock, walks the pool
	if s := a.Stats(); s.SmallSuperblocks != 0 || s.Committed != sbBytes {
		t.Fatalf("after the release at t0+2h: %d small superblocks, Committed %d; want 0, and only the small superblock (%d) committed",
			s.SmallSuperblocks, s.Committed, sbBytes)
	}
	clock += int64(2 * time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending while the pool holds a dirty superblock past Retain")
	}
	if s := a.Stats(); s.Committed != 0 {
		t.Fatalf("t0+4h, the released small superblock pooled 2h with Decay 1h: Committed %d, want 0", s.Committed)
	}
}

// TestQuarantinedLargeLeavesInUse (MEM-ACCOUNT, GUARD-FAULT's accounting): a
// quarantined superblock is neither in use nor pooled. In guard mode a large
// object of three superblocks is allocated beside one of one superblock, and
// freed into the quarantine: LargeSuperblocks and InUse then count only the
// one left, exactly. Slip (adv14a 08, quarlargecount): freeLargeLocked's
// quarantine path does not take the object's superblocks off the large count,
// and they stay in use for good.
func TestQuarantinedLargeLeavesInUse(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	keep := allocSBs(t, c, 1)
	b := allocSBs(t, c, 3)
	if s := a.Stats(); s.LargeSuperblocks != 4 || s.InUse != 4*sbBytes {
		t.Fatalf("setup: LargeSuperblocks %d, InUse %d; want 4 superblocks (%d bytes)", s.LargeSuperblocks, s.InUse, 4*sbBytes)
	}
	must(t, c.Free(b))
	s := a.Stats()
	if s.Guard.Quarantined != 1 || s.Guard.QuarantinedBytes != 3*sbBytes {
		t.Fatalf("guard stats %+v: want the 3-superblock object quarantined", s.Guard)
	}
	if s.LargeSuperblocks != 1 || s.InUse != sbBytes {
		t.Errorf("a large object of 3 superblocks quarantined beside a live one of 1: LargeSuperblocks %d, InUse %d; want 1 superblock (%d bytes)",
			s.LargeSuperblocks, s.InUse, sbBytes)
	}
	must(t, c.Free(keep))
	if s := a.Stats(); s.LargeSuperblocks != 0 || s.InUse != 0 {
		t.Errorf("every large object freed: LargeSuperblocks %d, InUse %d; want 0", s.LargeSuperblocks, s.InUse)
	}
}

// TestReallocLargeToMaxSmallMoves (ZEROED: a large object stays in place only
// when it stays large): a large object Realloc'ed to exactly spec.MaxSmall
// bytes becomes a small object of the largest class, so it moves, its
// capacity MaxSmall, and its superblocks go back to the pool; one Realloc'ed
// to MaxSmall+1 stays large, in place. Slip (adv14a 11, resizeatmaxsmall):
// resize takes n < MaxSmall for small, and a large object shrunk to MaxSmall
// stays large in place, its capacity a page count.
func TestReallocLargeToMaxSmallMoves(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	for _, tc := range []struct {
		n     int
		small bool
	}{{spec.MaxSmall, true}, {spec.MaxSmall + 1, false}} {
		b := allocSBs(t, c, 2)
		b[0], b[spec.MaxSmall-1] = 7, 9
		r, err := c.Realloc(b, tc.n)
		must(t, err)
		if len(r) != tc.n || r[0] != 7 || r[spec.MaxSmall-1] != 9 {
			t.Fatalf("Realloc of a large object to %d: len %d, first and last kept bytes %d, %d; want %d, 7, 9",
				tc.n, len(r), r[0], r[spec.MaxSmall-1], tc.n)
		}
		s := a.Stats()
		if tc.small {
			if addrOf(r) == addrOf(b) || cap(r) != spec.MaxSmall || s.Large.LiveObjects != 0 || s.LargeSuperblocks != 0 {
				t.Errorf("Realloc of a large object to MaxSmall (%d): moved %v, cap %d, %d large objects live on %d superblocks; want moved to a small object of cap %d, no large object",
					tc.n, addrOf(r) != addrOf(b), cap(r), s.Large.LiveObjects, s.LargeSuperblocks, spec.MaxSmall)
			}
		} else if addrOf(r) != addrOf(b) || s.Large.LiveObjects != 1 || s.LargeSuperblocks != 1 {
			t.Errorf("Realloc of a large object to MaxSmall+1 (%d): in place %v, %d large objects live on %d superblocks; want it in place, large, on 1",
				tc.n, addrOf(r) == addrOf(b), s.Large.LiveObjects, s.LargeSuperblocks)
		}
		must(t, c.Free(r))
	}
}

// TestExplainNotPastQuarantinedRun (GUARD-FAULT, the report names the object
// whose superblocks hold the address): a large object of two superblocks is
// quarantined, a live one of one superblock right after it. ExplainAddr of an
// address in the quarantined object's last superblock names it; of an
// address in the next superblock, the live object's, it finds nothing.
// Slip (adv14a 26, explainpastrun): ExplainAddr's walk of the quarantine
// takes i <= idx+n, and blames the superblock just past a quarantined object
// on it.
func TestExplainNotPastQuarantinedRun(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	x := allocSBs(t, c, 2)
	y := allocSBs(t, c, 1)
	if sbOf(a, y) != sbOf(a, x)+2 {
		t.Fatalf("setup: the second large object is at superblock %d, not right after the first (%d, 2 superblocks)", sbOf(a, y), sbOf(a, x))
	}
	must(t, c.Free(x))
	last := addrOf(x) + 2*sbBytes - 1
	if e, ok := a.ExplainAddr(last); !ok || e.Object != addrOf(x) || e.Offset != 2*sbBytes-1 || e.Released {
		t.Errorf("ExplainAddr of the last byte of a quarantined object: %+v %v, want object %#x, offset %d", e, ok, addrOf(x), 2*sbBytes-1)
	}
	for _, addr := range []uintptr{addrOf(y), addrOf(y) + sbBytes - 1} {
		if e, ok := a.ExplainAddr(addr); ok {
			t.Errorf("ExplainAddr of %#x, in the live object right after a quarantined one: %v, want nothing", addr, e)
		}
	}
	must(t, c.Free(y))
}

// TestDebugShrinkPoisonsWholeTail (DEBUG-POISON): in debug mode a large
// object shrunk in place poisons every superblock it gives back to the pool,
// as a free does. A large object of three superblocks, written all over, is
// Realloc'ed to one superblock: the two past it hold the poison, and a large
// object of two allocated next (it takes them) is handed out without a
// write-after-free report, zeroed. Slip (adv14a 05, shrinkpoisonshort):
// resizeRun poisons old-m-1 superblocks of the old-m it pools; the last one
// keeps the object's bytes, and its next allocation reports a write after
// free that never happened.
func TestDebugShrinkPoisonsWholeTail(t *testing.T) {
	var reports []error
	a, c := newAllocCache(t, impl.Options{Reserve: 32 * sbBytes, Debug: true, Retain: 16 * sbBytes, Decay: time.Hour,
		OnError: func(err error) { reports = append(reports, err) }})
	b := allocSBs(t, c, 3)
	fillWith(b, 0x11)
	r, err := c.Realloc(b, sbBytes)
	must(t, err)
	if addrOf(r) != addrOf(b) || cap(r) != sbBytes {
		t.Fatalf("setup: a large object of 3 superblocks Realloc'ed to one moved (%v) or has cap %d", addrOf(r) != addrOf(b), cap(r))
	}
	for i, x := range b[sbBytes:cap(b)] {
		if x != impl.Poison {
			t.Fatalf("the superblocks a shrink in place gave back hold %#x at byte %d past the new end, not the poison", x, i)
		}
	}
	z, err := c.Alloc(2 * sbBytes)
	must(t, err)
	if len(reports) != 0 || a.Stats().WriteAfterFrees != 0 {
		t.Fatalf("no write after free, yet the allocation after a shrink in place reported: %v", reports)
	}
	for i, x := range z[:cap(z)] {
		if x != 0 {
			t.Fatalf("a large object handed out after a shrink holds %#x at byte %d", x, i)
		}
	}
	must(t, c.Free(z))
	must(t, c.Free(r))
}
