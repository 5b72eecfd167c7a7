//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFlushWalkSurvivesRelease (STATS-EXACT, LIFECYCLE): Flush walks each
// class's partial and full lists and collects every superblock on them, and a
// collection may release the superblock it collects: a remote free announced
// on the owner's stack after Flush's drain swapped it out (paused at
// drain.pop) is collected by the walk, not by the drain, and when it frees
// the last live object the superblock goes back to the pool, unlinked. The
// walk must have read the next superblock's link before: read after, it is
// nil, the walk ends there, and the superblocks behind it keep their
// unpublished local frees through the Flush (Stats.Frees short after every
// cache flushed). Slip: flushwalknextlate.
func TestFlushWalkSurvivesRelease(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	w, _ := a.NewCache()
	const size = 1000
	k := spec.SizeToClass(size)
	nobj := spec.ClassObjects(k)
	pmin := max(1, nobj/16) // LIFECYCLE's partialMin
	if nobj < 2*pmin+2 {
		t.Fatalf("class %d has %d objects a superblock: pick a larger class", k, nobj)
	}
	frees := 0
	// full fills a superblock of c's and frees one object into it while it
	// is current, taken again: c has freed into it (ownerFreed), so the
	// acquisition of the next superblock keeps it on c's full list.
	full := func() [][]byte {
		objs := allocObjects(t, c, size, nobj)
		must(t, c.Free(objs[0]))
		frees++
		objs[0] = allocN(t, c, size)
		return objs
	}
	s1 := full() // S1
	s2 := full() // S2; S1 on the full list
	z := allocN(t, c, size)
	defer func() { must(t, c.Free(z)) }()
	// S1: partial (pmin frees published), then one local free unpublished.
	for _, b := range s1[1 : pmin+2] {
		must(t, c.Free(b))
		frees++
	}
	// S2: partial after S1, so ahead of it on the list; every object but the
	// first freed, the frees after partialMin unpublished.
	for _, b := range s2[1:] {
		must(t, c.Free(b))
		frees++
	}
	snap := a.Snapshot()
	var cs impl.CacheState
	for _, x := range snap.Caches {
		if x.ID == c.ID() {
			cs = x
		}
	}
	sbOf := func(b []byte) int { return int((addrOf(b) - snap.Base) / spec.SuperblockSize) }
	if got := cs.Partial[k]; len(got) != 2 || got[0] != sbOf(s2[0]) || got[1] != sbOf(s1[0]) {
		t.Fatalf("set-up: partial list of class %d is %v, want [S2 %d, S1 %d]", k, got, sbOf(s2[0]), sbOf(s1[0]))
	}
	for _, sb := range snap.Superblocks {
		if sb.Index == sbOf(s1[0]) && sb.LocalFreed == 0 {
			t.Fatalf("set-up: S1 has no unpublished local free")
		}
	}
	y, err := c.Alloc(64) // another class's superblock, for the drain to pop
	must(t, err)
	must(t, w.Free(y)) // announces it on c's stack
	err = during(t, newPause(impl.YieldDrainPop),
		func() error { c.Flush(); return nil }, // pops y's superblock; the walk collects S2, releases it, then S1
		func() { must(t, w.Free(s2[0])) })      // S2's last live object, announced on c's emptied stack
	must(t, err)
	w.Flush()
	frees++ // s2[0], remote
	snap = a.Snapshot()
	for _, sb := range snap.Superblocks {
		if sb.State == impl.SBSmall && sb.LocalFreed != 0 {
			t.Errorf("superblock %d keeps %d local frees unpublished through Flush (STATS-EXACT)", sb.Index, sb.LocalFreed)
		}
	}
	if got := a.Stats().Classes[k].Frees; got != uint64(frees) {
		t.Errorf("every cache flushed: %d frees of class %d, want %d", got, k, frees)
	}
}

// TestRerouteKeepsRestOfStack (LIFECYCLE, CONSERVE): reroute forwards every
// superblock of the stack it pops, and forwarding one with remote frees
// pending pushes it again, which overwrites its link: reroute must read the
// link first (as drainNotify does). Here old's Flush (paused at drain.pop,
// its stack swapped out) leaves a stack of U, T, S pushed meanwhile: S
// emptied (its last object freed remotely), T and U with a remote free each,
// of classes above S's. The walk releases S while it is announced, and the
// release reroutes old's stack: U goes back onto it, then T and S must be
// forwarded too. Read after, U's link is nil once U is pushed: T and S stay
// marked notified on no stack, and no later remote free into them is
// announced. Slip: reroutenextlate.
func TestRerouteKeepsRestOfStack(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	old, _ := a.NewCache()
	w, _ := a.NewCache()
	const sizeS, sizeT, sizeU = 1000, 2000, 3000
	if !(spec.SizeToClass(sizeS) < spec.SizeToClass(sizeT) && spec.SizeToClass(sizeT) < spec.SizeToClass(sizeU)) {
		t.Fatal("set-up: S's class must come first in Flush's walk")
	}
	k := spec.SizeToClass(sizeS)
	objs := allocObjects(t, old, sizeS, spec.ClassObjects(k)) // S: full
	for _, b := range objs[1:] {
		must(t, old.Free(b)) // S: one object live
	}
	tObjs := allocObjects(t, old, sizeT, 2)
	uObjs := allocObjects(t, old, sizeU, 2)
	y := allocN(t, old, 64) // another superblock, for the drain to pop
	must(t, w.Free(y))
	err = during(t, newPause(impl.YieldDrainPop),
		func() error { old.Flush(); return nil },
		func() {
			// S pushed, then T, then U: U on top
			must(t, w.Free(objs[0]))
			must(t, w.Free(tObjs[0]))
			must(t, w.Free(uObjs[0]))
		})
	must(t, err)
	announcedOnAStack(t, a)
	must(t, old.Free(tObjs[1]))
	must(t, old.Free(uObjs[1]))
}
