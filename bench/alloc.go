// Package bench measures refalloc against Go's own ways of getting memory: the
// classic allocator benchmarks (larson, threadtest, linux-scalability,
// cache-thrash, cache-scratch, xmalloc-test) and alloc/free pair loops, each
// written once against the Allocator/Thread interface below and run against
// every allocator. cmd/allocbench is the runner; bench_test.go has the same
// workloads as go test benchmarks. See README.md.
package bench

import (
	"fmt"
	"math/bits"
	"sync"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"modernc.org/memory"
)

// Allocator is one allocator under test, set up for one measurement.
type Allocator interface {
	Name() string
	// Thread returns the handle one goroutine allocates and frees through; it
	// must not be shared between goroutines that run at the same time.
	Thread() Thread
	// Close releases the allocator once every Thread is closed and every object
	// freed.
	Close() error
}

// Thread allocates and frees for one goroutine. Errors panic: an allocator
// that fails inside a benchmark has a bug the benchmark must not hide.
type Thread interface {
	Alloc(n int) []byte
	Free(b []byte)
	Close()
}

// Reallocer is implemented by the Threads of allocators that can resize an
// object themselves: refalloc (Cache.Realloc, Allocator.Realloc), modernc
// (Realloc) and the Go heap (make and copy, as append does). Realloc keeps the
// first min(len(b), n) bytes; the rest of the result reads zero.
type Reallocer interface {
	Realloc(b []byte, n int) []byte
}

// Realloc resizes b through th: its own Realloc when it has one, otherwise
// Alloc, copy and Free (sync-pool, go-slab).
func Realloc(th Thread, b []byte, n int) []byte {
	if r, ok := th.(Reallocer); ok {
		return r.Realloc(b, n)
	}
	return moveRealloc(th, b, n)
}

// moveRealloc is Realloc for a Thread without one of its own.
func moveRealloc(th Thread, b []byte, n int) []byte {
	nb := th.Alloc(n)
	copy(nb, b)
	th.Free(b)
	return nb
}

// Trimmer is implemented by allocators that can hand empty memory back to the
// OS on request.
type Trimmer interface{ Trim() error }

// Refallocer gives the memory and sweep measurements access to refalloc's
// statistics.
type Refallocer interface{ Refalloc() *impl.Allocator }

// Config is what an allocator must know about the workload before it starts.
type Config struct {
	// RemoteFrees: objects are freed on goroutines other than the one that
	// allocated them (modernc.org/memory then runs as one shared allocator
	// behind a mutex, since its allocators are not goroutine-safe).
	RemoteFrees bool
	// Ways is refalloc's Options.SuperblockCacheWays (0: its default).
	Ways int
}

// Kind is an allocator the runner can set up.
type Kind struct {
	Name string
	// PairOnly: a reference for the single-goroutine pair loops, not a
	// general allocator (it cannot free remotely).
	PairOnly bool
	New      func(Config) (Allocator, error)
}

// The allocator names used in flags, tables and CSV files.
const (
	RefallocCache  = "refalloc-cache"
	RefallocShared = "refalloc-shared"
	GoHeap         = "go-heap"
	SyncPool       = "sync-pool"
	Modernc        = "modernc"
	GoSlab         = "go-slab"
)

// Kinds lists every allocator, refalloc-cache first: it is the one every
// ratio is taken against.
var Kinds = []Kind{
	{Name: RefallocCache, New: func(c Config) (Allocator, error) { return newRefalloc(c, false) }},
	{Name: RefallocShared, New: func(c Config) (Allocator, error) { return newRefalloc(c, true) }},
	{Name: GoHeap, New: func(Config) (Allocator, error) { return goHeap{}, nil }},
	{Name: SyncPool, New: func(Config) (Allocator, error) { return new(syncPool), nil }},
	{Name: Modernc, New: func(c Config) (Allocator, error) { return &moderncAlloc{shared: c.RemoteFrees}, nil }},
	{Name: GoSlab, PairOnly: true, New: func(Config) (Allocator, error) { return goSlab{}, nil }},
}

// KindByName returns the Kind called name.
func KindByName(name string) (Kind, error) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("unknown allocator %q", name)
}

// ---------------------------------------------------------------- refalloc

type refallocAlloc struct {
	a      *impl.Allocator
	shared bool
}

func newRefalloc(c Config, shared bool) (Allocator, error) {
	a, err := impl.New(impl.Options{SuperblockCacheWays: c.Ways})
	if err != nil {
		return nil, err
	}
	return &refallocAlloc{a: a, shared: shared}, nil
}

func (r *refallocAlloc) Name() string {
	if r.shared {
		return RefallocShared
	}
	return RefallocCache
}

func (r *refallocAlloc) Thread() Thread {
	if r.shared {
		return sharedThread{r.a}
	}
	c, err := r.a.NewCache()
	if err != nil {
		panic(err)
	}
	return cacheThread{c}
}

func (r *refallocAlloc) Close() error              { return r.a.Close() }
func (r *refallocAlloc) Trim() error               { return r.a.Trim() }
func (r *refallocAlloc) Refalloc() *impl.Allocator { return r.a }

type cacheThread struct{ c *impl.Cache }

func (t cacheThread) Alloc(n int) []byte {
	b, err := t.c.Alloc(n)
	if err != nil {
		panic(err)
	}
	return b
}

func (t cacheThread) Free(b []byte) {
	if err := t.c.Free(b); err != nil {
		panic(err)
	}
}

func (t cacheThread) Realloc(b []byte, n int) []byte {
	r, err := t.c.Realloc(b, n)
	if err != nil {
		panic(err)
	}
	return r
}

func (t cacheThread) Close() {
	if err := t.c.Close(); err != nil {
		panic(err)
	}
}

// sharedThread goes through the goroutine-safe Allocator methods, as code that
// cannot keep a Cache per goroutine would.
type sharedThread struct{ a *impl.Allocator }

func (t sharedThread) Alloc(n int) []byte {
	b, err := t.a.Alloc(n)
	if err != nil {
		panic(err)
	}
	return b
}

func (t sharedThread) Free(b []byte) {
	if err := t.a.Free(b); err != nil {
		panic(err)
	}
}

func (t sharedThread) Realloc(b []byte, n int) []byte {
	r, err := t.a.Realloc(b, n)
	if err != nil {
		panic(err)
	}
	return r
}

func (sharedThread) Close() {}

// ---------------------------------------------------------------- Go heap

// goHeap is make: Free is a no-op and the garbage collector pays for it,
// which the runner reports as GC CPU time and pauses.
type goHeap struct{}

func (goHeap) Name() string   { return GoHeap }
func (goHeap) Thread() Thread { return goHeapThread{} }
func (goHeap) Close() error   { return nil }

type goHeapThread struct{}

func (goHeapThread) Alloc(n int) []byte { return make([]byte, n) }
func (goHeapThread) Free([]byte)        {}
func (goHeapThread) Close()             {}

// Realloc is what Go code does to grow a buffer: a new one and a copy; the GC
// frees the old one.
func (goHeapThread) Realloc(b []byte, n int) []byte {
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}

// ---------------------------------------------------------------- sync.Pool

// poolClasses covers every size the workloads ask for (up to 1 GiB).
const poolClasses = 31

// syncPool is what Go code does to recycle buffers: one sync.Pool per
// power-of-two class. The pools hold *[]byte, so that Put does not allocate a
// slice header box each time.
type syncPool struct{ pools [poolClasses]sync.Pool }

func (p *syncPool) Name() string   { return SyncPool }
func (p *syncPool) Thread() Thread { return &poolThread{p: p} }
func (p *syncPool) Close() error   { return nil }

// maxBoxes bounds a thread's spare boxes: with remote frees, producers collect
// boxes that only consumers need.
const maxBoxes = 4096

type poolThread struct {
	p *syncPool
	// boxes are emptied *[]byte from Get, reused by Free so that the steady
	// state allocates nothing.
	boxes []*[]byte
}

func poolClass(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

func (t *poolThread) Alloc(n int) []byte {
	c := poolClass(n)
	if v := t.p.pools[c].Get(); v != nil {
		box := v.(*[]byte)
		b := (*box)[:n]
		*box = nil
		if len(t.boxes) < maxBoxes {
			t.boxes = append(t.boxes, box)
		}
		// Zeroed like every other allocator here hands out memory; only the
		// requested bytes, which favours the pool slightly.
		clear(b)
		return b
	}
	return make([]byte, n, 1<<c)
}

func (t *poolThread) Free(b []byte) {
	var box *[]byte
	if k := len(t.boxes); k > 0 {
		box = t.boxes[k-1]
		t.boxes = t.boxes[:k-1]
	} else {
		box = new([]byte)
	}
	*box = b[:cap(b)]
	t.p.pools[poolClass(cap(b))].Put(box)
}

func (t *poolThread) Close() {}

// ---------------------------------------------------------------- modernc.org/memory

// moderncAlloc is modernc.org/memory, an mmap-backed size-class allocator that
// is not goroutine-safe: one memory.Allocator per goroutine when frees are
// local, one shared behind a mutex when they cross goroutines.
type moderncAlloc struct {
	shared bool
	mu     sync.Mutex
	a      memory.Allocator // shared mode
	// locals are the per-goroutine allocators, kept open until Close so that
	// the memory measurement sees what they retain after the frees.
	locals []*memory.Allocator
}

func (m *moderncAlloc) Name() string { return Modernc }

func (m *moderncAlloc) Thread() Thread {
	if m.shared {
		return moderncShared{m}
	}
	a := new(memory.Allocator)
	m.mu.Lock()
	m.locals = append(m.locals, a)
	m.mu.Unlock()
	return moderncLocal{a}
}

func (m *moderncAlloc) Trim() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.a.Trim()
	for _, a := range m.locals {
		if e := a.Trim(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (m *moderncAlloc) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.a.Close()
	for _, a := range m.locals {
		if e := a.Close(); e != nil && err == nil {
			err = e
		}
	}
	m.locals = nil
	return err
}

// Calloc, not Malloc: every allocator here returns zeroed memory.
type moderncLocal struct{ a *memory.Allocator }

func (t moderncLocal) Alloc(n int) []byte {
	b, err := t.a.Calloc(n)
	if err != nil {
		panic(err)
	}
	return b
}

func (t moderncLocal) Free(b []byte) {
	if err := t.a.Free(b); err != nil {
		panic(err)
	}
}

// Realloc clears what it adds: modernc's Realloc, unlike its Calloc, leaves
// the added bytes uninitialised, and every allocator here hands out zeroes.
func (t moderncLocal) Realloc(b []byte, n int) []byte {
	keep := min(len(b), n)
	r, err := t.a.Realloc(b, n)
	if err != nil {
		panic(err)
	}
	clear(r[keep:])
	return r
}

func (moderncLocal) Close() {}

type moderncShared struct{ m *moderncAlloc }

func (t moderncShared) Alloc(n int) []byte {
	t.m.mu.Lock()
	b, err := t.m.a.Calloc(n)
	t.m.mu.Unlock()
	if err != nil {
		panic(err)
	}
	return b
}

func (t moderncShared) Free(b []byte) {
	t.m.mu.Lock()
	err := t.m.a.Free(b)
	t.m.mu.Unlock()
	if err != nil {
		panic(err)
	}
}

func (moderncShared) Close() {}

// ---------------------------------------------------------------- Go slab

// goSlab is the ceiling for the pair loops: the least a Go free list can do.
// Per size (rounded up to 16 bytes) a stack of free blocks carved from 64 KiB
// Go-heap chunks; alloc pops and zeroes, as refalloc does; free pushes, with
// no checks at all. Local frees only.
type goSlab struct{}

func (goSlab) Name() string   { return GoSlab }
func (goSlab) Thread() Thread { return new(slabThread) }
func (goSlab) Close() error   { return nil }

const slabChunk = 64 << 10

type slabThread struct {
	// free[c] holds blocks of c*16 bytes. unsafe.Pointer keeps their chunks
	// alive for the GC.
	free  [][]unsafe.Pointer
	chunk []byte
}

func (t *slabThread) Alloc(n int) []byte {
	size := (max(n, 1) + 15) &^ 15
	c := size >> 4
	if c < len(t.free) {
		if l := t.free[c]; len(l) > 0 {
			b := unsafe.Slice((*byte)(l[len(l)-1]), size)
			t.free[c] = l[:len(l)-1]
			clear(b)
			return b[:n]
		}
	}
	if len(t.chunk) < size {
		t.chunk = make([]byte, max(slabChunk, size))
	}
	b := t.chunk[:n:size]
	t.chunk = t.chunk[size:]
	return b
}

func (t *slabThread) Free(b []byte) {
	c := cap(b) >> 4
	for c >= len(t.free) {
		t.free = append(t.free, nil)
	}
	t.free[c] = append(t.free[c], unsafe.Pointer(unsafe.SliceData(b)))
}

func (t *slabThread) Close() {}
