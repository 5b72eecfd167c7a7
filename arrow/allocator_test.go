package refarrow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// newTest returns an Allocator that fails t on any late report, and checks at
// cleanup that the test left nothing live.
func newTest(t *testing.T, debug bool) *Allocator {
	t.Helper()
	return newTestOpt(t, impl.Options{Debug: debug})
}

// modes are the configurations the shape tests run in: plain, Debug, and
// guard mode with every small allocation sampled onto a superblock of its own
// (GUARD-FAULT), which must keep the capacity Reallocate relies on.
var modes = []struct {
	name string
	opt  impl.Options
}{
	{"plain", impl.Options{}},
	{"debug", impl.Options{Debug: true}},
	{"guard", impl.Options{Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}}},
}

// newRecording returns an Allocator of 64 MiB that appends every report
// (OnError) to *errs, for the tests of bad input, closed at cleanup.
func newRecording(t *testing.T, errs *[]error) *Allocator {
	t.Helper()
	m, err := New(impl.Options{Reserve: 64 << 20, OnError: func(err error) { *errs = append(*errs, err) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newTestOpt(t *testing.T, opt impl.Options) *Allocator {
	t.Helper()
	opt.Reserve, opt.OnError = 256<<20, func(err error) { t.Error(err) }
	m, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.AssertNoLeaks(t)
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment == 0 }

var sizes = []int{1, 7, 8, 63, 64, 65, 100, 1000, 4096, 4097, spec.MaxSmall - 1, spec.MaxSmall, spec.MaxSmall + 1, 100_000, 1<<20 + 3}

func TestAllocateShape(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) { allocateShape(t, newTestOpt(t, mode.opt)) })
	}
}

func allocateShape(t *testing.T, m *Allocator) {
	for _, n := range sizes {
		b := m.Allocate(n)
		if len(b) != n || cap(b) != n || !aligned(b) {
			t.Errorf("Allocate(%d): len %d cap %d at %p", n, len(b), cap(b), unsafe.SliceData(b))
		}
		for i, x := range b {
			if x != 0 {
				t.Fatalf("Allocate(%d): byte %d is %#x", n, i, x)
			}
		}
		for i := range b {
			b[i] = 0xab
		}
		m.Free(b)
	}
}

// TestCapacityIsPredicted pins what Reallocate relies on: the capacity
// refalloc gives a 64-byte aligned request is spec.Usable of its size.
func TestCapacityIsPredicted(t *testing.T) {
	for _, mode := range []int{0, 2} { // plain and guard
		t.Run(modes[mode].name, func(t *testing.T) { capacityIsPredicted(t, newTestOpt(t, modes[mode].opt)) })
	}
}

func capacityIsPredicted(t *testing.T, m *Allocator) {
	check := func(n int) {
		b, err := m.Impl().AllocAligned(n, alignment)
		if err != nil {
			t.Fatal(err)
		}
		if cap(b) != capacity(n) {
			t.Fatalf("AllocAligned(%d, 64): cap %d, capacity() says %d", n, cap(b), capacity(n))
		}
		if err := m.Impl().Free(b); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= spec.MaxSmall+2*spec.PageSize; n++ {
		check(n)
	}
	for _, n := range []int{1 << 20, 1<<20 + 1, 3<<20 - 1} {
		check(n)
	}
}

// A zero-size buffer is what GoAllocator returns: non-nil, empty, aligned;
// it holds no object, and freeing it does nothing.
func TestZeroSize(t *testing.T) {
	m := newTest(t, false)
	g := memory.NewGoAllocator().Allocate(0)
	b := m.Allocate(0)
	if b == nil || len(b) != 0 || cap(b) != 0 || !aligned(b) {
		t.Fatalf("Allocate(0) = %p len %d cap %d", unsafe.SliceData(b), len(b), cap(b))
	}
	if g == nil || len(g) != 0 || cap(g) != 0 {
		t.Fatalf("GoAllocator.Allocate(0) changed: %p len %d cap %d", unsafe.SliceData(g), len(g), cap(g))
	}
	m.Free(b)
	m.Free(b)
	m.Free(nil)
	if s := m.Stats(); s.Objects != 0 || s.Allocs != 0 || s.Frees != 0 || s.BadFrees != 0 {
		t.Fatalf("zero-size buffers touched the counters: %+v", s)
	}
	r := m.Reallocate(100, b)
	if len(r) != 100 || !aligned(r) {
		t.Fatalf("Reallocate(100, empty): len %d", len(r))
	}
	if r = m.Reallocate(0, r); len(r) != 0 || cap(r) != 0 || r == nil {
		t.Fatalf("Reallocate(0, b): len %d cap %d", len(r), cap(r))
	}
	if s := m.Stats(); s.Objects != 0 || s.Bytes != 0 {
		t.Fatalf("Reallocate to 0 left %d objects, %d bytes", s.Objects, s.Bytes)
	}
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}

func holds(b []byte, seed byte) bool {
	for i := range b {
		if b[i] != seed+byte(i) {
			return false
		}
	}
	return true
}

func TestReallocate(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			m := newTestOpt(t, mode.opt)
			// Within one object: 100 bytes are served by a class that holds 120.
			if capacity(120) != capacity(100) {
				t.Fatalf("the size classes changed: capacity(100) %d, capacity(120) %d", capacity(100), capacity(120))
			}
			b := m.Allocate(100)
			fill(b, 1)
			p := unsafe.SliceData(b)
			b = m.Reallocate(120, b)
			if unsafe.SliceData(b) != p || len(b) != 120 || cap(b) != 120 {
				t.Fatalf("100 -> 120 moved or has len %d cap %d", len(b), cap(b))
			}
			if !holds(b[:100], 1) || !isZero(b[100:]) {
				t.Fatal("100 -> 120 lost contents or the tail is not zero")
			}
			// Shrink in place, then grow back: what was written past the new
			// length must not come back.
			fill(b, 1)
			b = m.Reallocate(110, b)
			b = m.Reallocate(120, b)
			if unsafe.SliceData(b) != p || !holds(b[:110], 1) || !isZero(b[110:]) {
				t.Fatal("shrink and grow in place: moved, lost contents, or the tail is not zero")
			}
			// Past the object: a move, keeping contents and alignment (50 KB to
			// 3 MiB, large to large, grows in place into free superblocks).
			for _, n := range []int{1000, 50_000, 3 << 20} {
				old := len(b)
				fill(b, byte(n))
				b = m.Reallocate(n, b)
				if len(b) != n || cap(b) != n || !aligned(b) || !holds(b[:old], byte(n)) || !isZero(b[old:]) {
					t.Fatalf("%d -> %d: len %d cap %d aligned %v, or contents lost", old, n, len(b), cap(b), aligned(b))
				}
			}
			// A large shrink moves: a 3 MiB object must not stay behind 1 KiB.
			fill(b[:1024], 9)
			q := unsafe.SliceData(b)
			b = m.Reallocate(1024, b)
			if unsafe.SliceData(b) == q || !holds(b, 9) {
				t.Fatal("3 MiB -> 1 KiB stayed in place or lost contents")
			}
			s := m.Stats()
			if s.Objects != 1 || s.Bytes != 1024 || s.InPlace != 4 || s.Reallocs != 7 {
				t.Fatalf("counters: %+v", s)
			}
			if s.PeakBytes < 3<<20 {
				t.Fatalf("peak %d, want at least 3 MiB", s.PeakBytes)
			}
			m.Free(b)
		})
	}
}

func isZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func TestBadFree(t *testing.T) {
	// One P: a bad free is found at once by the cache of the P that freed
	// the buffer first. With more, the goroutine may move to another P
	// between the two frees; the second is then a remote free, whose double
	// free its owner finds later (as the package doc says), and the test's
	// "at once" failed about 3 runs in 100 (review27).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, debug := range []bool{false, true} {
		t.Run(fmt.Sprintf("debug=%v", debug), func(t *testing.T) {
			var errs []error
			explode := false // OnError panics (as t.Fatal ends the goroutine)
			m, err := New(impl.Options{Reserve: 64 << 20, Debug: debug, OnError: func(err error) {
				errs = append(errs, err)
				if explode {
					panic(err)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			free := func(b []byte) (panicked error) {
				defer func() {
					if r := recover(); r != nil {
						panicked = r.(error)
					}
				}()
				m.Free(b)
				return nil
			}
			keep := m.Allocate(256)
			b := m.Allocate(256)
			if p := free(b); p != nil {
				t.Fatalf("a good free panicked: %v", p)
			}
			for _, c := range []struct {
				b    []byte
				want error
			}{{b, impl.ErrDoubleFree}, {keep[64:], impl.ErrInvalidPointer}} {
				errs = nil
				p := free(c.b)
				if len(errs) != 1 || !errors.Is(errs[0], c.want) {
					t.Errorf("OnError got %v, want one %v", errs, c.want)
				}
				if debug != (p != nil) || p != nil && !errors.Is(p, c.want) {
					t.Errorf("debug=%v: Free panicked with %v", debug, p)
				}
			}
			s := m.Stats()
			if s.BadFrees != 2 || s.Objects != 1 || s.Bytes != 256 || s.Impl.DoubleFrees != 1 || s.Impl.InvalidFrees != 1 {
				t.Errorf("after two bad frees: %+v", s)
			}
			var rec recorder
			m.AssertNoLeaks(&rec)
			if !strings.Contains(rec.String(), "2 bad frees") {
				t.Errorf("AssertNoLeaks did not report the bad frees: %q", rec.String())
			}
			// A Reallocate of the released buffer is a bad free too: in Debug
			// it panics having kept nothing (review25: the new buffer it had
			// allocated before the free of b was refused stayed live, counted
			// in Bytes and Objects, and Close said ErrLeaked).
			errs = nil
			var r []byte
			p := func() (panicked error) {
				defer func() {
					if r := recover(); r != nil {
						panicked = r.(error)
					}
				}()
				r = m.Reallocate(300, b)
				return nil
			}()
			if len(errs) != 1 || !errors.Is(errs[0], impl.ErrDoubleFree) || debug != (p != nil) || p != nil && !errors.Is(p, impl.ErrDoubleFree) {
				t.Errorf("debug=%v: Reallocate of a released buffer: OnError got %v, panicked with %v", debug, errs, p)
			}
			m.Free(r)
			if s := m.Stats(); s.BadFrees != 3 || s.Objects != 1 || s.Bytes != 256 || s.Allocs != s.Frees+1 {
				t.Errorf("debug=%v: after a bad Reallocate: %+v", debug, s)
			}
			// The same when OnError panics, in either mode (impl frees what
			// an allocating call stopped by OnError would have returned).
			explode, r = true, nil
			func() {
				defer func() { recover() }()
				r = m.Reallocate(300, b)
			}()
			explode = false
			if s := m.Stats(); r != nil || s.BadFrees != 4 || s.Objects != 1 || s.Bytes != 256 || s.Allocs != s.Frees+1 {
				t.Errorf("debug=%v: after a bad Reallocate whose OnError panicked: %+v", debug, s)
			}
			m.Free(keep)
		})
	}
}

// A buffer from elsewhere is never extended in place: it is copied, and its
// free is reported.
func TestReallocateForeign(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	foreign := make([]byte, 128)[:100:100]
	fill(foreign, 3)
	b := m.Reallocate(110, foreign)
	if unsafe.SliceData(b) == unsafe.SliceData(foreign) || !holds(b[:100], 3) || !isZero(b[100:]) || !aligned(b) {
		t.Fatal("a Go-heap buffer was extended in place, or its contents were lost")
	}
	if len(errs) != 1 || !errors.Is(errs[0], impl.ErrInvalidPointer) || m.Stats().BadFrees != 1 {
		t.Fatalf("the foreign buffer's free: %v", errs)
	}
	m.Free(b)
}

func TestAllocatePanics(t *testing.T) {
	m, err := New(impl.Options{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	panics := func(f func()) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = r.(error)
			}
		}()
		f()
		return nil
	}
	b := m.Allocate(600 << 10)
	if err := panics(func() { m.Allocate(600 << 10) }); !errors.Is(err, impl.ErrOutOfMemory) {
		t.Errorf("Allocate past the reservation: %v", err)
	}
	m.Free(b)
	if err := panics(func() { m.Allocate(-1) }); !errors.Is(err, impl.ErrInvalidSize) {
		t.Errorf("Allocate(-1): %v", err)
	}
	if err := panics(func() { m.Reallocate(-1, nil) }); err == nil {
		t.Error("Reallocate(-1) did not panic")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := panics(func() { m.Allocate(10) }); !errors.Is(err, impl.ErrClosed) {
		t.Errorf("Allocate after Close: %v", err)
	}
}

type recorder struct{ strings.Builder }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	fmt.Fprintf(&r.Builder, format+"\n", args...)
}

func TestAssertions(t *testing.T) {
	m, err := New(impl.Options{Reserve: 64 << 20, Debug: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	b := m.Allocate(1000)
	var rec recorder
	m.AssertSize(&rec, 1000)
	if rec.Len() != 0 {
		t.Errorf("AssertSize(1000) with 1000 live: %s", rec.String())
	}
	m.AssertNoLeaks(&rec)
	out := rec.String()
	if !strings.Contains(out, "1000 bytes allocated, want 0") || !strings.Contains(out, "1 objects leaked") ||
		!strings.Contains(out, "TestAssertions") {
		t.Errorf("AssertNoLeaks with a live buffer said:\n%s", out)
	}
	m.Free(b)
	rec.Reset()
	m.AssertNoLeaks(&rec)
	if rec.Len() != 0 {
		t.Errorf("AssertNoLeaks after the free: %s", rec.String())
	}
}

// TestConcurrent: goroutines allocate, grow and free buffers of all sizes at
// once; each checks its own contents, so an object handed out twice shows.
func TestConcurrent(t *testing.T) {
	m := newTest(t, false)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			var live [][]byte
			for i := range 2000 {
				if len(live) > 0 && r.IntN(3) == 0 {
					j := r.IntN(len(live))
					b := live[j]
					if !holds(b, byte(len(b))) {
						t.Errorf("goroutine %d: a %d-byte buffer changed", g, len(b))
						return
					}
					switch r.IntN(2) {
					case 0:
						m.Free(b)
						live[j] = live[len(live)-1]
						live = live[:len(live)-1]
					case 1:
						b = m.Reallocate(len(b)+r.IntN(5000), b)
						fill(b, byte(len(b)))
						live[j] = b
					}
					continue
				}
				b := m.Allocate(sizes[i%len(sizes)] % 200_000)
				fill(b, byte(len(b)))
				live = append(live, b)
			}
			for _, b := range live {
				m.Free(b)
			}
		})
	}
	wg.Wait()
}

// TestReallocateAfterClose: after a Close that found buffers live (Arrow
// releasing late), a Reallocate of one panics with ErrClosed as Allocate
// does, whichever way it would have gone, and changes nothing (review27: the
// in-place path did not look at Close, so a shrink returned a slice of the
// released reservation, and a growth within the buffer's class cleared it: a
// fatal fault no recover sees).
func TestReallocateAfterClose(t *testing.T) {
	m, err := New(impl.Options{Reserve: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	small := m.Allocate(100)               // a class of 112 or 128 bytes
	large := m.Allocate(spec.MaxSmall + 1) // a large object, which may become small in place
	if err := m.Close(); !errors.Is(err, impl.ErrLeaked) {
		t.Fatalf("Close with two buffers live: %v", err)
	}
	before := m.Stats()
	for _, c := range []struct {
		what string
		size int
		b    []byte
	}{
		{"shrink in place", 50, small}, // first: before the fix it returns, and the growth below faults
		{"large to small in place", spec.MaxSmall, large},
		{"large to large", 2 * spec.MaxSmall, large},
		{"grow within the class", 110, small},
		{"grow past the class", 1000, small},
	} {
		var r []byte
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err, _ = p.(error)
					if err == nil {
						err = fmt.Errorf("%v", p)
					}
				}
			}()
			r = m.Reallocate(c.size, c.b)
			return nil
		}()
		if !errors.Is(err, impl.ErrClosed) || r != nil {
			t.Fatalf("Reallocate after Close (%s, to %d bytes): returned %d bytes, panicked with %v; want a panic with ErrClosed", c.what, c.size, len(r), err)
		}
	}
	if s := m.Stats(); s.Bytes != before.Bytes || s.Objects != before.Objects || s.InPlace != before.InPlace {
		t.Errorf("Reallocate after Close changed the counts: %+v, before %+v", s, before)
	}
}

// TestGuardReallocateOfReleased: in guard mode a Reallocate that moves a
// released buffer faults as it copies it (GUARD-FAULT), and CatchFaults
// reports the read; the new buffer it had allocated before the copy goes back,
// so the report is the only trace (review27: it stayed live, counted in
// Bytes and Objects, and Close said ErrLeaked).
func TestGuardReallocateOfReleased(t *testing.T) {
	m := newTestOpt(t, impl.Options{Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	if !m.Impl().GuardProtects() {
		t.Skip("the Go-heap backend (-race) cannot protect memory")
	}
	for _, c := range []struct{ have, size int }{{256, 1000}, {100_000, 1000}} {
		b := m.Allocate(c.have)
		m.Free(b)
		var got *impl.UseAfterFreeError
		func() {
			defer m.CatchFaults(func(e *impl.UseAfterFreeError) { got = e })()
			m.Reallocate(c.size, b)
		}()
		if got == nil || got.Object != uintptr(unsafe.Pointer(unsafe.SliceData(b))) {
			t.Fatalf("Reallocate of a released %d-byte buffer to %d bytes: report %v, want one on the buffer", c.have, c.size, got)
		}
		if s := m.Stats(); s.Bytes != 0 || s.Objects != 0 || s.Allocs != s.Frees {
			t.Fatalf("after the faulting Reallocate of a released %d-byte buffer to %d bytes, a buffer is live: %+v", c.have, c.size, s)
		}
	}
}
