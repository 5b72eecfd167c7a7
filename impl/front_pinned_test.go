//go:build !refalloc_portable

package impl

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
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
