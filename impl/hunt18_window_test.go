//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestAdoptedWhileAnnouncedOneGroupIsForwarded (LIFECYCLE, CONSERVE: every
// superblock with remote frees pending is announced): as
// TestAdoptedWhileAnnouncedIsForwarded, with a class whose superblock is one
// group (2048-byte objects, 32 of them), so that every group of S has a free
// pending each time S is forwarded: by the refill's second drain, which
// finds S, announced on the refill's stack, orphaned, and by the orphans'
// drain, which finds S adopted meanwhile. Each must announce S again, on
// the orphans' stack and then on its owner's: its remote set has frees
// pending. Slip: remoteSet.pending asks whether some word has no pending
// bit, not whether one has one (pendingnone): S, a bit pending in its only
// word, is not announced, and its frees stay pending, announced to nobody.
func TestAdoptedWhileAnnouncedOneGroupIsForwarded(t *testing.T) {
	adoptedWhileAnnounced(t, 2048, 32)
}

// TestPooledWhileAnnouncedIsNotAnnouncedAgain (LIFECYCLE, MEM-ACCOUNT: a
// refill collects its stack and takes its current superblock's remote frees
// before it acquires): S, announced on the orphans' stack, is adopted,
// emptied and released while announced there (as in
// TestOrphanNotifiedThenPooled); the orphans' drain pops it pooled, nothing
// pending, and must leave it unannounced. A cache x then takes S from the pool
// and fills it; a remote free into S announces it on x's stack, and x's next
// refill collects it and hands the object out again, in S. Slip: forward
// announces what it pops whatever is pending (forwardall): the drain pushes
// the pooled S back onto the orphans' stack, S keeps its mark into x's
// period, the remote free finds it marked and announces it to nobody, and
// x's refill passes it over, orphans S and commits a fresh superblock.
func TestPooledWhileAnnouncedIsNotAnnouncedAgain(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	w1, _ := a.NewCache()
	w2, _ := a.NewCache()
	x, _ := a.NewCache()
	// S, orphaned with 63 frees pending, announced
	objs, s, next := announcedOrphan(t, a, idle, w1, 1000, 64, 63)
	must(t, w2.Free(objs[63])) // adopts S, collects the 63, empties and releases it
	w1.Flush()                 // drains the orphans' stack: S is pooled, nothing pending
	if st := sbState(t, a, s); st.State != impl.SBPool || st.Notified {
		t.Fatalf("after the orphans' drain: S %v notified %v, want pooled and announced nowhere", st.State, st.Notified)
	}
	mine := allocObjects(t, x, 1000, 64) // S again, x's, full
	if sbOf(a, mine[0]) != s || sbOf(a, mine[63]) != s {
		t.Fatalf("setup: x's objects in superblocks %d and %d, want S (%d)", sbOf(a, mine[0]), sbOf(a, mine[63]), s)
	}
	must(t, w1.Free(mine[0])) // remote: announces S on x's stack
	b := allocN(t, x, 1000)   // the refill collects it and takes it again
	if sbOf(a, b) != s {
		t.Fatalf("x's refill after a remote free into its full current S: object in superblock %d, want S (%d)", sbOf(a, b), s)
	}
	if st := a.Stats(); st.SmallSuperblocks != 2 {
		t.Fatalf("%d small superblocks, want 2 (idle's and S)", st.SmallSuperblocks)
	}
	must(t, x.Free(b))
	for _, o := range mine[1:] {
		must(t, x.Free(o))
	}
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1, w2, x} {
		must(t, c.Close())
	}
}
