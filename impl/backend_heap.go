// The Go-heap backend: one aligned []byte arena, visible to the race detector.

package impl

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/refalloc/refalloc/internal/mutant"
)

type heapBackend struct {
	arena []byte
}

func (h *heapBackend) name() string { return "goheap" }

// heapDefaultReserve is Options.Reserve 0 under the Go-heap backend.
const heapDefaultReserve = 1 << 30

func (h *heapBackend) reserve(size, align uintptr) (unsafe.Pointer, error) {
	// The runtime maps a heap object without MAP_NORESERVE, so the kernel
	// charges all of it at once, and when the kernel refuses, the runtime
	// dies ("fatal error: out of memory"), which no caller can recover from.
	// So the kernel is asked first, with a mapping of the same kind, charged
	// and never touched, unmapped at once: a refusal is an error New returns
	// (ErrOutOfMemory; TestHeapBackendHugeReserveIsAnError).
	if !mutant.HeapNoProbe { // OOM-REAL
		probe, err := unix.Mmap(-1, 0, int(size+align), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
		if err != nil {
			return nil, fmt.Errorf("refalloc: a Go-heap arena of %d bytes: %w", size+align, err)
		}
		if err := unix.Munmap(probe); err != nil {
			return nil, fmt.Errorf("refalloc: a Go-heap arena of %d bytes: %w", size+align, err)
		}
	}
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
