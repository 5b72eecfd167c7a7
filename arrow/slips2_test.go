package refarrow

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestPeakAtOnce: PeakBytes reaches the live total at the call that makes it,
// not one call later (TestStatsCounts reads it after a free, which a lagging
// peak reaches too). Slip: grow keeps the peak of the total before d.
func TestPeakAtOnce(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(100)
	if s := m.Stats(); s.Bytes != 100 || s.PeakBytes != 100 {
		t.Fatalf("one 100-byte buffer live: Bytes %d, PeakBytes %d", s.Bytes, s.PeakBytes)
	}
	m.Free(b)
	if s := m.Stats(); s.Bytes != 0 || s.PeakBytes != 100 {
		t.Fatalf("after its free: Bytes %d, PeakBytes %d", s.Bytes, s.PeakBytes)
	}
}

// TestReallocateLargeResliceMove: a large buffer resliced shorter that
// Reallocate moves is debited whole, as Free debits it (its cap; Bytes stays
// exact). Slip: reallocLarge's move debits len(b).
func TestReallocateLargeResliceMove(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(100_000)
	fill(b[:10], 3)
	blocker := m.Allocate(100_000) // after b: no growth in place
	r := m.Reallocate(300_000, b[:10])
	if unsafe.SliceData(r) == unsafe.SliceData(b) {
		t.Fatal("setup: Reallocate stayed in place")
	}
	if !holds(r[:10], 3) || !isZero(r[10:]) {
		t.Fatal("contents not kept")
	}
	if s := m.Stats(); s.Bytes != 400_000 || s.Objects != 2 {
		t.Fatalf("after moving b[:10] of a 100 000-byte buffer to 300 000 bytes: Bytes %d, Objects %d, want 400000, 2", s.Bytes, s.Objects)
	}
	m.Free(r)
	m.Free(blocker)
}

// TestReallocateNegative: Reallocate(-1) panics as Reallocate's own error,
// before it counts the call or reaches Allocate. Slip: the check lets -1
// through (Allocate's invalid size panics instead, the call counted).
func TestReallocateNegative(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(100)
	func() {
		defer func() {
			err, _ := recover().(error)
			if err == nil || !strings.Contains(err.Error(), "Reallocate(-1)") {
				t.Errorf("Reallocate(-1) panicked with %v", err)
			}
		}()
		m.Reallocate(-1, b)
	}()
	if s := m.Stats(); s.Reallocs != 0 || s.Objects != 1 || s.Bytes != 100 {
		t.Errorf("after Reallocate(-1): %+v", s)
	}
	m.Free(b)
}

// TestReallocateLargeShrinkToMaxSmall: a large buffer within twice MaxSmall
// shrinks in place to exactly MaxSmall bytes, by Reallocate's own rule (the
// object holds them and is at most twice a fresh buffer's); impl's Realloc,
// which takes only large sizes here, moves it to a small object. Slip:
// `size >= spec.MaxSmall` sends it to reallocLarge.
func TestReallocateLargeShrinkToMaxSmall(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(40_000)
	fill(b, 5)
	r := m.Reallocate(spec.MaxSmall, b)
	if unsafe.SliceData(r) != unsafe.SliceData(b) || len(r) != spec.MaxSmall || cap(r) != spec.MaxSmall || !holds(r, 5) {
		t.Fatalf("40 000 -> MaxSmall bytes: moved (%v), len %d cap %d", unsafe.SliceData(r) != unsafe.SliceData(b), len(r), cap(r))
	}
	if s := m.Stats(); s.InPlace != 1 || s.Bytes != spec.MaxSmall || s.Objects != 1 {
		t.Fatalf("counters: %+v", s)
	}
	m.Free(r)
}

// TestReallocateMaxSmallReslice: a slice of exactly MaxSmall bytes is not a
// large buffer: Reallocate to a large size takes the moving path, which
// copies it and then reports its free (FREE-INVALID, a slice into the middle
// of a buffer), as the Reallocate doc says; impl's Realloc would refuse it
// first and the contents would be lost. Slip: `have >= spec.MaxSmall`.
func TestReallocateMaxSmallReslice(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	big := m.Allocate(100_000)
	b := big[len(big)-spec.MaxSmall:]
	fill(b, 7)
	r := m.Reallocate(40_000, b)
	if !holds(r[:spec.MaxSmall], 7) || !isZero(r[spec.MaxSmall:]) || len(r) != 40_000 {
		t.Error("the moved slice's contents were not kept")
	}
	if len(errs) != 1 || !errors.Is(errs[0], impl.ErrInvalidPointer) {
		t.Errorf("the slice's free: %v", errs)
	}
	m.Free(r)
	m.Free(big)
}

// TestLeaksLists: Leaks lists the live buffers' objects, at their addresses
// and capacities, and nothing once they are freed. Slip: Leaks returns nil.
func TestLeaksLists(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(100)
	l := m.Leaks()
	if len(l) != 1 || l[0].Addr != uintptr(unsafe.Pointer(unsafe.SliceData(b))) || l[0].Size != capacity(100) {
		t.Fatalf("one 100-byte buffer live at %p: Leaks %v", unsafe.SliceData(b), l)
	}
	m.Free(b)
	if l := m.Leaks(); len(l) != 0 {
		t.Fatalf("nothing live: Leaks %v", l)
	}
}

// TestExplainPassesReport: Explain is impl's: a UseAfterFreeError (as
// CatchFaults with a nil report panics with) comes back as it is, anything
// else gives false. Slip: Explain returns nil, false.
func TestExplainPassesReport(t *testing.T) {
	m := newTest(t, false)
	e := &impl.UseAfterFreeError{Addr: 1}
	if got, ok := m.Explain(e); !ok || got != e {
		t.Fatalf("Explain(a UseAfterFreeError) = %v, %v", got, ok)
	}
	if got, ok := m.Explain("not a fault"); ok || got != nil {
		t.Fatalf("Explain(a string) = %v, %v", got, ok)
	}
}
