//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestOrphanFullNotifiedOnOwnersStack (LIFECYCLE): a remote free reads the
// owner of a full superblock (notify.owner) and pushes it onto that owner's
// stack only after the owner has made it an orphan (orphanFull, at a refill
// that acquires). The owner then goes idle: nothing but its own drain would
// ever pop its stack, and while the superblock is marked notified no other
// free announces it, so every object of it, freed remotely, stayed pending
// and the superblock was never released. The push must forward it to the
// orphans' stack, where the next drain of any cache collects and releases it.
func TestOrphanFullNotifiedOnOwnersStack(t *testing.T) {
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
	var next []byte
	p := newPause(impl.YieldNotifyOwner)
	err = during(t, p, func() error { return w1.Free(objs[0]) }, func() {
		for _, b := range objs[1:] {
			must(t, w2.Free(b)) // announced already: no push
		}
		var err error
		next, err = idle.Alloc(1000) // acquires a second superblock, orphans the full one
		must(t, err)
	})
	must(t, err)
	w2.Flush() // drains the orphans' stack
	if s := a.Stats(); s.SmallSuperblocks != 1 || s.OrphanedSuperblocks != 0 {
		t.Fatalf("every object of the orphaned superblock freed and a drain done: %d small superblocks, %d orphaned; want 1 (the idle cache's current) and 0",
			s.SmallSuperblocks, s.OrphanedSuperblocks)
	}
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1, w2} {
		must(t, c.Close())
	}
}

// TestOrphanFullPushedBeforeOrphaning (LIFECYCLE): the other order of the race
// above. A remote free announces the full superblock on its owner's stack after
// the owner's refill drained that stack and before the acquisition orphans the
// superblock (paused at refill.acquire); the owner then goes idle. The refill
// must drain its stack once more after acquiring, forwarding the new orphan.
func TestOrphanFullPushedBeforeOrphaning(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	w1, _ := a.NewCache()
	var objs [][]byte
	for range 64 { // one superblock of 1000-byte objects, full
		b, err := idle.Alloc(1000)
		must(t, err)
		objs = append(objs, b)
	}
	var next []byte
	p := newPause(impl.YieldRefillAcquire)
	err = during(t, p, func() error {
		var err error
		next, err = idle.Alloc(1000) // acquires a second superblock, orphans the full one
		return err
	}, func() {
		for _, b := range objs {
			must(t, w1.Free(b)) // the first one announces it on idle's stack
		}
	})
	must(t, err)
	w1.Flush() // drains the orphans' stack
	if s := a.Stats(); s.SmallSuperblocks != 1 || s.OrphanedSuperblocks != 0 {
		t.Fatalf("every object of the orphaned superblock freed and a drain done: %d small superblocks, %d orphaned; want 1 (the idle cache's current) and 0",
			s.SmallSuperblocks, s.OrphanedSuperblocks)
	}
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1} {
		must(t, c.Close())
	}
}
