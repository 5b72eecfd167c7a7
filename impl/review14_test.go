package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestQuarantineBoundedWhenReleaseFails (GUARD-FAULT): the quarantine holds
// at most QuarantineObjects objects, also when its oldest object cannot
// leave it (the kernel refuses to make its memory accessible again). A free
// that would exceed the bound then cannot make room, and its object is
// pooled as one the kernel refuses to protect is, not quarantined past the
// bound. quarantine protected the new object first and, finding it could
// not evict, quarantined it anyway: every guarded free while the oldest was
// stuck grew the quarantine (and the kernel's mappings) without bound.
func TestQuarantineBoundedWhenReleaseFails(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{QuarantineObjects: 2})
	needProtect(t, a)
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	var objs [][]byte
	for range 5 {
		objs = append(objs, allocN(t, c, 64))
	}
	must(t, c.Free(objs[0]))
	must(t, c.Free(objs[1]))
	undo := impl.RefuseRestore(a)
	for _, b := range objs[2:] {
		must(t, c.Free(b))
		if g := a.Stats().Guard; g.Quarantined > 2 {
			undo()
			t.Fatalf("guard stats %+v: %d objects quarantined, the bound is 2", g, g.Quarantined)
		}
	}
	undo()
	// The objects that could not be quarantined were pooled: accessible,
	// and a free of their start again is a double free.
	for _, b := range objs[2:] {
		if r := touch(a, b, 0, false); r != nil {
			t.Errorf("an object pooled for want of room in the quarantine faulted: %v", r)
		}
		if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
			t.Errorf("the free of a pooled guarded object's start again: %v, want ErrDoubleFree", err)
		}
	}
}
