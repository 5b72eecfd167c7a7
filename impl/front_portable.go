//go:build refalloc_portable

// The portable front (build tag refalloc_portable): no per-P caches, every
// call of the Allocator's own methods locks a shard (front.go).

package impl

import (
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
)

// shardsPerP: the shards are the whole front.
const shardsPerP = 2

type procCaches struct{}

func (procCaches) init(*Allocator)   {}
func (procCaches) pinned(int) *Cache { return nil }
func (procCaches) release(*Cache)    {}
func (procCaches) flush()            {}
func (procCaches) hold(*Cache)       {}
func (procCaches) caches() []*Cache  { return nil }

func pin() int { return 0 }

// acquire locks a shard for the caller.
func (f *front) acquire(int, *Cache) (*Cache, *shard) {
	s := f.lock()
	if !mutant.PortableNoEnter {
		s.c.enter() // FRONT-EXCLUSIVE
	}
	return s.c, s
}

// Alloc is Cache.Alloc, safe for concurrent use.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	if mutant.PortableAlloc16 { // REFINES: the capacity is spec.Usable(n, 1)
		return a.allocSlow(0, nil, n, 16)
	}
	return a.allocSlow(0, nil, n, 1)
}

// AllocAligned is Cache.AllocAligned, safe for concurrent use.
func (a *Allocator) AllocAligned(n, align int) ([]byte, error) {
	return a.allocSlow(0, nil, n, align)
}

// Free frees an object of any cache of a, safe for concurrent use.
func (a *Allocator) Free(b []byte) error {
	if cap(b) == 0 || mutant.FreeLenNotCap && len(b) == 0 {
		return nil
	}
	return a.freeSlow(0, nil, uintptr(unsafe.Pointer(unsafe.SliceData(b)))-a.base)
}
