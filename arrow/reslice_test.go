package refarrow

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocateNotAStart: Reallocate of a slice that does not start a buffer
// (a[64:] of a 1024-byte buffer: bad input, as a double free is) must not be
// resized in place. Its capacity, 960, predicts a 1024-byte object at a+64,
// which runs 64 bytes into the buffer after a: growing it to 1024 bytes in
// place cleared them (NO-OVERLAP), and a shrink handed out a slice of a with
// no report. It moves instead, and the free of b reports ErrInvalidPointer
// (FREE-INVALID) as the package comment promises; every buffer keeps its
// bytes, and the moved buffer holds b's.
func TestReallocateNotAStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{{"grow", 1024}, {"same", 960}, {"shrink", 512}} {
		t.Run(tc.name, func(t *testing.T) {
			var errs []error
			m := newRecording(t, &errs)
			if capacity(1024) != 1024 || capacity(960) != 1024 {
				t.Fatalf("the size classes changed: capacity(1024) %d, (960) %d", capacity(1024), capacity(960))
			}
			bufs := make([][]byte, 16)
			starts := map[uintptr]bool{}
			for i := range bufs {
				bufs[i] = m.Allocate(1024)
				fill(bufs[i], byte(i+1))
				starts[uintptr(unsafe.Pointer(unsafe.SliceData(bufs[i])))] = true
			}
			var a []byte // a buffer with another right after it
			for _, b := range bufs {
				if starts[uintptr(unsafe.Pointer(unsafe.SliceData(b)))+1024] {
					a = b
					break
				}
			}
			if a == nil {
				t.Fatal("no two of 16 buffers of one class are adjacent")
			}
			b := a[64:]
			want := append([]byte(nil), b[:min(len(b), tc.size)]...)
			before := m.Stats()
			r := m.Reallocate(tc.size, b)
			for i, x := range bufs {
				if !holds(x, byte(i+1)) {
					t.Errorf("buffer %d changed by Reallocate(%d, a[64:])", i, tc.size)
				}
			}
			if unsafe.SliceData(r) == unsafe.SliceData(b) || len(r) != tc.size || cap(r) != tc.size || !aligned(r) {
				t.Errorf("Reallocate(%d, a[64:]) kept it in place (len %d cap %d)", tc.size, len(r), cap(r))
			}
			if string(r[:len(want)]) != string(want) || !isZero(r[len(want):]) {
				t.Error("the moved buffer does not hold b's bytes")
			}
			s := m.Stats()
			if len(errs) != 1 || !errors.Is(errs[0], impl.ErrInvalidPointer) || s.BadFrees != 1 || s.InPlace != before.InPlace {
				t.Errorf("the reslice's free: errs %v, BadFrees %d, InPlace %d -> %d", errs, s.BadFrees, before.InPlace, s.InPlace)
			}
			m.Free(r)
			for _, x := range bufs {
				m.Free(x)
			}
			if s := m.Stats(); s.Bytes != 0 || s.Objects != 0 || s.BadFrees != 1 {
				t.Errorf("after freeing everything: %+v", s)
			}
		})
	}
}

// TestReallocateEveryStartInPlace: every buffer of a superblock, the last
// one ending at its end included, is a start for Reallocate's in-place test,
// in a class that divides the superblock (1024) and one that does not (832,
// its objects at multiples of 832, the superblock's tail unused). Slips in
// starts: `<` for `<=` (the last 1024-byte buffer moves); a mask of half a
// superblock (832-byte buffers past it move).
func TestReallocateEveryStartInPlace(t *testing.T) {
	m := newTest(t, false)
	for _, c := range []struct{ alloc, grow int }{{1000, 1024}, {800, 832}} {
		if capacity(c.alloc) != c.grow {
			t.Fatalf("the size classes changed: capacity(%d) %d", c.alloc, capacity(c.alloc))
		}
		n := 2 * spec.SuperblockSize / c.grow
		bufs := make([][]byte, n)
		last := false
		for i := range bufs {
			bufs[i] = m.Allocate(c.alloc)
			off := (uintptr(unsafe.Pointer(unsafe.SliceData(bufs[i]))) - m.base) % spec.SuperblockSize
			last = last || int(off)+c.grow == spec.SuperblockSize
		}
		if !last && spec.SuperblockSize%c.grow == 0 {
			t.Fatalf("setup: no %d-byte buffer ends a superblock", c.grow)
		}
		for i, b := range bufs {
			if r := m.Reallocate(c.grow, b); unsafe.SliceData(r) != unsafe.SliceData(b) {
				off := (uintptr(unsafe.Pointer(unsafe.SliceData(b))) - m.base) % spec.SuperblockSize
				t.Fatalf("%d-byte buffer %d, at %d in its superblock, moved", c.grow, i, off)
			} else {
				bufs[i] = r
			}
		}
		for _, b := range bufs {
			m.Free(b)
		}
	}
}

// TestReallocateLargeTailNotAStart: a large buffer's tail slice at a multiple
// of its predicted capacity that would run past the superblock (36864 bytes
// at 36864) is not a buffer: Reallocate moves it and reports its free, it
// does not hand out a slice of the large buffer. Slip: starts without its
// `off+c <= SuperblockSize`.
func TestReallocateLargeTailNotAStart(t *testing.T) {
	var errs []error
	m := newRecording(t, &errs)
	const half = 36 << 10
	if capacity(half) != half {
		t.Fatalf("capacity(%d) = %d", half, capacity(half))
	}
	big := m.Allocate(2 * half)
	b := big[half:]
	fill(b, 4)
	r := m.Reallocate(spec.MaxSmall, b)
	if unsafe.SliceData(r) == unsafe.SliceData(b) || !holds(r, 4) {
		t.Errorf("Reallocate(MaxSmall, big[%d:]) stayed in place or lost its contents", half)
	}
	if len(errs) != 1 || !errors.Is(errs[0], impl.ErrInvalidPointer) {
		t.Errorf("the tail's free: %v", errs)
	}
	m.Free(r)
	m.Free(big)
}
