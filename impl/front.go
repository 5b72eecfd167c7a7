// The goroutine-safe front: Allocator.Alloc, AllocAligned, Free and Flush.

package impl

import "sync"

// front serves the Allocator's own methods from an internal cache under a mutex.
type front struct {
	mu sync.Mutex
	c  *Cache
}

func (f *front) init(a *Allocator) {
	f.c, _ = a.NewCache()
}

// Alloc is Cache.Alloc, safe for concurrent use.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	a.front.mu.Lock()
	defer a.front.mu.Unlock()
	return a.front.c.Alloc(n)
}

// AllocAligned is Cache.AllocAligned, safe for concurrent use.
func (a *Allocator) AllocAligned(n, align int) ([]byte, error) {
	a.front.mu.Lock()
	defer a.front.mu.Unlock()
	return a.front.c.AllocAligned(n, align)
}

// Free frees an object of any cache of a, safe for concurrent use.
func (a *Allocator) Free(b []byte) error {
	a.front.mu.Lock()
	defer a.front.mu.Unlock()
	return a.front.c.Free(b)
}

// Flush flushes the Allocator's internal caches (see Cache.Flush).
func (a *Allocator) Flush() {
	a.front.mu.Lock()
	defer a.front.mu.Unlock()
	a.front.c.Flush()
}
