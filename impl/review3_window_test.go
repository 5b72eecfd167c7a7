//go:build refalloc_yield

package impl_test

import (
	"errors"
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
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
	a, idle, w1, w2, objs := idleOwnerFull(t)
	var next []byte
	p := newPause(impl.YieldNotifyOwner)
	err := during(t, p, func() error { return w1.Free(objs[0]) }, func() {
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

// TestReallocRacesFreeOfSource (GUARD-FAULT: the allocator never touches
// quarantined memory for its caller): a free of a guarded object while a
// moving Realloc of it has allocated the new object and not yet copied
// (realloc.moved) quarantines the source; the copy, under the central lock,
// must then be skipped, not fault reading the protected source.
func TestReallocRacesFreeOfSource(t *testing.T) {
	for _, n := range []int{100, 200_000} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
		must(t, err)
		if !a.GuardProtects() {
			a.Close()
			t.Skip("guard mode cannot protect memory here")
		}
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		b, err := c.Alloc(n)
		must(t, err)
		blocker, err := c.Alloc(8) // b cannot grow in place
		must(t, err)
		var nb []byte
		err = during(t, newPause(impl.YieldReallocMoved), func() (err error) {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("Realloc faulted: %v", r)
				}
			}()
			nb, err = c.Realloc(b, 2*n)
			return err
		}, func() {
			must(t, d.Free(b)) // quarantined now
		})
		switch {
		case errors.Is(err, impl.ErrDoubleFree): // refused: the free came first (FREE-DOUBLE)
		case err != nil:
			t.Fatalf("size %d: %v", n, err)
		default:
			must(t, c.Free(nb))
		}
		must(t, c.Free(blocker))
		c.Close()
		d.Close()
		a.Close()
	}
}
