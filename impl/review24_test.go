package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardShrinkInPlaceTailFaults (GUARD-FAULT): a large object shrunk in
// place by Realloc gives the superblocks past its new size back; in guard
// mode they are freed memory of a guarded object, and a read or write of
// them through the slice Realloc was given faults while they are in
// quarantine, as after a free or a moving Realloc.
func TestGuardShrinkInPlaceTailFaults(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	needProtect(t, a)
	c := mustCache(t, a)
	b, err := c.Alloc(3 * spec.SuperblockSize)
	must(t, err)
	r, err := c.Realloc(b, spec.SuperblockSize)
	must(t, err)
	if addrOf(r) != addrOf(b) {
		t.Skipf("Realloc(3 superblocks → 1) moved")
	}
	r[len(r)-1] = 1
	for _, i := range []int{spec.SuperblockSize, 3*spec.SuperblockSize - 1} {
		if e := touch(a, b, i, false); e == nil {
			t.Errorf("read of byte %d of the object Realloc shrank from 3 superblocks to 1: no fault", i)
		}
	}
	must(t, c.Free(r))
}
