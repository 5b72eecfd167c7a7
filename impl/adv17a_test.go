package impl_test

import (
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestAdoptedTailOrphanKeepsListHead (LIFECYCLE: every orphan is on the
// central list of its class, and each list holds exactly those superblocks,
// once): two caches close, each leaving one superblock of the 64-byte class
// with a live object, A then B; the orphans' list is B, A. A free into A,
// the list's tail, adopts A and unlinks it: the list is B, and the next
// refill of the class adopts B (a sixteenth free: before the pool). Slip
// (adv17a 08, orphanlinknoprev): linkOrphan does not point the old head's
// prev at the new head, so unlinking A takes A for the head and drops B with
// it: B is orphaned on no list, never adopted, and the refill takes the
// pool's superblock instead. Before this test the suite saw the slip only
// through the 60 s watchdog, in an unrelated test that spun on a list the
// slip had made a cycle (TestGuardFirstSampleDrawn).
func TestAdoptedTailOrphanKeepsListHead(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * sbBytes})
	must(t, err)
	defer a.Close()
	k := spec.SizeToClass(64)
	c1, c2, d := mustCache(t, a), mustCache(t, a), mustCache(t, a)
	x1 := allocN(t, c1, 64)
	x2 := allocN(t, c2, 64)
	sa, sb := sbOf(a, x1), sbOf(a, x2)
	if sa == sb {
		t.Fatal("setup: the two caches' objects share a superblock")
	}
	must(t, c1.Close())
	must(t, c2.Close())
	if got := a.Snapshot().Orphans[k]; !slices.Equal(got, []int{sb, sa}) {
		t.Fatalf("setup: class %d's orphans %v, want [%d %d] (B, then A)", k, got, sb, sa)
	}
	must(t, d.Free(x1)) // adopts A, the tail, and releases it (emptied)
	if got := a.Snapshot().Orphans[k]; !slices.Equal(got, []int{sb}) {
		t.Fatalf("after the free that adopted superblock %d (the list's tail), class %d's orphans are %v, want [%d] (LIFECYCLE)", sa, k, got, sb)
	}
	y := allocN(t, d, 64)
	if sbOf(a, y) != sb {
		t.Fatalf("the refill took superblock %d, want orphan %d (a sixteenth free: adopted before the pool)", sbOf(a, y), sb)
	}
	must(t, d.Free(y))
	must(t, d.Free(x2))
	must(t, d.Close())
}
