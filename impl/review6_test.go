package impl_test

import (
	"errors"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardedAllocPanicUnlocks: an OnError that panics in the report of a
// write after free found while an allocation of a guarded small object
// releases the quarantine to make room (allocGuarded, takeRunEvict: a
// poison-only quarantine verifies on release) must not leave the central lock
// held: every later call on the Allocator, Close included, would hang.
func TestGuardedAllocPanicUnlocks(t *testing.T) {
	const n = 16
	a, err := impl.New(impl.Options{Reserve: n * spec.SuperblockSize, HeapBackend: true, OnError: func(err error) { panic(err) },
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 4 * n, QuarantineBytes: 4 * n * spec.SuperblockSize}})
	must(t, err)
	c, _ := a.NewCache()
	var first []byte
	for range n { // the quarantine then holds every superblock
		b, err := c.Alloc(100)
		must(t, err)
		must(t, c.Free(b))
		if first == nil {
			first = b
		}
	}
	if g := a.Stats().Guard; g.Quarantined != n || g.Released != 0 {
		t.Fatalf("the quarantine does not hold every superblock: %+v", g)
	}
	first[3] = 1 // a write after free, into the oldest quarantined object
	func() {
		defer func() {
			var waf *impl.WriteAfterFreeError
			if r := recover(); r == nil || !errors.As(r.(error), &waf) {
				t.Fatalf("the allocation that released the quarantine: recovered %v", r)
			}
		}()
		c.Alloc(100)
		t.Fatal("no report of the write after free")
	}()
	if !impl.CentralLockFree(a) {
		t.Fatal("the panic left the central lock held: every later call hangs")
	}
}

// TestResizeInPlaceEndsResizing (INTEGRITY, LIFECYCLE): a Realloc that
// resizes a large object in place, shrinking or growing, leaves it unmarked
// (superblock.resizing) when it returns, in plain, debug and guard mode
// alike (the last two zero under the central lock and never mark it): a
// mark left behind makes every later free and in-place Realloc of the
// object wait for good.
func TestResizeInPlaceEndsResizing(t *testing.T) {
	for _, opt := range []impl.Options{{}, {Debug: true}, {Guard: impl.GuardOptions{Enabled: true}}} {
		opt.Reserve = 64 * spec.SuperblockSize
		a, err := impl.New(opt)
		must(t, err)
		c, _ := a.NewCache()
		b, err := c.Alloc(4 * spec.SuperblockSize)
		must(t, err)
		inPlace := 0
		for _, n := range []int{2*spec.SuperblockSize + 100, 5 * spec.SuperblockSize, 3 * spec.SuperblockSize} {
			r, err := c.Realloc(b, n)
			must(t, err)
			if addrOf(r) == addrOf(b) {
				inPlace++
			}
			if impl.Resizing(a, r) {
				t.Fatalf("debug %v guard %v: Realloc to %d returned with the object still marked resizing", opt.Debug, opt.Guard.Enabled, n)
			}
			b = r
		}
		if inPlace == 0 && !opt.Guard.Enabled {
			t.Errorf("debug %v: no Realloc stayed in place", opt.Debug)
		}
		noHang(t, func() { must(t, c.Free(b)) })
		must(t, c.Close())
		must(t, a.Close())
	}
}

// noHang runs f, failing the test with every goroutine's stack if it has not
// returned within a minute (a waiter nothing will release).
func noHang(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		var buf strings.Builder
		pprof.Lookup("goroutine").WriteTo(&buf, 2)
		t.Fatalf("hung:\n%s", buf.String())
	}
}

// TestReallocStaleSelfFreesOnce (FREE-DOUBLE, STATS-EXACT): a Realloc of a
// freed small object whose Alloc hands out that very address (b was not
// live) refuses it, counted as one double free, and frees its new object
// once: a second drop (the deferred one after an explicit one) is a double
// free of the allocator's own, counted against the caller too.
func TestReallocStaleSelfFreesOnce(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	const size = 1000
	nobj := spec.ClassObjects(spec.SizeToClass(size))
	objs := allocObjects(t, c, size, nobj) // the whole superblock: the next refill finds only what is freed
	x := objs[3]
	must(t, c.Free(x))
	before := a.Stats().DoubleFrees
	if r, err := c.Realloc(x, size-1); !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Fatalf("Realloc of a freed object onto its own address: %v, %d bytes", err, len(r))
	}
	c.Flush()
	if got := a.Stats().DoubleFrees - before; got != 1 {
		t.Fatalf("the refused Realloc counted %d double frees, want 1", got)
	}
	for i, b := range objs {
		if i != 3 {
			must(t, c.Free(b))
		}
	}
	c.Flush()
	if s := a.Stats(); s.SmallSuperblocks != 0 {
		t.Fatalf("every object freed: %d small superblocks left", s.SmallSuperblocks)
	}
	must(t, c.Close())
}
