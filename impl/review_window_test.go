//go:build refalloc_yield

package impl_test

// Race-window tests written by an independent review (its M10, M11, M35).

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// pauseNth stops the goroutine that reaches point for the n-th time.
type pauseNth struct {
	point          string
	n              int32
	seen           atomic.Int32
	paused, resume chan struct{}
}

func (p *pauseNth) Yield(point string) {
	if point == p.point && p.seen.Add(1) == p.n {
		close(p.paused)
		<-p.resume
	}
}

func (p *pauseNth) Bucket() uint32 { return 0 }

// TestRemoteFreeDuringDrainIsAnnounced (CONSERVE: every superblock with pending
// remote frees has been announced). The owner drains its notification stack and
// collects a superblock group by group; a remote free lands in a group the
// collection has passed while the owner is at a later one. That free must find the
// superblock not notified, and push it again: else its pending bit waits,
// unannounced, for a full Flush (the refill's takeGroup collects only group 0).
func TestRemoteFreeDuringDrainIsAnnounced(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for range spec.ClassObjects(spec.SizeToClass(256)) { // the whole superblock: no free group left
		objs = append(objs, allocN(t, c, 256))
	}
	i := sbOf(a, objs[0])
	must(t, d.Free(objs[0]))  // group 0, pending
	must(t, d.Free(objs[64])) // group 2, pending; the superblock is on c's stack
	p := &pauseNth{point: impl.YieldCollectSwap, n: 2, paused: make(chan struct{}), resume: make(chan struct{})}
	impl.SetScheduler(p)
	done := make(chan error)
	go func() { _, err := c.Alloc(256); done <- err }() // refill: drainNotify collects group 0, then 2
	select {
	case <-p.paused:
	case err := <-done:
		impl.SetScheduler(nil)
		t.Fatalf("the refill never reached the second group's collection (%v)", err)
	}
	must(t, d.Free(objs[32])) // group 1: the drain is past it
	close(p.resume)
	must(t, <-done)
	impl.SetScheduler(nil)
	for _, s := range a.Snapshot().Superblocks {
		if s.Index == i && s.Pending[1] != 0 && !s.Notified {
			t.Fatalf("superblock %d has pending remote frees %#x and is not notified", i, s.Pending)
		}
	}
}

// TestStaleFreeDuringReleaseIsDouble (FREE-DOUBLE, CACHE-COHERENT 2): a remote
// free through a "not mine" entry that meets a remote word already stamped with
// the next generation while the header still has the entry's generation (the
// owner is between stamping and relabelling, YieldReleaseStamped) frees an
// object that is not live in an unchanged layout: ErrDoubleFree, not
// ErrInvalidPointer.
func TestStaleFreeDuringReleaseIsDouble(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x, err := c.Alloc(4096)
	must(t, err)
	y, err := c.Alloc(4096)
	must(t, err)
	must(t, d.Free(y)) // d now has a "not mine" entry of the current generation
	must(t, c.Free(x)) // every object is free: c's flush releases the superblock
	var stale error
	during(t, newPause(impl.YieldReleaseStamped),
		func() error { c.Flush(); return nil },
		func() { stale = d.Free(x) })
	if !errors.Is(stale, impl.ErrDoubleFree) {
		t.Fatalf("a free of a freed object while its superblock is being released: %v, want ErrDoubleFree", stale)
	}
}

// TestFreeMissRemoteSetReplaced (CACHE-COHERENT 2: "A miss reads the remote set
// before and after the header"). A free through a stale pointer reads the
// pooled superblock's remote set (one word: class 4096); before it reads the
// header, the owner carves the superblock for class 8, which needs a new set,
// and hands out the object at the same address. The free must not pair the
// old set with the new header: its CAS would land in the dead set, return nil
// and free nothing.
//
// Needs the yield point impl.YieldFreeRemoteSet between freeMiss's load of the
// remote set and its load of the header (yieldpoint_free_rs.patch).
func TestFreeMissRemoteSetReplaced(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x := allocN(t, c, 4096)
	must(t, c.Free(x))
	c.Flush() // released: pooled, its one-word remote set stamped
	var y []byte
	err = during(t, newPause(impl.YieldFreeRemoteSet),
		func() error { return d.Free(x) }, // d has no entry: a miss
		func() { y = allocN(t, c, 8) })
	if addrOf(y) != addrOf(x) {
		t.Fatalf("the superblock was not reused at the same address (%#x, %#x)", addrOf(x), addrOf(y))
	}
	if err != nil {
		// Judged before the reuse (pooled: a double free): y stays live.
		must(t, c.Free(y))
		return
	}
	// Judged after the reuse: d freed y, so the owner must refuse a second free.
	if err := c.Free(y); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("the stale free returned nil, yet y is still live: the owner's Free(y) = %v", err)
	}
}
