package impl_test

// Tests of hunt25, a blind hunt of one-line slips over cache.go and alloc.go.
// Each test names its rule and the slip it kills.

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestRefillFindsGroupBeforeCursor (MEM-ACCOUNT: a refill takes a group
// handed out before while one of them is free; OOM-REAL): a cache hands out
// every object of its current superblock, so the cursor wraps to group 0, and
// frees the last one, in the group just before the cursor. The next Alloc of
// the class reuses it. Slip: nextGroup's scan from the cursor stops one group
// short (nextgroupshort): the refill takes a fresh superblock instead, or at
// a full reservation loops for good.
func TestRefillFindsGroupBeforeCursor(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	const size = 1024
	n := spec.ClassObjects(spec.SizeToClass(size))
	if n <= 32 {
		t.Fatalf("class of %d bytes has %d objects a superblock, want two groups or more", size, n)
	}
	objs := make([][]byte, n)
	for i := range objs {
		objs[i] = allocN(t, c, size)
		if addrOf(objs[i])/sbBytes != addrOf(objs[0])/sbBytes {
			t.Fatalf("object %d of a fresh cache's first %d is not in the first one's superblock", i, n)
		}
	}
	last := addrOf(objs[n-1])
	must(t, c.Free(objs[n-1]))
	objs[n-1] = allocN(t, c, size)
	if got := addrOf(objs[n-1]); got != last {
		t.Fatalf("the only free object of the current superblock is at %#x, in its last group; Alloc returned %#x", last, got)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
}

// TestCloseStopsDecayTimer (MEM-ACCOUNT: after Close nothing keeps the
// Allocator for the pool): Close stops the pool's decay timer. A timer left
// armed holds the closed Allocator (headers, caches) reachable until it
// fires, up to Decay later. Slip: releaseAll forgets the timer without
// stopping it (closetimerkept).
func TestCloseStopsDecayTimer(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * sbBytes, Retain: -1, Decay: time.Hour})
	must(t, err)
	var timers []*time.Timer
	impl.SetTimerFunc(a, func(d time.Duration, f func()) *time.Timer {
		tm := time.AfterFunc(time.Hour, f)
		timers = append(timers, tm)
		return tm
	})
	c := mustCache(t, a)
	must(t, c.Free(allocSBs(t, c, 1))) // one dirty superblock past Retain (none): arms the timer
	must(t, c.Close())
	must(t, a.Close())
	if len(timers) != 1 {
		t.Fatalf("the decay timer was armed %d times, want once", len(timers))
	}
	if timers[0].Stop() {
		t.Fatal("Close left the pool's decay timer armed")
	}
}

// TestTrimLeavesNoDecayDue (MEM-ACCOUNT: a release walks the pool only once
// something in it can have waited the decay): a Trim that returned every
// pooled superblock leaves nothing to wait for, so the releases past Retain
// right after it, within the decay, do not walk the pool. Slip: a walk that
// saw the whole pool and kept nothing dirty leaves decayNext unknown instead
// of never (trimdecayunknown): the first release past Retain walks.
func TestTrimLeavesNoDecayDue(t *testing.T) {
	const retain = 4
	a, c, _, objs := decayClockRetain(t, 16, retain*sbBytes)
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, a.Trim())
	objs = objs[:0]
	for range 16 {
		objs = append(objs, allocSBs(t, c, 1))
	}
	w0 := impl.PoolWalks(a)
	for _, b := range objs {
		must(t, c.Free(b)) // past Retain from the fifth on, all within the decay
	}
	if w := impl.PoolWalks(a) - w0; w != 0 {
		t.Fatalf("after a Trim, 16 releases within the decay walked the pool %d times, want none", w)
	}
}
