// The mmap backend: one lazily committed anonymous mapping.

package impl

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/refalloc/refalloc/internal/mutant"
)

type mmapBackend struct {
	mapping []byte // the whole mapping, kept for Munmap
}

func (m *mmapBackend) name() string { return "mmap" }

func (m *mmapBackend) reserve(size, align uintptr) (unsafe.Pointer, error) {
	// MAP_NORESERVE: the reservation is address space, not a commitment; pages are
	// committed when first written. Over-map by align to cut an aligned window.
	over := align
	if mutant.MmapNoOverAllocate {
		over = 0
	}
	b, err := unix.Mmap(-1, 0, int(size+over), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("refalloc: mmap of %d bytes: %w", size+align, err)
	}
	m.mapping = b
	p := unsafe.Pointer(unsafe.SliceData(b))
	return unsafe.Add(p, (align-uintptr(p)%align)%align), nil
}

func (m *mmapBackend) decommit(p unsafe.Pointer, n uintptr) error {
	// MADV_DONTNEED, not MADV_FREE: afterwards the range reads as zero at once, so
	// a decommitted superblock counts as fresh and its objects need no zeroing,
	// and RSS drops at once, which is what Trim is for. MADV_FREE pages stay
	// resident, with their old contents, until the kernel is short of memory.
	// Measured (BenchmarkMadvise, dirty 64 KiB, advise, touch again; 2-vCPU VM):
	// DONTNEED 511-590 us a cycle, FREE 393-447 us, and under FREE the old bytes
	// were still there after every advise (so reuse would have to zero again,
	// and Committed could not fall). The page faults dominate both.
	return unix.Madvise(unsafe.Slice((*byte)(p), n), unix.MADV_DONTNEED)
}

func (m *mmapBackend) release() error {
	if m.mapping == nil || mutant.UnmapSkipped { // MEM-ACCOUNT: Close releases the reservation
		return nil
	}
	err := unix.Munmap(m.mapping)
	m.mapping = nil
	return err
}

// protect changes the protection of [p, p+n): PROT_NONE, so that any access
// faults, or read and write again. The kernel splits the mapping's VMA around
// the range and merges neighbours of equal protection back, so each
// quarantined range costs at most two VMAs (vm.max_map_count is 65530 by
// default); the quarantine's object bound keeps that bounded.
func (m *mmapBackend) protect(p unsafe.Pointer, n uintptr, access bool) error {
	prot := unix.PROT_NONE
	if access {
		prot = unix.PROT_READ | unix.PROT_WRITE
	}
	return unix.Mprotect(unsafe.Slice((*byte)(p), n), prot)
}

func (m *mmapBackend) canProtect() bool { return true }
