package impl_test

// From a second independent mutant hunt (alloc.go, large.go, realloc.go, the
// backends): each test names the one-line slip that passed the suite before it.

import (
	"errors"
	"testing"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// decayClock is an Allocator with Retain none and Decay an hour on a clock
// the test moves, and n one-superblock objects on it, written to.
func decayClock(t *testing.T, n int) (*impl.Allocator, *impl.Cache, *int64, [][]byte) {
	t.Helper()
	return decayClockRetain(t, n, -1)
}

// decayClockRetain is decayClock with Options.Retain set to retain.
func decayClockRetain(t *testing.T, n, retain int) (*impl.Allocator, *impl.Cache, *int64, [][]byte) {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: retain, Decay: time.Hour})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	clock := new(int64)
	*clock = time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return *clock })
	c, _ := a.NewCache()
	var objs [][]byte
	for range n {
		objs = append(objs, allocSBs(t, c, 1))
	}
	return a, c, clock, objs
}

// TestDecayAtExactlyDecay (MEM-ACCOUNT, Options.Decay): a superblock that has
// been pooled for exactly Decay has waited it: the next release returns it
// (slip: the release walks the pool only once the clock is past decayNext,
// not at it, so it waits for a later release or the timer).
func TestDecayAtExactlyDecay(t *testing.T) {
	a, c, clock, objs := decayClock(t, 2)
	must(t, c.Free(objs[0]))
	if h := held(a); h != sbBytes {
		t.Fatalf("freed within the decay: the pool holds %d bytes committed, want one superblock", h)
	}
	*clock += int64(time.Hour)
	must(t, c.Free(objs[1]))
	if h := held(a); h != sbBytes {
		t.Fatalf("released exactly Decay after the first: the pool holds %d bytes committed, want only the second's superblock", h)
	}
}

// TestDecayTimerRearmed (MEM-ACCOUNT, Options.Decay): the timer, once it has
// fired, is armed again by the next release past Retain, so that what that
// release pooled goes back though nothing else happens (slip: the timer's
// function leaves its timer recorded, and no release arms another).
func TestDecayTimerRearmed(t *testing.T) {
	a, c, clock, objs := decayClock(t, 2)
	must(t, c.Free(objs[0]))
	*clock += 2 * int64(time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after a release past Retain")
	}
	if h := held(a); h != 0 {
		t.Fatalf("after the timer fired the pool holds %d bytes committed", h)
	}
	must(t, c.Free(objs[1]))
	*clock += 2 * int64(time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after a release past Retain, once the first had fired")
	}
	if h := held(a); h != 0 {
		t.Fatalf("after the second timer fired the pool holds %d bytes committed", h)
	}
}

// TestReallocGuardModeUnsampledCleanup (FREE-DOUBLE, EMPTY): in guard mode a
// moving Realloc's new small object is reserved only if it came out guarded;
// one served from the held group is a plain object, and when the Realloc is
// refused (its source was freed already) the clean-up must free it as one
// (slip: every new object taken as reserved, whose clean-up through the
// central lock finds no large or guarded object there and leaks it).
func TestReallocGuardModeUnsampledCleanup(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1 << 20})
	c, _ := a.NewCache()
	b, err := c.Alloc(100)
	must(t, err)
	must(t, c.Free(b))
	if _, err := c.Realloc(b, 200); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("Realloc of a freed object: %v, want ErrDoubleFree", err)
	}
	if g := a.Stats().Guard.Allocs; g != 0 {
		t.Fatalf("%d small allocations sampled at a rate of 1 in 2^20: the new object must be a plain one for this test", g)
	}
	must(t, c.Close())
	if leaks := a.Leaks(); len(leaks) != 0 {
		t.Fatalf("after a refused Realloc and Close: %v live; the new object was not freed", leaks)
	}
}

// TestFreedLargeRunTailFreesInvalid (FREE-INVALID, FREE-DOUBLE): of a freed
// large object's run only the head superblock keeps the mark that makes a
// second free of it a double free; the start of any other superblock of the
// run was never an object's start, so a free of it is invalid (slip: poolRun
// marks every superblock of the run).
func TestFreedLargeRunTailFreesInvalid(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	l := allocSBs(t, c, 3)
	must(t, c.Free(l))
	if err := c.Free(l); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("second free of a large object: %v, want ErrDoubleFree", err)
	}
	for sb := 1; sb < 3; sb++ {
		if err := c.Free(l[sb*sbBytes:]); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Fatalf("free of superblock %d of a freed large object: %v, want ErrInvalidPointer", sb, err)
		}
	}
}

// TestReallocTailOfSuperblock (FREE-INVALID, ZEROED): a Realloc is refused as
// a free of its slice would be; past the last object of a superblock (the
// 16-byte tail of class 48's) there is no object to resize in place (slip:
// resizable's object-count check one past the end, which takes the tail for
// the live object after the last).
func TestReallocTailOfSuperblock(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	k := spec.SizeToClass(48)
	if spec.ClassSize(k) != 48 || spec.ClassObjects(k) != 1365 {
		t.Fatalf("class of 48 bytes: size %d, %d objects; the test wants 48 and 1365", spec.ClassSize(k), spec.ClassObjects(k))
	}
	b, err := c.Alloc(48)
	must(t, err)
	base := addrOf(b) &^ (sbBytes - 1)
	tailSlice := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), int(base+1365*48-addrOf(b)))), 48)[:40]
	if r, err := c.Realloc(tailSlice, 44); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("Realloc of the tail of a superblock: %d bytes, %v; want ErrInvalidPointer", len(r), err)
	}
	must(t, c.Free(b))
}

// TestReallocStaleLargeSliceOverLargerObject (ZEROED, FREE-DOUBLE): a Realloc
// of a freed large object's slice, whose start is now a larger live object's,
// never returns the slice's own address: it is not the slice's object, so it
// is not resized in place (slip: the in-place check looks at the head's state
// and offset, not at the slice's capacity, and resizes the other object).
func TestReallocStaleLargeSliceOverLargerObject(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	stale, err := c.Alloc(100_000)
	must(t, err)
	must(t, c.Free(stale))
	live, err := c.Alloc(200_000)
	must(t, err)
	if addrOf(live) != addrOf(stale) {
		t.Fatalf("the second large object is at %#x, not at the freed one's %#x", addrOf(live), addrOf(stale))
	}
	r, err := c.Realloc(stale, 150_000)
	if err == nil && addrOf(r) == addrOf(stale) {
		t.Fatalf("Realloc of a stale slice returned its own address, the live object's, with capacity %d", cap(r))
	}
}

// TestHeapBackendTrimReadsZero (ZEROED, MEM-ACCOUNT): memory returned to the
// OS counts as fresh, and fresh memory is not cleared when handed out again,
// so the Go-heap backend (Options.HeapBackend, and every -race build) must
// clear what it is told to decommit, as MADV_DONTNEED does (slip: its
// decommit does nothing, and a large object on trimmed memory shows the old
// bytes).
func TestHeapBackendTrimReadsZero(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	b := allocSBs(t, c, 2)
	must(t, c.Free(b))
	must(t, a.Trim())
	again, err := c.Alloc(2 * sbBytes)
	must(t, err)
	if addrOf(again) != addrOf(b) {
		t.Fatalf("the trimmed run was not reused (%#x, then %#x)", addrOf(b), addrOf(again))
	}
	for i := 0; i < len(again); i += 4096 {
		if again[i] != 0 {
			t.Fatalf("byte %d of a large object on trimmed memory is %d", i, again[i])
		}
	}
	must(t, c.Free(again))
}

// TestReallocForeignLargeSlice (FREE-INVALID): a Realloc is refused as a free
// of its slice would be, and a slice from outside the reservation (the Go
// heap, another Allocator) is invalid to free; growing it to a large size
// must look it up only once it is known to lie inside (slip: the bounds
// check before the in-place large path left out, which indexes the header
// table past its end).
func TestReallocForeignLargeSlice(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	other, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer other.Close()
	c, _ := a.NewCache()
	foreign, err := other.Alloc(spec.MaxSmall + 1)
	must(t, err)
	for name, b := range map[string][]byte{"Go heap": make([]byte, 100, 4096), "another Allocator": foreign} {
		if r, err := c.Realloc(b, 2*spec.MaxSmall); !errors.Is(err, impl.ErrInvalidPointer) {
			t.Errorf("Realloc of a slice of the %s to a large size: %d bytes, %v; want ErrInvalidPointer", name, len(r), err)
		}
	}
	must(t, other.Free(foreign))
}
