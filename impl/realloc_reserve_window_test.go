//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocCleanupFreeStaysReserved (FREE-DOUBLE, INTEGRITY): a moving
// Realloc whose own free of b is refused (b was not live) frees its new
// large object y again, ending the reservation in the same hold of the
// central lock (Allocator.freeReserved). Were it unreserved first and freed
// by a plain free, which takes the lock only after the yield point
// large.free, a stale free of y between would be accepted, an Alloc would get
// y, and the clean-up free would free that new owner's object.
func TestReallocCleanupFreeStaysReserved(t *testing.T) {
	for _, self := range []bool{false, true} {
		cleanupFreeStaysReserved(t, self)
	}
}

func cleanupFreeStaysReserved(t *testing.T, self bool) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	n := 2*spec.SuperblockSize + 100
	keep, err := c.Alloc(100) // keeps b's superblock small and in use
	must(t, err)
	b, err := c.Alloc(100)
	must(t, err)
	w, err := c.Alloc(n) // the older object at y
	must(t, err)
	y := addrOf(w)
	must(t, c.Free(w)) // w is now a stale pointer to y
	must(t, c.Free(b)) // b is not live: the Realloc's own free is refused
	var z []byte
	var staleErr error
	// The clean-up free is paused at large.free if it goes through
	// Cache.Free (freeMiss); a Realloc that frees its reserved object in one
	// hold of the central lock never gets there, and there is no window.
	p := newPause(impl.YieldLargeFree)
	impl.SetScheduler(p)
	done := make(chan error)
	src := b
	if self {
		src = w // the Realloc's new object is at src's own address (the p == nb path)
	}
	go func() {
		_, err := c.Realloc(src, n) // new object at y; Free(b) refused, or nb == src; clean-up free of y
		done <- err
	}()
	select {
	case <-p.paused:
		impl.SetScheduler(nil)
		staleErr = d.Free(w)
		var aerr error
		z, aerr = d.Alloc(n)
		must(t, aerr)
		for i := range z {
			z[i] = 0x5a
		}
		close(p.resume)
		err = <-done
	case err = <-done:
		impl.SetScheduler(nil)
		staleErr = errors.New("no window")
		if e := d.Free(w); !errors.Is(e, impl.ErrDoubleFree) { // y was freed by the clean-up: a double free
			t.Errorf("a stale free of y after the Realloc: %v, want ErrDoubleFree", e)
		}
		z2, err2 := d.Alloc(n)
		must(t, err2)
		must(t, d.Free(z2))
	}
	if !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("self %v: Realloc of a freed object: %v, want ErrDoubleFree", self, err)
	}
	if staleErr == nil {
		t.Errorf("self %v: a stale free of y during the Realloc's clean-up free was accepted (want ErrDoubleFree)", self)
	}
	if addrOf(z) == y {
		t.Errorf("self %v: y was handed out again while the Realloc had it", self)
		if err := d.Free(z); err != nil {
			t.Errorf("self %v: the new owner's object at y was freed by the Realloc's clean-up: its Free says %v", self, err)
		}
	} else {
		must(t, d.Free(z))
	}
	must(t, c.Free(keep))
	if s := a.Stats(); s.Large.LiveObjects != 0 {
		t.Errorf("large objects live at the end: %d", s.Large.LiveObjects)
	}
	c.Close()
	d.Close()
	a.Close()
}

// TestReallocGuardedSmallNewObjectReserved (FREE-DOUBLE, INTEGRITY,
// GUARD-FAULT): in guard mode a sampled small object is a superblock of its
// own, handed out under the central lock like a large one, not from the
// cache's held group. A moving Realloc to a small size whose new object y is
// guarded reserves it as it does a large one (Cache.reserving). Were it not
// reserved, a stale free of y (an older guarded object's pointer) would
// quarantine it, the quarantine let it go, an Alloc get y, and the Realloc
// copy b's bytes into the new owner's object and return y to its caller too.
func TestReallocGuardedSmallNewObjectReserved(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	b, err := c.Alloc(200_000) // large: guarded, superblocks 0-3
	must(t, err)
	for i := range b {
		b[i] = 7
	}
	g, err := c.Alloc(100) // guarded, at y
	must(t, err)
	h, err := c.Alloc(100) // guarded, after y
	must(t, err)
	y := addrOf(g)
	must(t, c.Free(g)) // g is a stale pointer to y now; y quarantined
	must(t, c.Free(h)) // evicts y (QuarantineObjects 1): y is free again
	var nb, z []byte
	var staleErr error
	err = during(t, newPause(impl.YieldReallocMoved), func() error {
		var err error
		nb, err = c.Realloc(b, 100) // moves to a guarded small object at y
		return err
	}, func() {
		staleErr = d.Free(g)
		k1, err := d.Alloc(100)
		must(t, err)
		must(t, d.Free(k1)) // evicts y from the quarantine
		z, err = d.Alloc(100)
		must(t, err)
		for i := range z {
			z[i] = 0x5a
		}
	})
	must(t, err)
	if addrOf(nb) != y {
		t.Fatalf("the Realloc's new object is at %#x, want y %#x", addrOf(nb), y)
	}
	if staleErr == nil {
		t.Errorf("a stale free of the Realloc's new guarded object was accepted (want ErrDoubleFree)")
	}
	if addrOf(z) == y {
		t.Errorf("y was handed out again while the Realloc had it")
		for i, x := range z {
			if x != 0x5a {
				t.Errorf("the Realloc wrote into the new owner's object: byte %d is %#x, want 0x5a", i, x)
				break
			}
		}
	}
	if addrOf(z) != addrOf(nb) {
		must(t, c.Free(nb))
	}
	must(t, d.Free(z))
	c.Close()
	d.Close()
	a.Close()
}

// TestReallocNewLargeObjectReservedSizes (FREE-DOUBLE): the reservation
// covers every large size, from MaxSmall+1 (a run of one superblock) up: a
// stale free of the moving Realloc's new object at y, while it is paused
// before the copy, is refused and y is not handed out again.
func TestReallocNewLargeObjectReservedSizes(t *testing.T) {
	modes := map[string]impl.Options{
		"plain": {},
		"debug": {Debug: true},
		"guard": {Guard: impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1}},
		"heap":  {HeapBackend: true},
	}
	for mode, opt := range modes {
		opt.Reserve = 64 * spec.SuperblockSize
		t.Run(mode, func(t *testing.T) { reservedSizes(t, opt) })
	}
}

func reservedSizes(t *testing.T, opt impl.Options) {
	for _, n := range []int{spec.MaxSmall + 1, spec.SuperblockSize - 1, spec.SuperblockSize + 1, 2*spec.SuperblockSize + 100} {
		a, err := impl.New(opt)
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		b, err := c.Alloc(100)
		must(t, err)
		w, err := c.Alloc(n) // the older object at y
		must(t, err)
		q, err := c.Alloc(n)
		must(t, err)
		y := addrOf(w)
		must(t, c.Free(w))
		must(t, c.Free(q)) // in guard mode, releases y from the quarantine
		var nb, z []byte
		var staleErr error
		before := a.Stats().DoubleFrees
		err = during(t, newPause(impl.YieldReallocMoved), func() error {
			var err error
			nb, err = c.Realloc(b, n)
			return err
		}, func() {
			staleErr = d.Free(w)
			var err error
			z, err = d.Alloc(n)
			must(t, err)
		})
		must(t, err)
		if addrOf(nb) != y {
			t.Fatalf("n %d: the Realloc's new object is at %#x, want y %#x", n, addrOf(nb), y)
		}
		if !errors.Is(staleErr, impl.ErrDoubleFree) {
			t.Errorf("n %d: a stale free of the Realloc's new object: %v, want ErrDoubleFree", n, staleErr)
		}
		if addrOf(z) == y {
			t.Errorf("n %d: y was handed out again while the Realloc had it", n)
		} else {
			must(t, d.Free(z))
		}
		must(t, c.Free(nb))
		d.Flush()
		c.Flush()
		if s := a.Stats(); s.DoubleFrees-before != 1 || s.Large.LiveObjects != 0 || s.Large.LiveBytes != 0 {
			t.Errorf("n %d: DoubleFrees +%d (want 1), large live %d objects %d bytes (want 0)", n, s.DoubleFrees-before, s.Large.LiveObjects, s.Large.LiveBytes)
		}
		c.Close()
		d.Close()
		if err := a.Close(); err != nil {
			t.Errorf("n %d: Close: %v", n, err)
		}
	}
}

// TestReallocReservedNotResized (FREE-DOUBLE, LARGE-EXACT): a stale Realloc
// of y, through a pointer to the older object there with the same capacity,
// while a moving Realloc has y and has not returned it, must not resize y in
// place (resizeRun's reservation check): it is refused as a double free, and
// y is the first Realloc's with its full run.
func TestReallocReservedNotResized(t *testing.T) {
	for _, grow := range []bool{false, true} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		n := 2*spec.SuperblockSize + 100
		b, err := c.Alloc(100)
		must(t, err)
		w, err := c.Alloc(n) // the older object at y, same capacity as the new one
		must(t, err)
		y := addrOf(w)
		must(t, c.Free(w))
		m := spec.SuperblockSize + 100 // shrinks y's run in place
		if grow {
			m = 4*spec.SuperblockSize + 100 // grows it into the free superblocks after it
		}
		var nb, r2 []byte
		var staleErr error
		err = during(t, newPause(impl.YieldReallocMoved), func() error {
			var err error
			nb, err = c.Realloc(b, n)
			return err
		}, func() {
			r2, staleErr = d.Realloc(w, m)
		})
		must(t, err)
		if addrOf(nb) != y {
			t.Fatalf("grow %v: the Realloc's new object is at %#x, want y %#x", grow, addrOf(nb), y)
		}
		if !errors.Is(staleErr, impl.ErrDoubleFree) {
			t.Errorf("grow %v: a stale Realloc of the reserved y: %v (result at %#x), want ErrDoubleFree", grow, staleErr, addrOf(r2))
			if staleErr == nil && addrOf(r2) != y {
				must(t, d.Free(r2))
			}
		}
		if s := a.Stats(); s.Large.LiveObjects != 1 || s.Large.LiveBytes != uint64(cap(nb)) {
			t.Errorf("grow %v: large live %d objects %d bytes, want 1 and %d (y's run changed under the Realloc)", grow, s.Large.LiveObjects, s.Large.LiveBytes, cap(nb))
		}
		must(t, c.Free(nb))
		c.Close()
		d.Close()
		a.Close()
	}
}

// TestReallocReservedAfterOOMFlush (FREE-DOUBLE, OOM-REAL): the Realloc's
// large allocation that fails at first and succeeds after the cache gives
// back its empty superblocks (allocOther's retry) reserves its object too.
func TestReallocReservedAfterOOMFlush(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 6 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	n := 2*spec.SuperblockSize + 100 // superblocks 1-3
	b, err := c.Alloc(100)           // superblock 0, with the source
	must(t, err)
	w, err := c.Alloc(n) // the older object at y
	must(t, err)
	y := addrOf(w)
	must(t, c.Free(w))
	// Superblocks 1-5: each the current (kept, empty) superblock of a class of c.
	for _, size := range []int{1000, 2000, 4000, 8000, 16000} {
		x, err := c.Alloc(size)
		must(t, err)
		must(t, c.Free(x))
	}
	if _, err := d.Alloc(n); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Fatalf("the setup left a run for n: %v", err)
	}
	var nb []byte
	var staleErr error
	err = during(t, newPause(impl.YieldReallocMoved), func() error {
		var err error
		nb, err = c.Realloc(b, n) // OOM, flush, retry: y
		return err
	}, func() {
		staleErr = d.Free(w)
		if z, err := d.Alloc(n); err == nil {
			t.Errorf("y handed out again (at %#x) while the Realloc had it", addrOf(z))
			must(t, d.Free(z))
		}
	})
	must(t, err)
	if addrOf(nb) != y {
		t.Fatalf("the Realloc's new object is at %#x, want y %#x", addrOf(nb), y)
	}
	if !errors.Is(staleErr, impl.ErrDoubleFree) {
		t.Errorf("a stale free of the Realloc's new object (allocated after the OOM flush): %v, want ErrDoubleFree", staleErr)
	}
	must(t, c.Free(nb))
	c.Close()
	d.Close()
	a.Close()
}
