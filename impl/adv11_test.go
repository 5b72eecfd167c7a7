package impl_test

// From the adv11 mutant hunt: each test names the one-line slip that passed
// the suite before it.

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
)

// TestDecayTimerSparesExactlyRetain (MEM-ACCOUNT, Options.Retain): the pool
// keeps up to Retain bytes of committed empty superblocks for good. A release
// past Retain arms the decay timer; if the pool is back to exactly Retain when
// the timer fires, nothing is past Retain and nothing goes back, however long
// it has waited (slip: the timer's function walks the pool when it holds
// Retain or more, not more than Retain, and returns it down to half of Retain).
func TestDecayTimerSparesExactlyRetain(t *testing.T) {
	const retain = 4
	a, c, clock, objs := decayClockRetain(t, retain+1, retain*sbBytes)
	for _, b := range objs {
		must(t, c.Free(b))
	}
	if h := held(a); h != (retain+1)*sbBytes {
		t.Fatalf("%d superblocks freed within the decay: the pool holds %d bytes committed, want all of them", retain+1, h)
	}
	again := allocSBs(t, c, 1) // from the pool: back to exactly Retain
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("one superblock taken back from the pool: it holds %d bytes committed, want Retain, %d", h, retain*sbBytes)
	}
	*clock += 2 * int64(time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after a release past Retain")
	}
	if h := held(a); h != retain*sbBytes {
		t.Fatalf("the decay timer fired with exactly Retain pooled: the pool holds %d bytes committed, want all %d of Retain kept", h, retain*sbBytes)
	}
	must(t, c.Free(again))
}

// TestDecayDeadlineFromOldestYoung (MEM-ACCOUNT, Options.Decay): a pooled
// superblock that has waited Decay goes back to the OS at the next release.
// The pool walk, which passes from the highest address down, must therefore
// set the next deadline from the oldest young superblock it passes, wherever
// it lies (slip: from the last one it passes, the lowest: a younger superblock
// below an older one puts the deadline too late, and a release after the
// older one's Decay does not walk the pool).
func TestDecayDeadlineFromOldestYoung(t *testing.T) {
	a, c, clock, objs := decayClock(t, 4)
	low, mid, high, top := objs[0], objs[1], objs[2], objs[3]
	for i := 1; i < len(objs); i++ {
		if addrOf(objs[i-1]) >= addrOf(objs[i]) {
			t.Fatal("setup: superblocks allocated in a row are not in address order")
		}
	}
	must(t, c.Free(top)) // t0: arms the timer
	*clock += int64(20 * time.Minute)
	must(t, c.Free(high)) // t0+20m: the older young one, higher up
	*clock += int64(20 * time.Minute)
	must(t, c.Free(low)) // t0+40m: the younger, lower down
	*clock += int64(20 * time.Minute)
	if !impl.FireDecayTimer(a) { // t0+60m: returns top, keeps high and low
		t.Fatal("no decay timer pending after releases past Retain")
	}
	if h := held(a); h != 2*sbBytes {
		t.Fatalf("the timer at t0+60m (Decay 1h): the pool holds %d bytes committed, want high and low", h)
	}
	*clock += int64(25 * time.Minute)
	must(t, c.Free(mid)) // t0+85m: high has waited Decay, low has not
	if h := held(a); h != 2*sbBytes {
		t.Fatalf("a release at t0+85m, 65m after high was pooled (Decay 1h): the pool holds %d bytes committed, want low and mid (high returned)", h)
	}
}
