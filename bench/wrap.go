package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// rng is xorshift64* seeded through splitmix64, the generator of bench/c's
// common.h, so that the ports draw the same kind of numbers at the same cost.
type rng struct{ s uint64 }

func newRNG(seed uint64) rng {
	z := seed + 0x9E3779B97F4A7C15
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	z ^= z >> 31
	if z == 0 {
		z = 0x2545F4914F6CDD1D
	}
	return rng{z}
}

func (r *rng) next() uint64 {
	x := r.s
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	r.s = x
	return x * 0x2545F4914F6CDD1D
}

// below is common.h's rng_below: the high 32 bits scaled to [0, n).
func (r *rng) below(n uint32) uint32 {
	return uint32(((r.next() >> 32) * uint64(n)) >> 32)
}

// ---------------------------------------------------------------- live bytes

// Tracker counts the bytes of live objects (sum of cap) and their peak, for
// the memory measurement. It costs an atomic add per operation, so the runner
// uses it only in the memory pass, never when timing.
type Tracker struct {
	live, peak atomic.Int64
}

// Peak is the largest number of live bytes seen.
func (tr *Tracker) Peak() int64 { return tr.peak.Load() }

// Live is the number of live bytes now.
func (tr *Tracker) Live() int64 { return tr.live.Load() }

// Wrap returns a wraps whose threads count into tr.
func (tr *Tracker) Wrap(a Allocator) Allocator { return trackedAlloc{a, tr} }

type trackedAlloc struct {
	Allocator
	tr *Tracker
}

func (t trackedAlloc) Thread() Thread { return trackedThread{t.Allocator.Thread(), t.tr} }

type trackedThread struct {
	Thread
	tr *Tracker
}

func (t trackedThread) Alloc(n int) []byte {
	b := t.Thread.Alloc(n)
	t.tr.add(int64(cap(b)))
	return b
}

func (t trackedThread) Free(b []byte) {
	t.tr.live.Add(-int64(cap(b)))
	t.Thread.Free(b)
}

// Realloc counts an allocator's own Realloc as the new object live and the old
// one freed at once (in place or not); without one, Realloc's Alloc, copy and
// Free go through t and count as such, the old object live during the copy.
func (t trackedThread) Realloc(b []byte, n int) []byte {
	if _, ok := t.Thread.(Reallocer); !ok {
		return moveRealloc(t, b, n)
	}
	old := int64(cap(b))
	r := Realloc(t.Thread, b, n)
	t.tr.add(int64(cap(r)) - old)
	return r
}

func (tr *Tracker) add(d int64) {
	v := tr.live.Add(d)
	for {
		p := tr.peak.Load()
		if v <= p || tr.peak.CompareAndSwap(p, v) {
			break
		}
	}
}

// ---------------------------------------------------------------- checking

// Checker verifies what a workload gets from an allocator: the requested
// length, zeroed memory, no object handed out twice while live, no free of an
// object that is not live. For tests; it serialises every operation.
type Checker struct {
	mu       sync.Mutex
	live     map[uintptr]int
	allocs   int64
	frees    int64
	reallocs int64 // through the allocator's own Realloc
	err      error
}

// NewChecker returns an empty Checker.
func NewChecker() *Checker { return &Checker{live: make(map[uintptr]int)} }

// Wrap returns a whose threads are checked by c.
func (c *Checker) Wrap(a Allocator) Allocator { return checkedAlloc{a, c} }

// Err is the first problem found, or nil.
func (c *Checker) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Counts returns the allocations and frees seen and the objects still live.
func (c *Checker) Counts() (allocs, frees int64, live int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allocs, c.frees, len(c.live)
}

// Reallocs returns how many objects were resized by the allocator's own
// Realloc (neither an alloc nor a free in Counts).
func (c *Checker) Reallocs() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reallocs
}

func (c *Checker) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

type checkedAlloc struct {
	Allocator
	c *Checker
}

func (a checkedAlloc) Thread() Thread { return checkedThread{a.Allocator.Thread(), a.c} }

type checkedThread struct {
	Thread
	c *Checker
}

func (t checkedThread) Alloc(n int) []byte {
	b := t.Thread.Alloc(n)
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.allocs++
	if len(b) != n || cap(b) < n {
		c.fail("Alloc(%d) returned len %d cap %d", n, len(b), cap(b))
		return b
	}
	for i, x := range b {
		if x != 0 {
			c.fail("Alloc(%d): byte %d is %#x, not zeroed", n, i, x)
			break
		}
	}
	if cap(b) == 0 {
		return b
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if _, dup := c.live[p]; dup {
		c.fail("Alloc(%d) returned %#x, which is live", n, p)
	}
	c.live[p] = cap(b)
	return b
}

func (t checkedThread) Free(b []byte) {
	c := t.c
	c.mu.Lock()
	c.frees++
	if cap(b) > 0 {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if sz, ok := c.live[p]; !ok {
			c.fail("Free(%#x): not live", p)
		} else if sz != cap(b) {
			c.fail("Free(%#x): cap %d, allocated with cap %d", p, cap(b), sz)
		}
		delete(c.live, p)
	}
	c.mu.Unlock()
	t.Thread.Free(b)
}

// Realloc checks the object is live, that the result has length n, keeps the
// first min(len(b), n) bytes and reads zero after them up to n, and that no
// other live object is handed out.
func (t checkedThread) Realloc(b []byte, n int) []byte {
	if _, ok := t.Thread.(Reallocer); !ok {
		return moveRealloc(t, b, n) // Alloc, copy, Free: each checked
	}
	c := t.c
	keep := min(len(b), n)
	kept := append([]byte(nil), b[:keep]...)
	c.mu.Lock()
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if cap(b) > 0 {
		if sz, ok := c.live[p]; !ok {
			c.fail("Realloc(%#x): not live", p)
		} else if sz != cap(b) {
			c.fail("Realloc(%#x): cap %d, allocated with cap %d", p, cap(b), sz)
		}
		delete(c.live, p)
	}
	c.mu.Unlock()
	r := Realloc(t.Thread, b, n)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reallocs++
	if len(r) != n || cap(r) < n {
		c.fail("Realloc(%d) returned len %d cap %d", n, len(r), cap(r))
		return r
	}
	if string(r[:keep]) != string(kept) {
		c.fail("Realloc(%d) did not keep the first %d bytes", n, keep)
	}
	for i, x := range r[keep:] {
		if x != 0 {
			c.fail("Realloc(%d): byte %d is %#x, not zeroed", n, keep+i, x)
			break
		}
	}
	if cap(r) > 0 {
		q := uintptr(unsafe.Pointer(unsafe.SliceData(r)))
		if _, dup := c.live[q]; dup {
			c.fail("Realloc(%d) returned %#x, which is live", n, q)
		}
		c.live[q] = cap(r)
	}
	return r
}
