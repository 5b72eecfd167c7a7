//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// pauseAndWatch pauses the first goroutine to reach point, as pauseOnce, and
// reports on waiting every time a goroutine waits at a busy lock or object
// (impl.YieldLockWait) meanwhile.
type pauseAndWatch struct {
	pauseOnce
	waiting chan struct{}
}

func newPauseAndWatch(point string) *pauseAndWatch {
	return &pauseAndWatch{pauseOnce: *newPause(point), waiting: make(chan struct{}, 1)}
}

func (p *pauseAndWatch) Yield(point string) {
	if point == impl.YieldLockWait && p.taken.Load() {
		select {
		case p.waiting <- struct{}{}:
		default:
		}
	}
	p.pauseOnce.Yield(point)
}

// TestResizeInPlaceRacesFree (INTEGRITY, NO-OVERLAP): a large object resized
// in place is zeroed past what it keeps after the central lock is released
// (outside debug and guard mode). A free of its address that lands in
// between (a stale pointer left by an older object there: the object is
// live, so the free frees it) must not pool the run before the zeroing is
// done: an Alloc would hand it out, its new owner would write into it, and
// the Realloc's zeroing would clear that new live object. (The bug: it did.)
// The free may wait for the Realloc; it must not be refused, since the
// object is live throughout. Shrinking and growing alike.
func TestResizeInPlaceRacesFree(t *testing.T) {
	for _, grow := range []bool{false, true} {
		resizeInPlaceRacesFree(t, grow)
	}
}

func resizeInPlaceRacesFree(t *testing.T, grow bool) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	from, to := 4*spec.SuperblockSize, 2*spec.SuperblockSize+100
	if grow {
		from, to = to, 4*spec.SuperblockSize
	}
	old, err := c.Alloc(from) // the older object at the address
	must(t, err)
	stale := old
	must(t, c.Free(old))
	b, err := c.Alloc(from)
	must(t, err)
	if addrOf(b) != addrOf(stale) {
		t.Fatalf("the address was not reused (%#x, %#x)", addrOf(stale), addrOf(b))
	}
	p := newPauseAndWatch(impl.YieldLargeResized)
	impl.SetScheduler(p)
	defer impl.SetScheduler(nil)
	reallocDone := make(chan error, 1)
	go func() {
		r, err := c.Realloc(b[:0], to) // keeps nothing: zeroes the whole object
		if err == nil && addrOf(r) != addrOf(b) {
			t.Errorf("Realloc moved (%#x to %#x)", addrOf(b), addrOf(r))
		}
		reallocDone <- err
	}()
	select {
	case <-p.paused:
	case err := <-reallocDone:
		t.Fatalf("grow %v: the Realloc never paused after resizing in place (it returned %v)", grow, err)
	}
	// b is live: the free through the stale pointer frees it, now or once
	// the Realloc is done.
	freeDone := make(chan error, 1)
	go func() { freeDone <- d.Free(stale) }()
	var x []byte
	resumed := false
	select {
	case err := <-freeDone:
		must(t, err)
		// The run is pooled while the Realloc has still to zero it.
		x, err = d.Alloc(3 * spec.SuperblockSize)
		must(t, err)
		for i := range x {
			x[i] = 0xaa
		}
	case <-p.waiting:
		close(p.resume) // the free waits for the Realloc: let it finish
		resumed = true
		must(t, <-freeDone)
	}
	if !resumed {
		close(p.resume)
	}
	must(t, <-reallocDone)
	if x == nil {
		x, err = d.Alloc(3 * spec.SuperblockSize)
		must(t, err)
		for i := range x {
			x[i] = 0xaa
		}
	}
	for i, v := range x {
		if v != 0xaa {
			t.Fatalf("grow %v: byte %d of a live object at %#x (the resized one's address %#x) is %#x: the allocator wrote into it", grow, i, addrOf(x), addrOf(b), v)
		}
	}
	must(t, d.Free(x))
	if st := a.Stats(); st.Large.LiveObjects != 0 {
		t.Fatalf("grow %v: %d large objects live after every one was freed", grow, st.Large.LiveObjects)
	}
}
