package impl_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

func harness(t *testing.T, opt impl.Options, caches int) (*invariants.Harness, []int) {
	t.Helper()
	h, err := invariants.NewHarness(opt)
	if err != nil {
		t.Fatal(err)
	}
	h.CheckEachStep = true
	t.Cleanup(func() { h.Close() })
	var ids []int
	for range caches {
		id, err := h.NewCache()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return h, ids
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newDebugReporting returns a debug-mode Allocator of 16 superblocks whose
// OnError reports are appended to *reports; it is closed when t ends.
func newDebugReporting(t *testing.T, reports *[]error) *impl.Allocator {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { *reports = append(*reports, err) }})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	return a
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// lastAlloc returns the address of the object the harness allocated last.
func lastAlloc(t *testing.T, h *invariants.Harness, before map[uintptr]bool) uintptr {
	t.Helper()
	for _, a := range h.Live() {
		if !before[a] {
			return a
		}
	}
	t.Fatal("no new object")
	return 0
}

func liveSet(h *invariants.Harness) map[uintptr]bool {
	m := map[uintptr]bool{}
	for _, a := range h.Live() {
		m[a] = true
	}
	return m
}

func alloc(t *testing.T, h *invariants.Harness, id, n int) uintptr {
	t.Helper()
	before := liveSet(h)
	must(t, h.Alloc(id, n, 1))
	if h.LastErr != nil {
		t.Fatalf("Alloc(%d): %v", n, h.LastErr)
	}
	return lastAlloc(t, h, before)
}

// TestBadInput: every kind of bad input returns its sentinel, and every
// invariant holds afterwards (FREE-DOUBLE, FREE-INVALID).
func TestBadInput(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 32 * spec.SuperblockSize}, 2)
	c, d := ids[0], ids[1]
	x := alloc(t, h, c, 100)
	big := alloc(t, h, c, 100_000)
	allocCases := []struct {
		name     string
		n, align int
		want     error
	}{
		{"negative size", -1, 1, impl.ErrInvalidSize},
		{"negative aligned", -5, 16, impl.ErrInvalidSize},
		{"too large", spec.MaxAlloc + 1, 1, impl.ErrTooLarge},
		{"larger than the reservation", 33 * spec.SuperblockSize, 1, impl.ErrTooLarge},
		{"alignment 0", 8, 0, impl.ErrInvalidSize},
		{"alignment 3", 8, 3, impl.ErrInvalidSize},
		{"alignment 128 KiB", 8, 2 * spec.MaxAlign, impl.ErrInvalidSize},
		{"negative alignment", 8, -16, impl.ErrInvalidSize},
	}
	for _, tc := range allocCases {
		must(t, h.Alloc(c, tc.n, tc.align))
		if !errors.Is(h.LastErr, tc.want) {
			t.Errorf("%s: Alloc(%d, %d) = %v, want %v", tc.name, tc.n, tc.align, h.LastErr, tc.want)
		}
		// The message names the request (review25: ErrTooLarge came bare).
		if h.LastErr != nil && !strings.Contains(h.LastErr.Error(), fmt.Sprint(tc.n)) {
			t.Errorf("%s: Alloc(%d, %d) = %q, which does not name the size", tc.name, tc.n, tc.align, h.LastErr)
		}
	}
	obj := h.Object(x)
	other, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer other.Close()
	foreign, err := other.Alloc(100)
	must(t, err)
	freeCases := []struct {
		name  string
		cache int
		b     []byte
		want  error
	}{
		{"nil", c, nil, nil},
		{"zero capacity", c, obj[:0:0], nil},
		{"interior", c, obj[:cap(obj)][16:], impl.ErrInvalidPointer},
		{"interior, remote", d, obj[:cap(obj)][1:], impl.ErrInvalidPointer},
		{"interior of a large object", c, h.Object(big)[4096:], impl.ErrInvalidPointer},
		{"Go heap", c, make([]byte, 100), impl.ErrInvalidPointer},
		{"another Allocator", c, foreign, impl.ErrInvalidPointer},
		{"tail of a superblock", c, tail(t, h, c), impl.ErrInvalidPointer},
	}
	for _, tc := range freeCases {
		must(t, h.FreeSlice(tc.cache, tc.b))
		if !errors.Is(h.LastErr, tc.want) || (tc.want == nil) != (h.LastErr == nil) {
			t.Errorf("%s: Free = %v, want %v", tc.name, h.LastErr, tc.want)
		}
	}
	must(t, h.Free(c, x))
	must(t, h.FreeSlice(c, obj)) // the owner sees it at once
	if !errors.Is(h.LastErr, impl.ErrDoubleFree) {
		t.Errorf("double free: %v, want ErrDoubleFree", h.LastErr)
	}
	var fe *impl.FreeError
	if !errors.As(h.LastErr, &fe) || fe.Addr != x || fe.Class != spec.SizeToClass(100) {
		t.Errorf("double free error %v does not name %#x and class %d", h.LastErr, x, spec.SizeToClass(100))
	}
	must(t, h.FreeSlice(invariants.Front, obj)) // remote: found when c collects
	must(t, h.FlushAll())
	if s := h.A.Stats(); s.DoubleFrees != 2 {
		t.Errorf("DoubleFrees = %d after two double frees", s.DoubleFrees)
	}
	must(t, h.Free(c, big))
	must(t, h.FreeSlice(c, h.Object(big)))
	must(t, h.CloseCache(d))
	must(t, h.Alloc(d, 8, 1))
	if !errors.Is(h.LastErr, impl.ErrClosed) {
		t.Errorf("Alloc on a closed cache: %v", h.LastErr)
	}
	must(t, h.CloseCache(d))
	if !errors.Is(h.LastErr, impl.ErrClosed) {
		t.Errorf("second Cache.Close: %v", h.LastErr)
	}
	must(t, h.Check())
	must(t, h.FreeAll())
}

// tail returns a pointer into the tail of a class-48 superblock, past its last
// object (1365 objects of 48 bytes leave 16 bytes), leaving a class-48 object live.
func tail(t *testing.T, h *invariants.Harness, id int) []byte {
	b := h.Object(alloc(t, h, id, 48))
	base := addrOf(b) &^ (spec.SuperblockSize - 1)
	off := int(base + 1365*48 - addrOf(b))
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), off)), 16)
}

// TestUseAfterClose: after Allocator.Close every call returns ErrClosed.
func TestUseAfterClose(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	c, err := a.NewCache()
	must(t, err)
	b, err := c.Alloc(64)
	must(t, err)
	must(t, c.Free(b))
	// REFINES: a large object live at Close: a Realloc of it after Close, to a large
	// size, must not resize its run in place in the released reservation
	// (slip: resizeafterclose).
	big, err := c.Alloc(100_000)
	must(t, err)
	if err := a.Close(); !errors.Is(err, impl.ErrLeaked) {
		t.Fatalf("Close with a large object live: %v, want ErrLeaked", err)
	}
	// A write into the released reservation faults: made an error here, so
	// that the test fails rather than the process. A call that does not
	// return (a resize spinning on a header of the released reservation)
	// fails the test after 3 s rather than the watchdog's minute.
	noFault := func(f func() ([]byte, error)) error {
		done := make(chan error, 1)
		go func() {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panicked: %v", r)
				}
			}()
			_, err := f()
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(3 * time.Second):
			t.Fatal("a Realloc after Close did not return in 3 s, want ErrClosed")
			return nil
		}
	}
	for name, err := range map[string]error{
		"Cache.Realloc grow":       noFault(func() ([]byte, error) { return c.Realloc(big, 3*spec.SuperblockSize) }),
		"Cache.Realloc shrink":     noFault(func() ([]byte, error) { return c.Realloc(big, 40_000) }),
		"Allocator.Realloc grow":   noFault(func() ([]byte, error) { return a.Realloc(big, 3*spec.SuperblockSize) }),
		"Allocator.Realloc shrink": noFault(func() ([]byte, error) { return a.Realloc(big[:10], 40_000) }),
		"Cache.Alloc":              second(c.Alloc(64)),
		"Cache.AllocAligned":       second(c.AllocAligned(64, 64)),
		"Cache.Free":               c.Free(b),
		"Cache.Close":              c.Close(),
		"Allocator.Alloc":          second(a.Alloc(64)),
		"Allocator.Free":           a.Free(b),
		"NewCache":                 second(a.NewCache()),
		"Allocator.Close":          a.Close(),
	} {
		if !errors.Is(err, impl.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	c.Flush() // a no-op, not a crash
}

func second[T any](_ T, err error) error { return err }

// TestCloseReportsLeaks (EMPTY): Close with live objects unmaps and says how
// many; Leaks and CheckLeaks still list them after Close (review25: a test's
// `defer a.Close()` runs before its t.Cleanup(CheckLeaks), and Close's marks
// on every remote word hid every small object from Leaks: it listed the large
// one only).
func TestCloseReportsLeaks(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	var addrs []uintptr
	for _, n := range []int{1, 100, 70_000} {
		b, err := c.Alloc(n)
		must(t, err)
		addrs = append(addrs, addrOf(b))
	}
	b, err := a.Alloc(200) // the front's too
	must(t, err)
	addrs = append(addrs, addrOf(b))
	err = a.Close()
	if !errors.Is(err, impl.ErrLeaked) || !strings.Contains(err.Error(), " 4 objects") {
		t.Fatalf("Close = %v, want ErrLeaked naming 4 objects", err)
	}
	var got []uintptr
	for _, l := range a.Leaks() {
		got = append(got, l.Addr)
	}
	slices.Sort(got)
	slices.Sort(addrs)
	if !slices.Equal(got, addrs) {
		t.Fatalf("Leaks after Close lists %#x, want %#x", got, addrs)
	}
	var f fakeT
	impl.CheckLeaks(&f, a)
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "4 objects leaked") {
		t.Fatalf("CheckLeaks after Close: %q", f.errs)
	}
}

// TestStatsLagBatch (STATS-LAG): local frees are published every PublishBatch.
func TestStatsLagBatch(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	k := spec.SizeToClass(64)
	var objs [][]byte
	for range 200 {
		b, err := c.Alloc(64)
		must(t, err)
		objs = append(objs, b)
	}
	batch := a.Snapshot().PublishBatch
	for i := range batch - 1 {
		must(t, c.Free(objs[i]))
	}
	if f := a.Stats().Classes[k].Frees; f != 0 {
		t.Fatalf("after %d frees, %d published; the batch is %d", batch-1, f, batch)
	}
	must(t, c.Free(objs[batch-1]))
	if f := a.Stats().Classes[k].Frees; f != uint64(batch) {
		t.Fatalf("after %d frees, %d published", batch, f)
	}
	// STATS-LEAD: the 200 allocations took 7 groups of 32: 224 credited.
	if al := a.Stats().Classes[k].Allocs; al != 224 {
		t.Fatalf("Allocs = %d, want 200 + 24 held", al)
	}
	c.Flush()
	if s := a.Stats().Classes[k]; s.Allocs != 200 || s.Frees != uint64(batch) {
		t.Fatalf("after Flush: %+v", s)
	}
}

// TestStatsManyRefills (STATS-LEAD, STATS-EXACT): the counters are full width;
// 100 000 allocations of one class, credited 32 at a time at refill, stay exact.
func TestStatsManyRefills(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	const n = 100_000
	for range n {
		b, err := c.Alloc(16)
		must(t, err)
		must(t, c.Free(b))
	}
	c.Flush()
	if s := a.Stats().Classes[spec.SizeToClass(16)]; s.Allocs != n || s.Frees != n {
		t.Fatalf("after %d pairs and a flush: Allocs %d Frees %d", n, s.Allocs, s.Frees)
	}
}

// TestStatsExactAfterFlush (STATS-EXACT) across caches, sizes and remote frees.
func TestStatsExactAfterFlush(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 256 * spec.SuperblockSize}, 3)
	var objs []uintptr
	for i := range 900 {
		objs = append(objs, alloc(t, h, ids[i%3], (i*37)%3000))
	}
	for i, a := range objs {
		if i%3 != 0 {
			must(t, h.Free(ids[(i+1)%3], a))
		}
	}
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestLargeObjects (LARGE-EXACT, ALIGN, ZEROED, FREE-INVALID, FREE-DOUBLE).
func TestLargeObjects(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 64 * spec.SuperblockSize}, 2)
	for _, n := range []int{spec.MaxSmall + 1, 65536, 65537, 1 << 20} {
		a := alloc(t, h, ids[0], n)
		b := h.Object(a)
		if cap(b) != spec.LargeUsable(n) || (a-h.M.Base())%spec.SuperblockSize != 0 {
			t.Fatalf("Alloc(%d): cap %d at %#x", n, cap(b), a)
		}
		if st := h.A.Stats().Large; st.LiveObjects != 1 || st.LiveBytes != uint64(cap(b)) {
			t.Fatalf("large stats %+v", st)
		}
		must(t, h.FreeSlice(ids[1], b[1:]))
		if !errors.Is(h.LastErr, impl.ErrInvalidPointer) {
			t.Fatalf("interior free of a large object: %v", h.LastErr)
		}
		must(t, h.Free(ids[1], a))
		must(t, h.FreeSlice(ids[0], b))
		if !errors.Is(h.LastErr, impl.ErrDoubleFree) {
			t.Fatalf("double free of a large object: %v", h.LastErr)
		}
	}
	if st := h.A.Stats().Large; st.Allocs != 4 || st.Frees != 4 || st.LiveBytes != 0 {
		t.Fatalf("large stats %+v", st)
	}
}

// TestAllocAligned (ALIGN): every power-of-two alignment up to 64 KiB.
func TestAllocAligned(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 256 * spec.SuperblockSize}, 1)
	for align := 1; align <= spec.MaxAlign; align <<= 1 {
		for _, n := range []int{0, 1, 7, 24, 100, 1000, 5000, 40000} {
			before := liveSet(h)
			must(t, h.Alloc(ids[0], n, align))
			a := lastAlloc(t, h, before)
			if a%uintptr(align) != 0 || cap(h.Object(a)) != spec.Usable(n, align) {
				t.Fatalf("AllocAligned(%d, %d) = %#x cap %d", n, align, a, cap(h.Object(a)))
			}
		}
	}
	must(t, h.FreeAll())
}

// TestZeroedAfterReuse (ZEROED): a recycled object reads zero again, in a small
// class and a large object.
func TestZeroedAfterReuse(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 1)
	for _, n := range []int{24, 4096, 100_000} {
		for range 3 {
			a := alloc(t, h, ids[0], n) // the harness fills it and checks zero
			must(t, h.Free(ids[0], a))
			must(t, h.Flush(ids[0]))
		}
	}
}

// TestStaleRemoteEntry (CACHE-COHERENT): a cache's entry for a superblock that
// was released and repurposed for another class and owner must not be used.
func TestStaleRemoteEntry(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 3)
	c, d, e := ids[0], ids[1], ids[2]
	alloc(t, h, c, 48) // object 0
	x := alloc(t, h, c, 48)
	xobj := h.Object(x)
	must(t, h.Free(d, h.Live()[0]))
	must(t, h.Free(d, x)) // d now has a "not mine" entry for the superblock
	must(t, h.Flush(c))   // c collects: the superblock is empty and released
	var ys []uintptr
	for range 10 {
		ys = append(ys, alloc(t, h, e, 64)) // e repurposes it: class 64, other owner
	}
	if ys[0]>>spec.SuperblockShift != x>>spec.SuperblockShift {
		t.Fatalf("the superblock was not reused (%#x vs %#x)", ys[0], x)
	}
	must(t, h.FreeSlice(d, xobj))
	if !errors.Is(h.LastErr, impl.ErrInvalidPointer) {
		t.Fatalf("stale free of %#x (offset 48 in a class-64 superblock): %v", x, h.LastErr)
	}
	must(t, h.Free(d, ys[3])) // a good remote free through the refreshed entry
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestRemoteDoubleFreeFoundLater (FREE-DOUBLE): a remote free of an object that
// is not live is accepted, then found when the owner collects or before it can
// hand the object out; OnError hears of it; nothing else changes.
func TestRemoteDoubleFreeFoundLater(t *testing.T) {
	var reported []error
	h, ids := harness(t, impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { reported = append(reported, err) }}, 2)
	c, d := ids[0], ids[1]
	keep := alloc(t, h, c, 256)
	x := alloc(t, h, c, 256)
	obj := h.Object(x)
	must(t, h.Free(c, x))
	must(t, h.FreeSlice(d, obj)) // remote: d cannot know x is free
	if h.LastErr != nil {
		t.Fatalf("remote double free: %v, want it accepted for later", h.LastErr)
	}
	must(t, h.FreeSlice(d, obj)) // still pending: found at once
	if !errors.Is(h.LastErr, impl.ErrDoubleFree) {
		t.Fatalf("repeated remote free: %v", h.LastErr)
	}
	must(t, h.Flush(c))
	if s := h.A.Stats(); s.DoubleFrees != 2 || len(reported) != 1 || !errors.Is(reported[0], impl.ErrDoubleFree) {
		t.Fatalf("DoubleFrees %d, reported %v", s.DoubleFrees, reported)
	}
	_ = keep
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestRemoteDoubleFreeOfHeldObject (FREE-DOUBLE): a stale remote free of an
// object the owner holds (taken from its superblock, not handed out) must be
// found before the owner hands the object out.
func TestRemoteDoubleFreeOfHeldObject(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 8 * spec.SuperblockSize}, 2)
	c, d := ids[0], ids[1]
	a0 := alloc(t, h, c, 4096)
	a1 := alloc(t, h, c, 4096)
	a2 := alloc(t, h, c, 4096)
	stale := h.Object(a2)
	must(t, h.Free(c, a1))
	must(t, h.Free(c, a2))
	must(t, h.Flush(c))                     // a1 and a2 go back to the superblock
	if z := alloc(t, h, c, 4096); z != a1 { // refill: a1 handed out, a2 held
		t.Fatalf("expected %#x, got %#x", a1, z)
	}
	must(t, h.FreeSlice(d, stale)) // remote, stale: accepted, pending on a held object
	if h.LastErr != nil {
		t.Fatal(h.LastErr)
	}
	if z := alloc(t, h, c, 4096); z != a2 { // the pending free is dropped first
		t.Fatalf("expected %#x, got %#x", a2, z)
	}
	if s := h.A.Stats(); s.DoubleFrees != 1 {
		t.Fatalf("DoubleFrees %d", s.DoubleFrees)
	}
	_ = a0
	must(t, h.FreeAll())
}

// TestOutOfMemoryRecovers (OOM-REAL): fill a small reservation, check the OOM
// was real, free everything, and allocate again in other classes.
func TestOutOfMemoryRecovers(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 2)
	var n int
	for i := 0; ; i++ {
		must(t, h.Alloc(ids[i%2], 3000, 1)) // the harness runs CheckOOM on failure
		if errors.Is(h.LastErr, impl.ErrOutOfMemory) {
			// The message names the request (review25: a small one's came bare).
			if !strings.Contains(h.LastErr.Error(), "3000 bytes") {
				t.Errorf("small out of memory: %q does not name the request", h.LastErr)
			}
			break
		}
		n++
	}
	if n < 16*20 {
		t.Fatalf("only %d objects of 3000 bytes fit in 16 superblocks", n)
	}
	must(t, h.Alloc(ids[0], 200_000, 1))
	if !errors.Is(h.LastErr, impl.ErrOutOfMemory) {
		t.Fatalf("large alloc in a full reservation: %v", h.LastErr)
	}
	must(t, h.FreeAll())
	for _, size := range []int{16, 700, 200_000} {
		alloc(t, h, ids[1], size)
	}
	must(t, h.FreeAll())
}

// TestAllocsPerRun: the steady-state Cache Alloc+Free pair makes no Go heap
// allocation.
func TestAllocsPerRun(t *testing.T) {
	a, err := impl.New(impl.Options{})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	for _, n := range []int{16, 64, 256, 4096} {
		keep, _ := c.Alloc(n)
		if got := testing.AllocsPerRun(1000, func() {
			b, _ := c.Alloc(n)
			c.Free(b)
		}); got != 0 {
			t.Errorf("Alloc(%d)+Free: %v Go allocations", n, got)
		}
		c.Free(keep)
		// The front's pair too: per-P (or portable) caches, no allocation.
		keep, _ = a.Alloc(n)
		if got := testing.AllocsPerRun(1000, func() {
			b, _ := a.Alloc(n)
			a.Free(b)
		}); got != 0 {
			t.Errorf("Allocator.Alloc(%d)+Free: %v Go allocations", n, got)
		}
		a.Free(keep)
	}
}

// TestFastPathNoAtomicRMW: the owner's alloc and free fast paths contain no
// atomic read-modify-write (a LOCK prefix, or XCHG with memory); atomic loads
// are plain moves on amd64. Neither do the front's (the Allocator's methods):
// on a P's cache they rely on the pin (runtime.procPin, a plain increment),
// and the token's CAS and store are in acquire and release, which they call
// only on the slow path; a remote free's CAS is in remoteFree. It reads the
// compiler's assembly listing.
func TestFastPathNoAtomicRMW(t *testing.T) {
	if runtime.GOARCH != "amd64" || raceEnabled {
		t.Skip("the instruction check is written for amd64 without -race")
	}
	if testing.Short() {
		t.Skip("builds the package again")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	out, err := exec.Command(gotool, "build", "-o", os.DevNull, "-gcflags=-S", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-S: %v\n%s", err, out)
	}
	fns := []string{"(*Cache).Alloc", "(*Cache).allocClass", "(*Cache).free", "(*Cache).Free"}
	if !portable {
		fns = append(fns, "(*Allocator).Alloc", "(*Allocator).AllocAligned", "(*Allocator).Free")
	}
	for _, fn := range fns {
		body := asmOf(string(out), fn)
		if len(body) == 0 {
			t.Errorf("no assembly for %s: inlined or renamed? update the test", fn)
		}
		for _, line := range body {
			f := strings.Split(line, "\t") // "", "0x.. n (file:line)", op, operands
			if len(f) < 4 {
				continue
			}
			op, args := f[2], f[3]
			if strings.HasPrefix(op, "LOCK") || strings.HasPrefix(op, "XCHG") && strings.Contains(args, "(") {
				t.Errorf("%s has an atomic read-modify-write:\n%s", fn, line)
			}
		}
	}
}

// asmOf returns the listing lines of one function of package impl.
func asmOf(listing, fn string) []string {
	var body []string
	in := false
	for _, line := range strings.Split(listing, "\n") {
		if strings.Contains(line, "\tTEXT\t") {
			in = strings.Contains(line, "/impl."+fn+"(SB)")
		}
		if in {
			body = append(body, line)
		}
	}
	return body
}

// TestRemoteFreeReturnsToOwner: a remote free gives the object back to the
// cache that owns its superblock, never to the freeing cache (which would put
// two goroutines' objects on one cache line: cache-scratch).
func TestRemoteFreeReturnsToOwner(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 2)
	c, d := ids[0], ids[1]
	x := alloc(t, h, c, 64)
	must(t, h.Free(d, x))
	for range 100 {
		if y := alloc(t, h, d, 64); y>>spec.SuperblockShift == x>>spec.SuperblockShift {
			t.Fatalf("cache %d got %#x from cache %d's superblock", d, y, c)
		}
	}
	must(t, h.Flush(c)) // c collects x
	got := false
	for range 40 {
		got = got || alloc(t, h, c, 64) == x
	}
	if !got {
		t.Fatalf("the owner never handed %#x out again", x)
	}
	must(t, h.FreeAll())
}

// TestOrphanAdoption: a closed cache's superblocks become orphans; a cache that
// frees into one adopts it, so its frees are local from then on; a refill
// adopts orphans with room before it takes fresh superblocks; nothing leaks.
func TestOrphanAdoption(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 3)
	c, d, e := ids[0], ids[1], ids[2]
	var objs []uintptr
	for range 100 {
		objs = append(objs, alloc(t, h, c, 1000)) // two superblocks of 64
	}
	must(t, h.CloseCache(c))
	if s := h.A.Stats(); s.OrphanedSuperblocks != 2 {
		t.Fatalf("Close left %d orphans, want 2", s.OrphanedSuperblocks)
	}
	must(t, h.Free(d, objs[0])) // adopts the first orphan on the way
	owners := func() map[int]int {
		m := map[int]int{}
		for _, sb := range h.A.Snapshot().Superblocks {
			if sb.State == impl.SBSmall {
				m[sb.Owner]++
			}
		}
		return m
	}
	if o := owners(); o[d] != 1 || o[-1] != 1 {
		t.Fatalf("after one free into an orphan: owners %v", o)
	}
	// e's refill adopts the other orphan, which has room (the 28 objects c
	// did not hand out), before the pool. (A 29th allocation would give it
	// back full, LIFECYCLE's orphanFull, as it took one from the pool.)
	for range 28 {
		alloc(t, h, e, 1000)
	}
	if o := owners(); o[-1] != 0 || o[e] == 0 {
		t.Fatalf("orphans with room were not adopted before the pool: owners %v", o)
	}
	must(t, h.FreeAll())
}

// TestGenerationWrap (CACHE-COHERENT): a superblock-cache entry filled in one
// small period must fail its CAS in every later one, also once the 32-bit
// generation has wrapped around to the entry's value: the wrap retires the
// remote set, so the entry's words can never carry its generation again. The
// 2^32-2 periods between are fast-forwarded (impl.FastForward); the ones at
// the wrap are real.
func TestGenerationWrap(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 3)
	c, d, e := ids[0], ids[1], ids[2]
	first := alloc(t, h, c, 48)
	x := alloc(t, h, c, 48)
	i := int((x - h.M.Base()) >> spec.SuperblockShift)
	gen := func() uint32 { return h.A.Snapshot().Superblocks[i].Gen }
	entryGen := gen()
	must(t, h.Free(d, first))
	must(t, h.Free(d, x)) // d now has a "not mine" entry for the superblock
	must(t, h.Flush(c))   // c collects: the superblock is empty and released
	must(t, impl.FastForward(h.A, i, impl.DeadTag-1))
	// Real periods from the last generation before the wrap until the count
	// is back at d's entry's.
	for n := 0; gen() != entryGen; n++ {
		y := alloc(t, h, e, 64)
		if int((y-h.M.Base())>>spec.SuperblockShift) != i || n == 2 {
			t.Fatalf("period %d after the fast-forward: %#x, generation %d", n, y, gen())
		}
		must(t, h.Free(e, y))
		must(t, h.Flush(e))
	}
	// A new period at d's entry's generation, in another layout.
	var ys []uintptr
	for range 10 {
		ys = append(ys, alloc(t, h, e, 64))
	}
	if int((ys[0]-h.M.Base())>>spec.SuperblockShift) != i || gen() != entryGen {
		t.Fatalf("the superblock was not reused at generation %d (%#x, gen %d)", entryGen, ys[0], gen())
	}
	// Offset 192: a slot start in both layouts (object 4 of class 48, object 3
	// of class 64). Through a stale entry it would free object 4.
	must(t, h.Free(d, ys[3]))
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestPanicUnderLockUnlocks: a panic raised while the central lock is held (an
// OnError callback that panics as a release finds a remote double free still
// pending) reaches the caller, and the lock is released: the Allocator can
// still be closed, so a failing test fails instead of hanging in its cleanup.
func TestPanicUnderLockUnlocks(t *testing.T) {
	a, c, objs := pendingDoubleFreePanics(t, 8*spec.SuperblockSize)
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Errorf("the free that empties the superblock: recovered %v", r)
			}
		}()
		for _, b := range objs[1:16] {
			must(t, c.Free(b)) // the last releases it, under the central lock
		}
	}()
	done := make(chan error)
	go func() { done <- a.Close() }()
	select {
	case err := <-done:
		if !errors.Is(err, impl.ErrLeaked) {
			t.Fatalf("Close: %v, want the leak of the 17th object", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs: the panic left the central lock held")
	}
}

// pendingDoubleFreePanics returns an Allocator (of reserve bytes) whose OnError
// panics, and a cache c holding objs: 17 objects of 4096 bytes, 16 filling one
// superblock and the 17th making another current. objs[0] is free, with a
// remote double free of it pending, so the free of objs[1:16] that empties the
// superblock releases it, finds the pending free under the central lock, and
// panics with ErrDoubleFree.
func pendingDoubleFreePanics(t *testing.T, reserve int) (*impl.Allocator, *impl.Cache, [][]byte) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: reserve, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for range 17 { // 16 fill a superblock, the 17th makes another current
		b, err := c.Alloc(4096)
		must(t, err)
		objs = append(objs, b)
	}
	must(t, c.Free(objs[0]))
	must(t, d.Free(objs[0])) // remote, pending on a free object: found later
	return a, c, objs
}

// TestRestampAfterLargeLife (CACHE-COHERENT): a superblock that was small, then
// part of a large object, then small again keeps its remote set, which must be
// stamped with the generation of the new period: a remote free in it succeeds.
func TestRestampAfterLargeLife(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 2)
	c, d := ids[0], ids[1]
	x := alloc(t, h, c, 64)
	must(t, h.Free(c, x))
	must(t, h.Flush(c)) // released
	big := alloc(t, h, c, 3*spec.SuperblockSize)
	if big != x {
		t.Fatalf("the large object is not on the released superblock (%#x, %#x)", x, big)
	}
	must(t, h.Free(c, big))
	y := alloc(t, h, c, 64) // small again, its generation past the large life's
	if y>>spec.SuperblockShift != x>>spec.SuperblockShift {
		t.Fatalf("the superblock was not reused (%#x, %#x)", x, y)
	}
	must(t, h.Free(d, y)) // remote
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestAcquireDropsNotMine (CACHE-COHERENT): a cache that frees into another's
// superblock keeps a "not mine" entry for it; when that superblock is
// released and the same cache acquires it, the entry must go.
func TestAcquireDropsNotMine(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 2)
	c, d := ids[0], ids[1]
	x := alloc(t, h, d, 64)
	must(t, h.Free(c, x)) // remote: c's entry says "not mine"
	must(t, h.Flush(d))   // empty: released
	y := alloc(t, h, c, 256)
	if y>>spec.SuperblockShift != x>>spec.SuperblockShift {
		t.Fatalf("the superblock was not reused (%#x, %#x)", x, y)
	}
	must(t, h.Free(c, y)) // every step checks the entries (CACHE-COHERENT)
	must(t, h.FreeAll())
}

// TestTailFreedByEveryone (FREE-INVALID): for every size class whose objects do
// not fill the superblock, the first byte past the last object, and the last
// object's last byte, freed through the owner, another cache and the
// Allocator's methods, are invalid pointers; so is the tail of the superblock
// once it is pooled.
func TestTailFreedByEveryone(t *testing.T) {
	for k := range spec.NumClasses {
		size, objects := spec.ClassSize(k), spec.ClassObjects(k)
		if size*objects == spec.SuperblockSize {
			continue
		}
		h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 2)
		c, d := ids[0], ids[1]
		x := alloc(t, h, c, size)
		base := unsafe.Pointer(unsafe.SliceData(h.Object(x)))
		base = unsafe.Add(base, -int(uintptr(base)-h.M.Base())%spec.SuperblockSize)
		tail := unsafe.Slice((*byte)(unsafe.Add(base, size*objects)), 1)
		last := unsafe.Slice((*byte)(unsafe.Add(base, size*objects-1)), 1)
		for _, id := range []int{c, d, invariants.Front} {
			for _, b := range [][]byte{tail, last} {
				must(t, h.FreeSlice(id, b))
				if !errors.Is(h.LastErr, impl.ErrInvalidPointer) {
					t.Fatalf("class %d: free of offset %d by %d: %v", k, addrOf(b)-uintptr(base), id, h.LastErr)
				}
			}
		}
		must(t, h.Free(c, x))
		must(t, h.Flush(c)) // pooled
		must(t, h.FreeSlice(d, tail))
		if !errors.Is(h.LastErr, impl.ErrInvalidPointer) {
			t.Fatalf("class %d: free of a pooled superblock's tail: %v", k, h.LastErr)
		}
	}
}

// TestLocalDoubleFreeOfHeldObject (FREE-DOUBLE): the owner frees, without a
// flush, objects its refill moved into the held group but never handed out;
// each is a double free and changes nothing, whichever class it is in.
func TestLocalDoubleFreeOfHeldObject(t *testing.T) {
	for _, size := range []int{16, 64, 256, 4096} {
		h, ids := harness(t, impl.Options{Reserve: 8 * spec.SuperblockSize}, 1)
		c := ids[0]
		p := alloc(t, h, c, size) // refill: p handed out, the rest of its group held
		before := h.A.Stats().DoubleFrees
		for k := uintptr(1); k <= 3; k++ {
			held := unsafe.Add(unsafe.Pointer(&h.Object(p)[0]), k*uintptr(size))
			must(t, h.FreeSlice(c, unsafe.Slice((*byte)(held), size)))
			if !errors.Is(h.LastErr, impl.ErrDoubleFree) {
				t.Fatalf("size %d: free of held object %d returned %v, want ErrDoubleFree", size, k, h.LastErr)
			}
		}
		if got := h.A.Stats().DoubleFrees - before; got != 3 {
			t.Fatalf("size %d: DoubleFrees grew by %d, want 3", size, got)
		}
		for k := uintptr(1); k <= 3; k++ { // still handed out once each, zeroed
			if z := alloc(t, h, c, size); z != p+k*uintptr(size) {
				t.Fatalf("size %d: allocation %d at %#x, want %#x", size, k, z, p+k*uintptr(size))
			}
		}
		must(t, h.FreeAll())
	}
}

// TestEverySlotClosed (LIFECYCLE): after Allocator.Close the fast paths, which
// test no closed flag, find every object's remote bit pending and leave for
// the slow paths' ErrClosed: a free of any object, at any place in its group
// (the last one too), and an allocation from a held group whose only object
// left is a group's last, answer ErrClosed, on the owner and on another cache.
func TestEverySlotClosed(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for range 4*32 - 1 { // the held group keeps only the 4th group's last object
		b, err := c.Alloc(8)
		must(t, err)
		objs = append(objs, b)
	}
	big, err := c.Alloc(spec.SuperblockSize + 1)
	must(t, err)
	objs = append(objs, big)
	if err := a.Close(); !errors.Is(err, impl.ErrLeaked) {
		t.Fatalf("Close: %v, want ErrLeaked", err)
	}
	for name, err := range map[string]error{
		"the owner's Alloc":      second(c.Alloc(8)),
		"another cache's Alloc":  second(d.Alloc(8)),
		"a large Alloc":          second(c.Alloc(spec.SuperblockSize + 1)),
		"an aligned large Alloc": second(d.AllocAligned(8, spec.SuperblockSize)),
		"the owner's Realloc":    second(c.Realloc(objs[0], 100)),
		"a large Realloc":        second(d.Realloc(objs[1], spec.SuperblockSize+1)),
	} {
		if !errors.Is(err, impl.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	for i, b := range objs { // the last is the large object
		if err := c.Free(b); !errors.Is(err, impl.ErrClosed) {
			t.Errorf("the owner's free of object %d after Close: %v, want ErrClosed", i, err)
		}
		if err := d.Free(b); !errors.Is(err, impl.ErrClosed) {
			t.Errorf("another cache's free of object %d after Close: %v, want ErrClosed", i, err)
		}
	}
	c.Flush() // the held group stays where it is: nothing to give back to
	d.Flush()
	if err := c.Free(objs[0]); !errors.Is(err, impl.ErrClosed) {
		t.Errorf("a free after the flushes: %v, want ErrClosed", err)
	}
}
