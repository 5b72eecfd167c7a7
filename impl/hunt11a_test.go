package impl_test

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a mutant hunt of Realloc (realloc.go), large objects (large.go)
// and the Allocator's options, pool and accounting (alloc.go).

// newAllocCache is an Allocator of opt, closed when the test ends, and a
// Cache of it.
func newAllocCache(t *testing.T, opt impl.Options) (*impl.Allocator, *impl.Cache) {
	t.Helper()
	a, err := impl.New(opt)
	must(t, err)
	t.Cleanup(func() { a.Close() })
	c, err := a.NewCache()
	must(t, err)
	return a, c
}

// fillWith writes v over all of b, up to its capacity.
func fillWith(b []byte, v byte) {
	for i := range b[:cap(b)] {
		b[:cap(b)][i] = v
	}
}

// holds fails t unless every byte of b, up to its capacity, is v.
func holds(t *testing.T, b []byte, v byte, what string) {
	t.Helper()
	for i, x := range b[:cap(b)] {
		if x != v {
			t.Fatalf("byte %d of %s is %#x, want %#x", i, what, x, v)
		}
	}
}

// TestLargeGrowInPlaceClearsDirtyTakenSuperblocks (ZEROED): a large object
// that grows in place over superblocks used before clears all of each, not
// only its first page. A one-superblock object is followed by a freed,
// fully written two-superblock one; growing the first to three superblocks
// takes them in place, and every byte past the first superblock reads zero.
// Slip: each dirty superblock taken is cleared up to one page only.
func TestLargeGrowInPlaceClearsDirtyTakenSuperblocks(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(sbBytes)
	must(t, err)
	y, err := c.Alloc(2 * sbBytes)
	must(t, err)
	if addrOf(y) != addrOf(x)+sbBytes {
		t.Fatalf("second object at %#x, want right after the first at %#x", addrOf(y), addrOf(x)+sbBytes)
	}
	fillWith(y, 0xa5)
	must(t, c.Free(y))
	r, err := c.Realloc(x, 3*sbBytes)
	must(t, err)
	if addrOf(r) != addrOf(x) || cap(r) != 3*sbBytes {
		t.Fatalf("Realloc to 3 superblocks: %#x cap %d, want in place at %#x cap %d", addrOf(r), cap(r), addrOf(x), 3*sbBytes)
	}
	holds(t, r[sbBytes:], 0, "the grown object past its first superblock")
	must(t, c.Free(r))
}

// TestReallocStaleSliceOfLargerClass (FREE-DOUBLE, INTEGRITY): a Realloc of
// a stale slice is refused as its free would be, and writes nothing. A
// 128-byte object's slice outlives its superblock, which comes back carved
// for 64 bytes: the slice's address is object 2 of the new layout, freed,
// while objects 1 and 3 are live. Realloc(stale, 50) must be ErrDoubleFree
// and leave object 3 intact. Slip: resizable does not check that the
// slice's capacity is its class's size, takes the stale address for object
// 1 (128/128), finds that live, and clears the slice's 128-byte capacity
// past 50 in place, object 3 included.
func TestReallocStaleSliceOfLargerClass(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x0, err := c.Alloc(128)
	must(t, err)
	stale, err := c.Alloc(128)
	must(t, err)
	must(t, c.Free(x0))
	must(t, c.Free(stale))
	c.Flush() // the superblock is empty: released to the pool
	var y [4][]byte
	for i := range y {
		y[i], err = c.Alloc(64)
		must(t, err)
		fillWith(y[i], 0x5a)
	}
	if addrOf(y[0]) != addrOf(x0) || addrOf(y[2]) != addrOf(stale) {
		t.Fatalf("the superblock was not reused for 64 bytes (%#x, %#x; want %#x, %#x)", addrOf(y[0]), addrOf(y[2]), addrOf(x0), addrOf(stale))
	}
	must(t, c.Free(y[2]))
	r, err := c.Realloc(stale, 50)
	if !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Errorf("Realloc of a stale 128-byte slice at a freed 64-byte object: %#x, %v; want ErrDoubleFree", addrOf(r), err)
	}
	holds(t, y[1], 0x5a, "live object 1 after the Realloc")
	holds(t, y[3], 0x5a, "live object 3 after the Realloc")
}

// TestReallocInteriorPointerRefused (FREE-INVALID, INTEGRITY): a Realloc of a
// slice that does not start an object slot is refused as its free would be
// (ErrInvalidPointer), and writes nothing. The slice starts 32 bytes into
// object 0 of the 64-byte class with the class's capacity; Realloc(b, 50)
// must leave object 1 intact. Slip: resizable does not check that the
// address is a slot start, takes it for object 0 (32/64), which is live,
// and clears [50, 64) of the slice in place: bytes 18 to 31 of object 1.
func TestReallocInteriorPointerRefused(t *testing.T) {
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(64)
	must(t, err)
	y, err := c.Alloc(64)
	must(t, err)
	if addrOf(y) != addrOf(x)+64 {
		t.Fatalf("second object at %#x, want %#x", addrOf(y), addrOf(x)+64)
	}
	fillWith(y, 0x5a)
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), 32)), 64)
	r, err := c.Realloc(b, 50)
	if !errors.Is(err, impl.ErrInvalidPointer) || r != nil {
		t.Errorf("Realloc of an interior pointer: %#x, %v; want ErrInvalidPointer", addrOf(r), err)
	}
	holds(t, y, 0x5a, "the live object after it, after the Realloc")
	must(t, c.Free(x))
	must(t, c.Free(y))
}

// TestReallocStaleSelfNamesItsClass (FREE-DOUBLE): a Realloc refused because
// Alloc handed out b's own address (b was freed) reports the class the
// address is an object of. Both objects of a 32 KiB superblock (class 54,
// the largest small class) are allocated and the first freed; Realloc(first,
// 32 KiB) gets that address back from Alloc and must say ErrDoubleFree with
// class 54. Slip: the class is taken for spec.Large when n is MaxSmall
// exactly (< for <=).
func TestReallocStaleSelfNamesItsClass(t *testing.T) {
	const size, class = 32 << 10, 54
	if spec.ClassSize(class) != size || spec.MaxSmall != size {
		t.Fatalf("class %d is %d bytes, MaxSmall %d: the test assumes 32 KiB for both", class, spec.ClassSize(class), spec.MaxSmall)
	}
	_, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	x, err := c.Alloc(size)
	must(t, err)
	y, err := c.Alloc(size)
	must(t, err)
	must(t, c.Free(x))
	r, err := c.Realloc(x, size)
	var fe *impl.FreeError
	if !errors.As(err, &fe) || !errors.Is(err, impl.ErrDoubleFree) || r != nil {
		t.Fatalf("Realloc of a freed 32 KiB object onto its own address: %v, %d bytes; want ErrDoubleFree", err, len(r))
	}
	if fe.Class != class || fe.Addr != addrOf(x) {
		t.Fatalf("the refusal names class %d at %#x, want class %d at %#x", fe.Class, fe.Addr, class, addrOf(x))
	}
	must(t, c.Free(y))
}

// TestNewReserveRounding (MEM-ACCOUNT): Options.Reserve is rounded up to
// whole superblocks, and spec.MaxAlloc itself is a valid reservation (New's
// error names [0, MaxAlloc] as the range). Reserve 1 is one superblock,
// Reserve 64 KiB + 1 two, and a large object of two superblocks fits in the
// latter. Slips: the reservation rounded down (one superblock, and the
// two-superblock object is ErrTooLarge); Reserve == MaxAlloc refused.
func TestNewReserveRounding(t *testing.T) {
	for _, tc := range []struct{ reserve, want int }{
		{1, sbBytes},
		{sbBytes, sbBytes},
		{sbBytes + 1, 2 * sbBytes},
	} {
		a, err := impl.New(impl.Options{Reserve: tc.reserve})
		must(t, err)
		if got := a.Stats().Reserved; got != uint64(tc.want) {
			t.Errorf("Reserve %d: Stats.Reserved %d, want %d", tc.reserve, got, tc.want)
		}
		if tc.want == 2*sbBytes {
			b, err := a.Alloc(2 * sbBytes)
			if err != nil {
				t.Errorf("Reserve %d: Alloc of two superblocks: %v", tc.reserve, err)
			} else {
				must(t, a.Free(b))
			}
		}
		must(t, a.Close())
	}
	if raceEnabled {
		return // the Go-heap backend would allocate the terabyte
	}
	a, err := impl.New(impl.Options{Reserve: spec.MaxAlloc})
	if errors.Is(err, impl.ErrOutOfMemory) {
		t.Skipf("the OS refuses a terabyte of address space: %v", err)
	}
	if err != nil {
		t.Fatalf("New with Reserve = spec.MaxAlloc: %v", err)
	}
	if got := a.Stats().Reserved; got != spec.MaxAlloc {
		t.Errorf("Reserve spec.MaxAlloc: Stats.Reserved %d, want %d", got, uint64(spec.MaxAlloc))
	}
	must(t, a.Close())
}

// TestDefaultReserve (MEM-ACCOUNT): Options.Reserve 0 reserves 64 GiB (1 GiB
// in -race builds). Slip: a different default.
func TestDefaultReserve(t *testing.T) {
	want := uint64(64 << 30)
	if raceEnabled {
		want = 1 << 30
	}
	a, err := impl.New(impl.Options{})
	must(t, err)
	defer a.Close()
	if got := a.Stats().Reserved; got != want {
		t.Fatalf("Reserve 0: Stats.Reserved %d, want %d", got, want)
	}
}

// vmSize is the process's address space in bytes (/proc/self/status), 0 if
// unknown.
func vmSize() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmSize:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// TestNewReservationRefusedIsOutOfMemory (OOM-REAL): when the OS refuses the
// reservation, New's error is ErrOutOfMemory for errors.Is, with the OS's
// reason wrapped too. The address space is limited (RLIMIT_AS) to 1 GiB past
// what the process maps, for the one call of New asking 16 GiB. Slip: New
// formats ErrOutOfMemory with %v, so errors.Is(err, ErrOutOfMemory) fails.
func TestNewReservationRefusedIsOutOfMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("the Go-heap backend cannot survive the limit")
	}
	used := vmSize()
	if used == 0 {
		t.Skip("no VmSize in /proc/self/status")
	}
	var old unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_AS, &old))
	limit := used + 1<<30
	if old.Cur != unix.RLIM_INFINITY && old.Cur < limit {
		t.Skipf("RLIMIT_AS is %d already", old.Cur)
	}
	must(t, unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: limit, Max: old.Max}))
	a, err := impl.New(impl.Options{Reserve: 16 << 30})
	must(t, unix.Setrlimit(unix.RLIMIT_AS, &old))
	if err == nil {
		a.Close()
		t.Fatal("New reserved 16 GiB under a 1 GiB address-space limit")
	}
	if !errors.Is(err, impl.ErrOutOfMemory) || !errors.Is(err, unix.ENOMEM) {
		t.Fatalf("New under the limit: %v, want ErrOutOfMemory wrapping ENOMEM", err)
	}
}

// TestPoolKeepsReusedRunWithinRetain (MEM-ACCOUNT): the pool keeps up to
// Retain bytes committed for good. A large object of two superblocks is
// allocated and freed three times (the same run each time, dirty from the
// second on) with Retain four superblocks and Decay -1 (past Retain memory
// goes back at once): the pool holds two superblocks, within Retain, and
// they stay committed. Slip: a dirty superblock leaving the pool is not
// taken off the pool's count of dirty superblocks, which then reads six,
// past Retain, and the release returns the two to the OS.
func TestPoolKeepsReusedRunWithinRetain(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: 4 * sbBytes, Decay: -1})
	for i := range 3 {
		b := allocSBs(t, c, 2)
		must(t, c.Free(b))
		if s := a.Stats(); s.Committed != 2*sbBytes || s.InUse != 0 {
			t.Fatalf("cycle %d: Committed %d, InUse %d; want the two pooled superblocks (%d bytes) kept, Retain is %d",
				i, s.Committed, s.InUse, 2*sbBytes, 4*sbBytes)
		}
	}
}

// TestDefaultDecay (MEM-ACCOUNT): Options.Decay 0 means one second: with
// Retain none, a freed superblock stays committed 999 ms on the allocator's
// clock and goes back to the OS at one second. Slip: a different default
// (the invariants' machine only hangs on a far shorter one).
func TestDefaultDecay(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -1})
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	must(t, c.Free(allocSBs(t, c, 1)))
	clock += int64(999 * time.Millisecond)
	impl.DecayNow(a)
	if s := a.Stats(); s.Committed != sbBytes {
		t.Fatalf("999 ms after the free: Committed %d, want the superblock (%d) kept", s.Committed, sbBytes)
	}
	clock += int64(time.Millisecond)
	impl.DecayNow(a)
	if s := a.Stats(); s.Committed != 0 {
		t.Fatalf("1 s after the free: Committed %d, want 0", s.Committed)
	}
}

// TestNoDecayTimerWithinRetain (MEM-ACCOUNT): the decay timer is armed only
// for what the pool holds past Retain. Retain is four superblocks, Decay an
// hour on a test clock: a run of two is freed, two hours pass, a run of four
// is freed: the release returns the two old ones and keeps the four young
// ones, within Retain, for good, so no timer is left pending. Slip: the timer
// is armed when the pool holds Retain exactly (>= for >).
func TestNoDecayTimerWithinRetain(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 64 * sbBytes, Retain: 4 * sbBytes, Decay: time.Hour})
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	old := allocSBs(t, c, 2)
	young := allocSBs(t, c, 4)
	must(t, c.Free(old))
	clock += int64(2 * time.Hour)
	must(t, c.Free(young))
	if s := a.Stats(); s.Committed != 4*sbBytes {
		t.Fatalf("Committed %d after the release, want the 4 young superblocks (%d bytes)", s.Committed, 4*sbBytes)
	}
	if impl.FireDecayTimer(a) {
		t.Fatal("a decay timer is pending while the pool holds no more than Retain")
	}
}

// TestDecayAfterCloseWalksNothing (MEM-ACCOUNT): a decay timer that fires
// after Close (it had started before Close stopped it) does nothing: the
// reservation is gone, and madvising its range could hit a mapping made
// since. Retain none, Decay an hour on a test clock: a freed superblock
// waits, Close, two hours pass, the timer's function runs: the pool is not
// walked. Slip: decayLater does not check closed, walks and madvises.
func TestDecayAfterCloseWalksNothing(t *testing.T) {
	a, c, clock, objs := decayClock(t, 1)
	must(t, c.Free(objs[0]))
	must(t, a.Close())
	*clock += int64(2 * time.Hour)
	walks := impl.PoolWalks(a)
	impl.DecayNow(a)
	if got := impl.PoolWalks(a); got != walks {
		t.Fatalf("the decay timer walked the pool %d times after Close", got-walks)
	}
}

// TestTrimReportsMadviseError (MEM-ACCOUNT): an madvise that fails leaves its
// superblocks committed and counted so, and Trim reports the OS's error,
// wrapped for errors.Is. A pooled superblock is mlocked, which makes
// MADV_DONTNEED fail with EINVAL; once unlocked, Trim returns it. Slips: the
// error formatted with %v, so errors.Is(err, EINVAL) fails; Trim drops the
// error and returns nil.
func TestTrimReportsMadviseError(t *testing.T) {
	if raceEnabled {
		t.Skip("the Go-heap backend does not madvise")
	}
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	b := allocSBs(t, c, 1)
	must(t, c.Free(b))
	if err := unix.Mlock(b); err != nil {
		t.Skipf("mlock: %v", err)
	}
	err := a.Trim()
	must(t, unix.Munlock(b))
	if !errors.Is(err, unix.EINVAL) {
		t.Fatalf("Trim of an mlocked pooled superblock: %v, want EINVAL wrapped", err)
	}
	if s := a.Stats(); s.Committed != sbBytes {
		t.Fatalf("Committed %d after the failed madvise, want %d", s.Committed, sbBytes)
	}
	must(t, a.Trim())
	if s := a.Stats(); s.Committed != 0 {
		t.Fatalf("Committed %d after Trim, want 0", s.Committed)
	}
}

// TestReallocLargeBeyondMaxAlloc (LARGE-EXACT, NO-OVERLAP): a Realloc past
// spec.MaxAlloc fails with ErrTooLarge and leaves b live and unchanged, large
// or not. A two-superblock object is grown to 2^40+1, 2^48 and 2^48+128 KiB
// bytes and to math.MaxInt: each must be refused, with Stats.Large and the
// superblocks unchanged, and b freed at the end. Bug (it was so): the
// in-place large path took any size, and from 2^48 bytes the run's length
// (n>>16 in a uint32) wrapped: Realloc(b, 2^48) returned a 256 TiB slice
// over a run of no superblocks, b's two freed to the pool while it stayed
// live; math.MaxInt panicked inside the allocator with the head left
// resizing, so a free of b would have waited for ever.
func TestReallocLargeBeyondMaxAlloc(t *testing.T) {
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes})
	for _, small := range []bool{false, true} {
		n := 2 * sbBytes
		if small {
			n = 100
		}
		b, err := c.Alloc(n)
		must(t, err)
		fillWith(b, 0x5a)
		before := a.Stats()
		for _, huge := range []int{spec.MaxAlloc + 1, 1 << 48, 1<<48 + 2*sbBytes, math.MaxInt} {
			r, err := reallocNoPanic(c, b, huge)
			if !errors.Is(err, impl.ErrTooLarge) || r != nil {
				t.Fatalf("Realloc of a %d-byte object to %#x bytes: %d bytes, %v; want ErrTooLarge", n, huge, len(r), err)
			}
			if s := a.Stats(); s.Large != before.Large || s.LargeSuperblocks != before.LargeSuperblocks || s.InUse != before.InUse {
				t.Fatalf("after a refused Realloc to %#x bytes: large %+v on %d superblocks, want %+v on %d", huge, s.Large, s.LargeSuperblocks, before.Large, before.LargeSuperblocks)
			}
		}
		holds(t, b, 0x5a, "the object after the refused Reallocs")
		must(t, c.Free(b))
	}
}

// reallocNoPanic is c.Realloc(b, n), a panic inside it turned into an error.
func reallocNoPanic(c *impl.Cache, b []byte, n int) (r []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("panicked: %v", p)
		}
	}()
	return c.Realloc(b, n)
}

// TestGuardReallocFreedLargeUnsampled (GUARD-FAULT): in guard mode a moving
// Realloc copies under the central lock and not at all from a quarantined
// source, whether or not small allocations are sampled: with SampleRate -1
// only large objects are guarded, and a Realloc of a freed (quarantined,
// protected) large object must fail as its free does, ErrDoubleFree, without
// reading it. Slip: the guarded copy is taken only when small allocations
// are sampled, and the plain copy reads the protected memory.
func TestGuardReallocFreedLargeUnsampled(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: -1})
	needProtect(t, a)
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	b, err := c.Alloc(200_000)
	must(t, err)
	must(t, c.Free(b))
	if err := noFault(func() error { _, err := c.Realloc(b, 400_000); return err }); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed large guarded object, small allocations unsampled: %v, want ErrDoubleFree", err)
	}
}

// TestDebugGrowInPlaceVerifiesTakenSuperblock (DEBUG-POISON): a large object
// growing in place over one freed superblock verifies that superblock's
// poison, as an allocation of it would. A one-superblock object is followed
// by a freed one, written at byte 100 after its free; growing the first to
// two superblocks takes it in place, reports one WriteAfterFreeError at that
// byte, and the byte reads zero. Slip: the poison of the taken superblocks is
// verified only when more than one is taken.
func TestDebugGrowInPlaceVerifiesTakenSuperblock(t *testing.T) {
	var reports []error
	a := newDebugReporting(t, &reports)
	c, err := a.NewCache()
	must(t, err)
	x, err := c.Alloc(sbBytes)
	must(t, err)
	y, err := c.Alloc(sbBytes)
	must(t, err)
	if addrOf(y) != addrOf(x)+sbBytes {
		t.Fatalf("second object at %#x, want right after the first at %#x", addrOf(y), addrOf(x)+sbBytes)
	}
	must(t, c.Free(y))
	y[100] = 1 // write after free
	r, err := c.Realloc(x, 2*sbBytes)
	must(t, err)
	if addrOf(r) != addrOf(x) {
		t.Fatalf("Realloc to two superblocks moved the object to %#x", addrOf(r))
	}
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(y) || waf.Offset != 100 {
		t.Fatalf("reports %v, want one write after free at byte 100 of %#x", reports, addrOf(y))
	}
	if got := a.Stats().WriteAfterFrees; got != 1 {
		t.Fatalf("Stats.WriteAfterFrees %d, want 1", got)
	}
	if r[sbBytes+100] != 0 {
		t.Fatalf("the byte written after free reads %#x in the grown object, want 0", r[sbBytes+100])
	}
	must(t, c.Free(r))
}

// TestDecayRetriesFailedMadvise (MEM-ACCOUNT): an madvise that fails leaves
// its superblocks committed, and the next release past Retain tries them
// again. Retain none, Decay an hour on a test clock: x is freed, two hours
// pass, x is mlocked (MADV_DONTNEED fails) and y freed, whose release fails
// to return x; x is unlocked and, a second later, z freed: that release
// returns x, past its decay, and keeps y and z. Slip: a walk that fails
// keeps the time it computed for the next walk (an hour away, from y)
// instead of leaving it unknown, so x stays committed another hour.
func TestDecayRetriesFailedMadvise(t *testing.T) {
	if raceEnabled {
		t.Skip("the Go-heap backend does not madvise")
	}
	a, c := newAllocCache(t, impl.Options{Reserve: 16 * sbBytes, Retain: -1, Decay: time.Hour})
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	x, y, z := allocSBs(t, c, 1), allocSBs(t, c, 1), allocSBs(t, c, 1)
	must(t, c.Free(x))
	clock += int64(2 * time.Hour)
	if err := unix.Mlock(x); err != nil {
		t.Skipf("mlock: %v", err)
	}
	must(t, c.Free(y))
	must(t, unix.Munlock(x))
	if s := a.Stats(); s.Committed != 3*sbBytes {
		t.Fatalf("Committed %d with x locked, want all three superblocks (%d)", s.Committed, 3*sbBytes)
	}
	clock += int64(time.Second)
	must(t, c.Free(z))
	if s := a.Stats(); s.Committed != 2*sbBytes {
		t.Fatalf("Committed %d after the next release, want y and z (%d): x, past its decay, returned", s.Committed, 2*sbBytes)
	}
}
