package impl_test

// A real bug hunt21 found (not a mutant): under the Go-heap backend a closed
// Allocator pinned its arena. Allocator.Close "releases the reservation";
// heapBackend.release dropped its slice for the garbage collector, but the
// Allocator's start pointer, and every cache's held group, still pointed into
// the arena and kept all of it reachable for as long as the program held the
// Allocator or one of its caches.

import (
	"runtime"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestCloseFreesHeapArena (MEM-ACCOUNT; Allocator.Close "releases the
// reservation"): under the Go-heap backend the reservation is a heap slice,
// and Close lets the garbage collector have it even while the program still
// holds the closed Allocator: else every closed Allocator a program keeps
// pins Reserve bytes of Go heap (mutant closepinsarena: Allocator.start and
// the caches' held groups kept after Close).
func TestCloseFreesHeapArena(t *testing.T) {
	const reserve = 256 * spec.SuperblockSize // 16 MiB
	a, err := impl.New(impl.Options{Reserve: reserve, HeapBackend: true})
	must(t, err)
	inUse := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapInuse
	}
	// Every kind of cache holds a group of the arena when the Allocator
	// closes: an open Cache (which still points at its held group), a closed
	// one, and the P's (the Allocator's own methods).
	open, shut := mustCache(t, a), mustCache(t, a)
	for _, c := range []*impl.Cache{open, shut} {
		b, err := c.Alloc(48)
		must(t, err)
		must(t, c.Free(b))
	}
	must(t, shut.Close())
	b, err := a.Alloc(48)
	must(t, err)
	must(t, a.Free(b))
	b = nil
	before := inUse()
	must(t, a.Close())
	after := inUse()
	if before < after+reserve/2 {
		t.Errorf("Close of an Allocator still held: the Go heap in use went from %d to %d bytes, want it down by about %d (the arena)", before, after, reserve)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(open)
	runtime.KeepAlive(shut)
	// After Close every call still says ErrClosed, on every cache.
	if _, err := open.Alloc(48); err != impl.ErrClosed {
		t.Errorf("Alloc on an open Cache of a closed Allocator: %v, want ErrClosed", err)
	}
	if _, err := a.Alloc(48); err != impl.ErrClosed {
		t.Errorf("Allocator.Alloc after Close: %v, want ErrClosed", err)
	}
}
