//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardLargeFreeRacingFreeIsDouble (FREE-DOUBLE): in guard mode, of two
// frees of one large object, the one that read the header before the other
// quarantined the object finds it quarantined under the central lock: a
// double free, as a later free of it is, not an invalid pointer.
func TestGuardLargeFreeRacingFreeIsDouble(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	c, err := a.NewCache()
	must(t, err)
	d, err := a.NewCache()
	must(t, err)
	b, err := c.Alloc(2 * spec.SuperblockSize)
	must(t, err)
	err = duringEach(t, newPauseSeq(impl.YieldLargeFree), func() error { return c.Free(b) }, func() { must(t, d.Free(b)) })
	if !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("a free of a large object that another free quarantined meanwhile: %v, want ErrDoubleFree", err)
	}
}
