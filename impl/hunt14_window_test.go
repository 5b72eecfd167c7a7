//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestRefillAdoptsOrphanFreedLate (LIFECYCLE): a remote free that read the
// owner before the owner closed lands in the superblock, an orphan by then,
// and is announced on the orphans' stack, not collected. The next refill of
// the class collects the orphans' remote frees before it looks for one to
// adopt (acquire: orphanFull, drainOrphanNotify, then adoptOrphan), so the
// orphan, with partialMin free objects now (4096 B: 16 objects a superblock,
// partialMin 1), is adopted ahead of the pool, and its free object handed
// out. Slip: acquire does not drain the orphans' stack (acquirenoorphandrain):
// the orphan looks full, and the refill takes a superblock from the pool.
func TestRefillAdoptsOrphanFreedLate(t *testing.T) {
	const size = 4096
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	e, _ := a.NewCache()
	objs := allocObjects(t, c, size, spec.ClassObjects(spec.SizeToClass(size))) // S, full
	s := sbOf(a, objs[0])
	err = during(t, newPause(impl.YieldRemoteTag), func() error {
		return d.Free(objs[3]) // remote: S is c's
	}, func() {
		must(t, c.Close()) // S an orphan, nothing pending in it yet
	})
	must(t, err)
	if st := sbState(t, a, s); !st.Orphan || st.NFree != 0 {
		t.Fatalf("setup: S orphan %v with %d free, want an orphan with the free pending", st.Orphan, st.NFree)
	}
	before := a.Stats().SmallSuperblocks
	b := allocN(t, e, size)
	if addrOf(b) != addrOf(objs[3]) {
		t.Fatalf("refill returned %#x (superblock %d), want the orphan S's free object %#x (superblock %d)", addrOf(b), sbOf(a, b), addrOf(objs[3]), s)
	}
	if after := a.Stats().SmallSuperblocks; after != before {
		t.Fatalf("%d small superblocks after the refill, had %d", after, before)
	}
}
