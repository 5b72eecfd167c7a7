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

// TestResizeInPlaceRacesResize (INTEGRITY, ZEROED): while a Realloc that
// resized a large object in place zeroes it outside the central lock, another
// Realloc of the live object (a slice of it with its new capacity, as a
// stale pointer to the address may be) shrinks it. It must wait for the
// first: shrinking at once pools superblocks the first is still zeroing, and
// an Alloc of them gets an object the zeroing then clears. Nor may it move:
// a large object that does not grow stays in place.
func TestResizeInPlaceRacesResize(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	b, err := c.Alloc(4 * spec.SuperblockSize)
	must(t, err)
	u1 := 3 * spec.SuperblockSize
	p := newPauseAndWatch(impl.YieldLargeResized)
	impl.SetScheduler(p)
	defer impl.SetScheduler(nil)
	firstDone := make(chan error, 1)
	go func() {
		r, err := c.Realloc(b[:0], u1) // zeroes [0, 3 superblocks)
		if err == nil && (addrOf(r) != addrOf(b) || cap(r) != u1) {
			t.Errorf("the first Realloc returned %#x cap %d, want %#x cap %d", addrOf(r), cap(r), addrOf(b), u1)
		}
		firstDone <- err
	}()
	select {
	case <-p.paused:
	case err := <-firstDone:
		t.Fatalf("the first Realloc never paused after resizing in place (it returned %v)", err)
	}
	live := b[:u1:u1] // the live object as the first Realloc leaves it
	secondDone := make(chan []byte, 1)
	go func() {
		r, err := d.Realloc(live[:0], spec.SuperblockSize+100) // two superblocks
		if err != nil {
			t.Errorf("the second Realloc, of the live object: %v", err)
		}
		secondDone <- r
	}()
	var r2, x []byte
	select {
	case r2 = <-secondDone:
		// It shrank while the first is still to zero superblock 2.
		x, err = d.Alloc(spec.SuperblockSize + 100)
		must(t, err)
		for i := range x {
			x[i] = 0xaa
		}
		close(p.resume)
	case <-p.waiting:
		close(p.resume)
		r2 = <-secondDone
	}
	must(t, <-firstDone)
	if r2 != nil && addrOf(r2) != addrOf(b) {
		t.Errorf("the second Realloc moved a large object that shrank (%#x to %#x)", addrOf(b), addrOf(r2))
	}
	for i, v := range x {
		if v != 0xaa {
			t.Fatalf("byte %d of a live object at %#x is %#x: the first Realloc's zeroing wrote into it", i, addrOf(x), v)
		}
	}
	if x != nil {
		must(t, d.Free(x))
	}
	if r2 != nil {
		must(t, d.Free(r2))
	}
	if st := a.Stats(); st.Large.LiveObjects != 0 {
		t.Fatalf("%d large objects live after every one was freed", st.Large.LiveObjects)
	}
}
