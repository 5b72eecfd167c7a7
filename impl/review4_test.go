package impl_test

// Review 4: purgeOnGrowth, dirtyTop and the spinning central lock. Each test
// names the slip it was written to catch.

import (
	"runtime"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

const sbBytes = spec.SuperblockSize

// allocSBs allocates a large object of n whole superblocks and writes to it.
func allocSBs(t *testing.T, c *impl.Cache, n int) []byte {
	t.Helper()
	b, err := c.Alloc(n * sbBytes)
	must(t, err)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	return b
}

// held is what the pool holds committed: Committed minus InUse.
func held(a *impl.Allocator) uint64 {
	s := a.Stats()
	return s.Committed - s.InUse
}

// TestPurgeOnGrowthRetainFloor (MEM-ACCOUNT, Options.Retain): while the pool
// holds no more than Retain/8 committed, a fresh take returns nothing, even
// when that is far more than 1/32 of what is in use (the slack is the larger
// of the two; slips: min of the two, or Retain/8 left out).
func TestPurgeOnGrowthRetainFloor(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: 128 * sbBytes, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16)
	hole := allocSBs(t, c, 10)
	fence := allocSBs(t, c, 1)
	must(t, c.Free(hole))
	if h := held(a); h != 10*sbBytes {
		t.Fatalf("the pool holds %d bytes committed, want the hole's %d", h, 10*sbBytes)
	}
	before := a.Stats().Committed
	big := allocSBs(t, c, 11) // fits no hole: 11 fresh superblocks
	// At the purge: 10 pooled, 13 in use: 13/32 = 0, Retain/8 = 16 superblocks.
	if got := a.Stats().Committed; got != before+11*sbBytes {
		t.Fatalf("10 superblocks pooled, below Retain/8 (16): a fresh take of 11 took Committed from %d to %d, want %d (nothing returned)", before, got, before+11*sbBytes)
	}
	for _, b := range [][]byte{big, fence, anchor} {
		must(t, c.Free(b))
	}
}

// TestPurgeOnGrowthSlackOfInUse (MEM-ACCOUNT): the slack is 1/32 of the
// memory in use, not of Committed (which counts the pool's own superblocks
// too). 62 superblocks in use and 2 pooled: 62/32 = 1 < 2 pooled, so a fresh
// take returns one (64/32 = 2 would return none).
func TestPurgeOnGrowthSlackOfInUse(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: -1, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16) // superblock 0
	var objs [][]byte
	for range 57 {
		objs = append(objs, allocSBs(t, c, 1))
	}
	hole := allocSBs(t, c, 2)
	objs = append(objs, allocSBs(t, c, 1)) // the fence: the hole is a run of its own
	must(t, c.Free(hole))
	s := a.Stats()
	if s.InUse != 59*sbBytes || s.Committed != 61*sbBytes {
		t.Fatalf("setup: InUse %d, Committed %d, want 59 and 61 superblocks", s.InUse/sbBytes, s.Committed/sbBytes)
	}
	objs = append(objs, allocSBs(t, c, 3)) // fresh: 62 in use, 2 pooled, 64 committed
	if got := a.Stats().Committed; got != 63*sbBytes {
		t.Fatalf("62 superblocks in use (slack 1), 2 pooled: a fresh take of 3 left Committed %d superblocks, want 63 (one pooled returned)", got/sbBytes)
	}
	for _, b := range append(objs, anchor) {
		must(t, c.Free(b))
	}
}

// freshBelowDirty leaves the pool with a fresh run of 4 superblocks below a
// dirty run of 4: anchor(s) at 0, [1,5) freed and trimmed, a fence at 5,
// [6,10) freed dirty, a fence at 10. A take of one superblock then takes the
// fresh run's first while 4 dirty ones are pooled.
func freshBelowDirty(t *testing.T, a *impl.Allocator, c *impl.Cache) (keep [][]byte) {
	t.Helper()
	low := allocSBs(t, c, 4)
	f1 := allocSBs(t, c, 1)
	high := allocSBs(t, c, 4)
	f2 := allocSBs(t, c, 1)
	must(t, c.Free(low))
	must(t, a.Trim())
	must(t, c.Free(high))
	if h := held(a); h != 4*sbBytes {
		t.Fatalf("setup: the pool holds %d bytes committed, want 4 superblocks", h)
	}
	return [][]byte{f1, f2}
}

// TestPurgeOnSmallAcquire (MEM-ACCOUNT, Cache.Alloc): a small refill that
// takes a fresh superblock while the pool holds dirty ones past the slack
// returns one (slip: acquireSmall not calling purgeOnGrowth).
func TestPurgeOnSmallAcquire(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: -1, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16)
	keep := freshBelowDirty(t, a, c)
	before := a.Stats()
	b, err := c.Alloc(1024) // a class with no superblock yet: a fresh one
	must(t, err)
	s := a.Stats()
	if s.InUse != before.InUse+sbBytes {
		t.Fatalf("setup: the refill took %d superblocks", (s.InUse-before.InUse)/sbBytes)
	}
	if s.Committed != before.Committed {
		t.Fatalf("a small refill committed a fresh superblock with 4 dirty ones pooled (slack 0): Committed %d -> %d superblocks, want unchanged", before.Committed/sbBytes, s.Committed/sbBytes)
	}
	for _, x := range append(keep, b, anchor) {
		must(t, c.Free(x))
	}
}

// TestPurgeOnGuardedAcquire (MEM-ACCOUNT, GUARD-FAULT): a guarded small
// allocation that takes a fresh superblock while the pool holds dirty ones
// past the slack returns one (slip: allocGuarded not calling purgeOnGrowth).
// The large objects are larger than the quarantine, so their frees pool them.
func TestPurgeOnGuardedAcquire(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: -1, Decay: time.Hour,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineBytes: sbBytes}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor := allocSBs(t, c, 1)
	keep := freshBelowDirty(t, a, c)
	before := a.Stats()
	b, err := c.Alloc(16)
	must(t, err)
	s := a.Stats()
	if s.Guard.Allocs != before.Guard.Allocs+1 || s.InUse != before.InUse+sbBytes {
		t.Fatalf("setup: Alloc(16) was not guarded on a superblock of its own: guard allocs %d -> %d, InUse %d -> %d", before.Guard.Allocs, s.Guard.Allocs, before.InUse, s.InUse)
	}
	if s.Committed != before.Committed {
		t.Fatalf("a guarded allocation committed a fresh superblock with 4 dirty ones pooled (slack 0): Committed %d -> %d superblocks, want unchanged", before.Committed/sbBytes, s.Committed/sbBytes)
	}
	for _, x := range append(keep, b, anchor) {
		must(t, c.Free(x))
	}
}

// TestPurgeKeepsDecayNext (MEM-ACCOUNT): a purge that stops short of the
// pool leaves decayNext where it was (still a lower bound), so the releases
// after it do not walk the pool again before anything can have waited the
// decay (slips: decayNext not restored, or restored with min). Every
// iteration purges once (one walk); the release after it must not walk.
func TestPurgeKeepsDecayNext(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: -1, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16)
	var fences, holes [][]byte
	for range 16 {
		holes = append(holes, allocSBs(t, c, 2))
		fences = append(fences, allocSBs(t, c, 1))
	}
	for _, h := range holes {
		must(t, c.Free(h))
	}
	const n = 8
	w0 := impl.PoolWalks(a)
	var threes [][]byte
	for range n {
		before := held(a)
		threes = append(threes, allocSBs(t, c, 3)) // fresh: purges 3, stops short
		if h := held(a); h != before-3*sbBytes {
			t.Fatalf("setup: a fresh take of 3 left the pool %d superblocks committed, %d before", h/sbBytes, before/sbBytes)
		}
		one := allocSBs(t, c, 1) // from a hole: dirty
		clock += int64(time.Second)
		must(t, c.Free(one)) // a release past Retain, within the decay
	}
	if w := impl.PoolWalks(a) - w0; w > n {
		t.Fatalf("%d purges and %d releases within the decay walked the pool %d times, want %d (the purges')", n, n, w, n)
	}
	for _, b := range append(append(threes, fences...), anchor) {
		must(t, c.Free(b))
	}
}

// TestLockSpinsOnlyWithParallelism: the central lock spins before it parks
// only when another P can be running its holder; with GOMAXPROCS 1 spinning
// could only delay the holder (slip: NumCPU > 1 || GOMAXPROCS > 1).
func TestLockSpinsOnlyWithParallelism(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 1 << 20})
	must(t, err)
	defer a.Close()
	if impl.LockSpins(a) {
		t.Fatal("GOMAXPROCS 1: the central lock spins")
	}
	if runtime.NumCPU() > 1 {
		runtime.GOMAXPROCS(2)
		b, err := impl.New(impl.Options{Reserve: 1 << 20})
		must(t, err)
		defer b.Close()
		if !impl.LockSpins(b) {
			t.Fatal("GOMAXPROCS 2 on more than one CPU: the central lock does not spin")
		}
	}
}
