package impl_test

// A real bug hunt21 found (not a mutant): under the Go-heap backend a closed
// Allocator still pins its arena. Allocator.Close "releases the reservation";
// heapBackend.release drops its slice for the garbage collector, but the
// Allocator's start pointer (into the arena) keeps all of it reachable for as
// long as the program holds the Allocator.

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
// pins Reserve bytes of Go heap. Fails today: Allocator.start still points
// into the arena after Close, so heapBackend.release's arena = nil frees
// nothing (and deleting that line is a slip no test can see).
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
	before := inUse()
	must(t, a.Close())
	after := inUse()
	if before < after+reserve/2 {
		t.Errorf("Close of an Allocator still held: the Go heap in use went from %d to %d bytes, want it down by about %d (the arena)", before, after, reserve)
	}
	runtime.KeepAlive(a)
}
