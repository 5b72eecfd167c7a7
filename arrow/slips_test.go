package refarrow

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocateInPlaceBounds: Reallocate keeps the object exactly when it
// holds the new size and is at most twice what a fresh buffer of that size
// would get. Both bounds are inclusive: growing to the object's whole capacity
// stays, and so does a shrink to a size whose own capacity is exactly half the
// object's. Slips: `size < c`; `2*capacity(size) > c`; `capacity(size) >= c`.
func TestReallocateInPlaceBounds(t *testing.T) {
	m := newTest(t, false)
	// 1000 bytes get 1024, 512 a class of their own (the size-class table), so
	// the half bound is met exactly.
	if capacity(1000) != 1024 || capacity(512) != 512 || capacity(448) >= 512 {
		t.Fatalf("the size classes changed: capacity(1000) %d, (512) %d, (448) %d", capacity(1000), capacity(512), capacity(448))
	}
	b := m.Allocate(1000)
	p := unsafe.SliceData(b)
	inPlace := func(what string, size int, want bool) {
		t.Helper()
		before := m.Stats().InPlace
		b = m.Reallocate(size, b)
		stayed := unsafe.SliceData(b) == p
		if stayed != want || (m.Stats().InPlace == before+1) != want {
			t.Fatalf("%s (to %d bytes): stayed %v, InPlace %d -> %d; want stayed %v", what, size, stayed, before, m.Stats().InPlace, want)
		}
		if len(b) != size || cap(b) != size {
			t.Fatalf("%s: len %d cap %d, want %d", what, len(b), cap(b), size)
		}
		p = unsafe.SliceData(b)
	}
	inPlace("grow to the whole capacity", 1024, true)
	inPlace("shrink to half", 512, true)
	b = m.Reallocate(1024, b) // its capacity is taken as capacity(512) now: a move
	p = unsafe.SliceData(b)
	inPlace("shrink below half", 448, false)
	if s := m.Stats(); s.Bytes != 448 || s.Objects != 1 {
		t.Fatalf("after the moves: %+v", s)
	}
	m.Free(b)
}

// TestReallocateLargeBadBuffer: a large buffer Reallocate cannot resize because
// refalloc rejects it (a double free: it was freed before; an invalid pointer:
// the middle of a live buffer) is reported as a bad free, the live buffer is
// untouched, and Reallocate still returns a zeroed buffer of the new size.
// Slips: only one of ErrDoubleFree, ErrInvalidPointer taken for a bad free
// (the other panics); the bad free's result nil.
func TestReallocateLargeBadBuffer(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	keep := m.Allocate(200_000)
	fill(keep, 5)
	stale := m.Allocate(100_000)
	m.Free(stale)
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"freed", stale, impl.ErrDoubleFree},
		{"interior", keep[8192:], impl.ErrInvalidPointer},
	} {
		errs = nil
		var r []byte
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s: Reallocate panicked: %v", c.name, p)
				}
			}()
			r = m.Reallocate(300_000, c.b)
		}()
		if len(errs) != 1 || !errors.Is(errs[0], c.want) {
			t.Fatalf("%s: OnError got %v, want one %v", c.name, errs, c.want)
		}
		if len(r) != 300_000 || cap(r) != 300_000 || !aligned(r) || !isZero(r) {
			t.Fatalf("%s: the result has len %d cap %d, aligned %v, or is not zeroed", c.name, len(r), cap(r), aligned(r))
		}
		m.Free(r)
	}
	if !holds(keep, 5) {
		t.Fatal("the live buffer changed")
	}
	if s := m.Stats(); s.BadFrees != 2 || s.Objects != 1 || s.Bytes != 200_000 {
		t.Fatalf("after two bad Reallocates: %+v", s)
	}
	m.Free(keep)
}

// TestReallocateLargeForeign: a large buffer that is not this Allocator's is
// copied, never handed to refalloc's Realloc (which would refuse it and lose
// its contents). Slip: reallocLarge without the owns check.
func TestReallocateLargeForeign(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	foreign := make([]byte, 100_000)
	fill(foreign, 7)
	b := m.Reallocate(150_000, foreign)
	if !holds(b[:100_000], 7) || !isZero(b[100_000:]) || len(b) != 150_000 {
		t.Fatal("a Go-heap buffer's contents were lost")
	}
	if len(errs) != 1 || !errors.Is(errs[0], impl.ErrInvalidPointer) || m.Stats().BadFrees != 1 {
		t.Fatalf("the foreign buffer's free: %v", errs)
	}
	m.Free(b)
}

// TestReallocateLargeShape: a large buffer grown or shrunk by refalloc's
// Realloc has len == cap == the size asked, like every buffer, also when the
// object's capacity is rounded up to pages. Slip: reallocLarge returns
// r[:size], its cap the object's.
func TestReallocateLargeShape(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(100_000)
	for _, n := range []int{300_005, 200_001, 1<<20 + 3} {
		b = m.Reallocate(n, b)
		if len(b) != n || cap(b) != n {
			t.Fatalf("Reallocate(%d): len %d cap %d", n, len(b), cap(b))
		}
	}
	m.Free(b)
}

// TestFreeResliced: Free frees a buffer whole, resliced shorter or to b[:0]
// included, and debits the size it was allocated with. Slip: Free takes a
// zero-length slice for a zero-size buffer (the object leaks).
func TestFreeResliced(t *testing.T) {
	m := newTest(t, false)
	a := m.Allocate(300)
	b := m.Allocate(70_000)
	m.Free(a[:0])
	m.Free(b[:10])
	if s := m.Stats(); s.Objects != 0 || s.Bytes != 0 || s.Frees != 2 || s.Impl.Large.LiveObjects != 0 {
		t.Fatalf("after freeing a[:0] and b[:10]: %+v", s)
	}
	// Reallocate of a resliced buffer too: it keeps len's bytes, and takes
	// the buffer as it was allocated (review25: it took len for the buffer's
	// size, so Bytes kept what the reslice cut off for good, and a 100 KB
	// buffer resliced to 100 bytes stayed, in place, behind a 100-byte one).
	for _, c := range []struct{ n, l, size int }{{100, 50, 60}, {100_000, 100, 100}, {100_000, 90_000, 200_000}, {100_000, 0, 10}, {300, 0, 70_000}} {
		b := m.Allocate(c.n)
		fill(b, 7)
		r := m.Reallocate(c.size, b[:c.l])
		if len(r) != c.size || cap(r) != c.size || !holds(r[:c.l], 7) || !isZero(r[c.l:]) {
			t.Fatalf("%+v: len %d cap %d, or not len's bytes kept and the rest zero", c, len(r), cap(r))
		}
		if s := m.Stats(); s.Bytes != int64(c.size) || c.n > spec.MaxSmall && c.size <= spec.MaxSmall && s.Impl.Large.LiveObjects != 0 {
			t.Fatalf("%+v: %d bytes, %d large objects live, want %d bytes", c, s.Bytes, s.Impl.Large.LiveObjects, c.size)
		}
		m.Free(r)
	}
	if s := m.Stats(); s.Objects != 0 || s.Bytes != 0 {
		t.Fatalf("after the Reallocates of resliced buffers: %+v", s)
	}
}

// TestStatsCounts: each counter is its own. Slips: Allocs and Frees swapped;
// Frees not counted.
func TestStatsCounts(t *testing.T) {
	m := newTest(t, false)
	var bs [][]byte
	for range 3 {
		bs = append(bs, m.Allocate(64))
	}
	m.Free(bs[0])
	if s := m.Stats(); s.Allocs != 3 || s.Frees != 1 || s.Objects != 2 || s.Bytes != 128 || s.PeakBytes != 192 {
		t.Fatalf("3 allocations, 1 free: %+v", s)
	}
	m.Free(bs[1])
	m.Free(bs[2])
}

// TestAssertSizeBothWays: AssertSize fails on too few bytes as on too many.
// Slip: it fails only when more are live than asserted.
func TestAssertSizeBothWays(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(1000)
	for _, want := range []int{999, 1001} {
		var rec recorder
		m.AssertSize(&rec, want)
		if !strings.Contains(rec.String(), "1000 bytes allocated") {
			t.Errorf("AssertSize(%d) with 1000 live said %q", want, rec.String())
		}
	}
	m.Free(b)
}

// TestAssertNoLeaksEachCount: AssertNoLeaks fails on each kind of bad free or
// write after free alone, with nothing live: one refalloc finds with no Free of
// this Allocator involved (double, invalid, write after free: through Impl),
// and one only this Allocator counts (a Free after Close). Slips: any one of
// the four counts left out of the condition.
func TestAssertNoLeaksEachCount(t *testing.T) {
	quiet := func(error) {}
	for _, c := range []struct {
		name  string
		debug bool
		do    func(m *Allocator)
		want  string
	}{
		{"double", false, func(m *Allocator) {
			y, _ := m.Impl().Alloc(64)
			_ = m.Impl().Free(y)
			_ = m.Impl().Free(y)
		}, "0 bad frees (refalloc: 1 double, 0 invalid), 0 writes"},
		{"invalid", false, func(m *Allocator) {
			_ = m.Impl().Free(make([]byte, 64))
		}, "0 bad frees (refalloc: 0 double, 1 invalid), 0 writes"},
		{"write after free", true, func(m *Allocator) {
			// On one Cache: through the Allocator's own methods the goroutine
			// may move to another P between the Free and the Allocs, which then
			// never reuse y (the test failed 2 times in 300 on a loaded machine).
			c, err := m.Impl().NewCache()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			y, _ := c.Alloc(64)
			_ = c.Free(y)
			y[5] = 1
			// Reusing the object checks its poison.
			for range 40 {
				z, _ := c.Alloc(64)
				_ = c.Free(z)
			}
			c.Flush()
		}, "0 bad frees (refalloc: 0 double, 0 invalid), 1 writes after free"},
		{"free after close", false, func(m *Allocator) {
			b := m.Allocate(64)
			m.Free(b)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			m.Free(b)
		}, "1 bad frees (refalloc: 0 double, 0 invalid), 0 writes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(impl.Options{Reserve: 64 << 20, Debug: c.debug, OnError: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c.do(m)
			var rec recorder
			m.AssertNoLeaks(&rec)
			if !strings.Contains(rec.String(), c.want) {
				t.Errorf("AssertNoLeaks said %q, want %q", rec.String(), c.want)
			}
		})
	}
}

// TestReallocateLargeMoveCounts: a large Reallocate that cannot grow in place
// moves, and is counted as a small move is (Stats' doc): an allocation and a
// free, both buffers live for a moment (PeakBytes). Slips: reallocLarge counts
// a move as a resize; a buffer of exactly MaxSmall bytes, or a large one
// shrunk to exactly MaxSmall, goes to the other path (`>=` for `>`) and is
// counted differently.
func TestReallocateLargeMoveCounts(t *testing.T) {
	for _, c := range []struct {
		name      string
		old, size int
	}{
		{"large to large", 100_000, 300_000},
		{"MaxSmall to large", spec.MaxSmall, 100_000},
		{"large to MaxSmall", 100_000, spec.MaxSmall},
	} {
		m := newTest(t, false)
		b := m.Allocate(c.old)
		fill(b, 3)
		blocker := m.Allocate(100_000) // after b: no growth in place
		r := m.Reallocate(c.size, b)
		if unsafe.SliceData(r) == unsafe.SliceData(b) {
			t.Fatalf("%s: setup: Reallocate stayed in place", c.name)
		}
		if !holds(r[:min(c.old, c.size)], 3) || !isZero(r[min(c.old, c.size):]) {
			t.Fatalf("%s: contents not kept", c.name)
		}
		s := m.Stats()
		got := [...]int64{s.Bytes, s.PeakBytes, s.Objects, int64(s.Allocs), int64(s.Frees), int64(s.Reallocs), int64(s.InPlace)}
		want := [...]int64{int64(100_000 + c.size), int64(100_000 + c.old + c.size), 2, 3, 1, 1, 0}
		if got != want {
			t.Fatalf("%s: after the move Bytes, PeakBytes, Objects, Allocs, Frees, Reallocs, InPlace = %v, want %v", c.name, got, want)
		}
		m.Free(r)
		m.Free(blocker)
	}
}

// TestReallocateOneByteInPlace: a 1-byte buffer grows in place within its
// object, and a buffer shrinks in place to 1 byte. Slips: `old > 1` or
// `size > 1` for `> 0` in Reallocate's in-place test (the buffer moves).
func TestReallocateOneByteInPlace(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(1)
	p := unsafe.SliceData(b)
	b[0] = 9
	for i, size := range []int{8, 1, 64} {
		b = m.Reallocate(size, b)
		if unsafe.SliceData(b) != p || b[0] != 9 || len(b) != size || cap(b) != size {
			t.Fatalf("Reallocate to %d moved the buffer or lost its byte", size)
		}
		if s := m.Stats(); s.InPlace != uint64(i+1) || s.Allocs != 1 || s.Bytes != int64(size) {
			t.Fatalf("after Reallocate to %d: %+v", size, s)
		}
	}
	m.Free(b)
}

// callerHelperT is a TestingT that records which functions called Helper
// before the first Errorf.
type callerHelperT struct {
	helpers []string
	errorf  bool
}

func (h *callerHelperT) Helper() {
	if h.errorf {
		return
	}
	pc, _, _, _ := runtime.Caller(1)
	h.helpers = append(h.helpers, runtime.FuncForPC(pc).Name())
}

func (h *callerHelperT) Errorf(string, ...any) { h.errorf = true }

// TestAssertionsAreHelpers: AssertSize and AssertNoLeaks each mark themselves
// helpers before they report, so a failure names the caller's line. Slip:
// either does not call t.Helper (AssertNoLeaks's own report of bad frees
// would then name allocator.go).
func TestAssertionsAreHelpers(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	b := m.Allocate(100)
	m.Free(b)
	m.Free(b) // a bad free: AssertNoLeaks reports it itself
	for _, c := range []struct {
		name   string
		assert func(TestingT)
		want   string
	}{
		{"AssertSize", func(t TestingT) { m.AssertSize(t, 1) }, ".(*Allocator).AssertSize"},
		{"AssertNoLeaks", m.AssertNoLeaks, ".(*Allocator).AssertNoLeaks"},
	} {
		var h callerHelperT
		c.assert(&h)
		if !h.errorf || !slices.ContainsFunc(h.helpers, func(f string) bool { return strings.HasSuffix(f, c.want) }) {
			t.Fatalf("%s: reported %v, Helper called first by %v", c.name, h.errorf, h.helpers)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("OnError got %v, want the double free", errs)
	}
}
