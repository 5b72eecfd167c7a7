//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestResizeFreeWaitsOutZeroing (INTEGRITY): a free of a large object that a
// Realloc resized in place waits until the Realloc's zeroing outside the
// central lock is done, not only until it has begun: paused right after the
// zeroing (large.zeroed), the Realloc still holds the free off, which waits
// (lock.wait) rather than pooling the run, since the pause stands for the
// zeroing's last writes (an unmark before the zeroing let the free pool the
// run under it, and an Alloc hand it to a new owner the zeroing then cleared).
func TestResizeFreeWaitsOutZeroing(t *testing.T) {
	for _, grow := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		from, to := 4*spec.SuperblockSize, 2*spec.SuperblockSize+100
		if grow {
			from, to = to, 4*spec.SuperblockSize
		}
		b, err := c.Alloc(from)
		must(t, err)
		stale := b
		p := newPauseAndWatch(impl.YieldLargeZeroed)
		impl.SetScheduler(p)
		reallocDone := make(chan error, 1)
		go func() {
			_, err := c.Realloc(b[:0], to)
			reallocDone <- err
		}()
		select {
		case <-p.paused:
		case err := <-reallocDone:
			impl.SetScheduler(nil)
			t.Fatalf("grow %v: the Realloc never paused after zeroing in place (it returned %v)", grow, err)
		}
		freeDone := make(chan error, 1)
		go func() { freeDone <- d.Free(stale) }()
		select {
		case err := <-freeDone:
			close(p.resume)
			<-reallocDone
			impl.SetScheduler(nil)
			t.Fatalf("grow %v: a free of the object took effect (%v) while the Realloc had not finished zeroing it", grow, err)
		case <-p.waiting:
			close(p.resume)
		}
		must(t, <-reallocDone)
		must(t, <-freeDone)
		impl.SetScheduler(nil)
		if st := a.Stats(); st.Large.LiveObjects != 0 {
			t.Fatalf("grow %v: %d large objects live after the free", grow, st.Large.LiveObjects)
		}
		must(t, a.Close())
	}
}

// twoPauses pauses the first goroutine to reach each of its two points.
type twoPauses struct{ p, q *pauseOnce }

func (s twoPauses) Yield(point string) { s.p.Yield(point); s.q.Yield(point) }
func (s twoPauses) Bucket() uint32     { return 0 }

// TestReleaseWhileAnnouncingOnOwnersStack (LIFECYCLE, STATS-EXACT): a remote
// free that has read the owner (notify.owner) pushes the superblock onto the
// owner's stack while the owner's release of it, having collected that free,
// has stamped it but not yet given it up (release.stamped): the notify then
// still sees the owner and leaves the superblock on its stack, marked
// notified. The release must forward the stack after releaseLocked, not
// before (a forward before it misses this push), or its next owner never
// hears of a remote free into it (TestReleaseWhileAnnouncedOnOwnersStack).
func TestReleaseWhileAnnouncingOnOwnersStack(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	old, _ := a.NewCache() // goes idle after its Flush
	neu, _ := a.NewCache()
	w, _ := a.NewCache()
	const size = 1000
	k := spec.SizeToClass(size)
	nobj := spec.ClassObjects(k)
	objs := allocObjects(t, old, size, nobj) // superblock S, old's
	y, err := old.Alloc(64)                  // old keeps a live object while idle
	must(t, err)
	for _, b := range objs[1:] {
		must(t, old.Free(b)) // S: one object live
	}
	s := twoPauses{newPause(impl.YieldNotifyOwner), newPause(impl.YieldReleaseStamped)}
	impl.SetScheduler(s)
	freed := make(chan error, 1)
	go func() { freed <- w.Free(objs[0]) }() // pending, then paused before its push
	<-s.p.paused
	flushed := make(chan struct{})
	go func() { old.Flush(); close(flushed) }() // collects it, releases S: paused stamped
	<-s.q.paused
	close(s.p.resume) // the push lands on old's stack; old still owns S
	must(t, <-freed)
	close(s.q.resume)
	<-flushed
	impl.SetScheduler(nil)
	next := allocObjects(t, neu, size, nobj) // S again, neu's
	if addrOf(next[0]) != addrOf(objs[0]) {
		t.Fatalf("S was not reused (%#x, %#x)", addrOf(objs[0]), addrOf(next[0]))
	}
	for _, b := range next {
		must(t, w.Free(b)) // remote: pending in S
	}
	z, err := neu.Alloc(size) // a refill, which orphans S if it sees no free
	must(t, err)
	must(t, neu.Free(z))
	neu.Flush()
	w.Flush()
	st := a.Stats()
	if st.OrphanedSuperblocks != 0 || st.Classes[k].Frees != uint64(2*nobj+1) {
		t.Fatalf("every object freed, the active caches flushed: %d orphaned superblocks (want 0), %d frees of class %d (want %d)",
			st.OrphanedSuperblocks, st.Classes[k].Frees, k, 2*nobj+1)
	}
	must(t, old.Free(y))
	for _, c := range []*impl.Cache{old, neu, w} {
		must(t, c.Close())
	}
}
