package impl_test

// Tests written by an independent review: each kills an injected bug the suite
// let through (the review's M07, M13, M15, M16, M18, M23, M26, M28, M29, M33).

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// sbState is superblock i's header as a snapshot shows it.
func sbState(t *testing.T, a *impl.Allocator, i int) impl.SuperblockState {
	t.Helper()
	for _, s := range a.Snapshot().Superblocks {
		if s.Index == i {
			return s
		}
	}
	t.Fatalf("superblock %d never used", i)
	return impl.SuperblockState{}
}

// sbOf is the index of the superblock holding b.
func sbOf(a *impl.Allocator, b []byte) int {
	return int((addrOf(b) - a.Snapshot().Base) >> spec.SuperblockShift)
}

// genOf is superblock i's generation.
func genOf(t *testing.T, a *impl.Allocator, i int) uint32 {
	t.Helper()
	for _, s := range a.Snapshot().Superblocks {
		if s.Index == i {
			return s.Gen
		}
	}
	t.Fatalf("superblock %d never used", i)
	return 0
}

// allocator is what allocN and allocObjects allocate from: a Cache, or the
// Allocator's own methods (the front).
type allocator interface{ Alloc(n int) ([]byte, error) }

func allocN(t *testing.T, c allocator, n int) []byte {
	t.Helper()
	b, err := c.Alloc(n)
	must(t, err)
	return b
}

// allocObjects allocates count objects of size bytes from c, in order.
func allocObjects(t *testing.T, c allocator, size, count int) [][]byte {
	t.Helper()
	objs := make([][]byte, 0, count)
	for range count {
		objs = append(objs, allocN(t, c, size))
	}
	return objs
}

// TestWriteAfterFreeCountSurvivesClose (STATS-EXACT, DEBUG-POISON): a write after
// free found by a cache stays counted in Stats.WriteAfterFrees after that cache
// closes ("closing a cache loses none").
func TestWriteAfterFreeCountSurvivesClose(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true, OnError: func(error) {}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	b, err := c.Alloc(4096)
	must(t, err)
	must(t, c.Free(b))
	b[:cap(b)][7] = 1 // the bug under test: a write after free
	c.Flush()         // the superblock is released, and its poison verified
	if got := a.Stats().WriteAfterFrees; got != 1 {
		t.Fatalf("before Close: WriteAfterFrees = %d, want 1", got)
	}
	must(t, c.Close())
	if got := a.Stats().WriteAfterFrees; got != 1 {
		t.Fatalf("after Close: WriteAfterFrees = %d, want 1", got)
	}
}

// TestLateDoubleFreeNamesTheObject (FREE-DOUBLE): a remote double free found when
// the owner collects is reported to OnError with the address that was freed,
// also for an object past the first group of 32.
func TestLateDoubleFreeNamesTheObject(t *testing.T) {
	var reported []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { reported = append(reported, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	var objs [][]byte
	for range 40 { // class 256: group 0 and part of group 1
		b, err := c.Alloc(256)
		must(t, err)
		objs = append(objs, b)
	}
	x := objs[35] // object 35: group 1, bit 3
	must(t, c.Free(x))
	must(t, d.Free(x)) // remote, accepted: found when c collects
	c.Flush()
	var fe *impl.FreeError
	if len(reported) != 1 || !errors.As(reported[0], &fe) || !errors.Is(fe, impl.ErrDoubleFree) {
		t.Fatalf("reported %v", reported)
	}
	if fe.Addr != addrOf(x) || fe.Class != spec.SizeToClass(256) {
		t.Fatalf("the late double free is reported at %#x class %d, the object is at %#x class %d",
			fe.Addr, fe.Class, addrOf(x), spec.SizeToClass(256))
	}
	for i, b := range objs {
		if i != 35 {
			must(t, c.Free(b))
		}
	}
}

// TestNoSmallPeriodAtDeadTag (CACHE-COHERENT 2, the generation does not wrap):
// the period after generation DeadTag-1 must not run at DeadTag, the tag of a
// retired set: an entry of such a period would still match the words after the
// release stamped them, and a stale free through it would land in the pool.
func TestNoSmallPeriodAtDeadTag(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	b := allocN(t, c, 4096)
	i := sbOf(a, b)
	must(t, c.Free(b))
	c.Flush() // released
	must(t, impl.FastForward(a, i, impl.DeadTag-1))
	b = allocN(t, c, 4096) // the last period before the wrap
	if sbOf(a, b) != i {
		t.Fatal("the superblock was not reused")
	}
	must(t, c.Free(b))
	c.Flush()
	x := allocN(t, c, 4096) // the first period after it
	y := allocN(t, c, 4096)
	if g := genOf(t, a, i); g == impl.DeadTag {
		t.Errorf("a small period runs at generation DeadTag")
	}
	must(t, d.Free(y)) // d: a "not mine" entry of this period
	must(t, c.Free(x))
	c.Flush() // released: the period ends
	if err := d.Free(x); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("a stale free into the released superblock: %v, want ErrDoubleFree", err)
	}
}

// TestGenerationWrapInLargeLife (CACHE-COHERENT 2): when the generation wraps
// at the end of a large life, the superblock's remote set is retired as it is
// at the end of a small one, so an entry kept from 2^32 periods before fails
// its CAS in the next small period instead of freeing a live object of the new
// layout.
func TestGenerationWrapInLargeLife(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	wrapInLargeLife(t, a, func(c *impl.Cache, big []byte) { must(t, c.Free(big)) })
}

// TestRetainHysteresis (MEM-ACCOUNT): past Options.Retain the pool returns empty
// superblocks to the OS down to half of Retain, no more and no fewer (with no
// decay: at once).
func TestRetainHysteresis(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Retain: 4 * spec.SuperblockSize, Decay: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	var bs [][]byte
	for range 5 {
		bs = append(bs, allocN(t, c, spec.SuperblockSize)) // one superblock each
	}
	for j, b := range bs {
		must(t, c.Free(b))
		s := a.Stats()
		pooled := int(s.Committed-s.InUse) / spec.SuperblockSize
		want := j + 1
		if j == 4 { // the fifth is past Retain: down to half of it
			want = 2
		}
		if pooled != want {
			t.Fatalf("after %d frees the pool keeps %d committed superblocks, want %d", j+1, pooled, want)
		}
	}
}

// TestReallocGrowInPlaceZeroesPastLen: growing in place keeps len(b) bytes; the
// bytes after them, up to n, read zero even if the caller had written into b's
// spare capacity.
func TestReallocGrowInPlaceZeroesPastLen(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	for _, tc := range []struct{ from, n int }{{100, 112}, {200_000, 200_700}} {
		b := allocN(t, c, tc.from)
		full := b[:cap(b)]
		for i := range full {
			full[i] = 0x5a
		}
		r, err := c.Realloc(b, tc.n)
		must(t, err)
		if addrOf(r) != addrOf(b) {
			t.Fatalf("%d -> %d: not in place", tc.from, tc.n)
		}
		for i := tc.from; i < tc.n; i++ {
			if r[i] != 0 {
				t.Fatalf("%d -> %d: byte %d reads %#x, want 0", tc.from, tc.n, i, r[i])
			}
		}
		must(t, c.Free(r))
	}
}

// TestFreeOnePastReservation (FREE-INVALID): the first address after the
// reservation is outside it: ErrInvalidPointer, for a reservation whose
// superblock count is a multiple of the header chunk (512) and one that is not.
func TestFreeOnePastReservation(t *testing.T) {
	for _, nsb := range []int{512, 20} {
		a, err := impl.New(impl.Options{Reserve: nsb * spec.SuperblockSize})
		must(t, err)
		c, _ := a.NewCache()
		last := allocN(t, c, 8) // make sure some header chunk exists
		s := a.Snapshot()
		end := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(last)), s.Base+s.Size-addrOf(last))), 8)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%d superblocks: Free(base+size) panics: %v", nsb, r)
				}
			}()
			if err := c.Free(end); !errors.Is(err, impl.ErrInvalidPointer) {
				t.Fatalf("%d superblocks: Free(base+size): %v, want ErrInvalidPointer", nsb, err)
			}
		}()
		must(t, c.Free(last))
		must(t, a.Close())
	}
}

// TestTrimAfterClose: every call on a closed Allocator returns ErrClosed, Trim
// too, also when the pool held committed memory when it closed.
func TestTrimAfterClose(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	b, err := a.Alloc(spec.SuperblockSize)
	must(t, err)
	must(t, a.Free(b)) // a dirty superblock in the pool
	must(t, a.Close())
	if err := a.Trim(); !errors.Is(err, impl.ErrClosed) {
		t.Fatalf("Trim after Close: %v, want ErrClosed", err)
	}
}

// TestLeaksNamesObjectPastFirstGroup (EMPTY, Leaks): a live object past the first
// group of 32 of its superblock is listed at its own address.
func TestLeaksNamesObjectPastFirstGroup(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	var objs [][]byte
	for range 40 {
		objs = append(objs, allocN(t, c, 48))
	}
	for i, b := range objs {
		if i != 35 {
			must(t, c.Free(b))
		}
	}
	leaks := a.Leaks()
	if len(leaks) != 1 || leaks[0].Addr != addrOf(objs[35]) || leaks[0].Size != 48 {
		t.Fatalf("leaks %v, want the 48-byte object at %#x", leaks, addrOf(objs[35]))
	}
	must(t, c.Free(objs[35]))
}

// TestClosedCacheLeavesRegistry: Close hands the cache's counters to the
// Allocator and drops it: the snapshot lists open caches only, and Stats is the
// same before and after.
func TestClosedCacheLeavesRegistry(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	b := allocN(t, c, 100)
	must(t, c.Free(b))
	c.Flush()
	before := a.Stats()
	must(t, c.Close())
	for _, cs := range a.Snapshot().Caches {
		if cs.ID == c.ID() {
			t.Fatalf("cache %d is still registered after Close", c.ID())
		}
	}
	after := a.Stats()
	k := spec.SizeToClass(100)
	if after.Classes[k] != before.Classes[k] {
		t.Fatalf("class %d: %+v before Close, %+v after", k, before.Classes[k], after.Classes[k])
	}
}

// TestDebugWriteAfterFreeFoundAtRelease (DEBUG-POISON): a write after free into
// an object whose superblock empties and is released is reported at the
// release, which checks every object that held data before it poisons the
// whole superblock again.
func TestDebugWriteAfterFreeFoundAtRelease(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	var objs [][]byte
	for range 17 { // 16 fill a superblock; the 17th makes another current
		objs = append(objs, allocN(t, c, 4096))
	}
	must(t, c.Free(objs[3]))
	objs[3][:cap(objs[3])][9] = 1 // the bug under test: a write after free
	for i, b := range objs[:16] {
		if i != 3 {
			must(t, c.Free(b)) // the last empties the superblock: released
		}
	}
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(objs[3]) || waf.Offset != 9 {
		t.Fatalf("reports at the release: %v", reports)
	}
	must(t, c.Free(objs[16]))
}
