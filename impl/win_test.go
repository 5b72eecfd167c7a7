package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// closeWithLateRemoteFrees closes q while the remote frees of objs by d land
// after Close's flush drained q's stack (while the flush waits for the central
// lock, as in TestCloseForwardsLateRemoteFree): the superblock is orphaned
// with those frees pending, and Close forwards it to the orphans' stack. d's
// frees are remote, not adoptions: q still owns the superblock.
func closeWithLateRemoteFrees(t *testing.T, a *impl.Allocator, q, d *impl.Cache, objs ...[]byte) {
	t.Helper()
	unlock := impl.HoldCentralLock(a)
	defer unlock()
	done := make(chan error, 1)
	go func() { done <- q.Close() }()
	waitInFunction(t, "(*Allocator).drainOrphans", done)
	for _, x := range objs {
		if err := d.Free(x); err != nil {
			t.Fatalf("remote free of %#x: %v", addrOf(x), err)
		}
	}
	unlock()
	must(t, <-done)
}

// orphanEmptiedRemotely makes superblock S an orphan whose every object has
// a remote free pending (closeWithLateRemoteFrees), announced on the orphans'
// stack: the next Flush's orphan drain collects it (collectOrphan) and finds
// it empty. It returns a, d and S's index.
func orphanEmptiedRemotely(t *testing.T) (*impl.Allocator, *impl.Cache, int) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	q, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, q, 64, 2)
	s := sbOf(a, objs[0])
	closeWithLateRemoteFrees(t, a, q, d, objs...)
	if st := sbState(t, a, s); !st.Orphan || st.Pending[0] != 3 || a.Stats().OrphanedSuperblocks != 1 {
		t.Fatalf("after q's Close: S orphan %v, pending %#x, OrphanedSuperblocks %d; want a counted orphan with both objects pending", st.Orphan, st.Pending, a.Stats().OrphanedSuperblocks)
	}
	return a, d, s
}

// TestOrphanEmptiedByCollectionReleased (LIFECYCLE, MEM-ACCOUNT): the
// orphans' drain of a Flush collects an orphan's remote frees; when that frees
// its last live object the orphan is empty and must be released to the pool,
// not kept as an orphan, committed and counted, until some refill of its class
// happens to adopt it. Slip: collectOrphan never releases (orphankeptempty);
// only the soak's random runs met it.
func TestOrphanEmptiedByCollectionReleased(t *testing.T) {
	a, d, s := orphanEmptiedRemotely(t)
	d.Flush() // drains the orphans' stack: collectOrphan
	st := sbState(t, a, s)
	if st.State != impl.SBPool || st.Orphan {
		t.Errorf("after a Flush collected the orphan's last remote free: S state %v, orphan %v, list %q; want it released to the pool (LIFECYCLE)", st.State, st.Orphan, st.List)
	}
	if got := a.Stats().SmallSuperblocks; got != 0 {
		t.Errorf("SmallSuperblocks = %d with every object free and every cache flushed, want 0", got)
	}
}

// TestReleasedOrphanUncounted (MEM-ACCOUNT): an orphan released by the
// orphans' drain (its last live object freed remotely, collected by a Flush)
// leaves OrphanedSuperblocks. Slip: releaseLocked unlinks the orphan without
// the decrement (releaseorphancount): the count stays one high for good.
func TestReleasedOrphanUncounted(t *testing.T) {
	a, d, s := orphanEmptiedRemotely(t)
	d.Flush()
	if st := sbState(t, a, s); st.State != impl.SBPool {
		t.Fatalf("S was not released by the Flush (state %v, list %q)", st.State, st.List)
	}
	if got := a.Stats().OrphanedSuperblocks; got != 0 {
		t.Errorf("OrphanedSuperblocks = %d after the only orphan was released, want 0 (MEM-ACCOUNT)", got)
	}
}

// TestAdoptionCollectsAgainstOwnHeldGroup (FREE-DOUBLE, CONSERVE): a free
// that adopts an orphan B collects B's pending remote frees against the
// adopter's held group only when that group is B's. Here the adopter c holds
// group 0 of its own superblock A in the same class, and a legitimate remote
// free is pending on object 1 of B's group 0, a bit c's held group also has:
// it must be collected as a free, not taken for a double free of an object c
// holds (collectheldanysb: the held group's test without held.sb == sb drops
// the free, reports a double free nobody made, and B never empties).
func TestAdoptionCollectsAgainstOwnHeldGroup(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	q, _ := a.NewCache()
	d, _ := a.NewCache()
	y := allocN(t, c, 64) // A: c holds the rest of its group 0, objects 1..31
	xs := allocObjects(t, q, 64, 3)
	if sbOf(a, y) == sbOf(a, xs[0]) {
		t.Fatal("c and q share a superblock")
	}
	b := sbOf(a, xs[0])
	must(t, q.Free(xs[2]))
	closeWithLateRemoteFrees(t, a, q, d, xs[1]) // x0 live: B is an orphan, object 1 of group 0 pending
	if st := sbState(t, a, b); !st.Orphan || st.Pending[0] != 1<<1 {
		t.Fatalf("B orphan %v, pending %#x; want an orphan with object 1 pending", st.Orphan, st.Pending)
	}
	must(t, c.Free(xs[0])) // a miss into an orphan: c adopts B and collects it
	c.Flush()
	if len(reports) != 0 {
		t.Errorf("OnError heard %v: a legitimate remote free collected against another superblock's held group (FREE-DOUBLE)", reports)
	}
	if st := a.Stats(); st.DoubleFrees != 0 {
		t.Errorf("DoubleFrees = %d, want 0", st.DoubleFrees)
	}
	if st := sbState(t, a, b); st.State != impl.SBPool {
		t.Errorf("B state %v, list %q, free %#x after every object was freed and c flushed; want it released (CONSERVE: the remote free of object 1 was lost)", st.State, st.List, st.Free)
	}
	must(t, c.Free(y))
}
