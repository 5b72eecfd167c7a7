//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFlushOfClosedCacheIsNoop (STATS-EXACT): Flush of a closed cache does
// nothing. A remote free that read the owner before the owner closed lands
// in the superblock S, an orphan by then, and is announced on the orphans'
// stack; then the closed cache's Flush must not drain that stack: what it
// collected would be published to a cache already retired, whose counters
// Stats no longer reads. The next Flush of an open cache collects it, and
// after every cache flushed Frees counts the free. Slip: Flush tests only
// the Allocator's closed flag, not the cache's (flushclosed).
func TestFlushOfClosedCacheIsNoop(t *testing.T) {
	const size = 4096
	k := spec.SizeToClass(size)
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	e, _ := a.NewCache()
	objs := allocObjects(t, c, size, spec.ClassObjects(k)) // S, full
	s := sbOf(a, objs[0])
	err = during(t, newPause(impl.YieldRemoteTag), func() error {
		return d.Free(objs[3]) // remote: S is c's
	}, func() {
		must(t, c.Close()) // S an orphan, nothing pending in it yet
	})
	must(t, err)
	if st := sbState(t, a, s); !st.Orphan || !st.Notified {
		t.Fatalf("setup: S orphan %v notified %v, want an orphan announced on the orphans' stack", st.Orphan, st.Notified)
	}
	c.Flush() // closed: a no-op
	e.Flush() // collects S's remote free
	d.Flush()
	a.Flush()
	if st := a.Stats().Classes[k]; st.Frees != 1 {
		t.Fatalf("after every cache flushed: Frees %d, want 1 (STATS-EXACT)", st.Frees)
	}
	for i, b := range objs {
		if i != 3 {
			must(t, e.Free(b))
		}
	}
	must(t, d.Close())
	must(t, e.Close())
}

// TestAdoptingFreeDropsNotMineEntry (CACHE-COHERENT 1-2): a free that adopts
// an orphan invalidates the freeing cache's entry for it before it collects
// the orphan's remote frees, so that an OnError panicking on a double free
// found there leaves no "not mine" entry for a superblock the cache now owns.
// Cache e fills a "not mine" entry for c's superblock S by a remote free; a
// remote free of an object c freed already reads S's word before c closes and
// lands after (a double free pending in the orphan S); e's next free into S
// adopts it and the collection finds the double free; OnError, which panics,
// runs once that free is done (Allocator.report). Slip, when OnError ran in
// the middle of the adoption: adoptOnFree not invalidating the entry left e a
// "not mine" entry for its own superblock (its next free into S remote, into
// its own superblock). With reports queued the free goes on to refill the
// entry, so that slip no longer shows and has no mutant; the test stays.
func TestAdoptingFreeDropsNotMineEntry(t *testing.T) {
	const size = 4096
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	e, _ := a.NewCache()
	objs := allocObjects(t, c, size, spec.ClassObjects(spec.SizeToClass(size))) // S
	s := sbOf(a, objs[0])
	must(t, c.Free(objs[3]))
	must(t, e.Free(objs[5])) // remote: e's entry for S, not mine
	err = during(t, newPause(impl.YieldRemoteTag), func() error {
		return d.Free(objs[3]) // remote, of a free object: a double free, found later
	}, func() {
		must(t, c.Close()) // S an orphan
	})
	must(t, err)
	if st := sbState(t, a, s); !st.Orphan || !st.Notified {
		t.Fatalf("setup: S orphan %v notified %v, want an orphan with the double free pending", st.Orphan, st.Notified)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Fatalf("e's free into the orphan S adopts it and finds the double free: recovered %v, want OnError's panic", r)
			}
		}()
		must(t, e.Free(objs[7]))
	}()
	owner := sbState(t, a, s).Owner
	if owner < 0 {
		t.Fatalf("setup: S not adopted")
	}
	for _, cs := range a.Snapshot().Caches {
		for _, en := range cs.Entries {
			if en.Superblock == s && !en.Mine && cs.ID == owner {
				t.Fatalf("cache %d adopted superblock %d and keeps a 'not mine' entry for it (CACHE-COHERENT)", cs.ID, s)
			}
		}
	}
	for i, b := range objs {
		if i != 3 && i != 5 && i != 7 { // OnError runs once e's free of o7 is done
			must(t, e.Free(b))
		}
	}
	must(t, d.Close())
	must(t, e.Close())
}
