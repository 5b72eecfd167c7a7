// The goroutine-safe front: Allocator.Alloc, AllocAligned, Free and Flush.

package impl

import (
	"runtime"
	"sync"
	"unsafe"
)

// front serves the Allocator's own methods from a set of internal caches, each
// behind its own mutex: a sharded cache with try-lock, so there is no global lock
// on the path. A goroutine starts at the shard its stack address hashes to, which
// is stable while the goroutine lives (stacks move only when they grow), so a
// goroutine keeps meeting the cache whose superblocks it has warmed and whose
// objects it frees locally; when that shard is busy it takes the next free one,
// and only when all are busy does it wait on its own. There are twice as many
// shards as Ps, so two running goroutines rarely meet. The caches live as long as
// the Allocator: nothing is dropped, so nothing can leak; Flush gives back what
// they hold.
type front struct {
	shards []shard
	mask   uintptr
}

type shard struct {
	mu sync.Mutex
	c  *Cache
	_  [64 - unsafe.Sizeof(sync.Mutex{}) - 8]byte // one shard a cache line
}

func (f *front) init(a *Allocator) {
	n := 2
	for n < 2*runtime.GOMAXPROCS(0) {
		n *= 2
	}
	f.shards = make([]shard, n)
	f.mask = uintptr(n - 1)
	for i := range f.shards {
		f.shards[i].c, _ = a.NewCache()
		f.shards[i].c.front = true
	}
}

// lock locks and returns a shard: the goroutine's own if it is free, else the
// first free one after it, else (all busy) its own, waiting.
func (f *front) lock() *shard {
	var onStack byte
	// Goroutine stacks are at least 8 KiB apart; Fibonacci hashing spreads them.
	h := (uintptr(unsafe.Pointer(&onStack)) >> 13) * 0x9e3779b97f4a7c15 >> 40
	for i := range f.mask + 1 {
		if s := &f.shards[(h+i)&f.mask]; s.mu.TryLock() {
			return s
		}
	}
	s := &f.shards[h&f.mask]
	s.mu.Lock()
	return s
}

// Alloc is Cache.Alloc, safe for concurrent use.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	s := a.front.lock()
	b, err := s.c.Alloc(n)
	s.mu.Unlock()
	return b, err
}

// AllocAligned is Cache.AllocAligned, safe for concurrent use.
func (a *Allocator) AllocAligned(n, align int) ([]byte, error) {
	s := a.front.lock()
	b, err := s.c.AllocAligned(n, align)
	s.mu.Unlock()
	return b, err
}

// Free frees an object of any cache of a, safe for concurrent use.
func (a *Allocator) Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	s := a.front.lock()
	err := s.c.Free(b)
	s.mu.Unlock()
	return err
}

// Flush flushes the Allocator's internal caches (see Cache.Flush). Caches made
// with NewCache are flushed by their owners.
func (a *Allocator) Flush() {
	for i := range a.front.shards {
		s := &a.front.shards[i]
		s.mu.Lock()
		s.c.Flush()
		s.mu.Unlock()
	}
}
