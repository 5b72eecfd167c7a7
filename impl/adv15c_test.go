package impl_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// allocSiteA allocates n bytes from c: the site the test expects a report not
// to name.
func allocSiteA(t *testing.T, c *impl.Cache, n int) []byte {
	t.Helper()
	return allocN(t, c, n)
}

// TestDebugWAFInNewLayoutNamesNoOldSite (DEBUG-POISON: a write after free is
// reported naming the site that had allocated the object): a small period
// records its own sites. Two 64-byte objects are allocated (at offsets 0 and
// 64, by allocSiteA) and freed, and the superblock is released (poisoned).
// A byte is then written at offset 4096+8, inside no object the old layout
// ever handed out, and the superblock is carved for the 4096-byte class: its
// object 1, at offset 4096, fails verification. No object there was ever
// allocated, so the report names no site. Slip: initSmall keeps the
// previous period's per-object sites when the slice is long enough
// (debugsitesreused): the report names allocSiteA, the site of the old
// layout's object 1 at offset 64, an object that has nothing to do with the
// bytes written.
func TestDebugWAFInNewLayoutNamesNoOldSite(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	x, y := allocSiteA(t, c, 64), allocSiteA(t, c, 64)
	i := sbOf(a, x)
	if addrOf(y) != addrOf(x)+64 || (addrOf(x)-a.Snapshot().Base)%spec.SuperblockSize != 0 {
		t.Fatalf("the 64-byte objects are not objects 0 and 1 of their superblock")
	}
	must(t, c.Free(x))
	must(t, c.Free(y))
	c.Flush() // empty: released to the pool, poisoned
	if st := sbState(t, a, i); st.State != impl.SBPool {
		t.Fatalf("superblock %d is %v after the flush, want pooled", i, st.State)
	}
	sliceAt(x, addrOf(x)+4096+8, 1)[0] = 0x11 // a write after free into the pool
	z0 := allocN(t, c, 4096)
	z1 := allocN(t, c, 4096)
	if sbOf(a, z0) != i || addrOf(z1) != addrOf(x)+4096 {
		t.Fatalf("the 4096-byte objects are not objects 0 and 1 of superblock %d", i)
	}
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at offset 4096+8): %v", len(reports), reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As(reports[0], &we) || we.Addr != addrOf(z1) || we.Offset != 8 {
		t.Fatalf("report %v, want a write after free at byte 8 of %#x", reports[0], addrOf(z1))
	}
	if we.Site != "" {
		t.Errorf("the write after free into object 1 of the new layout, never allocated, names a site:\n%s", we.Site)
	}
	must(t, c.Free(z0))
	must(t, c.Free(z1))
}

// TestWrapInLargeLifeRetiresOneGroupSet (CACHE-COHERENT 2: within one remote
// set no generation repeats): a wrap at the end of a large life retires the
// superblock's remote set, every word of it. The set here has one word: the
// 4096-byte class has 16 objects. Cache d keeps a "not mine" entry from the
// first small period (class 4096, generation entryGen); the generation is
// fast-forwarded, a large object's free wraps it back to entryGen, and the
// superblock is carved for the 2048-byte class (32 objects, one group, so a
// kept set would fit). d's free of object 2 (offset 4096) must free object
// 2. Slip: retire stamps every word but the last (retirekeepslast): the
// one-word set is not retired, the new period restamps and reuses it, d's
// stale entry matches its generation and set, and its layout's index 1
// (offset 4096 in class 4096) frees object 1 of the new layout, a live
// object, while object 2 stays live.
func TestWrapInLargeLifeRetiresOneGroupSet(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, d := mustCache(t, a), mustCache(t, a)
	first, x := allocN(t, c, 4096), allocN(t, c, 4096)
	i := sbOf(a, x)
	entryGen := genOf(t, a, i)
	must(t, d.Free(first))
	must(t, d.Free(x)) // d's entry: not mine, class 4096, generation entryGen
	c.Flush()          // collected, empty, released
	must(t, impl.FastForward(a, i, impl.DeadTag-1))
	big := allocN(t, c, spec.SuperblockSize) // the period that wraps is a large one
	if sbOf(a, big) != i {
		t.Fatal("the large object is not on the superblock")
	}
	must(t, c.Free(big))
	if g := genOf(t, a, i); g != entryGen {
		t.Fatalf("generation %d after the wrap, want %d", g, entryGen)
	}
	var ys [][]byte
	for range 4 {
		ys = append(ys, allocN(t, c, 2048))
	}
	if sbOf(a, ys[0]) != i || addrOf(ys[2]) != addrOf(x) {
		t.Fatal("the 2048-byte objects are not at the start of the superblock")
	}
	must(t, d.Free(ys[2])) // offset 4096: object 1 of class 4096, object 2 of class 2048
	c.Flush()
	if err := c.Free(ys[2]); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("d's free of object 2 did not free it (the owner's Free: %v)", err)
	}
	for j, y := range ys {
		if err := c.Free(y); j != 2 && err != nil {
			t.Fatalf("object %d of class 2048 was live, Free: %v", j, err)
		}
	}
}

func mustCache(t *testing.T, a *impl.Allocator) *impl.Cache {
	t.Helper()
	c, err := a.NewCache()
	must(t, err)
	return c
}

// TestSnapshotShowsShortRemoteCount (CACHE-COHERENT 3: invariants.coherent
// verifies every entry against its superblock's header): an entry keeps its
// superblock's remote words as a pointer to the first and a count, and the
// snapshot's SameRemote says both are the header's set. An entry whose count
// is one short (impl.ShortRemoteCount: a fill that counted another layout's
// groups, so that a free of the last group's objects would be checked
// against too few words) must show SameRemote false, or no check sees it.
// Slip: the snapshot compares only the first word's address (snapremotelen),
// like the SameFree slip TestSnapshotShowsStaleFreeWord closes.
func TestSnapshotShowsShortRemoteCount(t *testing.T) {
	sameRemoteShows(t, impl.ShortRemoteCount, "counting one remote word short of its set")
}

// sameRemoteShows fills a not-mine entry of a cache d for a superblock of
// 64-byte objects (32 remote words), then breaks it with spoil (which
// reports whether d had the entry, and returns the function that mends
// it), and fails t unless the snapshot shows SameRemote before and not
// after; what names the spoiled entry in the failure.
func sameRemoteShows(t *testing.T, spoil func(d *impl.Cache, s int) (bool, func()), what string) {
	t.Helper()
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * spec.SuperblockSize})
	d := mustCache(t, a)
	x := allocN(t, c, 64)
	y := allocN(t, c, 64)
	must(t, d.Free(y)) // fills d's (not mine) entry for the superblock
	s := sbOf(a, x)
	if e := snapEntry(t, a, d, s); !e.SameRemote {
		t.Fatalf("setup: entry %+v, want the header's remote set", e)
	}
	ok, undo := spoil(d, s)
	if !ok {
		t.Fatal("setup: no entry to spoil")
	}
	e := snapEntry(t, a, d, s)
	undo()
	if e.SameRemote {
		t.Errorf("an entry %s shows SameRemote: %+v", what, e)
	}
	must(t, c.Free(x))
}

// TestSnapshotShowsPooledAt (MEM-ACCOUNT: the check that no dirty superblock
// outstays its decay reads SuperblockState.PooledAt): a large object freed at
// a test clock's t0, with Retain none and Decay an hour, leaves its
// superblock pooled dirty, and the snapshot shows it pooled at t0 exactly.
// Slip (adv15c 09, snapnopooledat): the snapshot leaves PooledAt zero, so
// the check takes every pooled superblock for one past its decay; only
// TestMachine's draws killed it.
func TestSnapshotShowsPooledAt(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -1, Decay: time.Hour})
	t0 := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return t0 })
	big := allocSBs(t, c, 1)
	i := sbOf(a, big)
	must(t, c.Free(big))
	for _, st := range a.Snapshot().Superblocks {
		if st.Index != i {
			continue
		}
		if st.State != impl.SBPool || !st.Dirty {
			t.Fatalf("setup: superblock %d is %v, dirty %v; want pooled dirty", i, st.State, st.Dirty)
		}
		if st.PooledAt != t0 {
			t.Errorf("superblock %d pooled dirty at %d shows PooledAt %d", i, t0, st.PooledAt)
		}
		return
	}
	t.Fatalf("superblock %d is not in the snapshot", i)
}

// TestSnapshotShowsOrphanNotify (CONSERVE: every notified superblock is on
// exactly one notification stack, invariants.Check): c closes with two
// objects of its superblock s live, and s is an orphan; a remote free whose
// owner read came before the close then notifies it (impl.NotifyLate stands in
// for the free, whose window only the yield build holds open), which puts s
// on the orphans' stack, where the snapshot must show it. Slip (adv15c 35,
// snapnoorphannotify): the snapshot does not walk that stack; only the yield
// build's window tests killed it.
func TestSnapshotShowsOrphanNotify(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, d := mustCache(t, a), mustCache(t, a)
	x, y := allocN(t, c, 64), allocN(t, c, 64)
	s := sbOf(a, x)
	must(t, c.Close())
	impl.NotifyLate(a, s)
	snap := a.Snapshot()
	for _, st := range snap.Superblocks {
		if st.Index == s && (st.Owner != -1 || !st.Notified) {
			t.Fatalf("setup: superblock %d has owner %d, notified %v; want an orphan with a notification", s, st.Owner, st.Notified)
		}
	}
	if !slices.Contains(snap.OrphanNotify, s) {
		t.Errorf("notified orphan %d is not on the orphans' notification stack %v", s, snap.OrphanNotify)
	}
	must(t, d.Free(x))
	must(t, d.Free(y))
}
