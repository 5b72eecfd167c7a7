package refarrow

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
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
			m, err := New(impl.Options{Reserve: 64 << 20, OnError: func(err error) { errs = append(errs, err) }})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
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
