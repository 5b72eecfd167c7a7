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

// TestConserveCatchesStackedButNotNotified (CONSERVE): a superblock on one
// notification stack is marked notified, and one marked notified is on one
// stack. The break puts an unmarked superblock on the orphans' stack, once.
// Slip (mutant notifiedunstacked): conserve looks only at marked
// superblocks (st.Notified && n != 1), so one stacked but unmarked passes.
func TestConserveCatchesStackedButNotNotified(t *testing.T) {
	h, _, _, k := fresh64(t)
	firesEach(t, h, spec.RuleConserve, []aBreak{
		{"on the orphans' stack, not notified", "notified false, on 1 notification stacks", func(s *impl.Snapshot) {
			st := smallOf(t, s, k)
			if st.Notified {
				t.Fatal("the superblock is notified already")
			}
			s.OrphanNotify = append(s.OrphanNotify, st.Index)
		}},
	})
}

// TestLifecycleCatchesOrphanOnCachesStack (LIFECYCLE): a superblock with
// remote frees pending that sits on a cache's notification stack must be that
// cache's; an orphan there waits for a drain of a cache that may never drain
// again. The break makes c's superblock an orphan with a free pending,
// announced on d's stack. Slip (mutant stackorphanpending): the check skips
// orphans (st.Owner >= 0), so an orphan on a cache's stack passes.
func TestLifecycleCatchesOrphanOnCachesStack(t *testing.T) {
	h, _, d, k := fresh64(t)
	firesEach(t, h, spec.RuleLifecycle, []aBreak{
		{"orphan with a pending free on d's stack", "is announced on the stack of cache", func(s *impl.Snapshot) {
			st := smallOf(t, s, k)
			st.Owner, st.Orphan = -1, true
			st.Pending[1] |= 1 << 5
			st.Notified = true
			dc := cacheOf(t, s, d)
			dc.Notify = append(dc.Notify, st.Index)
		}},
	})
}
