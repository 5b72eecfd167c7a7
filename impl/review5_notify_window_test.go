//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReleaseWhileAnnouncedOnOwnersStack (LIFECYCLE, STATS-EXACT): a remote
// free announces a superblock on its owner's stack after the owner's Flush
// drained that stack (paused at drain.pop, the stack already swapped out),
// and the same Flush then collects the free and releases the emptied
// superblock: it is pooled still marked notified, linked on the stack of an
// owner that goes idle. Its next owner never hears of a remote free into it
// (notified: no push), orphans it full, and nothing collects it: every object
// of it freed and pending, the superblock is kept for good and the frees are
// never counted, however often the active caches flush. The release must
// forward the owner's stack.
func TestReleaseWhileAnnouncedOnOwnersStack(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	old, _ := a.NewCache() // goes idle after its Flush
	neu, _ := a.NewCache()
	w, _ := a.NewCache()
	const size = 1000
	k := spec.SizeToClass(size)
	nobj := spec.ClassObjects(k)
	objs := allocObjects(t, old, size, nobj) // superblock S: one of old's, full
	y, err := old.Alloc(64)                  // another superblock of old's, of another class
	must(t, err)
	for _, b := range objs[1:] {
		must(t, old.Free(b)) // S: one object live
	}
	must(t, w.Free(y)) // announces y's superblock on old's stack
	err = during(t, newPause(impl.YieldDrainPop),
		func() error { old.Flush(); return nil }, // pops y's superblock, then collects S and releases it
		func() { must(t, w.Free(objs[0])) })      // announces S on old's (emptied) stack
	must(t, err)
	if s := a.Stats(); s.SmallSuperblocks != 0 {
		t.Fatalf("old flushed with nothing live: %d small superblocks, want 0", s.SmallSuperblocks)
	}
	next := allocObjects(t, neu, size, nobj) // S again, neu's
	if addrOf(next[0]) != addrOf(objs[0]) {
		t.Fatalf("S was not reused (%#x, %#x)", addrOf(objs[0]), addrOf(next[0]))
	}
	for _, b := range next {
		must(t, w.Free(b)) // remote: pending in S
	}
	z, err := neu.Alloc(size) // S has nothing free: a refill, which orphans S if it sees no free
	must(t, err)
	must(t, neu.Free(z))
	neu.Flush()
	w.Flush()
	s := a.Stats()
	if s.OrphanedSuperblocks != 0 || s.Classes[k].Frees != uint64(2*nobj+1) {
		t.Fatalf("every object freed, the active caches flushed: %d orphaned superblocks (want 0), %d frees of class %d (want %d)",
			s.OrphanedSuperblocks, s.Classes[k].Frees, k, 2*nobj+1)
	}
	for _, c := range []*impl.Cache{old, neu, w} {
		must(t, c.Close())
	}
}
