//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// idleOwnerFull makes an Allocator (closed when t ends) and three caches:
// idle, which has allocated objs, the 64 objects of 1000 bytes that fill one
// superblock, and w1 and w2, which have allocated nothing.
func idleOwnerFull(t *testing.T) (a *impl.Allocator, idle, w1, w2 *impl.Cache, objs [][]byte) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	idle, _ = a.NewCache()
	w1, _ = a.NewCache()
	w2, _ = a.NewCache()
	for range 64 {
		objs = append(objs, allocN(t, idle, 1000))
	}
	return a, idle, w1, w2, objs
}

// TestNotifyReroutesWhenAdoptedMeanwhile (LIFECYCLE): a remote free reads the
// owner of a full superblock S (notify.owner) and pushes S onto that owner's
// stack only after the owner has made S an orphan (orphanFull) and another
// cache has adopted it by freeing into it. The push must forward S from the
// old owner's stack, though S has an owner again: else S sits marked
// notified on the stack of a cache that will never collect it, and the next
// remote free into S announces nothing, so its pending free sits on the idle
// cache's stack. Slip: notify reroutes only when S's owner became nil, not
// whenever it changed.
func TestNotifyReroutesWhenAdoptedMeanwhile(t *testing.T) {
	a, idle, w1, w2, objs := idleOwnerFull(t) // S is the idle cache's full superblock
	s := sbOf(a, objs[0])
	var next []byte
	err := during(t, newPause(impl.YieldNotifyOwner), func() error { return w1.Free(objs[0]) }, func() {
		next = allocN(t, idle, 1000) // acquires a second superblock, orphans S
		must(t, w2.Free(objs[1]))    // adopts S
	})
	must(t, err)
	must(t, w1.Free(objs[2])) // remote again: S must be announced to w2
	for _, cs := range a.Snapshot().Caches {
		if cs.ID == idle.ID() && len(cs.Notify) != 0 {
			t.Fatalf("the idle cache's notification stack holds %v; S is superblock %d, w2's since it adopted it", cs.Notify, s)
		}
	}
	must(t, idle.Free(next))
	for _, b := range objs[3:] {
		must(t, w2.Free(b))
	}
	for _, c := range []*impl.Cache{idle, w1, w2} {
		must(t, c.Close())
	}
	if st := a.Stats(); st.DoubleFrees != 0 || st.SmallSuperblocks != 0 {
		t.Errorf("after every free and Close: %d double frees, %d small superblocks; want 0 and 0", st.DoubleFrees, st.SmallSuperblocks)
	}
}
