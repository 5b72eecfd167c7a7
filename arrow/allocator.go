// Package refarrow is refalloc behind Apache Arrow's memory.Allocator: Arrow's
// buffers live off the Go heap, in refalloc's reservation, and every Free is
// checked (double and invalid frees are always detected).
//
//	mem, err := refarrow.New(impl.Options{})
//	if err != nil { ... }
//	defer mem.Close()
//	b := array.NewInt64Builder(mem)
//
// Arrow's interface returns no errors, so this package decides:
//
//   - Allocate panics when refalloc cannot serve the request (out of memory, a
//     closed Allocator, a negative size), as GoAllocator panics when make fails.
//   - A Free that refalloc rejects (double free, invalid pointer, a closed
//     Allocator) changes nothing, is counted in Stats.BadFrees and given to
//     Options.OnError; with Options.Debug it then panics, on the goroutine that
//     called Free, so a test stops at the faulty Release.
//   - Bad frees and writes after free that refalloc finds later (a remote double
//     free found when its owner collects, Debug's poison check) go to
//     Options.OnError only: they are found by another call than the faulty
//     Release, often on another goroutine, which a panic would stop instead.
//     impl.Stats counts them.
//
// Buffers are as GoAllocator returns them: 64-byte aligned, zeroed, len == cap
// == size. A zero-size request returns a non-nil empty slice and allocates
// nothing; freeing it does nothing.
//
// Guard mode (impl.Options.Guard) catches a read or write of a released
// buffer at the access (GUARD-FAULT): in a test, make the allocator with
// Guard: impl.GuardOptions{Enabled: true, SampleRate: 1} and defer
// mem.CatchFaults(...)() in every goroutine that uses Arrow's arrays; a fault
// then becomes an impl.UseAfterFreeError with the stacks that allocated the
// buffer, released it and read it.
package refarrow

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// alignment is Arrow's: SIMD kernels and the IPC format assume 64-byte buffers.
const alignment = 64

// Allocator is a memory.Allocator over one impl.Allocator. It is safe for
// concurrent use.
type Allocator struct {
	a       *impl.Allocator
	onError func(error)
	debug   bool
	// the reservation, [base, base+size): Reallocate extends only buffers in it
	base, size uintptr
	// closed is set by Close: the in-place path writes b's object itself, so
	// it must not run once the reservation is gone (impl's calls check their
	// own).
	closed atomic.Bool

	bytes, peak, objects atomic.Int64
	allocs, frees        atomic.Uint64
	reallocs, inPlace    atomic.Uint64
	badFrees             atomic.Uint64
}

var _ memory.Allocator = (*Allocator)(nil)

// New makes an Allocator with its own impl.Allocator, configured by opt as it
// is: Reserve, Retain, Debug and OnError mean what they mean there.
func New(opt impl.Options) (*Allocator, error) {
	a, err := impl.New(opt)
	if err != nil {
		return nil, err
	}
	snap := a.Snapshot() // the reservation never moves; a fresh snapshot is small
	return &Allocator{a: a, onError: opt.OnError, debug: opt.Debug, base: snap.Base, size: snap.Size}, nil
}

// Impl is the underlying allocator, for its Stats, Snapshot or Trim. Freeing
// its objects directly bypasses this Allocator's counters.
func (m *Allocator) Impl() *impl.Allocator { return m.a }

// zeroBuf is every zero-size buffer: non-nil like GoAllocator's, and 64-byte
// aligned for code that checks. (unsafe.Slice because slicing to a zero cap
// would leave the pointer at the array's start.)
var zeroArea [2 * alignment]byte

var zeroBuf = alignedEmpty(zeroArea[:])

// alignedEmpty is an empty slice at the first 64-byte aligned address of area,
// which must hold one (len(area) >= alignment).
func alignedEmpty(area []byte) []byte {
	return unsafe.Slice(&area[-int(uintptr(unsafe.Pointer(&area[0])))&(alignment-1)], 0)
}

// Allocate returns size zeroed bytes, 64-byte aligned, len == cap == size.
func (m *Allocator) Allocate(size int) []byte {
	if size == 0 {
		return zeroBuf
	}
	b, err := m.a.AllocAligned(size, alignment)
	if err != nil {
		panic(fmt.Errorf("refarrow: Allocate(%d): %w", size, err))
	}
	m.allocs.Add(1)
	m.objects.Add(1)
	m.grow(int64(size))
	return b[:size:size]
}

// grow adds d to the live bytes and keeps the peak.
func (m *Allocator) grow(d int64) {
	n := m.bytes.Add(d)
	for {
		p := m.peak.Load()
		if n <= p || m.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// capacity is the real capacity of a buffer this Allocator returned with
// length n: refalloc's capacity is a function of the request (spec.Usable),
// which Allocate hides by cutting cap to n. Reallocate needs it back.
func capacity(n int) int {
	if n == 0 {
		return 0
	}
	return spec.Usable(n, alignment)
}

// Reallocate resizes b, a buffer of this Allocator (resliced shorter or not:
// it is the buffer as allocated that is resized), to size bytes and returns
// it; the first min(len(b), size) bytes are kept and the rest read zero. It
// stays in place when b's object holds size bytes and is at most twice the
// object a fresh size-byte buffer would get (so that a shrunk buffer does not
// pin a much larger object); otherwise it allocates, copies and frees b (a b
// that is not this Allocator's, or a slice that does not start one of its
// buffers, is copied, then reported as a bad free; in Debug mode that panics,
// and so may OnError, and in guard mode the copy of a released b faults: the
// new buffer is then freed again, nothing leaks). A released b that could
// stay in place is not found here (refalloc answers no liveness query): its
// next Free reports a double free, unless its object was allocated again.
func (m *Allocator) Reallocate(size int, b []byte) []byte {
	if size < 0 {
		panic(fmt.Errorf("refarrow: Reallocate(%d): negative size", size))
	}
	m.reallocs.Add(1)
	// len's bytes are kept; cap is the buffer's size as it was allocated,
	// resliced shorter or not (Free debits it too).
	old, have := len(b), cap(b)
	if have > spec.MaxSmall && size > spec.MaxSmall && m.owns(b) {
		return m.reallocLarge(size, b)
	}
	if c := capacity(have); have > 0 && size > 0 && size <= c && 2*capacity(size) >= c && m.owns(b) && m.starts(b, c) && !m.closed.Load() {
		m.inPlace.Add(1)
		m.grow(int64(size - have))
		r := unsafe.Slice(unsafe.SliceData(b), c)[:size:size]
		if size > old {
			// Arrow may have written there before a shrink.
			clear(r[old:])
		}
		return r
	}
	nb := m.Allocate(size)
	// The copy faults when b was released in guard mode (CatchFaults makes
	// that a report), badFree panics in Debug mode, and OnError may panic (or
	// end the goroutine): the caller then never gets nb, so it goes back, or
	// it would stay live for good (a bad Reallocate changes nothing).
	returned := false
	defer func() {
		if !returned {
			m.Free(nb)
		}
	}()
	copy(nb, b)
	if err := m.free(b); err != nil {
		m.badFree(err)
	}
	returned = true
	return nb
}

// reallocLarge is Reallocate from a large buffer to a large size, by impl's
// Realloc, which stays in place when it can (a shrink gives pages back, a
// growth takes the free superblocks right after the buffer), so a builder
// doubling its buffer rarely copies; large objects start superblocks, so the
// 64-byte alignment holds either way.
func (m *Allocator) reallocLarge(size int, b []byte) []byte {
	old, have := len(b), cap(b)
	r, err := m.a.Realloc(unsafe.Slice(unsafe.SliceData(b), capacity(have))[:old], size)
	if err != nil {
		if errors.Is(err, impl.ErrDoubleFree) || errors.Is(err, impl.ErrInvalidPointer) {
			m.badFree(fmt.Errorf("refarrow: Reallocate of a %d-byte buffer: %w", have, err))
			return m.Allocate(size)
		}
		panic(fmt.Errorf("refarrow: Reallocate(%d): %w", size, err))
	}
	if unsafe.SliceData(r) == unsafe.SliceData(b) {
		m.inPlace.Add(1)
		m.grow(int64(size - have))
	} else {
		// A move, counted as Reallocate's small moves are: an allocation and
		// a free, both buffers live for a moment.
		m.allocs.Add(1)
		m.frees.Add(1)
		m.grow(int64(size))
		m.grow(-int64(have))
	}
	return r[:size:size]
}

// owns reports whether b starts in the reservation. Arrow can hand
// Reallocate a buffer that came from elsewhere (memory.NewBufferWithAllocator
// wraps any slice); extending that to a refalloc capacity would overrun it.
func (m *Allocator) owns(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))-m.base < m.size
}

// starts reports whether b, which owns found in the reservation, can be the
// start of a buffer of capacity c (NO-OVERLAP, FREE-INVALID): small
// objects start at a superblock's start + i*their class size, large ones at a
// superblock's start (superblocks are SuperblockSize-aligned from the
// reservation's base), so a buffer of capacity c starts at a multiple of c in
// its superblock and ends in it (c is at most SuperblockSize where Reallocate
// asks: a larger buffer goes to reallocLarge, or is more than twice any small
// one). A slice into a buffer (a[64:]) fails this: Reallocate moves it and
// the free of b reports it, instead of resizing an object that is not b's
// into the next buffer. Unless its offset happens to be such a multiple: a
// slice whose capacity predicts a smaller class than its buffer's, at a
// multiple of that class (a[128:] of the 6th 512-byte buffer of a superblock:
// capacity(384) is 448, and 5*512+128 is 6*448), still passes, and growing it
// in place past its cap clears the start of the next buffer; telling those
// apart takes the superblock's class, which impl does not export. Whether b
// is live is not known here either.
func (m *Allocator) starts(b []byte, c int) bool {
	off := (uintptr(unsafe.Pointer(unsafe.SliceData(b))) - m.base) & (spec.SuperblockSize - 1)
	return off%uintptr(c) == 0 && off+uintptr(c) <= spec.SuperblockSize
}

// badFree reports a bad free (see the package comment): counted, given to
// OnError, a panic in Debug mode.
func (m *Allocator) badFree(err error) {
	m.badFrees.Add(1)
	if m.onError != nil {
		m.onError(err)
	}
	if m.debug {
		panic(err)
	}
}

// Free returns b, a buffer of this Allocator, to it. A slice without capacity
// (every zero-size buffer) is a no-op; a buffer resliced shorter (b[:0]
// included) is freed whole. A bad free is reported (see the package comment)
// and changes nothing.
func (m *Allocator) Free(b []byte) {
	if err := m.free(b); err != nil {
		m.badFree(err)
	}
}

// free is Free, returning a bad free's error instead of reporting it.
func (m *Allocator) free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	if err := m.a.Free(b); err != nil {
		return fmt.Errorf("refarrow: Free of a %d-byte buffer: %w", cap(b), err)
	}
	m.frees.Add(1)
	m.objects.Add(-1)
	// Every buffer leaves Allocate and Reallocate with cap == its size, and
	// reslicing keeps the cap: the size to debit even when len was cut.
	m.grow(-int64(cap(b)))
	return nil
}

// Close releases the reservation. It fails with impl.ErrLeaked, after
// releasing anyway, when buffers are still live; every buffer is invalid
// afterwards: Allocate and a Reallocate that needs memory panic with
// impl.ErrClosed, Free reports it. It must not run concurrently with other
// calls.
func (m *Allocator) Close() error {
	m.closed.Store(true)
	return m.a.Close()
}

// Stats is a snapshot of the counters.
type Stats struct {
	// Bytes is the total size of the live buffers, as Arrow requested them
	// (memory.CheckedAllocator.CurrentAlloc); PeakBytes its high-water mark,
	// which a Reallocate that moves its buffer reaches with both buffers.
	Bytes, PeakBytes int64
	// Objects is the number of live buffers that hold an object (zero-size
	// buffers hold none).
	Objects int64
	// Allocs and Frees count objects allocated and freed, including those of
	// Reallocate's moves; Reallocs counts Reallocate calls and InPlace those
	// that kept their object.
	Allocs, Frees, Reallocs, InPlace uint64
	// BadFrees counts Frees that refalloc rejected.
	BadFrees uint64
	// Impl is refalloc's own statistics (classes, memory, bad frees found late,
	// writes after free).
	Impl impl.Stats
}

// Stats returns the counters. Any goroutine, any time; each counter is read
// atomically, not all of them at one instant.
func (m *Allocator) Stats() Stats {
	return Stats{
		Bytes: m.bytes.Load(), PeakBytes: m.peak.Load(), Objects: m.objects.Load(),
		Allocs: m.allocs.Load(), Frees: m.frees.Load(),
		Reallocs: m.reallocs.Load(), InPlace: m.inPlace.Load(),
		BadFrees: m.badFrees.Load(),
		Impl:     m.a.Stats(),
	}
}

// CurrentAlloc is the total size of the live buffers, like
// memory.CheckedAllocator's.
func (m *Allocator) CurrentAlloc() int { return int(m.bytes.Load()) }

// CatchFaults is impl.Allocator.CatchFaults: it makes a fault of the calling
// goroutine a panic and returns the function to defer, which turns a fault on
// a released buffer (guard mode) into a UseAfterFreeError for report (with
// report nil, a panic with it). Defer it directly:
//
//	defer mem.CatchFaults(func(e *impl.UseAfterFreeError) { t.Error(e) })()
func (m *Allocator) CatchFaults(report func(*impl.UseAfterFreeError)) func() {
	return m.a.CatchFaults(report)
}

// Explain is impl.Allocator.Explain: what recover() returned after a fault
// on a released buffer, as a report with its stacks.
func (m *Allocator) Explain(recovered any) (*impl.UseAfterFreeError, bool) {
	return m.a.Explain(recovered)
}

// Leaks lists the live objects (with their allocation stacks in Debug mode).
// Call it at a quiescent point.
func (m *Allocator) Leaks() []impl.Leak { return m.a.Leaks() }

// TestingT is the part of testing.TB the assertions use; memory.TestingT too.
type TestingT = impl.TestingT

// AssertSize fails t unless the live buffers total sz bytes, as
// memory.CheckedAllocator.AssertSize does.
func (m *Allocator) AssertSize(t TestingT, sz int) {
	t.Helper()
	if got := m.CurrentAlloc(); got != sz {
		t.Errorf("refarrow: %d bytes allocated, want %d", got, sz)
	}
}

// AssertNoLeaks fails t if any buffer is live, listing refalloc's live objects
// (with allocation stacks in Debug mode), or if a bad free or, in Debug mode,
// a write after free was seen. Use it as a test's cleanup, after everything
// was Released:
//
//	t.Cleanup(func() { mem.AssertNoLeaks(t) })
func (m *Allocator) AssertNoLeaks(t TestingT) {
	t.Helper()
	m.AssertSize(t, 0)
	impl.CheckLeaks(t, m.a)
	s := m.Stats()
	if s.BadFrees != 0 || s.Impl.DoubleFrees != 0 || s.Impl.InvalidFrees != 0 || s.Impl.WriteAfterFrees != 0 {
		t.Errorf("refarrow: %d bad frees (refalloc: %d double, %d invalid), %d writes after free",
			s.BadFrees, s.Impl.DoubleFrees, s.Impl.InvalidFrees, s.Impl.WriteAfterFrees)
	}
}
