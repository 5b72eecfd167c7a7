// The goroutine-safe front: Allocator.Alloc, AllocAligned, Realloc, Free and
// Flush.

package impl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// The front serves the Allocator's own methods from internal caches, in two
// layers.
//
// Per-P caches (front_pinned.go; removed by the build tag refalloc_portable).
// Each P has a Cache of its own, made at New for max(GOMAXPROCS, NumCPU) Ps
// (a P past them, GOMAXPROCS raised later, uses the shards; the caches of Ps
// that went away keep what they hold until Flush or Trim, or an allocation
// through the Allocator that runs out: outOfMemory). A call pins its goroutine to its P
// (runtime.procPin, as sync.Pool does: no preemption until procUnpin), and,
// if nobody holds the P cache's token, runs the Cache's fast path on it with
// plain loads and stores: a goroutine that runs on the P after it comes after
// it, so the P's cache has one user at a time without an atomic
// read-modify-write. Nothing may block while pinned: besides the fast paths,
// what is pinned is what never blocks (the current superblock's next group
// when nothing is pending on it, a superblock-cache fill, a remote free's CAS
// and notification); everything else (refill beyond that, the central lock,
// madvise, OnError, debug mode) runs unpinned: the call takes the cache's
// token (a CAS, while still pinned), unpins, runs the Cache method, and
// releases the token (an atomic store). A goroutine that
// meets a held token — its holder was descheduled in a slow path — uses the
// shards instead. The caches belong to Ps, not to goroutines: goroutines that
// come and go leave nothing behind, and the number of caches is fixed at New.
// Allocator.Flush, from outside the Ps, takes every token and then stops the
// world for an instant (waitUnpinned) so that no fast path that read a free
// token before it is still running.
//
// In -race builds (pinSync) the fast path takes and releases the token too:
// the race detector sees no ordering between two goroutines that ran on one P
// one after the other, and the token gives it one, so -race still checks the
// cache's state and the payload.
//
// Shards: a fixed set of caches, each behind its own mutex, chosen by the
// caller's stack address. A goroutine goes first to the home shard of its
// stack address's bucket, so it keeps meeting the cache whose superblocks it
// warmed and whose objects it frees locally. When that shard is busy another
// goroutine shares the home: the caller takes the next free shard and makes it
// the bucket's home, so goroutines that run at the same time soon sit in shards
// of their own. Only when every shard is busy does a caller wait. In the
// portable build the shards are the whole front (twice as many as Ps); with
// per-P caches they are the fallback (as many as Ps).
//
// Both layers live as long as the Allocator, so nothing is dropped and
// nothing can leak; Flush gives back what they hold.
//
// Measured (bench/cmd/allocbench, medians of within-run ratios; see the design
// essay in alloc.go): the shards alone cost 3.2× a Cache's alloc+free pair at
// 64 B (two atomic read-modify-writes and the stack hash per call); a
// sync.Pool of Caches costs the same as a try-lock and unlock (Get+Put 9 ns
// here); the per-P pin costs 2.2 ns a call.
type front struct {
	procs  procCaches
	shards []shard
	mask   uint32
	home   [256]atomic.Uint32 // stack bucket → shard index
}

type shard struct {
	mu sync.Mutex
	c  *Cache
	_  [64 - unsafe.Sizeof(sync.Mutex{}) - 8]byte // one shard a cache line
}

func (f *front) init(a *Allocator) {
	n := 2
	for n < shardsPerP*runtime.GOMAXPROCS(0) {
		n *= 2
	}
	f.shards = make([]shard, n)
	f.mask = uint32(n - 1)
	for i := range f.shards {
		f.shards[i].c, _ = a.NewCache()
		f.shards[i].c.front = true
	}
	for b := range f.home {
		f.home[b].Store(uint32(b) & f.mask)
	}
	f.procs.init(a)
}

// lock locks and returns a shard: the caller's home if it is free, else the
// first free one after it, which becomes the home; else (all busy) the home,
// waiting.
func (f *front) lock() *shard {
	var onStack byte
	// Goroutine stacks are at least 8 KiB apart; Fibonacci hashing spreads them.
	b := (uintptr(unsafe.Pointer(&onStack)) >> 13) * 0x9e3779b97f4a7c15 >> 56
	if yieldPoints {
		if sb, ok := schedBucket(); ok {
			b = uintptr(sb) % uintptr(len(f.home))
		}
	}
	h := f.home[b].Load()
	if s := &f.shards[h&f.mask]; s.mu.TryLock() {
		return s
	}
	for i := uint32(1); i <= f.mask-uint32(b2i(mutant.ShardScanShort)); i++ {
		if s := &f.shards[(h+i)&f.mask]; s.mu.TryLock() {
			if !mutant.ShardHomeKept {
				f.home[b].Store((h + i) & f.mask)
			}
			return s
		}
		if mutant.ShardScanStuck {
			i--
		}
	}
	s := &f.shards[h&f.mask]
	lockMu(&s.mu)
	return s
}

// Flush flushes the Allocator's internal caches (see Cache.Flush). Caches made
// with NewCache are flushed by their owners.
func (a *Allocator) Flush() {
	a.flush()
	a.deliver()
}

// flush is Flush without the delivery of what it found (Trim delivers once
// its own work is done).
func (a *Allocator) flush() {
	a.front.procs.flush()
	for i := range a.front.shards {
		if mutant.FrontFlushSkip && i == len(a.front.shards)-1 {
			break
		}
		s := &a.front.shards[i]
		func() {
			lockMu(&s.mu)
			defer s.mu.Unlock()
			s.c.enter() // FRONT-EXCLUSIVE
			defer s.c.exit()
			s.c.Flush()
		}()
	}
}

// enter and exit bracket every use of a front cache by a call
// (FRONT-EXCLUSIVE). Under -tags refalloc_check, and in the explorer's
// refalloc_yield builds, a second call entering a cache that a call is using
// panics, naming the rule; other builds compile them out.
func (c *Cache) enter() {
	if !c.tryEnter() {
		panic(c.overlap())
	}
}

// tryEnter is enter reporting the overlap instead of panicking, for a caller
// that is pinned (a pinned goroutine must not panic: it would be fatal).
func (c *Cache) tryEnter() bool {
	if (checks || yieldPoints) && c.users.Add(1) != 1 {
		c.users.Add(-1)
		return false
	}
	return true
}

func (c *Cache) overlap() string {
	return fmt.Sprintf("refalloc: %s: two calls use front cache %d at once", spec.RuleFrontExclusive, c.id)
}

func (c *Cache) exit() {
	if checks || yieldPoints {
		c.users.Add(-1)
	}
}

// The slow paths of the front's methods: on a cache of the caller's own, a
// P's with its token or a locked shard's, released on return (also on a
// panic), then the reports the call queued delivered (OnError may call the
// Allocator, and panic).

func (a *Allocator) allocSlow(p int, c *Cache, n, align int) ([]byte, error) {
	b, err := a.allocAcquired(p, c, n, align)
	if err != nil && a.outOfMemory(err) {
		p = pin()
		if mutant.FrontOOMRetryAlign1 { // ALIGN: the retry asks for alignment 1
			align = 1
		}
		b, err = a.allocAcquired(p, a.front.procs.pinned(p), n, align)
	}
	if !mutant.AllocNoDeliver {
		a.deliverAlloc(b) // the cache given up
	}
	return b, err
}

func (a *Allocator) allocAcquired(p int, c *Cache, n, align int) ([]byte, error) {
	c, s := a.front.acquire(p, c)
	defer a.front.release(c, s)
	if align == 1 {
		return c.Alloc(n)
	}
	return c.AllocAligned(n, align)
}

// outOfMemory reports whether err, from a call of the Allocator's own methods
// that has given its cache up, is ErrOutOfMemory, after flushing every internal
// cache when it is (OOM-REAL): the cache that served the call gave back what it
// held before answering, but the others (other Ps', the shards) keep the
// current superblock of every class they served, empty once its objects are
// freed. They are the Allocator's own, not the user's to flush, so the call
// looks again once they are flushed. Off the fast paths: only an allocation
// that ran out pays (a stop of the world, waitUnpinned).
func (a *Allocator) outOfMemory(err error) bool {
	if !errors.Is(err, ErrOutOfMemory) || mutant.FrontOOMOwnFlush {
		return false
	}
	a.flush()
	return true
}

func (a *Allocator) freeSlow(p int, c *Cache, off uintptr) error {
	err := a.freeAcquired(p, c, off)
	if !mutant.FreeNoDeliver {
		a.deliver() // the cache given up
	}
	return err
}

func (a *Allocator) freeAcquired(p int, c *Cache, off uintptr) (err error) {
	c, s := a.front.acquire(p, c)
	defer func() {
		if err == nil || !mutant.TokenLeak {
			a.front.release(c, s)
		}
	}()
	return c.free(off)
}

// Realloc is Cache.Realloc, safe for concurrent use.
func (a *Allocator) Realloc(b []byte, n int) ([]byte, error) {
	r, err := a.reallocAcquired(b, n)
	switch { // the cache given up
	case mutant.ReallocNoDeliver:
	case moved(r, b) && !mutant.FrontReallocDeliver:
		a.deliverAlloc(r)
	case mutant.FrontInPlaceNoDeliver && !moved(r, b): // DEBUG-POISON: in place, the reports wait
	default:
		a.deliver()
	}
	return r, err
}

func (a *Allocator) reallocAcquired(b []byte, n int) ([]byte, error) {
	r, err := a.reallocOnce(b, n)
	if err != nil && a.outOfMemory(err) { // b is untouched: look again
		if mutant.FrontOOMRetryNil { // REFINES, CONSERVE: the retry is an Alloc, b neither copied nor freed
			b = nil
		}
		r, err = a.reallocOnce(b, n)
	}
	return r, err
}

func (a *Allocator) reallocOnce(b []byte, n int) ([]byte, error) {
	p := pin()
	c, s := a.front.acquire(p, a.front.procs.pinned(p)) // unpins
	defer a.front.release(c, s)
	return c.Realloc(b, n)
}

// release ends the use of c that acquire began.
func (f *front) release(c *Cache, s *shard) {
	c.exit()
	if s != nil {
		s.mu.Unlock()
		return
	}
	f.procs.release(c)
}

// frontCaches are the front's caches: the per-P ones, then the shards'.
func (a *Allocator) frontCaches() []*Cache {
	cs := a.front.procs.caches()
	for i := range a.front.shards {
		cs = append(cs, a.front.shards[i].c)
	}
	return cs
}

// FrontCaches is the number of the front's internal caches (the per-P ones,
// then the shards), for WithFrontCache.
func (a *Allocator) FrontCaches() int { return len(a.frontCaches()) }

// WithFrontCache runs f with the front's internal cache i, in [0,
// FrontCaches()), for f's exclusive use (FRONT-EXCLUSIVE), as a call of the
// Allocator's methods would have it. It is for verification: a single
// goroutine reaches one per-P cache only, and package invariants drives every
// internal cache with it, so that what Flush and Trim do to each is checked.
// f must not keep c, close it, or call the Allocator's own methods.
func (a *Allocator) WithFrontCache(i int, f func(c *Cache)) {
	a.withFrontCache(i, f)
	a.deliver() // the cache given up
}

func (a *Allocator) withFrontCache(i int, f func(c *Cache)) {
	procs := a.front.procs.caches()
	if i < len(procs) {
		c := procs[i]
		a.front.procs.hold(c)
		defer a.front.procs.release(c)
		c.enter()
		defer c.exit()
		f(c)
		return
	}
	s := &a.front.shards[i-len(procs)]
	lockMu(&s.mu)
	defer s.mu.Unlock()
	s.c.enter()
	defer s.c.exit()
	f(s.c)
}
