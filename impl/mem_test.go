package impl_test

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// resident is the number of bytes of the reservation the kernel has resident,
// read with mincore(2) (the kernel's view of what is committed). obj is any object of a, to derive the reservation.
func resident(t *testing.T, a *impl.Allocator, obj []byte) uint64 {
	t.Helper()
	s := a.Snapshot()
	p := unsafe.Pointer(unsafe.SliceData(obj))
	base := unsafe.Add(p, -int(uintptr(p)-s.Base))
	page := unix.Getpagesize()
	vec := make([]byte, int(s.Size)/page)
	// x/sys/unix has no wrapper for mincore on Linux: the raw call.
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(base), s.Size, uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	var n uint64
	for _, v := range vec {
		n += uint64(v & 1)
	}
	return n * uint64(page)
}

// TestCommittedMatchesKernel (MEM-ACCOUNT): Stats.Committed bounds what the
// kernel has resident in the reservation, memory freed past Options.Retain goes
// back at once, and Trim returns all the rest: after it the kernel holds
// nothing of a reservation whose objects were all freed.
func TestCommittedMatchesKernel(t *testing.T) {
	if raceEnabled {
		t.Skip("the -race backend is a Go-heap arena, not an mmap reservation")
	}
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: 8 << 20, Decay: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor, err := c.Alloc(16) // keeps one superblock in use, and locates the reservation
	must(t, err)
	check := func(step string, minResident uint64) {
		t.Helper()
		s, r := a.Stats(), resident(t, a, anchor)
		t.Logf("%-28s resident %6d KiB  committed %6d KiB  in use %6d KiB", step, r>>10, s.Committed>>10, s.InUse>>10)
		if r > s.Committed || r < minResident || s.InUse > s.Committed {
			t.Fatalf("%s: resident %d, Committed %d, InUse %d, want resident in [%d, Committed]", step, r, s.Committed, s.InUse, minResident)
		}
	}
	check("fresh", 0)
	var objs [][]byte
	for range 4096 { // 16 MiB of 4 KiB objects, every page touched
		b, err := c.Alloc(4096)
		must(t, err)
		b[0], b[4095] = 1, 1
		objs = append(objs, b)
	}
	big, err := c.Alloc(4 << 20)
	must(t, err)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	check("allocated 20 MiB", 20<<20)
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Free(big))
	c.Flush()
	// 20 MiB of empty superblocks, Retain 8 MiB: the pool returned memory down
	// to half of Retain as soon as it held more than Retain.
	check("freed, 8 MiB retained", 0)
	if s := a.Stats(); s.Committed-s.InUse > 8<<20 {
		t.Fatalf("the pool keeps %d bytes, Retain is 8 MiB", s.Committed-s.InUse)
	}
	must(t, a.Trim())
	check("after Trim", 0)
	if s, r := a.Stats(), resident(t, a, anchor); s.Committed != s.InUse || r > uint64(spec.SuperblockSize) {
		t.Fatalf("after Trim: Committed %d InUse %d resident %d; only the anchor's superblock should remain", s.Committed, s.InUse, r)
	}
	// Fresh again: reused memory must still read zero (ZEROED without clearing).
	b, err := c.Alloc(4 << 20)
	must(t, err)
	for i := 0; i < len(b); i += 512 {
		if b[i] != 0 {
			t.Fatalf("byte %d of a large object from decommitted memory is %d", i, b[i])
		}
	}
	must(t, c.Free(b))
	must(t, c.Free(anchor))
}

// TestDecay (MEM-ACCOUNT): past Retain the pool keeps what it is given for
// Options.Decay before it goes back to the OS, so that memory freed and
// allocated again within it is not faulted in anew (the pages stay resident
// and no madvise runs); once the time is up the pool returns it, down to half
// of Retain, on the next release or when the timer fires.
func TestDecay(t *testing.T) {
	if raceEnabled {
		t.Skip("the -race backend is a Go-heap arena, not an mmap reservation")
	}
	const retain = 4 * spec.SuperblockSize
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: retain, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	clock := time.Now().UnixNano()
	impl.SetClock(a, func() int64 { return clock })
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16)
	touch := func(b []byte) {
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
	}
	big, err := c.Alloc(20 << 20)
	must(t, err)
	touch(big)
	must(t, c.Free(big))
	if s, r := a.Stats(), resident(t, a, anchor); s.Committed-s.InUse < 20<<20 || r < 20<<20 {
		t.Fatalf("freed within the decay: pool %d, resident %d; want the 20 MiB kept", s.Committed-s.InUse, r)
	}
	again, err := c.Alloc(20 << 20)
	must(t, err)
	if addrOf(again) != addrOf(big) || resident(t, a, anchor) < 20<<20 {
		t.Fatal("the run was not reused with its pages resident")
	}
	for i := 0; i < len(again); i += 4096 {
		if again[i] != 0 {
			t.Fatalf("byte %d of the reused run is %d (ZEROED)", i, again[i])
		}
	}
	touch(again)
	must(t, c.Free(again))
	clock += int64(2 * time.Hour)
	impl.DecayNow(a)
	if s := a.Stats(); s.Committed-s.InUse > retain/2 {
		t.Fatalf("after the decay the pool keeps %d bytes committed, Retain is %d", s.Committed-s.InUse, retain)
	}
	if r := resident(t, a, anchor); r > uint64(retain) {
		t.Fatalf("after the decay %d bytes are resident", r)
	}
	must(t, c.Free(anchor))
}

// TestDecayTimer (MEM-ACCOUNT): with nothing else happening, the timer returns
// what is past Retain once Options.Decay has passed.
func TestDecayTimer(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: 2 * spec.SuperblockSize, Decay: 20 * time.Millisecond})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	big, err := c.Alloc(8 << 20)
	must(t, err)
	must(t, c.Free(big))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		s := a.Stats()
		if s.Committed-s.InUse <= spec.SuperblockSize {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the free the pool keeps %d bytes committed", s.Committed-s.InUse)
		}
	}
}

// TestDecayWalksOncePerDecay (MEM-ACCOUNT): past Retain, a workload that
// releases superblocks all the time within the decay does not walk the pool
// on every release (xmalloc-test spent 60% of its time there): the pool is
// walked again only once something can have waited the decay. The largest
// Duration ("forever", valid like any positive Decay) keeps the pool for good
// and walks it no more: decayNext, now+Decay, saturates (review22: it wrapped
// into the past and every release walked the pool, mutant decaywrap).
func TestDecayWalksOncePerDecay(t *testing.T) {
	for _, decay := range []time.Duration{time.Hour, math.MaxInt64} {
		t.Run(map[bool]string{true: "forever", false: "hour"}[decay == math.MaxInt64], func(t *testing.T) {
			const retain = 4 * spec.SuperblockSize
			a, err := impl.New(impl.Options{Reserve: 64 << 20, Retain: retain, Decay: decay})
			must(t, err)
			defer a.Close()
			clock := time.Now().UnixNano()
			impl.SetClock(a, func() int64 { return clock })
			c, _ := a.NewCache()
			var bigs [][]byte
			for range 16 { // one superblock each, all released past Retain
				b, err := c.Alloc(spec.MaxSmall + 1)
				must(t, err)
				b[0] = 1
				bigs = append(bigs, b)
			}
			for _, b := range bigs {
				must(t, c.Free(b))
			}
			w0 := impl.PoolWalks(a)
			for range 1000 {
				b, err := c.Alloc(spec.MaxSmall + 1)
				must(t, err)
				b[0] = 1
				must(t, c.Free(b))
			}
			if w := impl.PoolWalks(a) - w0; w > 1 {
				t.Fatalf("1000 releases within a decay of %v walked the pool %d times", decay, w)
			}
			clock += int64(2 * time.Hour)
			b, _ := c.Alloc(spec.MaxSmall + 1)
			must(t, c.Free(b)) // with an hour's decay, this release finds superblocks that waited it
			s := a.Stats()
			if decay == math.MaxInt64 {
				if s.Committed-s.InUse < 16*spec.SuperblockSize {
					t.Fatalf("with Decay the largest Duration the pool keeps %d bytes committed, want the 16 superblocks released", s.Committed-s.InUse)
				}
				return
			}
			if s.Committed-s.InUse > retain/2+spec.SuperblockSize {
				t.Fatalf("after the decay the pool keeps %d bytes committed, Retain is %d", s.Committed-s.InUse, retain)
			}
		})
	}
}

// TestRefillReusesDirtyGroups (MEM-ACCOUNT): a refill takes a group its
// superblock handed out before, while one of them has a free object, before a
// fresh one, so a class whose live set stays small does not sweep its cursor
// through the whole superblock and fault in every page (larson's 8-byte class:
// 357 live objects in a superblock of 8192). With mutant freshfirst the second
// round goes on into fresh groups.
func TestRefillReusesDirtyGroups(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	const n, group = 200, 32 * 8 // 8-byte objects: groups of 256 bytes
	var objs [][]byte
	lo, hi := ^uintptr(0), uintptr(0)
	for range n {
		b, err := c.Alloc(8)
		must(t, err)
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		lo, hi = min(lo, p), max(hi, p)
		objs = append(objs, b)
	}
	end := lo + (hi-lo)/group*group + group // past the last group the first round touched
	for _, b := range objs[1:] {
		must(t, c.Free(b))
	}
	for i := range n - 1 {
		b, err := c.Alloc(8)
		must(t, err)
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p < lo || p >= end {
			t.Fatalf("allocation %d of the second round at %#x, outside the groups of the first [%#x, %#x)", i, p, lo, end)
		}
		objs[1+i] = b
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}

// TestIdleOwnerFullSuperblocksReused (LIFECYCLE): a cache that fills
// superblocks and then goes idle does not keep them: its full superblocks of a
// class become orphans as it acquires the next one (orphanFull), so when
// another cache frees their objects it adopts them and they go back to the
// pool, instead of staying owned by the idle cache with every object pending
// (larson's main goroutine). With mutant keepfull they stay in use.
func TestIdleOwnerFullSuperblocksReused(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	idle, _ := a.NewCache()
	worker, _ := a.NewCache()
	var objs [][]byte
	for range 5 * 64 { // five superblocks of 1000-byte objects (64 each)
		b, err := idle.Alloc(1000)
		must(t, err)
		objs = append(objs, b)
	}
	last := objs[len(objs)-1]
	for _, b := range objs[:len(objs)-1] {
		must(t, worker.Free(b))
	}
	// Only the idle cache's current superblock, which still holds last, stays.
	if s := a.Stats(); s.SmallSuperblocks != 1 {
		t.Fatalf("%d small superblocks after the other cache freed all but one object, want 1 (the idle cache's current)", s.SmallSuperblocks)
	}
	must(t, idle.Free(last))
	must(t, idle.Close())
	must(t, worker.Close())
}

// TestOwnerFreedFullSuperblockKept (LIFECYCLE): a full superblock its owner
// has freed into stays the owner's when the next refill acquires a superblock
// (orphanFull gives up only the full superblocks nobody but others free into):
// the owner's frees into it go on without adopting it back under the central
// lock. With mutant orphanfreedfull it is orphaned.
func TestOwnerFreedFullSuperblockKept(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 << 20})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	per := spec.ClassObjects(spec.SizeToClass(1000))
	var objs [][]byte
	for range per { // the first superblock, full
		b, err := c.Alloc(1000)
		must(t, err)
		objs = append(objs, b)
	}
	must(t, c.Free(objs[0])) // the owner frees into it
	b, err := c.Alloc(1000)  // and takes the slot back: full again
	must(t, err)
	objs[0] = b
	b, err = c.Alloc(1000) // a refill that must acquire a second superblock
	must(t, err)
	objs = append(objs, b)
	if s := a.Stats(); s.OrphanedSuperblocks != 0 || s.SmallSuperblocks != 2 {
		t.Fatalf("after the owner freed into its full superblock and acquired another: %d orphaned, %d small superblocks; want 0 and 2",
			s.OrphanedSuperblocks, s.SmallSuperblocks)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}

// TestPurgeOnGrowth (MEM-ACCOUNT): a take that commits fresh superblocks while
// the pool holds committed empty ones past the slack (1/32 of what is in use,
// Retain/8) returns as many of them at once, whatever their age; a take the
// pool serves from its committed memory returns nothing. Large objects of two
// superblocks, every other one freed, leave holes no object of three fits
// (fill-mixed's churn): without the purge (mutant nogrowthpurge) the holes
// stay committed for the whole decay, and Committed grows past what is in use
// by all of them.
func TestPurgeOnGrowth(t *testing.T) {
	if raceEnabled {
		t.Skip("the -race backend is a Go-heap arena, not an mmap reservation")
	}
	const sb = spec.SuperblockSize
	a, err := impl.New(impl.Options{Reserve: 256 << 20, Retain: -1, Decay: time.Hour})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	anchor, _ := c.Alloc(16)
	var twos [][]byte
	for range 64 {
		twos = append(twos, allocSBs(t, c, 2))
	}
	for i := 0; i < len(twos); i += 2 {
		must(t, c.Free(twos[i]))
	}
	s := a.Stats()
	if held := s.Committed - s.InUse; held != 64*sb {
		t.Fatalf("32 freed objects of 2 superblocks: the pool holds %d bytes committed, want %d (decay is an hour)", held, 64*sb)
	}
	// Served from the pool: the holes fit objects of two; nothing returned.
	for i := 0; i < 8; i += 2 {
		b, err := c.Alloc(2 * sb)
		must(t, err)
		if r := resident(t, a, anchor); r < a.Stats().Committed-sb {
			t.Fatalf("a take from committed memory returned memory: resident %d, Committed %d", r, a.Stats().Committed)
		}
		twos[i] = b
	}
	var threes [][]byte
	for range 28 {
		before := a.Stats()
		threes = append(threes, allocSBs(t, c, 3))
		s := a.Stats()
		slack := s.InUse / 32
		held, heldBefore := s.Committed-s.InUse, before.Committed-before.InUse
		switch {
		case heldBefore >= slack+3*sb && s.Committed != before.Committed:
			t.Fatalf("fresh object %d of 3 superblocks with %d bytes pooled committed (slack %d): Committed went from %d to %d, want it unchanged", len(threes), heldBefore, slack, before.Committed, s.Committed)
		case held > max(heldBefore, slack+3*sb):
			t.Fatalf("fresh object %d: the pool holds %d bytes committed, %d before", len(threes), held, heldBefore)
		}
		if r := resident(t, a, anchor); r > s.Committed {
			t.Fatalf("resident %d > Committed %d", r, s.Committed)
		}
	}
	if s := a.Stats(); s.Committed-s.InUse > s.InUse/32+3*sb {
		t.Fatalf("after 28 fresh objects of 3 superblocks the pool holds %d bytes committed, in use %d", s.Committed-s.InUse, s.InUse)
	}
	for _, b := range append(threes, twos...) {
		if b != nil && addrOf(b) != 0 {
			_ = c.Free(b)
		}
	}
	must(t, c.Free(anchor))
}
