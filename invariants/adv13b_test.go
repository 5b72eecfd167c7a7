package invariants_test

import (
	"math/bits"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv13b's hunt of the checkers: each breaks a good snapshot so
// that one check must see it, and requires that check's own report.

// TestConserveCatchesCurrentOfOtherClass (CONSERVE): a cache's current
// superblock of class k must be a class-k superblock. Here cache c's current
// of class k+1 names its own current class-k superblock (owned by c, marked
// current): only the class comparison sees it. Slip (mutant
// conservecurrentclass): conserve drops sb.Class != k.
func TestConserveCatchesCurrentOfOtherClass(t *testing.T) {
	h, c, _, k := fresh64(t)
	if k+1 >= spec.NumClasses {
		t.Fatalf("class %d is the last", k)
	}
	firesEach(t, h, spec.RuleConserve, []aBreak{
		{"current of class k+1 is a class-k superblock", "current superblock", func(s *impl.Snapshot) {
			cc := cacheOf(t, s, c)
			if cc.Current[k] < 0 || cc.Current[k+1] >= 0 {
				t.Fatalf("cache %d currents: %v", c, cc.Current)
			}
			cc.Current[k+1] = cc.Current[k]
		}},
	})
}

// TestOOMCatchesOwnSuperblockWithPendingFrees (OOM-REAL): before it answers
// ErrOutOfMemory the cache collects the remote frees into its own
// superblocks, so none may be pending there after, whatever their class. The
// snapshot: the cache's class-4096 superblock (11 live, its held group given
// back as free), nothing in the pool; with a remote free pending on one live
// object the check must fire, without it not (the free objects are of
// another class than the request's). Slip (mutant oomownpending): CheckOOM's
// walk of the cache's own superblocks drops its pending test.
func TestOOMCatchesOwnSuperblockWithPendingFrees(t *testing.T) {
	h, id := setup(t)
	recycled(t, h, id) // one class-4096 superblock: 11 live, 4 held, 1 free
	for _, pending := range []bool{false, true} {
		s := clean(t, h)
		s.FreeRuns = nil
		c := cacheOf(t, s, id)
		held := c.Held[0]
		c.Held = nil
		st := sbAt(t, s, held.Superblock)
		st.Free[held.Group] |= held.Bits
		st.NFree += bits.OnesCount32(held.Bits)
		if pending {
			live := uint32(1<<st.Objects-1) &^ st.Free[0]
			st.Pending[0] = live & -live // the first live object, freed remotely
			st.Notified = true
		}
		vs := invariants.CheckOOM(s, []int{id}, 100, 1)
		if !pending && len(vs) != 0 {
			t.Fatalf("own superblock of another class, nothing pending: %v", vs)
		}
		if pending {
			fires(t, spec.RuleOOMReal, "remote frees pending in its superblock", vs)
		}
	}
}
