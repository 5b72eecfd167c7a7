// The goroutine-safe front: Allocator.Alloc, AllocAligned, Free and Flush.

package impl

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// front serves the Allocator's own methods from a fixed set of internal caches
// (shards), each behind its own mutex: no global lock on the path. A sync.Pool of
// shards gives affinity: its per-P slot hands a goroutine the shard last used on
// the same P, so each P keeps meeting the cache whose superblocks it warmed and
// whose objects it frees locally, and two running goroutines do not share one.
// The pool only suggests: a shard is used under its mutex, and when the pool has
// none to give (at start, after a GC empties it) the first shard that try-locks
// is taken, and only when all are busy does the caller wait. There are twice as
// many shards as Ps. The shards live as long as the Allocator; the pool drops
// only its pointers to them, so nothing can leak. Flush gives back what they
// hold.
type front struct {
	shards []shard
	pool   sync.Pool // of *shard
	next   atomic.Uint32
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
	for i := range f.shards {
		f.shards[i].c, _ = a.NewCache()
		f.shards[i].c.front = true
	}
}

// lock locks and returns a shard: the one the pool suggests if it is free, else
// the first free one, else (all busy) one, waiting.
func (f *front) lock() *shard {
	if s, _ := f.pool.Get().(*shard); s != nil && s.mu.TryLock() {
		return s
	}
	start := int(f.next.Add(1))
	for i := range f.shards {
		if s := &f.shards[(start+i)%len(f.shards)]; s.mu.TryLock() {
			return s
		}
	}
	s := &f.shards[start%len(f.shards)]
	s.mu.Lock()
	return s
}

// unlock releases s and offers it back to this P.
func (f *front) unlock(s *shard) {
	s.mu.Unlock()
	f.pool.Put(s)
}

// Alloc is Cache.Alloc, safe for concurrent use.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	s := a.front.lock()
	b, err := s.c.Alloc(n)
	a.front.unlock(s)
	return b, err
}

// AllocAligned is Cache.AllocAligned, safe for concurrent use.
func (a *Allocator) AllocAligned(n, align int) ([]byte, error) {
	s := a.front.lock()
	b, err := s.c.AllocAligned(n, align)
	a.front.unlock(s)
	return b, err
}

// Free frees an object of any cache of a, safe for concurrent use.
func (a *Allocator) Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	s := a.front.lock()
	err := s.c.Free(b)
	a.front.unlock(s)
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
