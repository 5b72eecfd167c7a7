package refarrow

import (
	"testing"
	"unsafe"
)

// TestAlignedEmpty: the zero-size buffer is 64-byte aligned wherever the
// linker put its backing array (TestZeroSize sees only this binary's
// placement, which may be aligned already), and lies inside the array. Slip:
// the mask alignment/2-1 leaves it 32-byte aligned when the array is.
func TestAlignedEmpty(t *testing.T) {
	var area [4 * alignment]byte
	for off := range 2 * alignment {
		a := area[off : off+2*alignment]
		b := alignedEmpty(a)
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		start := uintptr(unsafe.Pointer(&a[0]))
		if len(b) != 0 || cap(b) != 0 || p%alignment != 0 || p < start || p >= start+alignment {
			t.Fatalf("offset %d: alignedEmpty at %#x (area at %#x), len %d cap %d", off, p, start, len(b), cap(b))
		}
	}
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(zeroBuf))); p%alignment != 0 || len(zeroBuf) != 0 || cap(zeroBuf) != 0 {
		t.Fatalf("zeroBuf at %#x len %d cap %d", p, len(zeroBuf), cap(zeroBuf))
	}
}

// TestNewTakesReservation: owns bounds buffers by the whole reservation as
// impl reports it, so a buffer in its upper part is extended in place too.
// (TestOwnsBounds measures from m.base and m.size themselves, so a New that
// took half the size, or another base, passed it.) Slip: size: snap.Size/2.
func TestNewTakesReservation(t *testing.T) {
	m := newTest(t, false)
	snap := m.Impl().Snapshot()
	if m.base != snap.Base || m.size != snap.Size || snap.Size < 256<<20 {
		t.Fatalf("New took [%#x, +%d), the reservation is [%#x, +%d)", m.base, m.size, snap.Base, snap.Size)
	}
}
