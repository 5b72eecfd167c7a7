package impl

import (
	"testing"

	"github.com/refalloc/refalloc/spec"
)

// TestRerouteLeavesClosedStackSealed (LIFECYCLE, STATS-EXACT): a notify
// that pushed a superblock onto its owner's stack and then found the owner
// changed calls reroute on that owner; the owner may have closed in
// between (Close orphans, then seals its stack with closedStack and
// forwards what was on it). reroute must leave the seal alone: a stack
// swapped from closedStack to nil is open again, and a notify that read the
// closed cache as owner before Close orphaned its superblocks pushes onto
// it, where nothing will ever drain: the superblock stays marked notified,
// no later free announces it, and its remote frees stay pending for good.
// No yield point separates the push from reroute's load, so the window
// tests cannot open this interleaving: the test calls reroute as that
// notify would, after the Close. Slip: reroute's return on closedStack
// dropped (reroutesunseals).
func TestRerouteLeavesClosedStackSealed(t *testing.T) {
	a, err := New(Options{Reserve: 4 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	o, err := a.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	x, err := o.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if o.notify.Load() != closedStack {
		t.Fatal("setup: a closed cache's notification stack is not sealed")
	}
	a.reroute(o) // the notify that pushed just before the seal, finding the owner changed
	if o.notify.Load() != closedStack {
		t.Fatal("reroute on a closed cache reopened its sealed notification stack: pushes that read the closed owner would land where nothing drains (LIFECYCLE)")
	}
	if err := a.Free(x); err != nil {
		t.Fatal(err)
	}
}
