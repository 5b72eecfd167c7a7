//go:build !race

package refarrow

import (
	"testing"
	"unsafe"
)

// TestOwnsBounds: owns takes the reservation's first and last bytes and
// nothing outside it, the address right past the end included: a foreign
// buffer mapped there, handed to Reallocate, must be copied, never extended
// to a refalloc capacity. Slip: `<=` in owns. (Not under -race, where the
// reservation is a Go-heap object and checkptr refuses a pointer past it.)
func TestOwnsBounds(t *testing.T) {
	m := newTest(t, false)
	b := m.Allocate(8)
	p := unsafe.Pointer(unsafe.SliceData(b))
	at := func(addr uintptr) []byte { return unsafe.Slice((*byte)(unsafe.Add(p, addr-uintptr(p))), 1) }
	for _, c := range []struct {
		name string
		addr uintptr
		want bool
	}{
		{"first byte", m.base, true},
		{"last byte", m.base + m.size - 1, true},
		{"one past the end", m.base + m.size, false},
		{"one before", m.base - 1, false},
	} {
		if got := m.owns(at(c.addr)); got != c.want {
			t.Errorf("owns(%s) = %v, want %v", c.name, got, c.want)
		}
	}
	m.Free(b)
}
