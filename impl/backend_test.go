package impl

import (
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// TestReservationInsideMapping (INTEGRITY, NO-OVERLAP): the reservation a
// backend hands New, [Base, Base+Size) aligned to the superblock size, lies
// inside the memory the backend took (the mapping it will munmap, the arena it
// keeps alive). The window is cut from an over-allocation of size+align; one
// of only size leaves the window's tail, up to align-1 bytes of the last
// superblock, outside it: unmapped, or another mapping's memory (the Go
// heap's, here), which an allocation there faults on or silently corrupts.
// No allocation test sees it deterministically: it takes the reservation's
// last superblock, and then the layout of the address space decides.
// Slip: mmapnooverallocate.
func TestReservationInsideMapping(t *testing.T) {
	// The kernel's page-aligned address is superblock-aligned by chance one
	// time in 16, and then even a window cut from too little fits; mappings
	// of whole superblocks placed side by side are all aligned alike. So 16
	// reservations of sizes a page apart, held at once: their addresses take
	// 16 different offsets from the alignment.
	const page = 4096
	for _, base := range []uintptr{spec.SuperblockSize, 1 << 20} {
		for _, mk := range []func() backend{func() backend { return &mmapBackend{} }, func() backend { return &heapBackend{} }} {
			var held []backend
			for i := range uintptr(16) {
				size := base + i*page
				be := mk()
				p, err := be.reserve(size, spec.SuperblockSize)
				if err != nil {
					t.Fatalf("%s: reserve %d: %v", be.name(), size, err)
				}
				held = append(held, be)
				var mem []byte
				switch be := be.(type) {
				case *mmapBackend:
					mem = be.mapping
				case *heapBackend:
					mem = be.arena
				}
				lo := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
				hi := lo + uintptr(len(mem))
				start := uintptr(p)
				if start%spec.SuperblockSize != 0 {
					t.Errorf("%s: a reservation at %#x, not superblock-aligned", be.name(), start)
				}
				if start < lo || start+size > hi {
					t.Errorf("%s: a reservation of %d bytes at [%#x, %#x), outside the backend's memory [%#x, %#x)",
						be.name(), size, start, start+size, lo, hi)
				}
			}
			for _, be := range held {
				if err := be.release(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// And what New keeps: the reservation an Allocator hands out from.
	a, err := New(Options{Reserve: 4 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if m, ok := a.be.(*mmapBackend); ok {
		lo := uintptr(unsafe.Pointer(unsafe.SliceData(m.mapping)))
		if a.base < lo || a.base+a.size > lo+uintptr(len(m.mapping)) {
			t.Errorf("the Allocator's reservation [%#x, %#x) runs outside its mapping [%#x, %#x)",
				a.base, a.base+a.size, lo, lo+uintptr(len(m.mapping)))
		}
	}
}
