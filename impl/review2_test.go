package impl_test

import (
	"errors"
	"runtime"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a second independent review (injected bugs in the per-P front,
// guard mode and the large in-place Realloc that the suite did not see).

// TestGuardReallocCopiesNextToQuarantine (GUARD-FAULT, ZEROED): a moving
// Realloc in guard mode copies what it keeps of an object that ends exactly at
// a superblock boundary, next to a quarantined superblock: only the bytes it
// reads decide whether the source is quarantined (impl.Allocator.quarantined),
// not the first byte past them.
func TestGuardReallocCopiesNextToQuarantine(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1})
	c, _ := a.NewCache()
	defer c.Close()
	l, err := c.Alloc(spec.SuperblockSize) // one whole superblock, the first
	must(t, err)
	for i := range l {
		l[i] = byte(i%251 + 1)
	}
	g, err := c.Alloc(100) // sampled: a guard superblock of its own, the next
	must(t, err)
	if addrOf(g) != addrOf(l)+spec.SuperblockSize {
		t.Fatalf("the guarded object is at %#x, not right after the large one at %#x", addrOf(g), addrOf(l))
	}
	must(t, c.Free(g)) // quarantined: l cannot grow in place
	r, err := c.Realloc(l, 3*spec.SuperblockSize)
	must(t, err)
	if addrOf(r) == addrOf(l) {
		t.Fatal("it grew in place over a quarantined superblock")
	}
	for i := range spec.SuperblockSize {
		if r[i] != byte(i%251+1) {
			t.Fatalf("byte %d of the moved object is %#x, want %#x: the copy was skipped", i, r[i], byte(i%251+1))
		}
	}
	must(t, c.Free(r))
}

// TestLargeReallocGrowsIntoExactRun (ZEROED: a large object grows in place
// when the superblocks right after it are free): the free run after it is
// exactly as long as the growth needs (impl.Allocator.takeRunAt).
func TestLargeReallocGrowsIntoExactRun(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	l, err := c.Alloc(spec.SuperblockSize)
	must(t, err)
	l[0] = 7
	r, err := c.Realloc(l, 4*spec.SuperblockSize) // the whole reservation
	must(t, err)
	if addrOf(r) != addrOf(l) || r[0] != 7 || cap(r) != 4*spec.SuperblockSize {
		t.Fatalf("growing into the exactly long run after it: at %#x (was %#x), cap %d", addrOf(r), addrOf(l), cap(r))
	}
	must(t, c.Free(r))
}

// TestLargeReallocShrinkZeroesSlack (ZEROED): a large object shrunk in place
// to a size that is not a multiple of a page reads zero past the kept bytes up
// to its new capacity, which was written before.
func TestLargeReallocShrinkZeroesSlack(t *testing.T) {
	for _, opt := range []impl.Options{{}, {Debug: true}, {Guard: impl.GuardOptions{Enabled: true, SampleRate: -1}}} {
		opt.Reserve = 16 * spec.SuperblockSize
		a, err := impl.New(opt)
		must(t, err)
		c, _ := a.NewCache()
		l, err := c.Alloc(4 * spec.SuperblockSize)
		must(t, err)
		for i := range l {
			l[i] = 0xab
		}
		n := 2*spec.SuperblockSize - 1000
		r, err := c.Realloc(l, n)
		must(t, err)
		if addrOf(r) != addrOf(l) || cap(r) != 2*spec.SuperblockSize {
			t.Fatalf("%+v: shrink to %d: at %#x (was %#x), cap %d", opt, n, addrOf(r), addrOf(l), cap(r))
		}
		for i, x := range r[n:cap(r)] {
			if x != 0 {
				t.Fatalf("%+v: byte %d past the kept %d reads %#x", opt, n+i, n, x)
			}
		}
		must(t, c.Free(r))
		c.Close()
		a.Close()
	}
}

// TestFrontRemoteDoubleFreeOfHeldObject (FREE-DOUBLE, CONSERVE, STATS-EXACT):
// on the per-P front (one P, so every call runs on its cache) a stale remote
// free lands on the lowest object of the held group; the next Alloc and
// AllocAligned must not refill over the held group (its objects would be
// lost, credited but neither live nor free), but leave it to the slow path,
// which drops the pending free and hands the object out.
func TestFrontRemoteDoubleFreeOfHeldObject(t *testing.T) {
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, align := range []int{1, 64} {
		h, ids := harness(t, impl.Options{Reserve: 8 * spec.SuperblockSize}, 1)
		d := ids[0]
		must(t, h.Alloc(invariants.Front, 64, align))
		x := h.LastAddr
		held := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(h.Object(x))), 64)), 64)
		must(t, h.FreeSlice(d, held)) // remote, stale: accepted, pending on a held object
		if h.LastErr != nil {
			t.Fatal(h.LastErr)
		}
		must(t, h.Alloc(invariants.Front, 64, align))
		if h.LastAddr != x+64 {
			t.Fatalf("align %d: got %#x, want the held object %#x", align, h.LastAddr, x+64)
		}
		must(t, h.Flush(invariants.Front))
		if s := h.A.Stats(); s.DoubleFrees != 1 {
			t.Fatalf("align %d: DoubleFrees %d", align, s.DoubleFrees)
		}
		must(t, h.FreeAll())
	}
}

// TestFrontSamplesAfterPinnedRefill (GUARD-FAULT: one small allocation in
// SampleRate is guarded, on every path): on the per-P front (one P), once the
// first held group runs out, the allocation where the next sample is due takes
// the slow path and is guarded; a pinned refill (impl.Cache.takeGroupPinned)
// would serve it unguarded and keep sampling off from then on.
func TestFrontSamplesAfterPinnedRefill(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a := newGuarded(t, impl.GuardOptions{SampleRate: 10, QuarantineObjects: 4})
	const n = 2000
	for range n {
		b, err := a.Alloc(48)
		must(t, err)
		must(t, a.Free(b))
	}
	if got := a.Stats().Guard.Allocs; got < n/10*6/10 || got > n/10*14/10 {
		t.Fatalf("%d of %d allocations on the front guarded at SampleRate 10", got, n)
	}
}

// TestGuardSampleRate (GUARD-FAULT): the interval between two sampled
// allocations is uniform on [1, 2·SampleRate−1], so at SampleRate 2 half of
// a cache's small allocations are guarded; a refill that took one object more
// than the allocations left before the next sample (impl.Cache.guardLimit)
// would guard a third.
func TestGuardSampleRate(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 2, QuarantineObjects: 4})
	c, _ := a.NewCache()
	defer c.Close()
	const n = 4000
	for range n {
		b := allocN(t, c, 16)
		must(t, c.Free(b))
	}
	if got := a.Stats().Guard.Allocs; got < n/2*9/10 || got > n/2*11/10 {
		t.Fatalf("%d of %d allocations guarded at SampleRate 2, want about %d", got, n, n/2)
	}
}

// TestGuardSamplingResumesAfterFallback (GUARD-FAULT): a sampled allocation
// that finds no superblock for itself is served unguarded from the held
// group; once memory is free again, sampling goes on.
func TestGuardSamplingResumesAfterFallback(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 2, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	var kept [][]byte
	for a.Stats().SmallSuperblocks == 0 { // an unguarded allocation: a small superblock
		b := allocN(t, c, 16)
		if a.Stats().SmallSuperblocks == 0 {
			must(t, c.Free(b)) // guarded: quarantined
		} else {
			kept = append(kept, b)
		}
	}
	l := allocN(t, c, 3*spec.SuperblockSize) // the rest of the reservation
	for range 20 {                           // sampled ones fall back
		kept = append(kept, allocN(t, c, 16))
	}
	must(t, c.Free(l))
	before := a.Stats().Guard.Allocs
	for range 40 {
		b := allocN(t, c, 16)
		must(t, c.Free(b))
	}
	if got := a.Stats().Guard.Allocs - before; got < 10 {
		t.Fatalf("%d of 40 allocations guarded at SampleRate 2 once memory was free again", got)
	}
	for _, b := range kept {
		must(t, c.Free(b))
	}
}

// TestGuardStatsExact (GUARD-FAULT: Stats.Guard is exact at every instant):
// the live guarded bytes and the objects released from the quarantine.
func TestGuardStatsExact(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1, QuarantineObjects: 1})
	c, _ := a.NewCache()
	defer c.Close()
	x, y := allocN(t, c, 100), allocN(t, c, 0)
	if s := a.Stats().Guard; s.Allocs != 2 || s.LiveObjects != 2 || s.LiveBytes != uint64(cap(x)+cap(y)) {
		t.Fatalf("two live guarded objects of %d and %d bytes (Alloc(0) too): %+v", cap(x), cap(y), s)
	}
	must(t, c.Free(x))
	must(t, c.Free(y)) // the quarantine holds one: x is released
	if s := a.Stats().Guard; s.LiveObjects != 0 || s.LiveBytes != 0 || s.Quarantined != 1 || s.Released != 1 {
		t.Fatalf("after the frees: %+v", s)
	}
}

// TestGuardedObjectZeroedOnDirtyMemory (ZEROED): a sampled small object on a
// superblock that a large object used (freed too large for the quarantine,
// so pooled dirty) reads zero.
func TestGuardedObjectZeroedOnDirtyMemory(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{SampleRate: 1, QuarantineBytes: spec.SuperblockSize})
	c, _ := a.NewCache()
	defer c.Close()
	l := allocN(t, c, 2*spec.SuperblockSize)
	for i := range l {
		l[i] = 0xff
	}
	must(t, c.Free(l)) // two superblocks: past the quarantine's bound, pooled
	if s := a.Stats().Guard; s.Quarantined != 0 {
		t.Fatalf("the large object was quarantined: %+v", s)
	}
	g := allocN(t, c, 100)
	if addrOf(g) != addrOf(l) {
		t.Fatalf("the guarded object is at %#x, not on the large object's memory at %#x", addrOf(g), addrOf(l))
	}
	for i, x := range g[:cap(g)] {
		if x != 0 {
			t.Fatalf("byte %d of a guarded object on reused memory reads %#x", i, x)
		}
	}
	must(t, c.Free(g))
}

// TestLargeShrinkTailFreeInvalid (FREE-INVALID): after a large object shrinks
// in place, a free of the start of a superblock it gave back is invalid (it
// was never an object's start), not a double free.
func TestLargeShrinkTailFreeInvalid(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	l := allocN(t, c, 4*spec.SuperblockSize)
	tail := l[2*spec.SuperblockSize:]
	r, err := c.Realloc(l, 2*spec.SuperblockSize)
	must(t, err)
	if addrOf(r) != addrOf(l) {
		t.Fatal("the shrink moved it")
	}
	if err := c.Free(tail); !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("free of a superblock a shrink gave back, inside the object it was: %v", err)
	}
	must(t, c.Free(r))
}

// TestFrontMissesCounted (STATS-EXACT: Stats.SuperblockCacheMisses is exact
// after a flush): frees on the per-P front (one P) of objects in 40
// superblocks of another cache each miss the superblock cache once, filled
// pinned (impl.Cache.fillPinned).
func TestFrontMissesCounted(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	var objs [][]byte
	for k := range 40 { // one superblock each
		objs = append(objs, allocN(t, c, spec.ClassSize(k)))
	}
	c.Flush()
	a.Flush()
	before := a.Stats().SuperblockCacheMisses
	for _, b := range objs {
		must(t, a.Free(b))
	}
	a.Flush()
	if got := a.Stats().SuperblockCacheMisses - before; got != 40 {
		t.Fatalf("%d superblock-cache misses counted for 40 frees into 40 superblocks", got)
	}
}

// TestFrontRemoteFreeReachesOwner (STATS-LAG: pending remote frees are
// published when the owner collects them; LIFECYCLE): objects freed on the
// front into another cache's superblock are announced to their owner, whose
// next refill collects them and reuses the superblock rather than taking
// another from the pool.
func TestFrontRemoteFreeReachesOwner(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	size := spec.ClassSize(spec.NumClasses - 1)
	n := spec.ClassObjects(spec.NumClasses - 1)
	var objs [][]byte
	for range n { // the whole superblock
		objs = append(objs, allocN(t, c, size))
	}
	for _, b := range objs {
		must(t, a.Free(b))
	}
	b := allocN(t, c, size)
	if addrOf(b) != addrOf(objs[0]) {
		t.Fatalf("the owner's refill took %#x, not its superblock's freed object %#x", addrOf(b), addrOf(objs[0]))
	}
	if s := a.Stats(); s.SmallSuperblocks != 1 {
		t.Fatalf("%d small superblocks", s.SmallSuperblocks)
	}
	must(t, c.Free(b))
}

// TestFrontLocalDoubleFreeOfHeldObject (FREE-DOUBLE: the owner's free checks
// its held group): on the per-P front (one P) a free of an object the front's
// cache holds, never handed out, is refused at once by the pinned free path.
func TestFrontLocalDoubleFreeOfHeldObject(t *testing.T) {
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	x, err := a.Alloc(64)
	must(t, err)
	must(t, a.Free(x)) // a local free: the entry is filled, the free pinned from now on
	x, err = a.Alloc(64)
	must(t, err)
	held := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), 64)), 64)
	if err := a.Free(held); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("free of a held object on the front: %v", err)
	}
	must(t, a.Free(x))
	a.Flush()
	if s := a.Stats(); s.DoubleFrees != 1 || s.Classes[spec.SizeToClass(64)].Allocs != s.Classes[spec.SizeToClass(64)].Frees {
		t.Fatalf("DoubleFrees %d, class stats %+v", s.DoubleFrees, s.Classes[spec.SizeToClass(64)])
	}
}
