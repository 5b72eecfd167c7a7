package impl_test

import (
	"errors"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardFreeAtPageInsideIsInvalid (FREE-INVALID, GUARD-FAULT bad frees:
// the start of a live guarded object frees it, any other address in its
// superblock is invalid): a guarded small object has its superblock to
// itself, and the addresses of that superblock past the object are no
// object's; a free at a page boundary inside it (4 KiB, 8 KiB, the last page)
// is refused as invalid and leaves the object live, through the Cache and
// through the Allocator's own Free. (TestGuardFrees frees
// at +16 only.) Slip (adv16a 22, guardpagestart): freeLargeLocked takes an
// address whose offset in the superblock is page-aligned, not
// superblock-aligned, for the guarded object's start, and frees the object.
func TestGuardFreeAtPageInsideIsInvalid(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1})
	c := mustCache(t, a)
	defer c.Close()
	b := allocN(t, c, 64)
	if g := a.Stats().Guard; g.LiveObjects != 1 {
		t.Fatalf("%d live guarded objects after a small allocation at rate 1, want 1", g.LiveObjects)
	}
	for _, off := range []uintptr{spec.PageSize, 2 * spec.PageSize, sbBytes - spec.PageSize} {
		for _, f := range []struct {
			what string
			free func([]byte) error
		}{{"Cache.Free", c.Free}, {"Allocator.Free", a.Free}} {
			if err := f.free(sliceAt(b, addrOf(b)+off, 1)); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Errorf("%s at offset %d of a live guarded object's superblock: %v, want ErrInvalidPointer", f.what, off, err)
			}
			if g := a.Stats().Guard; g.LiveObjects != 1 || g.Quarantined != 0 {
				t.Fatalf("after %s at offset %d: %d live guarded objects, %d quarantined; want 1 and 0", f.what, off, g.LiveObjects, g.Quarantined)
			}
		}
	}
	must(t, c.Free(b))
}

// TestExplainNotPastReleasedRun (GUARD-FAULT, report: Explain finds the
// quarantined object holding the address, or one of the last 64 released):
// an address in the superblock right after a released object's run is not
// that object's. Guarded objects x, y and z take superblocks i, i+1 and i+2;
// x is freed, and freeing z releases it from a quarantine of one object. An
// address in i+1, where y is live, is explained as nothing; one in i as x,
// released. Slip (adv16a 31, recentpastrun): the walk of the released
// objects takes i+1 for x's (i <= idx+n), as explainpastrun does the
// quarantine's, and reports a use after free of x.
func TestExplainNotPastReleasedRun(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1, QuarantineObjects: 1})
	c := mustCache(t, a)
	defer c.Close()
	x, y, z := allocN(t, c, 64), allocN(t, c, 64), allocN(t, c, 64)
	i := sbOf(a, x)
	if sbOf(a, y) != i+1 || sbOf(a, z) != i+2 || a.Stats().Guard.LiveObjects != 3 {
		t.Fatalf("the guarded objects are on superblocks %d, %d, %d, want three in a row", i, sbOf(a, y), sbOf(a, z))
	}
	must(t, c.Free(x))
	must(t, c.Free(z)) // releases x: the quarantine holds one object
	if g := a.Stats().Guard; g.Quarantined != 1 || g.Released != 1 {
		t.Fatalf("%d quarantined, %d released, want z quarantined and x released", g.Quarantined, g.Released)
	}
	if e, ok := a.ExplainAddr(addrOf(x) + 8); !ok || e.Object != addrOf(x) || !e.Released {
		t.Fatalf("ExplainAddr inside x, released: %v %v, want x, released", e, ok)
	}
	if e, ok := a.ExplainAddr(addrOf(y) + 8); ok {
		t.Fatalf("ExplainAddr inside y, live, right after x's superblock: %v", e)
	}
	must(t, c.Free(y))
}

// TestDecayKeepsOneNanosecondYounger (MEM-ACCOUNT, Options.Decay: a superblock
// that has been pooled for Decay goes back to the OS, a younger one waits):
// with Retain none and a clock of the test's, superblocks are pooled at t,
// t+1ns and t+Decay; the last release walks the pool and returns the first
// (pooled exactly Decay ago) and keeps the second, one nanosecond younger.
// Slip (adv16a 33, decayedgeearly): the walk's cutoff is now-Decay+1, and the
// second goes too.
func TestDecayKeepsOneNanosecondYounger(t *testing.T) {
	a, c, clock, objs := decayClock(t, 3)
	must(t, c.Free(objs[0]))
	*clock++
	must(t, c.Free(objs[1]))
	*clock += int64(time.Hour) - 1
	must(t, c.Free(objs[2]))
	if h := held(a); h != 2*sbBytes {
		t.Fatalf("pooled at t, t+1ns and t+Decay, released at t+Decay: the pool holds %d bytes committed, want two superblocks (the second and third)", h)
	}
}
