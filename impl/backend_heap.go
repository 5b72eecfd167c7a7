// The Go-heap backend: one aligned []byte arena, visible to the race detector.

package impl

import (
	"errors"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
)

type heapBackend struct {
	arena []byte
}

func (h *heapBackend) name() string { return "goheap" }

func (h *heapBackend) reserve(size, align uintptr) (unsafe.Pointer, error) {
	// A large noscan allocation: the Go runtime maps it fresh (zeroed) and the OS
	// commits it on first touch, like the mmap backend.
	h.arena = make([]byte, size+align)
	p := unsafe.Pointer(unsafe.SliceData(h.arena))
	return unsafe.Add(p, (align-uintptr(p)%align)%align), nil
}

func (h *heapBackend) decommit(p unsafe.Pointer, n uintptr) error {
	if mutant.HeapDecommitShort {
		n--
	}
	if !mutant.HeapDecommitNoClear {
		clear(unsafe.Slice((*byte)(p), n))
	}
	return nil
}

func (h *heapBackend) release() error {
	h.arena = nil
	return nil
}

// protect: the arena is Go heap memory, which only the runtime may map; guard
// mode poisons what it quarantines instead (GUARD-FAULT).
func (h *heapBackend) protect(unsafe.Pointer, uintptr, bool) error { return errNoProtect }

func (h *heapBackend) canProtect() bool { return false }

var errNoProtect = errors.New("refalloc: the Go-heap backend cannot protect memory")
