package impl_test

// Tests of adv10, a blind adversarial sweep: one-line bugs written from
// spec/SPEC.md and impl/ alone, then run against the suite. Each names its
// rule and the slip it kills.

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStalePoolFreeEveryClass (FREE-DOUBLE: the start of a slot of a pooled
// superblock's last layout is a double free, FREE-INVALID only what is not a
// slot start): for every class, object 0 of a superblock is freed, the
// superblock goes back to the pool at Flush, and the same object is freed
// again. The answer is ErrDoubleFree, counted in Stats.DoubleFrees, and
// nothing changes: every class, so the boundaries of the class byte the
// pooled superblock keeps (class 0, the last class, 32 KiB with 2 objects)
// are all judged. Slip: stalePoolFree's class bound stops one short
// (stalepoollastclass): the last class's stale free says ErrInvalidPointer.
// Before this test only TestMachine's random programs reached it, in about
// one run of three.
func TestStalePoolFreeEveryClass(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	for k := range spec.NumClasses {
		x := allocN(t, c, spec.ClassSize(k))
		if (addrOf(x)-a.Snapshot().Base)%spec.SuperblockSize != 0 {
			t.Fatalf("setup: class %d's first object of a fresh superblock is not at its start", k)
		}
		must(t, c.Free(x))
		c.Flush() // releases the superblock: pooled, its last class kept
		if st := sbState(t, a, sbOf(a, x)); st.State != impl.SBPool {
			t.Fatalf("setup: class %d: the superblock is %v after Flush, want pooled", k, st.State)
		}
		before := a.Stats()
		if err := c.Free(x); !errors.Is(err, impl.ErrDoubleFree) {
			t.Fatalf("a second free of object 0 of a pooled superblock whose last class was %d (%d bytes, %d objects): %v, want ErrDoubleFree",
				k, spec.ClassSize(k), spec.ClassObjects(k), err)
		}
		after := a.Stats()
		if after.DoubleFrees != before.DoubleFrees+1 || after.InvalidFrees != before.InvalidFrees {
			t.Fatalf("class %d: the stale free counted %d double and %d invalid frees, want 1 and 0",
				k, after.DoubleFrees-before.DoubleFrees, after.InvalidFrees-before.InvalidFrees)
		}
	}
}
