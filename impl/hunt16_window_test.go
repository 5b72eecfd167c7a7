//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestOrphanNotifiedThenPooled (LIFECYCLE, NO-OVERLAP): a superblock
// announced on the orphans' stack can leave it pooled: a refill orphans a
// full superblock S whose remote frees, landed during the refill
// (refill.acquire), are announced on its stack, so its second drain
// forwards S to the orphans' stack; then a free of S's last live object
// adopts S, collects the others and releases it, S still marked notified
// there. The next drain of the orphans' stack pops a pooled superblock
// (no owner, on no list): it must only forward it, not collect it as an
// orphan. Slip: drainOrphanNotify takes any superblock without an owner
// for an orphan (drainpooled): it finds the pooled S empty and releases it
// a second time, counting one small superblock less than there are and
// putting S into the pool twice.
func TestOrphanNotifiedThenPooled(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	w1, _ := a.NewCache()
	w2, _ := a.NewCache()
	var objs [][]byte
	for range 64 { // one superblock of 1000-byte objects, full
		b, err := idle.Alloc(1000)
		must(t, err)
		objs = append(objs, b)
	}
	s := sbOf(a, objs[0])
	var next []byte
	err = during(t, newPause(impl.YieldRefillAcquire), func() error {
		var err error
		next, err = idle.Alloc(1000) // acquires a second superblock, orphans S
		return err
	}, func() {
		for _, b := range objs[:63] {
			must(t, w1.Free(b)) // remote: the first announces S on idle's stack
		}
	})
	must(t, err)
	if st := sbState(t, a, s); !st.Orphan || !st.Notified {
		t.Fatalf("setup: S orphan %v notified %v, want an orphan announced on the orphans' stack", st.Orphan, st.Notified)
	}
	must(t, w2.Free(objs[63])) // adopts S, collects the 63, empties and releases it
	if st := sbState(t, a, s); st.State != impl.SBPool || !st.Notified {
		t.Fatalf("setup: S %v notified %v, want pooled and still on the orphans' stack", st.State, st.Notified)
	}
	w1.Flush() // drains the orphans' stack: S is pooled, not an orphan
	if st := a.Stats(); st.SmallSuperblocks != 1 || st.OrphanedSuperblocks != 0 {
		t.Fatalf("after the drain: %d small superblocks, %d orphaned; want 1 (idle's current) and 0", st.SmallSuperblocks, st.OrphanedSuperblocks)
	}
	runs := a.Snapshot().FreeRuns
	for i := 1; i < len(runs); i++ {
		if runs[i].Start < runs[i-1].Start+runs[i-1].N {
			t.Fatalf("pool runs overlap: %v", runs)
		}
	}
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1, w2} {
		must(t, c.Close())
	}
}
