package impl_test

// From adv2, an outside round of hand-written semantic bugs in the central
// heap's decay and the report queue: each test names its rule and the slip
// that passed the suite before it.

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
)

// TestDecayTimerRearmsForYoung (MEM-ACCOUNT, Options.Decay: "a timer returns
// it when nothing else happens"): when the timer fires and its walk leaves a
// superblock past Retain that has not waited the decay yet, the timer is
// armed again for it, with no release to arm it. Slip: decayLater clears its
// timer after the walk instead of before, so decayPool finds it still
// recorded and arms none (timerclearedlate).
func TestDecayTimerRearmsForYoung(t *testing.T) {
	a, c, clock, objs := decayClock(t, 2)
	must(t, c.Free(objs[0]))
	*clock += int64(30 * time.Minute)
	must(t, c.Free(objs[1])) // within the first's decay: no walk, the timer armed already
	*clock += int64(40 * time.Minute)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after two releases past Retain")
	}
	if h := held(a); h != sbBytes {
		t.Fatalf("the timer fired 70 min after the first release and 40 min after the second: the pool holds %d bytes committed, want the second's superblock only", h)
	}
	*clock += int64(time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("the timer's walk left a young superblock past Retain and armed no timer for it: nothing returns it unless a release happens")
	}
	if h := held(a); h != 0 {
		t.Fatalf("after the second timer the pool holds %d bytes committed", h)
	}
}

// TestDecayWalkStoppedAtKeepWalksAgain (MEM-ACCOUNT, Options.Decay: "a
// superblock that has been pooled for Options.Decay goes back to the OS ...
// at the next release"): a walk that stops at half of Retain has not seen
// the superblocks it kept, so the next release past Retain walks again and
// returns those that have waited the decay. Slip: a walk that stops at its
// keep in the lowest run (the last one it looks at) counts itself as having
// seen them all, decayNext becomes "never", and the next release waits a
// whole decay from now before it walks (decaystopknown).
func TestDecayWalkStoppedAtKeepWalksAgain(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: 4 * sbBytes, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c, _ := a.NewCache()
	anchor, err := c.Alloc(16) // superblock 0: the pool's runs start past it
	must(t, err)
	six := allocSBs(t, c, 6)
	three := allocSBs(t, c, 3)
	must(t, c.Free(six)) // 6 dirty pooled, past Retain (4): all young
	clock += int64(2 * time.Hour)
	impl.DecayNow(a) // returns 4, down to half of Retain: the walk stops at 2 kept, pooled 2 h ago
	if h := held(a); h != 2*sbBytes {
		t.Fatalf("after the decay the pool holds %d bytes committed, want 2 superblocks (half of Retain)", h)
	}
	must(t, c.Free(three)) // 5 dirty pooled, past Retain: the 2 kept have waited the decay
	if h := held(a); h != 3*sbBytes {
		t.Fatalf("a release past Retain, 2 h after the 2 kept superblocks were pooled: the pool holds %d bytes committed, want the 3 just freed only", h)
	}
	must(t, c.Free(anchor))
}

// TestReportsDeliveredInOrder (FREE-DOUBLE, Options.OnError: "Reports wait in
// one queue"): the late double frees one collection finds reach OnError in
// the order they were found, oldest first. Slip: deliver pops the newest
// report (deliverlifo).
func TestReportsDeliveredInOrder(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * sbBytes, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache()
	other, _ := a.NewCache()
	objs := allocObjects(t, owner, 16, 3)
	for _, b := range objs {
		must(t, owner.Free(b))
	}
	for _, b := range objs { // remote frees of freed objects: accepted, found by the owner
		must(t, other.Free(b))
	}
	owner.Flush()
	if len(reports) != len(objs) {
		t.Fatalf("%d reports after the owner's flush, want %d: %v", len(reports), len(objs), reports)
	}
	for i, r := range reports {
		var fe *impl.FreeError
		if !errors.As(r, &fe) || !errors.Is(r, impl.ErrDoubleFree) {
			t.Fatalf("report %d: %v, want a double free", i, r)
		}
		if want := uintptr(unsafe.Pointer(unsafe.SliceData(objs[i]))); fe.Addr != want {
			t.Fatalf("report %d names %#x, want %#x: the reports are not in the order they were found", i, fe.Addr, want)
		}
	}
}
