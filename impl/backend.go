// The backend: where payload memory comes from and how it goes back to the OS.

package impl

import "unsafe"

// backend is the layer under the superblocks: one address-space reservation, and a
// way to give ranges of it back to the OS. The mmap backend is the default; the
// Go-heap backend is selected in -race builds (backend_race.go) so that races on
// user payload are visible to the race detector, which does not see mmap'd memory.
type backend interface {
	// reserve returns the start of a reservation of size bytes aligned to align.
	// The memory reads as zero and is committed lazily, on first touch.
	reserve(size, align uintptr) (unsafe.Pointer, error)
	// decommit gives [p, p+n) back to the OS; afterwards it reads as zero.
	decommit(p unsafe.Pointer, n uintptr) error
	// release unmaps the whole reservation.
	release() error
	// protect makes [p, p+n) inaccessible (a read or write faults), or
	// accessible again (read and write), for guard mode (GUARD-FAULT). A
	// backend that cannot returns errNoProtect and changes nothing.
	protect(p unsafe.Pointer, n uintptr, access bool) error
	canProtect() bool
	name() string
}
