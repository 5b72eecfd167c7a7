//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
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
// for an orphan (orphandrainpooled, which hunt15 found too): it finds the
// pooled S empty and releases it a second time, counting one small
// superblock less than there are and putting S into the pool twice.
func TestOrphanNotifiedThenPooled(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	w1, _ := a.NewCache()
	w2, _ := a.NewCache()
	// S, orphaned with 63 frees pending, announced
	objs, s, next := announcedOrphan(t, a, idle, w1, 1000, 64, 63)
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
	poolRunsDisjoint(t, a)
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1, w2} {
		must(t, c.Close())
	}
}

// poolRunsDisjoint fails t if two runs of a's pool overlap (NO-OVERLAP: a
// superblock released twice is pooled twice).
func poolRunsDisjoint(t *testing.T, a *impl.Allocator) {
	t.Helper()
	runs := a.Snapshot().FreeRuns
	for i := 1; i < len(runs); i++ {
		if runs[i].Start < runs[i-1].Start+runs[i-1].N {
			t.Fatalf("pool runs overlap: %v", runs)
		}
	}
}

// announcedOrphan builds an orphan S announced on the orphans' stack: idle
// fills S with count objects of size bytes; its next Alloc(size) acquires a
// second superblock and orphans S, while w1 frees S's first n objects
// remotely inside the refill's acquire. The first of them announces S on
// idle's stack, so the refill's second drain forwards S to the orphans'.
// It returns S's objects, S, and the object the Alloc returned.
func announcedOrphan(t *testing.T, a *impl.Allocator, idle, w1 *impl.Cache, size, count, n int) (objs [][]byte, s int, next []byte) {
	t.Helper()
	objs = allocObjects(t, idle, size, count)
	s = sbOf(a, objs[0])
	err := during(t, newPause(impl.YieldRefillAcquire), func() error {
		var err error
		next, err = idle.Alloc(size)
		return err
	}, func() {
		for _, b := range objs[:n] {
			must(t, w1.Free(b))
		}
	})
	must(t, err)
	return objs, s, next
}

// pauseEach stops the first goroutine to reach a point at the first of its
// pauses for that point, the next goroutine at the next one, and so on: each
// of several goroutines stopped at the same point can be let go alone. A
// goroutine goes through one pause a call at most.
type pauseEach []*pauseOnce

func (s pauseEach) Yield(point string) {
	for _, p := range s {
		if p.point == point && p.taken.CompareAndSwap(false, true) {
			close(p.paused)
			<-p.resume
			return
		}
	}
}

func (s pauseEach) Bucket() uint32 { return 0 }

// TestRemoteFreeDuringOrphanDrainIsAnnounced (LIFECYCLE, STATS-EXACT): the
// orphans' drain, as its owner's drain does (TestRemoteFreeDuringDrainIsAnnounced),
// clears an orphan's notified mark before it collects: a remote free that
// lands in a group the collection has passed must find it clear and announce
// the orphan again. Three remote frees into S, a full superblock of 1000-byte
// objects (two groups), read its owner and stop before their CAS
// (remote.tag); the owner closes, S is an orphan; the first lands in group 0
// and announces S on the orphans' stack, the second in group 1; a Flush
// drains the orphans' stack and stops at the collection of group 1
// (collect.swap), and meanwhile the third lands in group 0. After the
// flushes every free is published and none is pending. Slip: the drain
// clears notified after collecting (orphannotifiedlate): the third free finds
// S still announced, and its bit stays pending, unannounced, for good.
func TestRemoteFreeDuringOrphanDrainIsAnnounced(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache()
	w := make([]*impl.Cache, 3)
	for i := range w {
		w[i], _ = a.NewCache()
	}
	objs := allocObjects(t, owner, 1000, 64) // S, full: objects 0-31 are group 0
	s := sbOf(a, objs[0])
	tags := pauseEach{newPause(impl.YieldRemoteTag), newPause(impl.YieldRemoteTag), newPause(impl.YieldRemoteTag)}
	swap := &pauseNth{point: impl.YieldCollectSwap, n: 2, paused: make(chan struct{}), resume: make(chan struct{})}
	sched := schedulers{tags, swap}
	impl.SetScheduler(sched)
	defer impl.SetScheduler(nil)
	done := make([]chan error, 3)
	for i, b := range [][]byte{objs[1], objs[40], objs[0]} {
		done[i] = make(chan error, 1)
		go func() { done[i] <- w[i].Free(b) }()
		<-tags[i].paused
	}
	must(t, owner.Close()) // S an orphan, nothing pending yet
	close(tags[0].resume)  // lands in group 0, announces S on the orphans' stack
	must(t, <-done[0])
	close(tags[1].resume) // lands in group 1: S is announced already
	must(t, <-done[1])
	if st := sbState(t, a, s); !st.Orphan || !st.Notified || st.Pending[0] == 0 || st.Pending[1] == 0 {
		t.Fatalf("setup: S orphan %v notified %v pending %x, want an announced orphan with frees pending in both groups", st.Orphan, st.Notified, st.Pending)
	}
	flushed := make(chan struct{})
	go func() { w[0].Flush(); close(flushed) }() // the orphans' drain: group 0, then group 1
	select {
	case <-swap.paused:
	case <-flushed: // a failure, not a hang, under flushnoorphans
		close(tags[2].resume)
		<-done[2]
		t.Fatal("Flush returned without collecting S, announced on the orphans' stack (STATS-EXACT: a flush drains it)")
	}
	close(tags[2].resume) // lands in group 0, collected already
	must(t, <-done[2])
	close(swap.resume)
	<-flushed
	for _, c := range w {
		c.Flush()
	}
	st := sbState(t, a, s)
	k := spec.SizeToClass(1000)
	if f := a.Stats().Classes[k].Frees; f != 3 || st.Pending[0] != 0 || st.Pending[1] != 0 {
		t.Fatalf("after every cache flushed: %d frees published, S pending %x; want 3 and none", f, st.Pending)
	}
}

// schedulers runs each scheduler's Yield in turn.
type schedulers []impl.Scheduler

func (s schedulers) Yield(point string) {
	for _, x := range s {
		x.Yield(point)
	}
}

func (s schedulers) Bucket() uint32 { return 0 }

// TestNotifyAfterReleaseFindsNoOwner (LIFECYCLE, NO-OVERLAP): a remote free
// whose CAS landed stops before it announces the superblock (remote.notify);
// meanwhile the owner's Flush collects the free and releases the emptied
// superblock S. A pooled superblock has no owner: the late announcement goes
// to the orphans' stack, whose drain forwards S (nothing pending) and leaves
// it. Slip: the release keeps the owner (releasekeepsowner): the
// announcement goes onto the old owner's stack, whose next drain takes S
// for its own, finds it empty and releases it a second time, counting one
// small superblock less than there are and putting S into the pool twice.
func TestNotifyAfterReleaseFindsNoOwner(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	w, _ := a.NewCache()
	x := allocN(t, c, 1000)
	s := sbOf(a, x)
	err = during(t, newPause(impl.YieldRemoteNotify), func() error {
		return w.Free(x) // remote: pending in S, c's current
	}, func() {
		c.Flush() // collects the free, releases S
	})
	must(t, err)
	if st := sbState(t, a, s); st.State != impl.SBPool || !st.Notified {
		t.Fatalf("setup: S %v notified %v, want pooled and announced", st.State, st.Notified)
	}
	c.Flush() // drains c's stack and the orphans'
	w.Flush()
	if st := a.Stats(); st.SmallSuperblocks != 0 {
		t.Fatalf("after the drains: %d small superblocks, want 0", st.SmallSuperblocks)
	}
	poolRunsDisjoint(t, a)
	must(t, c.Close())
	must(t, w.Close())
}

// TestAdoptedWhileAnnouncedIsForwarded (LIFECYCLE, CONSERVE: every superblock
// with remote frees pending is announced): S, an orphan announced on the
// orphans' stack (set up as in TestOrphanNotifiedThenPooled, two objects
// live), is adopted by a free of one of them; a remote free of the other
// then finds S still marked notified and does not announce it. The next
// drain of the orphans' stack pops S, owned now: it must forward it onto
// its owner's stack, not leave its free pending unannounced. Slip: the
// orphans' drain drops what it does not collect (orphandropforward).
func TestAdoptedWhileAnnouncedIsForwarded(t *testing.T) {
	adoptedWhileAnnounced(t, 1000, 64)
}

// adoptedWhileAnnounced is TestAdoptedWhileAnnouncedIsForwarded with a
// superblock S of count objects of size bytes: count-2 frees pending in the
// refill, the last object's free by w2 adopts S, and w1's free of the one
// before it lands in S's group g, still marked notified.
func adoptedWhileAnnounced(t *testing.T, size, count int) {
	t.Helper()
	k := spec.SizeToClass(size)
	if spec.ClassObjects(k) != count {
		t.Fatalf("setup: class %d has %d objects a superblock, want %d", k, spec.ClassObjects(k), count)
	}
	g, words := (count-2)/32, (count+31)/32
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	w1, _ := a.NewCache()
	w2, _ := a.NewCache()
	objs, s, next := announcedOrphan(t, a, idle, w1, size, count, count-2)
	if st := sbState(t, a, s); !st.Orphan || !st.Notified || st.Pending[g] == 0 {
		t.Fatalf("after the refill: S orphan %v notified %v pending %x, want an orphan with frees pending, announced on the orphans' stack", st.Orphan, st.Notified, st.Pending)
	}
	must(t, w2.Free(objs[count-1])) // adopts S, collects the count-2
	must(t, w1.Free(objs[count-2])) // remote into w2's S, still marked notified: no push
	if st := sbState(t, a, s); st.Owner != w2.ID() || !st.Notified || st.Pending[g] == 0 || len(st.Pending) != words {
		t.Fatalf("setup: S owner %d notified %v pending %x, want cache %d's, announced, a free pending in group %d of %d", st.Owner, st.Notified, st.Pending, w2.ID(), g, words)
	}
	w1.Flush() // drains the orphans' stack: S is w2's
	if st := sbState(t, a, s); st.Pending[g] != 0 && !st.Notified {
		t.Fatalf("after the orphans' drain S has remote frees pending %x and is not announced", st.Pending)
	}
	w2.Flush()
	if f := a.Stats().Classes[k].Frees; f != uint64(count) {
		t.Fatalf("%d frees of class %d published after the flushes, want %d", f, k, count)
	}
	must(t, idle.Free(next))
	for _, c := range []*impl.Cache{idle, w1, w2} {
		must(t, c.Close())
	}
}
