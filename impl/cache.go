// Cache: the per-goroutine front end, with the alloc and free fast paths.

package impl

import (
	"errors"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Cache allocates and frees for one goroutine at a time. It owns the superblocks
// it allocates from. It is not safe for concurrent use; use one per goroutine, or
// the Allocator's own methods.
type Cache struct {
	a       *Allocator
	base    uintptr // a.base, here so the free path reads one line
	wayMask uintptr
	closed  bool
	front   bool   // one of the Allocator's own caches (front.go)
	misses  uint32 // superblock-cache misses not yet added to ev.sbcFills
	id      int
	// busy is a per-P cache's token (front_pinned.go): free, or held by the
	// one call that may use the cache outside its P's pinned fast path.
	busy atomic.Uint32
	// users counts the calls using a front cache, under -tags refalloc_check
	// and in refalloc_yield builds (FRONT-EXCLUSIVE: enter, exit).
	users atomic.Int32
	// The superblock cache's entries are lines: sbc starts at offset 56
	// because the Go heap puts an 8-byte header before a pointerful object of
	// more than 512 bytes in its 64-byte-aligned slot (TestCacheLinesAligned).
	// reserving: a moving Realloc allocates its new object; a guarded small
	// one is reserved (gotReserved then says so), as a large one is
	// (FREE-DOUBLE: allocGuarded, freeLargeLocked).
	reserving, gotReserved bool
	_                      [2]byte

	sbc   [maxWays]sbEntry // the superblock cache (sbcache.go)
	cls   [clsSlots]classCache
	lists [spec.NumClasses]classLists
	// notify is the head of this cache's stack of superblocks with pending
	// remote frees: pushed by any goroutine, popped all at once by the owner.
	// It has a line of its own, so remote frees do not steal the owner's lines.
	_      [64]byte
	notify atomic.Pointer[superblock]
	_      [56]byte
	pub    [spec.NumClasses]classCounters // published counters, read by Stats
	ev     eventCounters

	// Guard mode's sampling (GUARD-FAULT), on the slow paths only: per class,
	// how many more objects refills may take into the held group before the
	// next sampled allocation, and the generator of the intervals.
	guardLeft [spec.NumClasses]int32
	guardRng  uint64
}

var _ = [1]struct{}{}[unsafe.Offsetof(Cache{}.sbc)-56]

// missBatch: superblock-cache misses are published in batches, like frees;
// Stats.SuperblockCacheMisses lags by fewer than this per cache until a flush.
const missBatch = 64

// clsSlots is NumClasses rounded up to a power of two, so that the fast paths
// index cls with a mask instead of a bounds check.
const clsSlots = 64

var _ [clsSlots - spec.NumClasses]struct{}

// classCache is one class's held group: up to 32 objects of the current
// superblock, taken out of its free bitmap and credited as allocations at refill.
type classCache struct {
	bits     uint32         // bit i: object 32*group+i is held
	size     uint32         // class size, so the fast path needs no table
	base     unsafe.Pointer // address of object 32*group
	rw       *atomic.Uint64 // the group's remote word: pending frees of these objects
	sb       *superblock    // the current superblock
	group    int32
	needzero bool // the group's memory may be dirty
}

// classLists are the owned superblocks of a class that are not current.
type classLists struct {
	partial, full *superblock
}

type classCounters struct {
	allocs, frees atomic.Uint64
}

// eventCounters are the other counters a cache publishes, read by Stats.
type eventCounters struct {
	double, invalid atomic.Uint64
	sbcFills        atomic.Uint64 // superblock-cache misses that filled an entry
	waf             atomic.Uint64 // debug mode: writes after free found
}

// NewCache returns a Cache of a. Give it to one goroutine; Close it when done:
// Close hands its superblocks over to the other caches. A Cache dropped without
// Close is not reclaimed by the garbage collector (the Allocator keeps it, for
// Stats): its superblocks stay its own, with what is free in them, until the
// Allocator closes. For short-lived goroutines use the Allocator's methods.
func (a *Allocator) NewCache() (*Cache, error) {
	if a.closed.Load() {
		return nil, ErrClosed
	}
	c := new(Cache)
	a.initCache(c)
	return c, nil
}

// initCache makes c, a zero Cache, an open cache of a.
func (a *Allocator) initCache(c *Cache) {
	*c = Cache{a: a, base: a.base, wayMask: uintptr(a.ways - 1)}
	for i := range c.sbc {
		c.sbc[i].key = noKey
	}
	a.regMu.Lock()
	c.id = a.nextID
	a.nextID++
	a.caches[c] = struct{}{}
	a.regMu.Unlock()
	if a.guard.sampled {
		c.initSampling()
	}
}

// dropArena forgets where c's held groups are, once the reservation is
// released (Allocator.releaseAll; Cache.Close clears its class caches).
func (c *Cache) dropArena() {
	for k := range c.cls {
		c.cls[k].base = nil
	}
}

// Alloc returns n bytes: len n, cap the class's usable size, zeroed over the whole
// cap. Alloc(0) returns a real object that can be freed. Errors: ErrInvalidSize
// (n < 0), ErrTooLarge, ErrOutOfMemory, ErrClosed.
func (c *Cache) Alloc(n int) ([]byte, error) {
	if uint(n) > spec.MaxSmall {
		return c.allocOther(n, 1, false)
	}
	// allocClass, by hand: it is too big for the compiler to inline, and this
	// is the fast path.
	k := spec.SizeToClass(n)
	cc := &c.cls[k&(clsSlots-1)]
	b := cc.next()
	if b == 0 {
		return c.allocSlow(n, k)
	}
	// pop, by hand too: with zero inlined it is over the inliner's budget.
	p := cc.lowest(b)
	if cc.needzero && !mutant.NoZero { // ZEROED
		zero(p, uintptr(cc.size))
	}
	return object(p, n, cc.size), nil
}

// AllocAligned is Alloc with the start aligned to align, a power of two up to the
// superblock size (64 KiB); other alignments are ErrInvalidSize.
func (c *Cache) AllocAligned(n, align int) ([]byte, error) {
	if uint(n) > spec.MaxSmall || !spec.ValidAlign(align) {
		return c.allocOther(n, align, false)
	}
	// ALIGN: the smallest class whose objects all have the alignment; objects
	// start at a superblock-aligned base + i*size.
	if k := spec.AlignedClass(n, align); k != spec.Large {
		if mutant.AlignIgnored && align <= 64 {
			k = spec.SizeToClass(n)
		}
		return c.allocClass(n, k)
	}
	return c.allocOther(n, align, false)
}

// allocClass is the fast path: pop the lowest held object of class k. A closed
// cache holds nothing, and Allocator.Close marks every remote word pending, so
// a closed cache or allocator always takes allocSlow, which says ErrClosed.
func (c *Cache) allocClass(n, k int) ([]byte, error) {
	cc := &c.cls[k&(clsSlots-1)]
	b := cc.next()
	if b == 0 {
		return c.allocSlow(n, k)
	}
	return cc.pop(b, n), nil
}

// next returns the held group if its lowest object can be handed out, 0 if
// the group is empty or a remote free is pending on that object (FREE-DOUBLE:
// never hand out an object with a remote free pending on it).
func (cc *classCache) next() uint32 {
	b := cc.bits
	if b == 0 || cc.rw.Load()&uint64(b&-b) != 0 && !mutant.PendingNotChecked {
		return 0
	}
	return b
}

// pop hands out the lowest held object, b being cc.bits.
func (cc *classCache) pop(b uint32, n int) []byte {
	p := cc.lowest(b)
	if cc.needzero && !mutant.NoZero { // ZEROED
		zero(p, uintptr(cc.size))
	}
	return object(p, n, cc.size)
}

// lowest takes the lowest held object out of the group, b being cc.bits, and
// returns its address.
func (cc *classCache) lowest(b uint32) unsafe.Pointer {
	cc.bits = b & (b - 1)
	return unsafe.Add(cc.base, uintptr(bits.TrailingZeros32(b))*uintptr(cc.size))
}

// object is the slice of len n and cap size at p, made without the checks
// of unsafe.Slice and reslicing (n <= size by the class, and [p, p+size) is
// one object of the reservation): they were a fifth of the pop.
func object(p unsafe.Pointer, n int, size uint32) []byte {
	var b []byte
	h := (*struct {
		p        unsafe.Pointer
		len, cap int
	})(unsafe.Pointer(&b))
	h.p, h.len, h.cap = p, n, int(size)
	return b
}

// zero clears size bytes at p, with inline 16-byte stores up to 128 bytes: the
// call to memclr, and the register spills around it, cost more than the stores
// (the 16-byte pair went from 10.4 to 9.1 ns, median of 12 interleaved runs).
// Two overlapping runs of stores, not a loop: a loop's exit mispredicts when
// sizes vary (larson 8-1000: 2.57 to 1.96 mispredicted branches an op,
// callgrind), and a 128-byte pair took 12.0 ns with the loop, 11.3 without
// (medians of 5 interleaved runs; 16 and 64 bytes unchanged). Class sizes
// above 8 are multiples of 16, and it writes nothing outside [p, p+size).
func zero(p unsafe.Pointer, size uintptr) {
	switch {
	case size == 8:
		*(*uint64)(p) = 0
	case size <= 32:
		*(*[2]uint64)(p) = [2]uint64{}
		*(*[2]uint64)(unsafe.Add(p, size-16)) = [2]uint64{}
	case size <= 64:
		*(*[4]uint64)(p) = [4]uint64{}
		*(*[4]uint64)(unsafe.Add(p, size-32)) = [4]uint64{}
	case size <= 128:
		*(*[8]uint64)(p) = [8]uint64{}
		if mutant.ZeroOverrun {
			size += 16
		}
		*(*[8]uint64)(unsafe.Add(p, size-64)) = [8]uint64{}
	default:
		clear(unsafe.Slice((*byte)(p), size))
	}
}

// allocSlow is the refill path (refillAlloc), then the reports it queued.
func (c *Cache) allocSlow(n, k int) ([]byte, error) {
	b, err := c.refillAlloc(n, k)
	reserved := c.reserving && c.gotReserved
	if mutant.SampledAllocReserved { // CONSERVE: an unsampled new object is the cache's, not reserved
		reserved = c.reserving
	}
	c.deliverAlloc(b, reserved)
	return b, err
}

func (c *Cache) refillAlloc(n, k int) ([]byte, error) {
	if c.closed && !mutant.ClosedAlloc || c.a.closed.Load() {
		return nil, ErrClosed
	}
	cc := &c.cls[k]
	// refill's first step, most refills: the current superblock's next
	// group, nothing pending on it (so nothing to collect).
	if cc.bits == 0 && c.takeGroupPinned(k) {
		if checks {
			c.checkLead(k)
		}
		yield(YieldAllocTaken)
		if b := cc.bits; cc.rw.Load()&uint64(b&-b) == 0 || mutant.AllocTakenUnchecked {
			return cc.pop(b, n), nil
		}
	}
	for spins := 0; ; spins++ {
		if mutant.Build && spins > 1<<16 {
			panic("refalloc: allocSlow went round 65536 times") // a mutant's collection that leaves a bit pending, a failure rather than a hang
		}
		if cc.bits == 0 {
			// GUARD-FAULT: the held group ran out where the next sampled
			// allocation is due (guardLimit cut it there): this is the one.
			if c.a.guard.sampled && c.guardLeft[k] == 0 {
				if b := c.allocGuarded(n, k); b != nil {
					return b, nil
				}
			}
			if err := c.refill(k); err != nil {
				return nil, errNoRoom(err, n, k)
			}
		}
		rw := cc.rw
		if c.a.debug {
			rw = &cc.sb.remote.Load().w[cc.group] // cc.rw is alwaysPending
		}
		if b := cc.bits; b != 0 && rw.Load()&uint64(b&-b) == 0 {
			if c.a.debug {
				return c.handOutDebug(n, k), nil
			}
			return cc.pop(b, n), nil
		}
		// A remote free is pending on an object we hold: it came through a stale
		// pointer (FREE-DOUBLE). Collecting the group drops it.
		freed := c.a.collectWord(c, cc, cc.sb, cc.sb.remote.Load(), int(cc.group))
		if !mutant.HeldCollectNoPub {
			c.publishFrees(k, freed) // STATS-EXACT: a legitimate remote free of the group may be among them
		}
	}
}

// allocOther handles everything but a small request on an open cache; a
// large object is reserved if reserve (Realloc's new object: publishLarge).
// Then the reports it queued (a write after free in debug mode).
func (c *Cache) allocOther(n, align int, reserve bool) ([]byte, error) {
	b, err := c.allocLargeOr(n, align, reserve)
	c.deliverAlloc(b, reserve) // reserve: Realloc's, n > MaxSmall, so large
	return b, err
}

func (c *Cache) allocLargeOr(n, align int, reserve bool) ([]byte, error) {
	switch {
	case c.closed || c.a.closed.Load():
		return nil, ErrClosed
	case n < 0 || !spec.ValidAlign(align):
		return nil, errSize(n, align)
	case n > spec.MaxAlloc || uintptr(n) > c.a.size:
		return nil, errTooLarge(n, c.a.size)
	}
	if k := spec.AlignedClass(n, align); k != spec.Large {
		return c.allocSlow(n, k)
	}
	b, err := c.a.allocLarge(n, reserve)
	if errors.Is(err, ErrOutOfMemory) && !mutant.LargeOOMNoFlush {
		// OOM-REAL: as a small refill does, give back what this cache holds
		// and release its empty superblocks, then look again.
		c.flush()
		b, err = c.a.allocLarge(n, reserve && !mutant.LargeOOMUnreserved)
	}
	return b, err
}

// Free frees b, which must be a whole object of this Cache's Allocator as Alloc
// returned it (any length, same start). A nil or zero-capacity slice is a no-op.
// Objects of other caches are freed remotely and return to their owner. Errors
// (ErrDoubleFree, ErrInvalidPointer, ErrClosed) leave the allocator unchanged.
func (c *Cache) Free(b []byte) error {
	if cap(b) == 0 {
		return nil
	}
	return c.free(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - c.base)
}

// free is the fast path: a hit on an owned superblock in the superblock cache.
// off is the offset from the reservation's base (huge for addresses below it).
// A closed cache has no entries, and Allocator.Close marks every remote word
// pending, so after either Close a free leaves this path, for ErrClosed.
func (c *Cache) free(off uintptr) error {
	i := off >> spec.SuperblockShift
	e := c.way(i)
	if e.key != i<<1|1 {
		if e.key == i<<1 && e.sb.owner.Load() != nil {
			return c.freeRemote(e, off) // a hit on another cache's superblock
		}
		return c.freeMiss(off)
	}
	if checks {
		c.checkHit(e)
	}
	rel := uint32(off) & (spec.SuperblockSize - 1)
	idx := uint32(uint64(rel) * uint64(e.magic) >> 32)
	g, m := idx>>5, uint32(1)<<(idx&31)
	if idx*e.size != rel || idx >= e.nobj && !mutant.LocalTail || // FREE-INVALID: not a slot start
		!mutant.NoDoubleFreeCheck && c.notLive(e, g, m) { // FREE-DOUBLE
		return c.freeReject(e, off, idx)
	}
	sb := e.sb
	*e.freeWord(g) |= m
	sb.localFreed++ // STATS-LAG: published in batches by publishLocal
	if sb.localFreed >= sb.limit+b2i(mutant.PublishLate) {
		c.publishLocal(sb) // a release may find late double frees
		c.deliver()
	}
	return nil
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

// notLive reports whether object (g, m) of e's superblock is free in it, has a
// remote free pending, or is in c's held group.
func (c *Cache) notLive(e *sbEntry, g, m uint32) bool {
	cc := &c.cls[e.class&(clsSlots-1)]
	// Without a branch on whether the held group is this one: under random
	// frees it is as often as not, and a mispredicted branch cost more than
	// the selects (larson 8-1000: 0.65 mispredicts a free, callgrind).
	held := cc.bits
	if cc.sb != e.sb {
		held = 0
	}
	if cc.group != int32(g) || mutant.HeldNotChecked {
		held = 0
	}
	if mutant.LocalPendingIgnored {
		return (*e.freeWord(g)|held)&m != 0
	}
	return (*e.freeWord(g)|uint32(e.word(g).Load())|held)&m != 0
}

func (c *Cache) freeReject(e *sbEntry, off uintptr, idx uint32) error {
	if c.closed || c.a.closed.Load() {
		return ErrClosed
	}
	rel := uint32(off) & (spec.SuperblockSize - 1)
	if idx*e.size != rel || idx >= e.nobj {
		return c.reject(errInvalid(c.a.base+off, int(e.class)))
	}
	return c.reject(errDouble(c.a.base+off, int(e.class)))
}

// reject counts a bad free (FREE-DOUBLE, FREE-INVALID) and returns its error.
func (c *Cache) reject(err error) error {
	if err == nil {
		return nil
	}
	if fe, ok := err.(*FreeError); ok && fe.Err == ErrDoubleFree {
		c.ev.double.Add(1)
	} else {
		c.ev.invalid.Add(1)
	}
	return err
}

// freeMiss handles a free the fast path did not: a hit on a superblock another
// cache owns goes straight to the remote free with the cached fields; a miss
// reads the authoritative header, refills the entry, and frees locally or
// remotely.
func (c *Cache) freeMiss(off uintptr) error {
	err := c.freeRead(off)
	c.deliver()
	return err
}

func (c *Cache) freeRead(off uintptr) error {
	a := c.a
	if c.closed || a.closed.Load() {
		return ErrClosed
	}
	i := off >> spec.SuperblockShift
	// A hit on another cache's superblock frees remotely; an orphan is
	// adopted below, once the header says the address is a slot start.
	if e := c.way(i); e.key == i<<1 && e.sb.owner.Load() != nil {
		return c.freeRemote(e, off)
	}
	addr := a.base + off
	if mutant.MissAddr {
		addr = a.base - off
	}
	if off >= a.size {
		return c.reject(errInvalid(addr, -1))
	}
	sb := a.lookup(i)
	if sb == nil && !mutant.FreeNoHeader {
		return c.reject(errInvalid(addr, -1))
	}
	for {
		// The remote set before and after the header: if it did not change, it
		// is the set of the period the header describes (fillEntry).
		rs := sb.remote.Load()
		yield(YieldFreeRemoteSet)
		gen, state, k := unpackMeta(sb.meta.Load())
		yield(YieldFreeHeader)
		switch state {
		case stateSmall:
			// CACHE-COHERENT: a new small period began since the loads, or
			// adoption waited on a.mu while this one ended: what was read may
			// describe a layout that is gone. Once c owns sb, only c changes
			// it, so the next reading is final.
			if sb.remote.Load() != rs && !mutant.FreeMissRS { // CACHE-COHERENT: else a replaced set is paired with the new layout
				continue
			}
			// FREE-INVALID: an address that is not a slot start in the
			// layout the header gave at its load (so not one at that
			// instant) is refused and changes no state. In an orphan it is
			// refused here, before adoption, which would change the
			// orphan's owner and list, collect its pending frees and
			// perhaps release it. (Into an owned superblock the fast path
			// refuses it, from the entry filled below: so the owner is asked
			// first, and a miss into one does not pay for the divisions.)
			size := uint32(spec.ClassSize(int(k)))
			rel := uint32(off) & (spec.SuperblockSize - 1)
			if mutant.OrphanSlotMask { // FREE-INVALID: the offset's lowest bit lost
				rel = uint32(off) & (spec.SuperblockSize - 2)
			}
			slot := rel%size == 0 && rel/size < uint32(spec.ClassObjects(int(k)))
			if sb.owner.Load() == nil && !mutant.InvalidAdopts && !slot {
				c.fillEntry(c.way(i), i, sb, rs, gen, k) // not mine: c owns no orphan
				c.countMiss()
				return c.reject(errInvalid(addr, int(k)))
			}
			yield(YieldFreeSlot)
			// FREE-INVALID: only a slot start adopts. The owner was loaded
			// above, and may have closed since: an address that is not a slot
			// start must not adopt the orphan it became (the owned path below
			// refuses it, changing nothing).
			if (slot || mutant.InvalidAdopts || mutant.InvalidSlotRacingAdopts) && c.adoptOnFree(sb, gen, rs) && !mutant.AdoptStale {
				continue
			}
			e := c.way(i)
			c.fillEntry(e, i, sb, rs, gen, k)
			c.countMiss()
			switch {
			case e.mine() && c.a.debug:
				return c.freeDebug(e, off)
			case e.mine():
				return c.free(off)
			}
			return c.freeRemote(e, off)
		case stateLargeHead, stateLargeTail, stateGuard:
			var site uint32
			if a.guard.on { // GUARD-FAULT: the stack that freed it, for the report
				site = a.sites.record()
			}
			yield(YieldLargeFree)
			return c.reject(a.freeLarge(c, off, site))
		case statePool, stateQuarantine:
			return c.reject(a.stalePoolFree(off, k))
		}
		return c.reject(errInvalid(addr, -1))
	}
}

// countMiss counts a superblock-cache miss that filled an entry.
func (c *Cache) countMiss() {
	if c.misses++; c.misses == missBatch { // not a locked add on every miss
		c.ev.sbcFills.Add(missBatch - uint64(b2i(mutant.MissBatchShort)))
		if !mutant.MissNoReset { // STATS-EXACT: else the batch is published again at the flush
			c.misses = 0
		}
	}
}

// fillPinned is freeMiss's lock-free part, for the front's pinned path
// (front_pinned.go), which must not block: for a miss on a small superblock
// that has an owner, it fills the entry from the header as freeMiss does, so
// that the pinned path can try again with a hit, and reports true. Everything
// else — an orphan to adopt, a large object, a pooled superblock, a bad
// address, debug mode, a header changing under it — it leaves to freeMiss,
// unpinned, and reports false having changed nothing.
func (c *Cache) fillPinned(off uintptr) bool {
	a := c.a
	if c.closed || a.closed.Load() || a.debug && !mutant.PinnedFillDebug /* DEBUG-POISON: a pinned free would not poison */ || off >= a.size+uintptr(b2i(mutant.PinnedFillPast)) { // FREE-INVALID
		return false
	}
	i := off >> spec.SuperblockShift
	sb := a.lookup(i)
	if sb == nil && !mutant.PinnedNilHeader {
		return false
	}
	rs := sb.remote.Load()
	yield(YieldFreeRemoteSet)
	gen, state, k := unpackMeta(sb.meta.Load())
	yield(YieldFreeHeader)
	// CACHE-COHERENT: the remote set before and after the header, as freeMiss.
	if state != stateSmall || sb.remote.Load() != rs && !mutant.FillPinnedRS || sb.owner.Load() == nil {
		return false
	}
	c.fillEntry(c.way(i), i, sb, rs, gen, k)
	c.countMiss()
	return true
}

// publishLocal publishes sb's local frees and files sb by its new free count.
// The free path calls it every publishBatch frees, and on the frees that make sb
// partial or empty (sb.limit).
func (c *Cache) publishLocal(sb *superblock) { c.publish(sb, true) }

// publish is publishLocal; release says whether an empty sb may be released
// (which locks): the front's pinned free publishes without, and only when
// the free does not empty sb.
func (c *Cache) publish(sb *superblock, release bool) {
	n := sb.foldFreed()
	if n > 0 {
		sb.ownerFreed = true
	}
	c.publishFrees(int(sb.class), n)
	c.relist(sb, release)
}

// relist files a non-current owned superblock on the list its free count calls
// for, releases it if it is empty, and sets the limit at which the free path
// next calls publishLocal: the free that makes it partial, or empty, comes
// here (LIFECYCLE). The caller has published sb's local frees.
func (c *Cache) relist(sb *superblock, release bool) {
	free := sb.nfree + sb.localFreed
	switch {
	case sb.list == listCurrent:
		sb.limit = publishBatch + b2i(mutant.CurrentLimitPast) // STATS-LAG
		return
	case sb.empty() && release && !mutant.KeepEmpty:
		c.unlink(sb)
		c.release(sb)
		return
	case free >= sb.partialMin()+b2i(mutant.PartialMinExcl):
		if mutant.RelistFull {
			c.moveTo(sb, listFull)
			sb.limit = 1
			return
		}
		c.moveTo(sb, listPartial)
		sb.limit = min(publishBatch, sb.objects()-sb.nfree)
		if mutant.PartialLimitNoCap {
			sb.limit = sb.objects() - sb.nfree
		}
		if mutant.PartialLimitFull {
			sb.limit = sb.fullLimit()
		}
	default:
		c.moveTo(sb, listFull)
		sb.limit = sb.fullLimit()
	}
}

// fullLimit is the limit of a superblock on the full list (fewer than
// partialMin free, localFreed folded): the free that makes it partial.
func (sb *superblock) fullLimit() int32 {
	if mutant.FullLimitNoCap {
		return sb.partialMin() - sb.nfree - sb.localFreed
	}
	return min(publishBatch, sb.partialMin()-sb.nfree-sb.localFreed-b2i(mutant.FullLimitEarly))
}

// partialShare: an owned superblock is partial, where refills look, once a
// sixteenth of its objects are free (LIFECYCLE, partialMin).
const partialShare = 16

// partialMin is how many free objects make an owned superblock partial: a
// sixteenth of its objects, at least one. A refill takes one group of the
// current superblock at a time, and larson's steady state (a live set packed
// into its superblocks, frees at random) leaves about one free object a
// group: taking every superblock with a free object as current cost a switch
// of superblock (publish, relist, drain, list moves) and a refill per object
// or two. A superblock with fewer free objects waits on the full list, and is
// taken only when neither a partial superblock, an orphan with as many, nor
// the pool can serve (OOM-REAL: no allocation fails while an object of the
// class is free). Measured (callgrind, one Cache, larson 8-1000 and a fixed
// 512 B): see the design essay, Allocation.
func (sb *superblock) partialMin() int32 {
	if mutant.PartialMinOne {
		return 1
	}
	return max(1, sb.objects()/partialShare)
}

func (c *Cache) head(sb *superblock) **superblock {
	l := &c.lists[sb.class]
	if sb.list == listPartial {
		return &l.partial
	}
	return &l.full
}

func (c *Cache) unlink(sb *superblock) {
	if sb.list != listPartial && sb.list != listFull {
		sb.list = listNone
		return
	}
	if sb.prev != nil {
		sb.prev.next = sb.next
	} else {
		*c.head(sb) = sb.next
	}
	if sb.next != nil {
		sb.next.prev = sb.prev
	}
	if !mutant.UnlinkKeepsLinks {
		sb.prev, sb.next = nil, nil
	}
	sb.list = listNone
}

func (c *Cache) moveTo(sb *superblock, list uint8) {
	if sb.list == list {
		return
	}
	c.unlink(sb)
	sb.list = list
	h := c.head(sb)
	sb.next = *h
	if sb.next != nil {
		sb.next.prev = sb
	}
	*h = sb
}

// release returns an empty owned superblock, already unlinked, to the pool.
func (c *Cache) release(sb *superblock) {
	if !mutant.StaleOwner {
		c.invalidate(sb) // CACHE-COHERENT: the owner drops its own entry
	}
	yield(YieldReleaseLock)
	c.a.lock()
	defer c.a.mu.Unlock() // also on a panic (a refalloc_check assertion): Close must not hang
	if mutant.RerouteBeforeRelease {
		c.a.reroute(c)
	}
	c.a.releaseLocked(c, sb)
	if sb.notified.Load() && !mutant.ReleaseNoReroute && !mutant.RerouteBeforeRelease {
		// LIFECYCLE: a remote free announced sb on c's stack after c last
		// drained it, and c collected the free some other way (Flush's walk
		// of its superblocks, a group's collection). sb leaves c marked
		// notified: until c drains again, no free into its next small period
		// announces it, and if c goes idle nothing ever collects those.
		// Forward c's stack now, as a notify that finds the owner changed does.
		c.a.reroute(c)
	}
}

// refill gives class k a new held group: from the current superblock, then from
// remote frees collected, then a partial superblock, an orphan, the pool.
func (c *Cache) refill(k int) error {
	cc := &c.cls[k]
	if cc.sb != nil && c.takeGroup(k) {
		return nil
	}
	c.drainNotify()
	if cc.sb != nil && !mutant.RefillNoRetake && c.takeGroup(k) {
		return nil
	}
	for retried := false; ; retried = true {
		sb := c.lists[k].partial
		if sb == nil {
			c.fileCurrent(k) // full: acquire orphans it with the others (LIFECYCLE)
			yield(YieldRefillAcquire)
			sb = c.a.acquire(c, k)
		}
		if sb == nil && !mutant.NoSparseRefill && !(mutant.SparseOnlyFirst && retried) && !(mutant.SparseAfterFlush && !retried) {
			// OOM-REAL: nothing outside holds a free object of class k, or
			// memory for a superblock: take one of ours with fewer free
			// objects than partialMin.
			sb = c.sparse(k)
		}
		if sb != nil {
			c.setCurrent(k, sb)
			// A superblock acquire orphaned (orphanFull) may have been pushed
			// onto our stack after the drain above: forward it (LIFECYCLE).
			if !mutant.RefillNoDrain {
				c.drainNotify()
			}
		} else if !retried && !mutant.OOMNoFlush {
			// OOM-REAL: before giving up, give back what this cache holds in
			// every class and release its empty superblocks, so that frees
			// make room for any class.
			c.flush()
			continue
		} else {
			return ErrOutOfMemory
		}
		if c.takeGroup(k) {
			return nil
		}
	}
}

// sparse returns one of c's superblocks of class k with a free object, not
// partial (fewer than partialMin), or nil.
func (c *Cache) sparse(k int) *superblock {
	for sb := c.lists[k].full; sb != nil; sb = sb.next {
		if sb.nfree+sb.localFreed > 0 || mutant.SparseEmpty {
			return sb
		}
	}
	return nil
}

// takeGroup moves the next group of free objects of the current superblock into
// the held group and credits exactly that many allocations (STATS-LEAD).
func (c *Cache) takeGroup(k int) bool {
	cc := &c.cls[k]
	sb := cc.sb
	rs := sb.remote.Load()
	g := sb.nextGroup()
	if g < 0 {
		return false // remote frees, if any, wait for drainNotify
	}
	// Collect the group's remote frees first: a pending bit on a free object
	// is a double free, and must not survive into the held group.
	n := c.a.collectWord(c, cc, sb, rs, int(g))
	if !mutant.TakeGroupUnpublished { // STATS-EXACT
		c.publishFrees(k, n)
	}
	c.take(k, rs, g)
	if checks {
		c.checkLead(k)
	}
	return true
}

// takeGroupPinned is refill's first step, takeGroup, for the front's pinned
// path (front_pinned.go), which must not block: it takes the current
// superblock's next group only when nothing is pending on it (collecting could
// find a double free, whose report takes the queue's lock) and debug mode is
// off, and otherwise reports false having changed nothing. The caller checks
// STATS-LEAD.
func (c *Cache) takeGroupPinned(k int) bool {
	cc := &c.cls[k&(clsSlots-1)]
	sb := cc.sb
	if sb == nil || c.a.debug || c.a.guard.sampled && !mutant.PinnedSampled {
		return false // poisoning or a sampled allocation may block
	}
	rs := sb.remote.Load()
	g := sb.nextGroup()
	if g < 0 || uint32(rs.w[g].Load()) != 0 && !mutant.PinnedTakePending {
		return false
	}
	c.take(k, rs, g)
	return true
}

// nextGroup is the group refill takes next, or -1: the first with a free
// object from the cursor on, among the groups that were handed out before while
// any of them has one, and only then the first fresh group. The objects at and
// above zeroedFrom were never handed out, so their pages may never have been
// touched: a superblock whose live set stays small (larson's 8-byte class, 357
// live objects in a superblock of 8192) reuses the pages it dirtied instead of
// sweeping the cursor through all 64 KiB of them, faulting every page in
// (MEM-ACCOUNT: Committed is the superblock, the kernel's RSS only what was
// touched). The order changes nothing else: every group returned has a free
// object, and -1 means none has.
func (sb *superblock) nextGroup() int32 {
	ng := int32(sb.groups())
	if sb.nfree+sb.localFreed == 0 || mutant.NextGroupNFree && sb.nfree <= 0 {
		// CONSERVE: the free bits number nfree+localFreed; a refill whose
		// current superblock ran out looks here twice before it moves on
		// (before and after drainNotify), and scanning every group to find
		// none cost larson 8-1000 a third of its refill time.
		return -1
	}
	// Every object at or above zeroedFrom is free (never taken), so the free
	// bits below it number nfree+localFreed minus those above.
	if dg := (sb.zeroedFrom + 31) / 32; dg < ng && !mutant.FreshFirst {
		if sb.nfree+sb.localFreed > sb.objects()-sb.zeroedFrom {
			start := sb.cursor
			if start >= dg {
				start = 0
			}
			for j := int32(0); j < dg-b2i(mutant.DirtyScanShort); j++ {
				g := start + j
				if g >= dg {
					g -= dg
				}
				if sb.free[g] != 0 {
					return g
				}
			}
		}
		if sb.free[dg] != 0 {
			return dg
		}
	}
	for j := int32(0); j < ng-b2i(mutant.NextGroupShort); j++ { // MEM-ACCOUNT, OOM-REAL: every group, the one before the cursor too
		g := sb.cursor + j
		if g >= ng {
			g -= ng
		}
		if sb.free[g] != 0 {
			return g
		}
	}
	return -1
}

// take moves the free objects of group g of class k's current superblock into
// the held group and credits exactly that many allocations (STATS-LEAD). Only
// free bits become held (NO-OVERLAP: a live object is never handed out again;
// CONSERVE: each object moves from one place to one); the caller has
// collected the group's remote frees, or seen none pending.
func (c *Cache) take(k int, rs *remoteSet, g int32) {
	cc := &c.cls[k]
	sb := cc.sb
	ng := int32(sb.groups())
	b := sb.free[g]
	fresh := g*32 >= sb.zeroedFrom
	var n0 int32
	if mutant.GuardCutCredit {
		n0 = popcount(b)
	}
	if c.a.guard.sampled {
		b = c.guardLimit(k, b)
	}
	n := popcount(b)
	if mutant.GuardCutCredit {
		n = n0
	}
	sb.free[g] &^= b
	if rest := sb.free[g]; rest != 0 && fresh && c.a.debug {
		// The group is counted as maybe dirty from now on (zeroedFrom):
		// in debug mode its free objects must then hold poison.
		c.a.poisonObjects(sb, int(g), rest)
	}
	// nfree may go below zero: bits of localFreed are taken too, and are
	// folded in at the next publishLocal; nfree+localFreed stays the count.
	sb.nfree -= n
	sb.cursor = g + 1
	if sb.cursor == ng {
		sb.cursor = 0
	}
	size := uint32(spec.ClassSize(k))
	cc.bits, cc.group, cc.size = b, g, size
	cc.base = unsafe.Add(c.a.sbAddr(sb), uintptr(g)*32*uintptr(size))
	cc.rw = &rs.w[g]
	if c.a.debug {
		cc.rw = alwaysPending
	}
	cc.needzero = g*32 < sb.zeroedFrom
	if mutant.ZeroedFromLower {
		sb.zeroedFrom = min((g+1)*32, sb.objects())
	} else {
		sb.zeroedFrom = max(sb.zeroedFrom, min((g+1)*32, sb.objects()))
	}
	credit := n // STATS-LEAD: the transfer, never the capacity
	if mutant.CapacityCredit {
		credit = min(32, sb.objects()-g*32)
	}
	c.creditAllocs(k, credit)
}

// setCurrent makes sb the current superblock of class k and files the old one.
// The held group is empty.
func (c *Cache) setCurrent(k int, sb *superblock) {
	cc := &c.cls[k]
	old := cc.sb
	c.unlink(sb)
	sb.list = listCurrent
	sb.limit = publishBatch
	cc.sb, cc.bits, cc.rw = sb, 0, nil
	if old != nil && old != sb {
		old.list = listNone
		c.publishLocal(old)
	}
}

// fileCurrent files class k's current superblock, which has no free group
// left, on its owner's full list (LIFECYCLE), so that acquire orphans it with
// the class's other full superblocks.
func (c *Cache) fileCurrent(k int) {
	cc := &c.cls[k]
	if old := cc.sb; old != nil && !mutant.KeepFull {
		cc.sb, cc.bits, cc.rw = nil, 0, nil
		old.list = listNone
		c.publishLocal(old)
	}
}

// adoptOnFree makes c the owner of sb if sb is an orphan, so that this free and
// the ones after it are local: a goroutine that takes over another's objects
// (larson's successors) takes over their superblocks as it frees into them,
// instead of freeing into orphans remotely until a refill happens to adopt
// them. It adopts only the period gen, rs of sb that the caller read and
// judged the address in (FREE-INVALID: a free the header of a later period
// refuses must not adopt that period's orphan first). It reports whether the
// caller must read the header again: it adopted, or sb's period ended.
func (c *Cache) adoptOnFree(sb *superblock, gen uint32, rs *remoteSet) bool {
	if sb.owner.Load() != nil {
		return false
	}
	yield(YieldAdoptLock)
	if ok, stale := c.a.adopt(c, sb, gen, rs); !ok {
		return stale
	}
	c.invalidate(sb) // CACHE-COHERENT: a "not mine" entry would now be wrong
	yield(YieldAdoptCollect)
	c.collect(sb) // files it on c's lists (or releases it, if all is free)
	return true
}

// adopt makes c the owner of sb if sb is still an orphan in the period gen,
// rs; stale: it is an orphan of a later period.
func (a *Allocator) adopt(c *Cache, sb *superblock, gen uint32, rs *remoteSet) (ok, stale bool) {
	a.lock()
	defer a.mu.Unlock()
	// Owner first: only under a.mu does it leave nil, and while it is nil the
	// list field is a.mu's; once it is not, list is its owner's, not ours to read.
	if sb.owner.Load() != nil || sb.list != listOrphan { // adopted meanwhile, or pooled
		return false, false
	}
	// FREE-INVALID, CACHE-COHERENT: released and carved again since the
	// caller read the header (a reused remote set looks the same): not the
	// orphan the caller judged the address in. An orphan's period ends only
	// under a.mu, so this one is final while we hold it.
	// CACHE-COHERENT: the generation alone does not name a period, it comes
	// round again after a wrap, which gives the superblock a new remote set.
	if g, _, _ := unpackMeta(sb.meta.Load()); (g != gen || sb.remote.Load() != rs && !mutant.AdoptStaleSet) && !mutant.AdoptAnyPeriod && !mutant.AdoptStale {
		return false, true
	}
	a.unlinkOrphan(sb)
	a.counts.orphaned--
	sb.ownerFreed = !mutant.AdoptNotOwnerFreed // it adopts by freeing into it
	sb.owner.Store(c)
	return true, false
}

// drainOrphans collects the remote frees that landed in orphans.
func (a *Allocator) drainOrphans(c *Cache) {
	a.lock()
	defer a.mu.Unlock()
	a.drainOrphanNotify(c)
}

// acquire finds class k a superblock outside c: an orphan with partialMin
// free objects, one from the pool, or else an orphan with any free object
// (OOM-REAL).
func (a *Allocator) acquire(c *Cache, k int) *superblock {
	a.lock()
	defer a.mu.Unlock()
	if !mutant.OrphanFullLast {
		a.orphanFull(c, k)
	}
	if !mutant.AcquireNoOrphanDrain { // LIFECYCLE: an orphan's remote frees count before adoptOrphan looks
		a.drainOrphanNotify(c)
	}
	sb := a.adoptOrphan(c, k, !mutant.AdoptAnyFirst)
	if sb == nil {
		sb = a.acquireSmall(c, k)
	}
	if sb == nil && !mutant.NoSparseAdopt {
		sb = a.adoptOrphan(c, k, false)
	}
	if mutant.OrphanFullLast {
		a.orphanFull(c, k)
	}
	if sb != nil && !mutant.AcquireNoInvalidate {
		c.invalidate(sb) // CACHE-COHERENT: a "not mine" entry would now be wrong
	}
	return sb
}

// orphanFull makes c's full superblocks of class k orphans, as Close does
// (LIFECYCLE): a cache that goes idle after filling superblocks (larson's
// main goroutine, which allocates the initial objects that the workers then
// free) would otherwise keep them for good, every object freed remotely and
// pending, since only an owner collects and an idle owner never does. As
// orphans, the first free into one adopts it, and its free objects are
// reused (xmalloc-test's consumer adopts its producer's superblocks, and its
// frees become local). A full superblock holds nothing to hand out, so nothing
// is lost by giving it up; it happens under the lock the acquisition takes
// anyway. One the owner has freed into since it took it (ownerFreed) stays:
// it will be partial again, and adopting it back would cost the owner the
// central lock. Under a.mu.
func (a *Allocator) orphanFull(c *Cache, k int) {
	for sb := c.lists[k].full; sb != nil; {
		next := sb.next
		// A superblock on the full list may hold free objects, fewer than
		// partialMin, some of them freed by the owner and not yet published
		// (relist's limit): those are frees into it, so it stays, and they
		// are published and its limit set anew from the folded count
		// (STATS-EXACT: a Flush does not reach an orphan; LIFECYCLE: a
		// limit left counting from before the fold would let every acquire
		// restart it, and the superblock never become partial).
		// Not publishLocal: under a.mu it must not relist (release locks).
		if sb.localFreed > 0 && !mutant.OrphanFullUnfolded {
			c.publishFrees(k, sb.foldFreed())
			sb.ownerFreed = true
			if !mutant.OrphanFullLimit {
				sb.limit = sb.fullLimit()
			}
		}
		// One the owner frees into will be partial again soon, and adopting
		// it back would cost the owner the central lock: it stays.
		if !sb.ownerFreed || mutant.OrphanFreedFull {
			if !mutant.OrphanFullEntry {
				c.invalidate(sb) // CACHE-COHERENT: the owner drops its own entry; its next free misses and adopts
			}
			c.unlink(sb)
			sb.owner.Store(nil)
			a.linkOrphan(sb)
			a.counts.orphaned++
		}
		sb = next
	}
}

// Flush gives back the objects the cache holds, collects remote frees, publishes
// its counters and releases its empty superblocks. After every cache has
// flushed, Stats is exact (STATS-EXACT).
func (c *Cache) Flush() {
	if c.closed && !mutant.FlushClosed || c.a.closed.Load() && !mutant.FlushAfterClose { // REFINES: nothing after Close
		return
	}
	c.flush()
	c.deliver()
}

func (c *Cache) flush() {
	if !mutant.CloseMisses {
		c.ev.sbcFills.Add(uint64(c.misses))
	}
	c.misses = 0
	for k := range spec.NumClasses {
		cc := &c.cls[k]
		if cc.bits != 0 {
			n := popcount(cc.bits)
			if c.a.debug { // they may be fresh zeros: free objects hold poison
				g := int(cc.group)
				if mutant.PoisonWrongGroup && g+1 < cc.sb.groups() {
					g++
				}
				c.a.poisonObjects(cc.sb, g, cc.bits)
			}
			cc.sb.free[cc.group] |= cc.bits
			cc.sb.nfree += n
			cc.bits = 0
			if c.a.guard.sampled && !mutant.GuardFlushLeft { // not handed out: they do not count towards the next sample
				c.guardLeft[k] += n
			}
			if !mutant.NoFlushDebit {
				c.debitAllocs(k, n) // STATS-LEAD: Flush subtracts what it gives back
			}
		}
	}
	if !mutant.FlushNoDrain {
		c.drainNotify() // what is on the stack and no longer c's (orphaned meanwhile) goes on (OOM-REAL)
	}
	for k := range spec.NumClasses {
		// Collect every owned superblock, not only the notified ones: a
		// notification can be parked on the stack of a superblock's previous
		// owner for a while.
		l := &c.lists[k]
		heads := []*superblock{l.partial, l.full}
		if mutant.FlushPartialOnly {
			heads = heads[:1]
		}
		for _, head := range heads {
			for sb := head; sb != nil; {
				next := sb.next // before collect: it may relist or release sb
				c.collect(sb)
				if mutant.FlushWalkNextLate {
					next = sb.next
				}
				sb = next
			}
		}
		if sb := c.cls[k].sb; sb != nil {
			c.collect(sb)
			if sb.empty() {
				c.cls[k].sb, c.cls[k].rw = nil, nil
				sb.list = listNone
				c.release(sb)
			}
		}
	}
	if !mutant.FlushNoOrphans {
		c.a.drainOrphans(c)
	}
}

// Close flushes the cache and hands its superblocks over: they become orphans,
// remote frees still land in them, and a later refill of any cache adopts them.
// Every later call on the cache returns ErrClosed.
func (c *Cache) Close() error {
	if c.closed || c.a.closed.Load() {
		return ErrClosed
	}
	c.flush()
	c.closed = true
	a := c.a
	var sealed *superblock
	if mutant.CloseSealFirst { // LIFECYCLE: the stack sealed while c still owns its superblocks
		sealed = c.notify.Swap(closedStack)
		yield(YieldCloseOrphaned)
		a.orphanAll(c)
	} else {
		a.orphanAll(c)
		yield(YieldCloseOrphaned)
		// The owners are nil now; close the stack and forward what was on it.
		sealed = c.notify.Swap(closedStack)
	}
	for sb := sealed; sb != nil; {
		next := sb.nextNotify.Load()
		if !mutant.CloseNotifiedKept {
			sb.notified.Store(false) // LIFECYCLE: or forward's notify finds the mark and pushes it nowhere
		}
		a.forward(sb)
		if mutant.CloseNextLate { // LIFECYCLE: the link read after forward's push overwrote it
			next = sb.nextNotify.Load()
		}
		sb = next
	}
	ways := c.sbc[:]
	if mutant.CloseWaysShort {
		ways = c.sbc[:c.wayMask]
	}
	for i := range ways {
		c.sbc[i] = sbEntry{key: noKey}
	}
	a.retire(c)
	c.deliver()
	return nil
}

// orphanAll makes every superblock c owns an orphan. Its owner goes nil first:
// a remote free that reads it then pushes to the orphans' stack.
func (a *Allocator) orphanAll(c *Cache) {
	a.lock()
	defer a.mu.Unlock()
	for k := range spec.NumClasses {
		l := &c.lists[k]
		heads := []*superblock{c.cls[k].sb, l.partial, l.full}
		if mutant.OrphanAllNoCurrent { // LIFECYCLE: the current superblock stays with the closed cache
			heads = heads[1:]
		}
		for _, head := range heads {
			for sb := head; sb != nil; {
				next := sb.next
				if sb.list == listCurrent {
					next = nil
				}
				sb.prev, sb.next, sb.list = nil, nil, listNone
				sb.owner.Store(nil)
				a.linkOrphan(sb)
				a.counts.orphaned++
				sb = next
			}
		}
		c.cls[k] = classCache{}
		*l = classLists{}
	}
}

func (c *Cache) publishFrees(k int, n int32) {
	if ClassCounters && n != 0 {
		c.pub[k].frees.Add(uint64(n))
	}
}

func (c *Cache) creditAllocs(k int, n int32) {
	if mutant.CounterWrap {
		c.pub[k].allocs.Store(uint64(uint16(c.pub[k].allocs.Load() + uint64(n))))
		return
	}
	if ClassCounters {
		c.pub[k].allocs.Add(uint64(n))
	}
}

func (c *Cache) debitAllocs(k int, n int32) {
	if ClassCounters {
		c.pub[k].allocs.Add(-uint64(n))
	}
}
