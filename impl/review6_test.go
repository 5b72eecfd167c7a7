package impl_test

import (
	"errors"
	"testing"

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
