package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// shrinkInPlace allocates a 3-superblock object of c and has Realloc shrink
// it to one (skipping t if it moved): the old slice b and the new one r.
func shrinkInPlace(t *testing.T, c *impl.Cache) (b, r []byte) {
	t.Helper()
	b, err := c.Alloc(3 * spec.SuperblockSize)
	must(t, err)
	r, err = c.Realloc(b, spec.SuperblockSize)
	must(t, err)
	if addrOf(r) != addrOf(b) {
		t.Skipf("Realloc(3 superblocks → 1) moved")
	}
	return b, r
}

// TestGuardShrinkInPlaceTailFaults (GUARD-FAULT): a large object shrunk in
// place by Realloc gives the superblocks past its new size back; in guard
// mode they are freed memory of a guarded object, and a read or write of
// them through the slice Realloc was given faults while they are in
// quarantine, as after a free or a moving Realloc.
func TestGuardShrinkInPlaceTailFaults(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	needProtect(t, a)
	c := mustCache(t, a)
	b, r := shrinkInPlace(t, c)
	r[len(r)-1] = 1
	for _, i := range []int{spec.SuperblockSize, 3*spec.SuperblockSize - 1} {
		if e := touch(a, b, i, false); e == nil {
			t.Errorf("read of byte %d of the object Realloc shrank from 3 superblocks to 1: no fault", i)
		}
	}
	must(t, c.Free(r))
}

// TestGuardHeapShrinkTailWriteReported (GUARD-FAULT, DEBUG-POISON): where
// guard mode cannot protect (the Go-heap backend), the superblocks a large
// object's in-place shrink gives back are poisoned in quarantine like any
// freed guarded memory, and a write through the old slice is reported as
// they leave it, naming the object's site.
func TestGuardHeapShrinkTailWriteReported(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, HeapBackend: true, OnError: func(err error) { reports = append(reports, err) },
		Guard: impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c := mustCache(t, a)
	b, r := shrinkInPlace(t, c)
	if s := a.Stats(); s.Guard.Quarantined != 1 || s.Guard.QuarantinedBytes != 2*spec.SuperblockSize {
		t.Fatalf("after the shrink: %d objects, %d bytes in quarantine, want the 2 superblocks given back", s.Guard.Quarantined, s.Guard.QuarantinedBytes)
	}
	b[spec.SuperblockSize+5] = 1 // a write after free, through the old slice
	must(t, c.Free(r))           // pushes the tail out of the quarantine
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(b)+spec.SuperblockSize || waf.Offset != 5 ||
		!strings.Contains(waf.Site, "TestGuardHeapShrinkTailWriteReported") {
		t.Fatalf("reports %v, want the write at byte 5 of the superblocks given back at %#x", reports, addrOf(b)+spec.SuperblockSize)
	}
}
