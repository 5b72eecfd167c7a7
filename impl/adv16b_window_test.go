//go:build refalloc_yield

package impl_test

// Race-window tests of adv16b: each forces, with the refalloc_yield build's
// yield points, the interleaving under which one of adv16b's slips (a
// statement moved or an atomic weakened on a concurrent path) goes wrong.

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// announcedOnAStack fails t unless every superblock marked notified sits on
// exactly one notification stack, and no other does (invariants.NotifyStacks):
// a notification on no stack is lost, and the remote frees it announces are
// never collected.
func announcedOnAStack(t *testing.T, a *impl.Allocator) {
	t.Helper()
	for _, v := range invariants.NotifyStacks(a.Snapshot()) {
		t.Fatalf("%s: %s", v.Rule, v.Detail)
	}
}

// newWithCaches is what most of these tests start from: an Allocator of
// 64 MiB and n caches of it.
func newWithCaches(t *testing.T, n int) (*impl.Allocator, []*impl.Cache) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	cs := make([]*impl.Cache, n)
	for i := range cs {
		cs[i] = mustCache(t, a)
	}
	return a, cs
}

// TestRemoteFreesRacingInOneGroupBothLand (FREE-DOUBLE, CONSERVE): two remote
// frees of two live objects of one group of c's superblock: the first has
// read the group's remote word and stops before its CAS (remote.tag) while
// the second lands. The first's CAS then fails (the word changed) and it
// sets its bit on the word as it is now: both frees are pending, and c's
// flush publishes two. Slip (adv16b 02, remotestore): the CAS is a Store of
// the word the first free read, which wipes the second free's bit: that
// object is neither live nor free, and c publishes one free.
func TestRemoteFreesRacingInOneGroupBothLand(t *testing.T) {
	a, cs := newWithCaches(t, 3)
	defer a.Close()
	c, d, e := cs[0], cs[1], cs[2]
	objs := allocObjects(t, c, 1000, 2) // group 0 of c's superblock
	err := during(t, newPause(impl.YieldRemoteTag),
		func() error { return d.Free(objs[0]) },
		func() { must(t, e.Free(objs[1])) })
	must(t, err)
	c.Flush()
	k := spec.SizeToClass(1000)
	if f := a.Stats().Classes[k].Frees; f != 2 {
		t.Fatalf("two remote frees of live objects, one racing the other's CAS: %d frees published after the owner's flush, want 2", f)
	}
}

// TestPushDuringDrainStaysOnStack (LIFECYCLE, CONSERVE): c's drain has popped
// its notification stack (S1, announced by a remote free) and stops before it
// collects S1 (drain.pop); meanwhile a remote free into S2, another of c's
// superblocks, announces S2 on c's stack, now empty again. S2 must stay
// there, marked notified, for c's next drain. Slip (adv16b 05, drainloadstore):
// the drain reads the head with a Load and clears the stack with a Store
// once it is done instead of one Swap: the push made meanwhile is wiped, and
// S2 stays marked notified on no stack, so no later remote free into it is
// announced.
func TestPushDuringDrainStaysOnStack(t *testing.T) {
	a, cs := newWithCaches(t, 2)
	defer a.Close()
	c, d := cs[0], cs[1]
	s1 := allocObjects(t, c, 1000, 2)
	s2 := allocObjects(t, c, 512, 2) // another class: another superblock
	if sbOf(a, s1[0]) == sbOf(a, s2[0]) {
		t.Fatal("setup: one superblock")
	}
	must(t, d.Free(s1[0])) // S1 on c's stack
	err := during(t, newPause(impl.YieldDrainPop),
		func() error { c.Flush(); return nil },
		func() { must(t, d.Free(s2[0])) }) // S2 pushed onto c's stack, emptied by the pop
	must(t, err)
	announcedOnAStack(t, a)
}

// TestRemoteFreeDuringCloseFindsOrphan (LIFECYCLE): a remote free into c's
// superblock while c closes, between the orphaning of its superblocks and
// the sealing of its stack (close.orphaned), reads no owner and announces
// the orphan on the orphans' stack. Slip (adv16b 17, closesealfirst): Close
// seals its stack before it orphans: the free reads owner c, finds the
// stack sealed and the owner unchanged, and panics (a closed cache still
// owning a superblock).
func TestRemoteFreeDuringCloseFindsOrphan(t *testing.T) {
	a, cs := newWithCaches(t, 2)
	defer a.Close()
	c, d := cs[0], cs[1]
	objs := allocObjects(t, c, 1000, 2)
	must(t, d.Free(objs[1])) // d's entry: a hit, straight to the remote free
	c.Flush()
	var freeErr error
	err := during(t, newPause(impl.YieldCloseOrphaned),
		func() error { return c.Close() },
		func() {
			defer func() {
				if r := recover(); r != nil {
					freeErr = fmt.Errorf("panicked: %v", r)
				}
			}()
			freeErr = d.Free(objs[0])
		})
	must(t, err)
	if freeErr != nil {
		t.Fatalf("a remote free racing the owner's Close: %v", freeErr)
	}
	announcedOnAStack(t, a)
	d.Flush() // drains the orphans' stack: the orphan is empty, released
	if st := a.Stats(); st.SmallSuperblocks != 0 || st.Classes[spec.SizeToClass(1000)].Frees != 2 {
		t.Fatalf("after the drain: %d small superblocks, %d frees; want 0 and 2", st.SmallSuperblocks, st.Classes[spec.SizeToClass(1000)].Frees)
	}
}

// TestOrphanDrainKeepsRestOfStack (LIFECYCLE, CONSERVE): the orphans' drain
// pops a stack of two orphans, O1 then O2, and stops inside O1's collection
// (collect.swap); meanwhile a remote free lands in O1, whose mark the drain
// has reset, and announces it again: its push overwrites O1's link. The
// drain must go on to O2 by the link it read when it popped O1. Three
// remote frees read their owners and stop before their CAS (remote.tag),
// the owner closes, the first two announce O2 and then O1, a Flush drains.
// Slip (adv16b 20, orphannextlate): the drain reads O1's link after the
// collection: it ends there, and O2 stays marked notified on no stack, its
// free pending, unannounced for good.
func TestOrphanDrainKeepsRestOfStack(t *testing.T) {
	a, cs := newWithCaches(t, 5)
	defer a.Close()
	owner, w := cs[0], cs[1:]
	o1 := allocObjects(t, owner, 1000, 40) // O1: groups 0 and 1
	o2 := allocObjects(t, owner, 512, 2)   // O2
	if sbOf(a, o1[0]) == sbOf(a, o2[0]) {
		t.Fatal("setup: one superblock")
	}
	tags := pauseEach{newPause(impl.YieldRemoteTag), newPause(impl.YieldRemoteTag), newPause(impl.YieldRemoteTag)}
	swap := &pauseNth{point: impl.YieldCollectSwap, n: 1, paused: make(chan struct{}), resume: make(chan struct{})}
	impl.SetScheduler(schedulers{tags, swap})
	defer impl.SetScheduler(nil)
	done := make([]chan error, 3)
	for i, b := range [][]byte{o2[0], o1[0], o1[35]} {
		done[i] = make(chan error, 1)
		go func() { done[i] <- w[i].Free(b) }()
		<-tags[i].paused
	}
	must(t, owner.Close()) // O1 and O2 orphans, nothing pending yet
	close(tags[0].resume)  // announces O2 on the orphans' stack
	must(t, <-done[0])
	close(tags[1].resume) // announces O1: the stack is O1, O2
	must(t, <-done[1])
	flushed := make(chan struct{})
	go func() { w[3].Flush(); close(flushed) }() // the orphans' drain pops O1, O2
	select {
	case <-swap.paused:
	case <-flushed:
		close(tags[2].resume)
		<-done[2]
		t.Fatal("setup: the flush collected no orphan")
	}
	close(tags[2].resume) // lands in O1's group 1 and announces O1 again
	must(t, <-done[2])
	close(swap.resume)
	<-flushed
	impl.SetScheduler(nil)
	announcedOnAStack(t, a)
	if st := sbState(t, a, sbOf(a, o2[0])); st.Pending[0] != 0 {
		t.Fatalf("after the orphans' drain O2 has a remote free pending (%x): it was on the stack the drain popped", st.Pending)
	}
}

// TestCloseForwardsWholeStack (LIFECYCLE, CONSERVE): c closes while two
// remote frees into two of its superblocks, S2 and S3, land after its
// flush's own drain (they run while the flush drains the orphans' stack,
// stopped at orphan.drain): at the sealing of c's stack both are on it,
// with frees pending, and Close forwards both onto the orphans' stack.
// Slip (adv16b 21, closenextlate): Close's loop reads a superblock's link
// after forwarding it: the forward's push has overwritten it, the rest of
// c's stack is lost, and S2 stays marked notified on no stack.
func TestCloseForwardsWholeStack(t *testing.T) {
	a, cs := newWithCaches(t, 4)
	defer a.Close()
	idle, w1, c, d := cs[0], cs[1], cs[2], cs[3]
	s2 := allocObjects(t, c, 512, 2)
	s3 := allocObjects(t, c, 256, 2)
	if sbOf(a, s2[0]) == sbOf(a, s3[0]) {
		t.Fatal("setup: one superblock")
	}
	announcedOrphan(t, a, idle, w1, 1000, 64, 2) // an orphan on the orphans' stack
	err := during(t, newPause(impl.YieldOrphanDrain),
		func() error { return c.Close() },
		func() {
			must(t, d.Free(s2[0])) // a miss, owned by c: remote, announced on c's stack
			must(t, d.Free(s3[0])) // on top of S2
		})
	must(t, err)
	if st := sbState(t, a, sbOf(a, s2[0])); !st.Orphan || st.Pending[0] == 0 {
		t.Fatalf("setup: S2 orphan %v pending %x, want an orphan with a free pending", st.Orphan, st.Pending)
	}
	announcedOnAStack(t, a)
}

// spinGuard pauses the first goroutine at point like pauseOnce, and ends
// (runtime.Goexit) a goroutine that comes back to point more than limit
// times: a retry loop that re-reads nothing spins there for good.
type spinGuard struct {
	*pauseOnce
	limit int32
	seen  atomic.Int32
	spun  atomic.Bool
}

func (s *spinGuard) Yield(point string) {
	if point == s.point && s.seen.Add(1) > s.limit {
		s.spun.Store(true)
		runtime.Goexit()
	}
	s.pauseOnce.Yield(point)
}

// TestNotifyRereadsOwnerAfterClose (LIFECYCLE): a remote free has read the
// owner c and stops before it reads c's stack (notify.owner); c closes,
// orphans its superblocks and seals its stack. The push finds the stack
// sealed, reads the owner again (nil now) and announces the orphan on the
// orphans' stack. Slip (adv16b 27, notifyownerhoisted): notify reads the
// owner once, before its retry loop: it retries on c's sealed stack for
// good (the test ends the goroutine after 100 rounds).
func TestNotifyRereadsOwnerAfterClose(t *testing.T) {
	a, cs := newWithCaches(t, 2)
	defer a.Close()
	c, d := cs[0], cs[1]
	objs := allocObjects(t, c, 1000, 2)
	g := &spinGuard{pauseOnce: newPause(impl.YieldNotifyOwner), limit: 100}
	impl.SetScheduler(g)
	defer impl.SetScheduler(nil)
	done := make(chan error, 1)
	go func() {
		err := errors.New("the free never returned")
		defer func() { done <- err }()
		err = d.Free(objs[0]) // remote: its CAS lands, then notify stops
	}()
	select {
	case <-g.paused:
	case err := <-done:
		t.Fatalf("the free never reached %s (it returned %v)", g.point, err)
	}
	must(t, c.Close())
	close(g.resume)
	err := <-done
	impl.SetScheduler(nil)
	if g.spun.Load() {
		t.Fatal("the announcement retried more than 100 times on the closed owner's sealed stack")
	}
	must(t, err)
	announcedOnAStack(t, a)
}

// TestStaleFreesDuringReleaseStampingCounted (FREE-DOUBLE, STATS-EXACT): c's
// flush releases its emptied superblock S; a stale remote free of x, free
// in S, lands before the release takes the central lock (release.lock), and
// another of z, free too, lands while the release has read group 0's word
// (x's bit pending) and not yet stamped it (release.stamp). The stamping
// CAS fails, reads the word again and stamps it with both bits: two late
// double frees, each counted once. Slips: the stamp is a Store of the next
// generation (adv16b 18, releasestampstore): z's bit is wiped, one double
// free counted; the release records the bits it read before its CAS
// (adv16b 19, lateappendearly): x's, read twice, is counted twice.
func TestStaleFreesDuringReleaseStampingCounted(t *testing.T) {
	a, cs := newWithCaches(t, 3)
	defer a.Close()
	c, d, e := cs[0], cs[1], cs[2]
	objs := allocObjects(t, c, 1000, 3) // objects 0..2 of S, group 0
	x, z := objs[0], objs[2]
	for _, b := range objs {
		must(t, c.Free(b))
	}
	lock, stamp := newPause(impl.YieldReleaseLock), newPause(impl.YieldReleaseStamp)
	impl.SetScheduler(pauseEach{lock, stamp})
	defer impl.SetScheduler(nil)
	flushed := make(chan struct{})
	go func() { c.Flush(); close(flushed) }() // S empty: released
	select {
	case <-lock.paused:
	case <-flushed:
		t.Fatal("setup: the flush released nothing")
	}
	must(t, d.Free(x)) // stale: pending in group 0, found by the release
	close(lock.resume)
	<-stamp.paused
	must(t, e.Free(z)) // stale: lands between the release's Load and its CAS
	close(stamp.resume)
	<-flushed
	impl.SetScheduler(nil)
	if n := a.Stats().DoubleFrees; n != 2 {
		t.Fatalf("two stale frees of free objects racing a release: %d double frees counted, want 2", n)
	}
}

// TestDrainDuringPushFollowsNewLink (LIFECYCLE, CONSERVE): c's superblocks
// S1, S2, S3 (three classes). S3 then S2 were announced and drained, which
// leaves S2 linked to S3; S1 is announced again. A remote free into S2 pushes
// S2 above S1 and stops right after its push (notify.pushed), while c's
// flush drains the stack: it must go from S2 to S1, the link S2's push
// stored before its CAS. Slip (adv16b 04, notifylinklate): the link is
// stored after the CAS: the drain follows S2's old link to S3, and S1 stays
// marked notified on no stack.
func TestDrainDuringPushFollowsNewLink(t *testing.T) {
	a, cs := newWithCaches(t, 2)
	defer a.Close()
	c, d := cs[0], cs[1]
	s1 := allocObjects(t, c, 1000, 2)
	s2 := allocObjects(t, c, 512, 2)
	s3 := allocObjects(t, c, 256, 2)
	must(t, d.Free(s3[0])) // S3 announced
	must(t, d.Free(s2[0])) // S2 announced above it: S2's link is S3
	c.Flush()              // both drained
	must(t, d.Free(s1[0])) // S1 announced: the stack is S1
	err := during(t, newPause(impl.YieldNotifyPushed),
		func() error { return d.Free(s2[1]) }, // S2 pushed above S1
		func() { c.Flush() })                  // drains S2, then S1
	must(t, err)
	announcedOnAStack(t, a)
	if st := sbState(t, a, sbOf(a, s1[0])); st.Notified {
		t.Fatalf("S1, announced below S2, is still marked notified after c's drain (pending %x)", st.Pending)
	}
}

// TestRerouteKeepsPushMeanwhile (LIFECYCLE, CONSERVE): c's flush releases S,
// still announced on c's stack (a remote free landed after the flush's
// drain, while it stopped at drain.pop, and the walk collected it), so it
// forwards c's stack (reroute). Between its read of the stack's head and
// taking the stack (reroute.swap) a remote free announces S2, another of
// c's superblocks, on c's stack. The CAS fails, the reroute takes the stack
// again, S2 with it, and forwards S2 back onto c's stack. Slip (adv16b 24,
// reroutestore): the reroute empties the stack with a Store: S2 is wiped,
// marked notified on no stack.
func TestRerouteKeepsPushMeanwhile(t *testing.T) {
	a, cs := newWithCaches(t, 3)
	defer a.Close()
	c, d, e := cs[0], cs[1], cs[2]
	s2 := allocObjects(t, c, 512, 2)
	x := allocN(t, c, 1000) // S, a class after S2's: the flush walks it last
	if sbOf(a, s2[0]) == sbOf(a, x) || spec.SizeToClass(512) >= spec.SizeToClass(1000) {
		t.Fatal("setup: one superblock, or S2's class after S's")
	}
	must(t, d.Free(s2[0])) // S2 announced: the flush's drain pops it
	pop, swap := newPause(impl.YieldDrainPop), newPause(impl.YieldRerouteSwap)
	impl.SetScheduler(pauseEach{pop, swap})
	defer impl.SetScheduler(nil)
	flushed := make(chan struct{})
	go func() { c.Flush(); close(flushed) }()
	select {
	case <-pop.paused:
	case <-flushed:
		t.Fatal("setup: the flush drained nothing")
	}
	must(t, d.Free(x)) // S announced after the drain's pop: the walk collects it, S is released
	close(pop.resume)
	select {
	case <-swap.paused:
	case <-flushed:
		t.Fatal("setup: the release of S, still announced, forwarded nothing")
	}
	must(t, e.Free(s2[1])) // S2 announced on c's stack, above S
	close(swap.resume)
	<-flushed
	impl.SetScheduler(nil)
	announcedOnAStack(t, a)
	c.Flush()
	if st := a.Stats(); st.Classes[spec.SizeToClass(512)].Frees != 2 {
		t.Fatalf("after c's flushes: %d frees of S2's class published, want 2", st.Classes[spec.SizeToClass(512)].Frees)
	}
}
