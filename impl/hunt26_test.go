package impl_test

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from hunt26, a blind injected-bug hunt of large.go, realloc.go,
// guard.go, debug.go and the fronts: each kills a slip the suite missed.

//go:noinline
func reallocHere(c *impl.Cache, b []byte, n int) ([]byte, error) { return c.Realloc(b, n) }

// TestGuardReallocDropNamesFreeSite (GUARD-FAULT): a moving Realloc of a
// freed large object in guard mode finds b dead only once it has its new
// object, reserved, which it then frees itself (freeReserved) into the
// quarantine: an access there is explained with the stack that freed it,
// the Realloc's, as for any freed guarded object.
func TestGuardReallocDropNamesFreeSite(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	c := mustCache(t, a)
	b := allocN(t, c, 2*spec.SuperblockSize)
	must(t, c.Free(b))
	if _, err := reallocHere(c, b, 3*spec.SuperblockSize); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed large object: %v, want ErrDoubleFree", err)
	}
	var dropped uintptr
	for _, q := range a.Snapshot().Guard.Quarantine {
		if q.Superblocks == 3 {
			dropped = q.Addr
		}
	}
	if dropped == 0 {
		t.Fatalf("the Realloc's dropped 3-superblock object is not in the quarantine: %+v", a.Snapshot().Guard.Quarantine)
	}
	e, ok := a.ExplainAddr(dropped + 5)
	if !ok || !strings.Contains(e.FreeSite, "impl_test.reallocHere") {
		t.Fatalf("ExplainAddr of the dropped object: %v, FreeSite\n%s\nwant the Realloc's stack (reallocHere)", ok, e.FreeSite)
	}
}

// TestGuardedDoubleFreeNamesClass (FREE-DOUBLE): a second free of a guarded
// small object in quarantine is a double free of an object of its size
// class, as without guard mode: the quarantine marks its superblock with
// the class, not as a large object's.
func TestGuardedDoubleFreeNamesClass(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c := mustCache(t, a)
	b := allocN(t, c, 100)
	must(t, c.Free(b))
	if len(a.Snapshot().Guard.Quarantine) != 1 {
		t.Fatalf("the guarded object is not in the quarantine: %+v", a.Snapshot().Guard.Quarantine)
	}
	var fe *impl.FreeError
	if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) || !errors.As(err, &fe) || fe.Class != spec.SizeToClass(100) {
		t.Fatalf("second free of a quarantined guarded 100-byte object: %v, want ErrDoubleFree of class %d", err, spec.SizeToClass(100))
	}
}

// TestGuardFreedLargeTailFreesInvalid (FREE-INVALID): a free of the start of
// a quarantined large object's second superblock is invalid, not a double
// free: only the head's superblock keeps the object's mark (endRun), as
// when it is pooled without guard mode (TestFreedLargeRunTailFreesInvalid).
func TestGuardFreedLargeTailFreesInvalid(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	c := mustCache(t, a)
	b := allocN(t, c, 2*spec.SuperblockSize)
	must(t, c.Free(b))
	if err := c.Free(b[spec.SuperblockSize:]); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Errorf("free of a quarantined large object's second superblock: %v, want ErrInvalidPointer", err)
	}
	if err := c.Free(b); !errors.Is(err, impl.ErrDoubleFree) {
		t.Errorf("second free of a quarantined large object: %v, want ErrDoubleFree", err)
	}
}

// TestGuardHeapWAFNamesAllocSite (GUARD-FAULT): where guard mode only
// poisons (the Go-heap backend), a write after free found as the object
// leaves the quarantine is reported with the stack that allocated the
// object, as WriteAfterFreeError.Site says, not the one that freed it.
func TestGuardHeapWAFNamesAllocSite(t *testing.T) {
	var reports []error
	_, c := newAllocCache(t, impl.Options{Reserve: 64 * spec.SuperblockSize, HeapBackend: true, OnError: func(err error) { reports = append(reports, err) },
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	b := allocHere(t, c, 100)
	freeHere(t, c, b)
	b[3] = 1 // a write after free
	o := allocN(t, c, 100)
	must(t, c.Free(o)) // pushes b out of the quarantine
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || !strings.Contains(waf.Site, "allocHere") || strings.Contains(waf.Site, "freeHere") {
		t.Fatalf("reports %v, want one write after free naming allocHere's stack", reports)
	}
}

// TestUseAfterFreeErrorSaysReleased (GUARD-FAULT): the report of a fault
// says that the object has left the quarantine (its memory may be in use
// again) when Released says so, and only then.
func TestUseAfterFreeErrorSaysReleased(t *testing.T) {
	for _, released := range []bool{false, true} {
		msg := (&impl.UseAfterFreeError{Addr: 0x1010, Object: 0x1000, Offset: 16, Size: 64, Class: spec.SizeToClass(64), Released: released}).Error()
		if strings.Contains(msg, "left the quarantine") != released {
			t.Errorf("Released %v: %q", released, msg)
		}
	}
}

// TestReallocAtReservationEndFullRefused (FREE-INVALID): a slice that starts
// exactly at the end of the reservation is outside it, and Realloc refuses it
// before it allocates anything: in a full reservation too, ErrInvalidPointer,
// not the ErrOutOfMemory of a new object it would not need
// (TestReallocSliceAtReservationEnd has room for one).
func TestReallocAtReservationEndFullRefused(t *testing.T) {
	if raceEnabled {
		t.Skip("the Go-heap backend: a pointer past the reservation's arena is another Go object (checkptr)")
	}
	const nsb = 512
	_, c := newAllocCache(t, impl.Options{Reserve: nsb * spec.SuperblockSize})
	front := allocN(t, c, (nsb-1)*spec.SuperblockSize) // superblocks 0-510
	last := allocN(t, c, spec.MaxSmall+1)              // superblock 511, the last: the reservation is full
	end := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), spec.SuperblockSize)), 64)[:0]
	if r, err := c.Realloc(end, 16); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("Realloc of a slice at the end of a full reservation: %d bytes, %v; want ErrInvalidPointer", len(r), err)
	}
	must(t, c.Free(front))
	must(t, c.Free(last))
}

// TestInteriorFreeNamesClass (FREE-INVALID): a free inside a live large
// object, or inside a live guarded small object, is refused naming the
// object's class (FreeError.Class): spec.Large, or the guarded object's size
// class; -1 is for an address whose object is unknown.
func TestInteriorFreeNamesClass(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c := mustCache(t, a)
	large := allocN(t, c, 2*spec.SuperblockSize)
	small, err := c.Alloc(100) // guarded: SampleRate 1
	must(t, err)
	for _, tc := range []struct {
		what  string
		b     []byte
		class int
	}{{"large", large[spec.SuperblockSize:], spec.Large}, {"large", large[16:], spec.Large}, {"guarded", small[16:], spec.SizeToClass(100)}} {
		var fe *impl.FreeError
		if err := c.Free(tc.b); !errors.Is(err, impl.ErrInvalidPointer) || !errors.As(err, &fe) || fe.Class != tc.class {
			t.Errorf("free inside a live %s object: %v, want ErrInvalidPointer of class %d", tc.what, err, tc.class)
		}
	}
	must(t, c.Free(large))
	must(t, c.Free(small))
}

// TestFreedGuardedInteriorClassUnknown (FREE-INVALID): a free inside a freed
// guarded small object, quarantined, is refused as any address inside no
// object is, class -1 (unknown): the superblock's mark names the class of
// its start only, for a double free of it (TestGuardedDoubleFreeNamesClass).
func TestFreedGuardedInteriorClassUnknown(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c := mustCache(t, a)
	b := allocN(t, c, 100) // guarded: SampleRate 1
	must(t, c.Free(b))
	var fe *impl.FreeError
	if err := c.Free(b[16:]); !errors.Is(err, impl.ErrInvalidPointer) || !errors.As(err, &fe) || fe.Class != -1 {
		t.Fatalf("free inside a quarantined guarded object: %v, want ErrInvalidPointer of class -1", err)
	}
}
