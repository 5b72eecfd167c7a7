//go:build !refalloc_portable

package impl

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// TestWaitUnpinned: waitUnpinned, which Allocator.Flush relies on to exclude
// the per-P fast paths, returns only after a goroutine that was pinned when it
// was called has unpinned. If a Go release stops ReadMemStats from stopping
// the world, this fails, and waitUnpinned needs another way.
func TestWaitUnpinned(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for range 3 {
		var pinned, unpinned atomic.Bool
		go func() {
			procPin()
			pinned.Store(true)
			for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; {
			}
			unpinned.Store(true)
			procUnpin()
		}()
		for !pinned.Load() {
			runtime.Gosched()
		}
		waitUnpinned()
		if !unpinned.Load() {
			t.Fatal("waitUnpinned returned while a goroutine was still pinned")
		}
	}
}

// TestProcCachesMadeAtNew: every P at New has its cache, registered as a
// front cache, and P ids past the slots get none (they use the shards).
func TestProcCachesMadeAtNew(t *testing.T) {
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if n := len(a.front.procs.slots); n < runtime.GOMAXPROCS(0) {
		t.Fatalf("%d per-P caches for GOMAXPROCS %d", n, runtime.GOMAXPROCS(0))
	}
	for _, c := range a.front.procs.caches() {
		if !c.front {
			t.Fatal("a per-P cache is not marked as the front's")
		}
	}
	if a.front.procs.pinned(len(a.front.procs.slots)) != nil || a.front.procs.pinned(-1) != nil {
		t.Fatal("a P id out of the slots got a cache")
	}
}

// TestFlushWaitsForPinnedFastPath: Allocator.Flush does not touch a per-P
// cache while a fast path that found its token free is running on it
// (FRONT-EXCLUSIVE): a goroutine stays pinned to its P, between pinned and
// unpin, for 30 ms; Flush, from another goroutine, returns only after it.
func TestFlushWaitsForPinnedFastPath(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var inside, done atomic.Bool
	go func() {
		p := pin()
		c := a.front.procs.pinned(p)
		if c == nil {
			unpinP(p)
			inside.Store(true)
			t.Error("no per-P cache for a pinned goroutine")
			return
		}
		inside.Store(true)
		stayPinned(p, c, &done)
	}()
	for !inside.Load() {
		runtime.Gosched()
	}
	a.Flush()
	if !done.Load() {
		t.Fatal("Flush returned while a fast path was running on a per-P cache")
	}
}

// TestBusyTokenFallsBack: a call that finds its P's cache in use by another
// call (its token held: the holder was descheduled in a slow path) never uses
// it (FRONT-EXCLUSIVE), fast path or slow: it is served by a shard.
func TestBusyTokenFallsBack(t *testing.T) {
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	procs := a.front.procs.caches()
	for _, c := range procs { // every P's cache is held by "another call"
		c.busy.Store(tokenP)
		c.enter()
	}
	for i := range 100 { // fast and slow paths alike
		b, err := a.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Free(b); err != nil {
			t.Fatal(i, err)
		}
	}
	b, _ := a.Alloc(64)
	for _, sb := range a.Snapshot().Superblocks {
		if sb.State != SBSmall {
			continue
		}
		for _, c := range procs {
			if sb.Owner == c.id {
				t.Fatalf("superblock %d belongs to per-P cache %d, whose token was held", sb.Index, c.id)
			}
		}
	}
	a.Free(b)
	for _, c := range procs {
		c.exit()
		c.busy.Store(tokenFree)
	}
}

// TestWithFrontCacheWaitsForPinnedFastPath (FRONT-EXCLUSIVE): WithFrontCache
// runs f on a per-P cache only once no fast path that found its token free is
// running on it: a goroutine stays pinned on a per-P cache until f has run (or
// 200 ms have passed); f must find it gone.
func TestWithFrontCacheWaitsForPinnedFastPath(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var inside, ran, done atomic.Bool
	slot := make(chan int, 1)
	go func() {
		p := pin()
		c := a.front.procs.pinned(p)
		if c == nil {
			unpinP(p)
			slot <- -1
			return
		}
		slot <- p
		inside.Store(true)
		for t0 := time.Now(); !ran.Load() && time.Since(t0) < 200*time.Millisecond; {
		}
		done.Store(true)
		unpin(p, c)
	}()
	p := <-slot
	if p < 0 {
		t.Fatal("no per-P cache for a pinned goroutine")
	}
	for !inside.Load() {
		runtime.Gosched()
	}
	a.WithFrontCache(p, func(*Cache) {
		ran.Store(true)
		if !done.Load() {
			t.Error("WithFrontCache ran f while a fast path was running on its per-P cache")
		}
	})
}

// TestOutsideTokenFallsBack (FRONT-EXCLUSIVE): a per-P cache whose token was
// taken from outside the Ps (Allocator.Flush, WithFrontCache: tokenOutside,
// not tokenP) is as busy as one a call holds in a slow path: the fast path
// declines it too, and the call is served by a shard. On one P the cache is
// P 0's, and an allocation before gives it a held group the fast path would
// pop from. Slip: pinned declines only tokenP, and a fast path runs on a cache
// that Flush is flushing.
func TestOutsideTokenFallsBack(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	first, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	procs := a.front.procs.caches()
	for _, c := range procs {
		a.front.procs.take(c) // as Flush does
		c.enter()
	}
	b, err := a.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	i := int((uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base) >> spec.SuperblockShift)
	for _, sb := range a.Snapshot().Superblocks {
		for _, c := range procs {
			if sb.Index == i && sb.Owner == c.id {
				t.Errorf("an allocation while Flush held every per-P token came from superblock %d of per-P cache %d", i, c.id)
			}
		}
	}
	for _, c := range procs {
		c.exit()
		a.front.procs.release(c)
	}
	for _, b := range [][]byte{first, b} {
		if err := a.Free(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFrontFreeAdoptsOrphan (FREE-DOUBLE, adoption on free: "a free into an
// orphaned superblock first makes the freeing cache its owner"): the front's
// pinned free, holding an entry made while the superblock was another cache's,
// leaves a free into it once it is an orphan to the slow path, which adopts
// it; only a superblock with an owner takes a lock-free remote free. On one
// P every call runs on that P's cache, whose entry the first free filled.
// Slip: the pinned free tests the owner the other way round, and a free into
// an orphan stays pending in it, unowned.
func TestFrontFreeAdoptsOrphan(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := New(Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	c, err := a.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	var objs [][]byte
	for range 3 {
		b, err := c.Alloc(64)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, b)
	}
	if err := a.Free(objs[0]); err != nil { // a remote free: fills the P's entry
		t.Fatal(err)
	}
	if err := c.Close(); err != nil { // orphans the superblock, two objects live
		t.Fatal(err)
	}
	if err := a.Free(objs[1]); err != nil {
		t.Fatal(err)
	}
	i := int((uintptr(unsafe.Pointer(unsafe.SliceData(objs[1]))) - a.base) >> spec.SuperblockShift)
	s := a.Snapshot()
	for _, sb := range s.Superblocks {
		if sb.Index == i && (sb.Orphan || sb.Owner < 0) {
			t.Errorf("superblock %d after a free into it as an orphan: owner %d, list %s; want it adopted", i, sb.Owner, sb.List)
		}
	}
	if err := a.Free(objs[1]); !errors.Is(err, ErrDoubleFree) {
		t.Errorf("a second free of an object freed into an adopted orphan: %v, want ErrDoubleFree at once", err)
	}
	if err := a.Free(objs[2]); err != nil {
		t.Fatal(err)
	}
}
