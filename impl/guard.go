// Guard mode: freed memory made inaccessible and kept out of reuse for a bounded
// quarantine, so that a read or write after free faults at the access
// (GUARD-FAULT); the fault turned into a report with both stacks.

package impl

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// GuardOptions configures guard mode (Options.Guard; GUARD-FAULT in SPEC.md).
//
// In guard mode every large object, and one small allocation in SampleRate,
// is guarded: a sampled small object gets a superblock of its own (the object
// at its start, its capacity still the class's usable size), and a large object
// is a run of superblocks anyway. When a guarded object is freed its
// superblocks are made inaccessible (mprotect PROT_NONE), given back to the OS
// (madvise) and kept out of reuse in a quarantine, oldest released first. A
// read or write of a freed guarded object while it is in quarantine faults at
// the access: with debug.SetPanicOnFault(true) the faulting goroutine panics,
// and Allocator.Explain (or CatchFaults, which does both) turns the panic into
// a UseAfterFreeError naming the address, the object, the stack that allocated
// it and the stack that freed it. Without SetPanicOnFault the program dies with
// "unexpected fault address" and the faulting stack.
//
// What it costs (BenchmarkGuard, BenchmarkGuardMemory; 2 shared vCPUs): a
// guarded alloc+free pair takes 7-11 µs (protect, decommit, restore at the
// quarantine's release, the page fault of the first touch, and the two
// stacks recorded) against 15-50 ns unguarded; on average over guarded and
// unguarded ones, a 16- to 4096-byte pair takes 28-61 ns at SampleRate 1000
// (the default) and 115-170 ns at 100. A live guarded small object holds a
// page of memory (4.1 KB resident for a 64-byte object, against 64 bytes)
// and a superblock of address space (counted in Stats.InUse); quarantined
// memory costs address space, not memory: it is given back to the OS, and
// after the frees the resident memory is where it was. A large object in
// guard mode pays the protect and decommit on every free (100 KB: 10 µs a
// pair, against 0.7 µs) and the page faults on every reuse. Off, guard mode
// costs nothing: the fast paths do not test for it (their machine code is
// the same), and a refill tests one flag.
//
// Under the Go-heap backend (-race builds, Options.HeapBackend) memory cannot
// be protected: guard mode samples and quarantines the same way, but poisons
// quarantined memory and verifies the poison when it leaves the quarantine,
// so a write after free is reported (WriteAfterFreeError) and a read is not.
// Allocator.GuardProtects says which.
type GuardOptions struct {
	// Enabled turns guard mode on. The other fields must be zero without it.
	Enabled bool
	// SampleRate: on average one small allocation in SampleRate, in each class
	// and cache, is guarded; 1 guards every one. 0 means 1000; a negative
	// value guards no small object (large objects only). New rejects a
	// SampleRate above 1<<30.
	SampleRate int
	// QuarantineBytes bounds the address space of freed guarded objects kept
	// inaccessible (whole superblocks), rounded up to superblocks. 0 means a
	// quarter of the reservation, at most 1 GiB. A freed object larger than
	// the bound is not quarantined. New rejects a negative value or one above
	// 1 TiB (spec.MaxAlloc).
	QuarantineBytes int
	// QuarantineObjects bounds how many freed guarded objects are kept. 0
	// means 4096; New rejects a negative value. Each costs the kernel up to two memory mappings (VMAs) while
	// quarantined (Linux allows 65530 a process by default).
	QuarantineObjects int
}

// The defaults of GuardOptions.
const (
	defaultSampleRate        = 1000
	defaultQuarantineObjects = 4096
	maxQuarantineBytes       = 1 << 30
	maxSampleRate            = 1 << 30
)

// guard is guard mode's configuration, in the Allocator: read-only after New,
// and read by slow paths next to the other read-only fields.
type guard struct {
	on       bool   // guard mode
	sampled  bool   // small allocations are sampled (SampleRate > 0)
	protects bool   // the backend protects memory: an access after free faults
	rate     int32  // SampleRate
	maxSBs   uint32 // QuarantineBytes, in superblocks
	maxObjs  int    // QuarantineObjects
}

// quarantine is guard mode's state, under a.mu.
type quarantine struct {
	q        []quarantined // the quarantine, oldest first
	qsbs     uint32        // superblocks in q
	recent   [recentLen]quarantined
	nrecent  int    // objects ever released from q; recent holds the last recentLen
	allocs   uint64 // small allocations guarded
	live     uint64 // live guarded small objects
	bytes    uint64 // their usable bytes
	released uint64 // objects released from the quarantine
}

// recentLen: the quarantine records Explain still finds after their release
// (a fault explained while other goroutines free may lose that race).
const recentLen = 64

// quarantined is a freed guarded object: its superblocks [idx, idx+n), what
// it was, and where it was allocated and freed (sites IDs).
type quarantined struct {
	idx, n      uint32
	class       int // small class, or spec.Large
	usable      int
	alloc, free uint32
	// stuck: the kernel refused to restore its access at the last attempt
	// to release it, or after a protection it refused partway (Snapshot's
	// Quarantined.Stuck).
	stuck bool
}

// guardMark is the class byte of a quarantined or pooled superblock whose
// last life was a guarded object of small class k (stalePoolFree: its start
// is a double free). Classes are below 0x80, largeMark and noClass above it.
func guardMark(k int) uint8 { return uint8(0x80 + k) }

func isGuardMark(b uint8) (int, bool) {
	if b >= 0x80 && b < 0x80+spec.NumClasses {
		return int(b - 0x80), true
	}
	return 0, false
}

var _ [0x80 - spec.NumClasses]struct{}
var _ [largeMark - (0x80 + spec.NumClasses)]struct{}

// initGuard validates opt.Guard and fills a.guard; reserve is the
// reservation's size in bytes.
func (a *Allocator) initGuard(opt GuardOptions, reserve int) error {
	if !opt.Enabled {
		if opt != (GuardOptions{}) {
			return errors.New("refalloc: Options.Guard has settings but Enabled is false")
		}
		return nil
	}
	switch {
	case opt.SampleRate > maxSampleRate-int(b2i(mutant.SampleRateBound)):
		return fmt.Errorf("refalloc: Options.Guard.SampleRate %d is above %d", opt.SampleRate, maxSampleRate)
	case opt.QuarantineBytes < 0 || opt.QuarantineBytes > spec.MaxAlloc-int(b2i(mutant.QuarantineMaxExcl)):
		return fmt.Errorf("refalloc: Options.Guard.QuarantineBytes %d out of range [0, %d]", opt.QuarantineBytes, spec.MaxAlloc)
	case opt.QuarantineObjects < 0:
		return fmt.Errorf("refalloc: Options.Guard.QuarantineObjects %d is negative", opt.QuarantineObjects)
	}
	g := &a.guard
	g.on, g.protects = true, a.be.canProtect()
	rate := opt.SampleRate
	if rate == 0 {
		rate = defaultSampleRate
	}
	if rate > 0 {
		g.sampled, g.rate = true, int32(rate)
	}
	g.maxObjs = opt.QuarantineObjects
	if g.maxObjs == 0 {
		g.maxObjs = defaultQuarantineObjects
	}
	qb := opt.QuarantineBytes
	if qb == 0 {
		qb = min(maxQuarantineBytes, reserve/4)
	}
	sbs := spec.LargeSuperblocks(qb) // rounded up
	if mutant.QuarBytesFloor {
		sbs = qb >> spec.SuperblockShift
	}
	g.maxSBs = uint32(max(1, sbs))
	return nil
}

// GuardProtects reports whether guard mode is on and freed guarded memory is
// inaccessible, so that a read or write after free faults (GUARD-FAULT); it is
// false under the Go-heap backend, where guard mode only poisons.
func (a *Allocator) GuardProtects() bool {
	return a.guard.on && (a.guard.protects || mutant.GuardProtectsOn)
}

// guardInterval draws how many small allocations of a class come before the
// next sampled one, counting the sampled one: uniform on [1, 2·SampleRate-1],
// so one in SampleRate on average, and a pattern of the program's does not
// line up with a fixed period. The generator is per cache and seeded by its
// ID: a run is reproducible.
func (c *Cache) guardInterval() int32 {
	r := c.a.guard.rate
	if r <= 1 {
		return 1
	}
	x := c.guardRng // xorshift64*
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	c.guardRng = x
	return 1 + int32((x*2685821657736338717>>33)%uint64(2*r-1))
}

// initSampling starts each class's countdown. NewCache, guard mode with
// sampling only.
func (c *Cache) initSampling() {
	c.guardRng = uint64(c.id)*0x9e3779b97f4a7c15 | 1
	for k := range c.guardLeft {
		c.guardLeft[k] = c.guardInterval() - 1
		if mutant.GuardFirstSoon {
			c.guardLeft[k] = -c.guardLeft[k]
		}
	}
}

// guardLimit cuts b, the free objects refill is about to take into the held
// group of class k, to the allocations left before the next sampled one, and
// counts them off (GUARD-FAULT: when the held group runs out, the allocation
// that finds it empty is the sampled one; the fast path never knows). At
// least one object: a sampled allocation that found no superblock for itself
// is served here.
func (c *Cache) guardLimit(k int, b uint32) uint32 {
	left := c.guardLeft[k]
	if popcount(b) <= left {
		c.guardLeft[k] = left - popcount(b)
		return b
	}
	var take uint32
	for i := max(left, 1); i > 0 && b != 0; i-- {
		low := b & -b
		take |= low
		b &^= low
	}
	c.guardLeft[k] = max(0, left-popcount(take))
	return take
}

// allocGuarded serves a sampled small allocation of class k from a superblock
// of its own (GUARD-FAULT): the object at its start, capacity the class's
// usable size (ZEROED; ALIGN: the start of a superblock is aligned to
// anything a class offers). It returns nil if no superblock is free even
// after releasing the quarantine; the caller then serves the request as usual.
func (c *Cache) allocGuarded(n, k int) []byte {
	a := c.a
	site := a.sites.record()
	size := spec.ClassSize(k)
	a.lock()
	// Unlocked also on a panic (a refalloc_check assertion): a held central
	// lock would hang every later call, Close too. OnError does not run here:
	// what the release of the quarantine finds is queued.
	locked := true
	defer func() {
		if locked {
			a.mu.Unlock()
		}
	}()
	i, ok := a.takeRunEvict(1)
	if !ok {
		return nil
	}
	sb := a.header(i)
	if a.takeDirty(sb) {
		a.purgeOnGrowth(1)
	}
	b := unsafe.Slice((*byte)(a.sbAddr(sb)), size)
	if sb.dirty {
		// Before the header says guard: until then a stale free of its start
		// is judged by the pool's mark and writes nothing, so the check and
		// the zeroing write into no object a free took back (a fault, here).
		if a.debug {
			freed := sb.site // the site of the object freed here
			if mutant.GuardVerifyNewSite {
				freed = site
			}
			wk := k // DEBUG-POISON: the report names the object's class with its size
			if mutant.GuardedWAFLarge {
				wk = spec.Large
			}
			a.verifyLargePoison(wholeRun(b, 1), []bool{true}, []uint32{freed}, wk) // its whole superblock, as its free poisons it
		}
		clear(b) // ZEROED
	}
	sb.dirty = true
	gen, _, _ := unpackMeta(sb.meta.Load())
	sb.runLen, sb.usable, sb.site = 1, uintptr(size), site
	sb.reserved = c.reserving && !mutant.GuardedNoReserve // FREE-DOUBLE: a moving Realloc's (Cache.Realloc)
	c.gotReserved = sb.reserved
	// STATS-LEAD: counted at the event, never held, and before the header
	// says guard: from then on a free of its start (a stale pointer, racing
	// this allocation) frees it and is published at once (freeGuarded), and
	// Stats must not count that free without this allocation.
	if !mutant.GuardCreditLate {
		c.creditAllocs(k, 1)
	}
	sb.meta.Store(packMeta(gen, stateGuard, uint8(k)))
	a.counts.guard++
	a.quar.allocs++
	a.quar.live++
	a.quar.bytes += uint64(size)
	locked = false
	a.mu.Unlock()
	yield(YieldGuardMade)
	if mutant.GuardCreditLate {
		c.creditAllocs(k, 1)
	}
	c.guardLeft[k] = c.guardInterval() - 1
	return b[:n]
}

// freeGuarded frees the live guarded small object of class k at the start of
// sb for cache c, site being where it was freed: counted at the event, then
// quarantined. Under a.mu.
func (a *Allocator) freeGuarded(c *Cache, sb *superblock, k int, site uint32) error {
	a.quar.live--
	a.quar.bytes -= uint64(sb.usable)
	a.counts.guard--
	c.publishFrees(k, 1) // STATS-LAG: exact at the event
	if !a.quarantine(sb, 1, k, site) {
		if a.debug {
			n := spec.SuperblockSize
			if mutant.UnprotectPoisonShort {
				n = int(sb.usable)
			}
			poison(unsafe.Slice((*byte)(a.sbAddr(sb)), n))
		}
		mark := guardMark(k) // FREE-DOUBLE: a free of its start again (stalePoolFree)
		if mutant.UnprotectNoMark {
			mark = noClass
		}
		a.endRun(sb, 1, statePool, mark)
		a.putRun(sb.idx, 1)
		if !mutant.UnprotectNotPooled {
			a.pooled(sb.idx, 1)
		}
	}
	return nil
}

// quarantine takes the freed guarded object whose m superblocks start at head
// (class k, or spec.Large) out of reuse (GUARD-FAULT): the oldest objects
// released first while the bounds would be exceeded, then its memory made
// inaccessible and given back to the OS (or, when the backend cannot protect,
// poisoned). It reports false, having done nothing to the object, if the
// object is larger than the bound, the oldest object that had to make room
// could not be released, or the protection failed: the caller pools it as
// usual. Under a.mu.
func (a *Allocator) quarantine(head *superblock, m uint32, k int, site uint32) bool {
	g := &a.guard
	if !g.on || m > g.maxSBs || mutant.QuarantineExactBound && m == g.maxSBs {
		return false
	}
	// GUARD-FAULT: the quarantine is bounded. Room is made before the object
	// is protected: when the oldest object cannot leave (the kernel refuses
	// to make its memory accessible again) there is no room, and this one is
	// pooled as one the kernel refuses to protect, rather than quarantined
	// past the bound (TestQuarantineBoundedWhenReleaseFails).
	for (a.quar.qsbs+m > g.maxSBs || len(a.quar.q)+1 > g.maxObjs) && !mutant.QuarantineUnbounded {
		if !a.evictOldest() {
			if mutant.QuarantineOverBound { // the object quarantined past the bound
				break
			}
			return false
		}
	}
	p, n := a.sbAddr(head), uintptr(m)<<spec.SuperblockShift
	stuck := false
	if g.protects {
		if !mutant.GuardNoProtect && a.be.protect(p, n, false) != nil {
			// E.g. the kernel's mapping limit: no quarantine for this one. But
			// mprotect changes one kernel mapping after another, so a refusal
			// partway may have made the first pages inaccessible: access is
			// restored before the caller pools (and in debug mode poisons)
			// the object. If even that is refused, it stays quarantined,
			// stuck, until an eviction restores it (GUARD-FAULT, INTEGRITY:
			// never pooled with pages that fault).
			if mutant.PartwayPooled || a.be.protect(p, n, true) == nil || mutant.PartwayStuckPooled {
				return false
			}
			stuck = true
		}
		// Decommit: quarantined memory costs address space, not memory, and it
		// comes back fresh (MEM-ACCOUNT, ZEROED).
		if a.be.decommit(p, n) == nil {
			for j := head.idx; j < head.idx+m; j++ {
				if sb := a.lookup(uintptr(j)); sb.dirty {
					sb.dirty = false
					a.counts.committed--
				}
			}
		}
	} else {
		poison(unsafe.Slice((*byte)(p), a.poisoned(n, int(head.usable))-uintptr(b2i(mutant.QuarPoisonShort))))
	}
	mark := uint8(largeMark)
	if k != spec.Large && !mutant.QuarGuardMarkLarge { // FREE-DOUBLE: a free of its start again names its class
		mark = guardMark(k)
	}
	a.endRun(head, m, stateQuarantine, mark)
	a.quar.q = append(a.quar.q, quarantined{idx: head.idx, n: m, class: k, usable: int(head.usable), alloc: head.site, free: site, stuck: stuck})
	a.quar.qsbs += m
	return true
}

// evictOldest releases the oldest object of the quarantine that can be
// released to the pool: its memory made accessible again (fresh: it was
// decommitted) or, without protection, its poison verified (a write after
// free is reported). An object whose access the kernel refuses to restore
// stays, and the next oldest goes instead: one stuck object must not stop the
// quarantine from making room, nor the allocations that need its memory
// (GUARD-FAULT, OOM-REAL). It reports false if no object could be released.
// Under a.mu.
func (a *Allocator) evictOldest() bool {
	for i := range a.quar.q {
		if a.evict(i) {
			return true
		}
		if mutant.EvictStuckOldest {
			return false
		}
	}
	return false
}

// evict releases object i of the quarantine, as evictOldest says, or
// reports false if its access cannot be restored (it then stays). Under a.mu.
func (a *Allocator) evict(i int) bool {
	g := &a.guard
	e := a.quar.q[i]
	p, n := unsafe.Add(a.start, uintptr(e.idx)<<spec.SuperblockShift), uintptr(e.n)<<spec.SuperblockShift
	dirty := 0
	for j := e.idx; j < e.idx+e.n; j++ {
		if a.lookup(uintptr(j)).dirty {
			dirty++
		}
	}
	if g.protects {
		if !mutant.GuardNoProtect && a.be.protect(p, n, true) != nil {
			a.quar.q[i].stuck = !mutant.StuckUnmarked // OOM-REAL: it may stay past an out-of-memory
			return false
		}
		// DEBUG-POISON: the decommit failed: pooled dirty memory holds poison
		// (TestGuardDecommitRefusedPoolsPoison).
		if dirty > 0 && a.debug && !mutant.EvictDirtyNoPoison {
			poison(unsafe.Slice((*byte)(p), n))
		}
	} else {
		a.verifyQuarantined(p, a.poisoned(n, e.usable)-uintptr(b2i(mutant.QuarVerifyShort)), e)
	}
	for j := e.idx; j < e.idx+e.n; j++ {
		sb := a.lookup(uintptr(j))
		gen, _, mark := unpackMeta(sb.meta.Load())
		sb.meta.Store(packMeta(gen, statePool, mark))
	}
	if i == 0 || mutant.EvictWrongEntry && i == 1 { // GUARD-FAULT: the entry released, not the head
		a.quar.q[0] = quarantined{}
		a.quar.q = a.quar.q[1:]
	} else {
		a.quar.q = slices.Delete(a.quar.q, i, i+1)
	}
	a.quar.qsbs -= e.n
	a.quar.recent[a.quar.nrecent%recentLen] = e
	a.quar.nrecent++
	a.quar.released++
	a.putRun(e.idx, e.n)
	if !mutant.EvictNotPooled { // the dirty ones: fresh ones (decommitted) are not the pool's to decay
		a.pooled(e.idx, e.n)
	}
	return true
}

// takeRunEvict is takeRun, releasing the quarantine oldest first while no run
// of n superblocks is free (OOM-REAL: memory in quarantine is given up before
// the allocator says it has none). Under a.mu.
func (a *Allocator) takeRunEvict(n uint32) (uint32, bool) {
	for {
		if i, ok := a.takeRun(n); ok {
			return i, true
		}
		if !a.evictOldest() {
			return 0, false
		}
	}
}

// copyOut copies src, what a moving Realloc keeps of its b, into dst, its new
// object, in guard mode: under the central lock, so that a free racing the
// Realloc cannot protect either in the middle of the copy, and not at all if
// either is in quarantine already: b's free then fails the Realloc; a stale
// free that took the new object as soon as Alloc returned it leaves the caller
// a freed object, as it would any caller of Alloc. The allocator never reads
// or writes memory it made inaccessible.
func (a *Allocator) copyOut(dst, src []byte) {
	a.lock()
	defer a.mu.Unlock()
	if (mutant.CopyQuarantinedSrc || !a.quarantined(src)) && !a.quarantined(dst) {
		copy(dst, src)
	}
}

// quarantined reports whether any byte of b lies in a quarantined superblock.
func (a *Allocator) quarantined(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	if lo >= a.size {
		return false
	}
	hi := min(lo+uintptr(len(b))-1+uintptr(b2i(mutant.QuarantinedPastEnd)), a.size-1)
	for i := lo >> spec.SuperblockShift; i <= hi>>spec.SuperblockShift; i++ {
		if sb := a.lookup(i); sb != nil {
			if _, state, _ := unpackMeta(sb.meta.Load()); state == stateQuarantine {
				return true
			}
		}
	}
	return false
}

// endRun ends the life of the m superblocks starting at head (a large object
// or a guarded one): each takes the next generation (CACHE-COHERENT: it stops
// being large or guarded) and the state; the head keeps mark as its class
// byte, so that a free of its start is a double free. Under a.mu.
func (a *Allocator) endRun(head *superblock, m uint32, state, mark uint8) {
	for j := head.idx; j < head.idx+m; j++ {
		sb := a.header(j)
		gen, _, _ := unpackMeta(sb.meta.Load())
		k := uint8(noClass)
		if j == head.idx || mutant.EndRunMarkAll { // FREE-INVALID: the head alone keeps the mark
			k = mark
		}
		next, tag := nextGen(gen)
		if tag == deadTag && !mutant.GuardWrapNoRetire {
			sb.retire()
		}
		sb.meta.Store(packMeta(next, state, k))
	}
}

// poisoned is how much of a quarantined object's n bytes of superblocks
// guard mode poisons where it cannot protect: the object's usable bytes, or
// in debug mode all of them (DEBUG-POISON: a dirty pooled superblock holds
// poison throughout).
func (a *Allocator) poisoned(n uintptr, usable int) uintptr {
	if a.debug && !mutant.QuarPoisonUsable {
		return n
	}
	return min(n, uintptr(usable))
}

// verifyQuarantined checks, without protection, that a quarantined object's
// bytes still hold the poison its free left, and reports the first byte
// that does not (WriteAfterFreeError, counted in Stats.WriteAfterFrees).
// Then it poisons them again: the memory goes to the pool, where in debug
// mode it must hold poison throughout, and the next object there would find
// the write again and report it a second time (DEBUG-POISON: one write, one
// report; TestGuardHeapDebugWAFReportedOnce).
func (a *Allocator) verifyQuarantined(p unsafe.Pointer, n uintptr, e quarantined) {
	if off := notPoison(unsafe.Slice((*byte)(p), n)); off >= 0 {
		if !mutant.QuarRepoisonless {
			defer poison(unsafe.Slice((*byte)(p), n))
		}
		size, class := e.usable, e.class
		if mutant.GuardHeapSize {
			size = int(n)
		}
		if mutant.QuarWAFClass {
			class = spec.Large
		}
		site := e.alloc // GUARD-FAULT: where the freed object had been allocated
		if mutant.QuarWAFSiteFree {
			site = e.free
		}
		a.retiredWAF()
		if a.opt.OnError != nil {
			a.report(&WriteAfterFreeError{
				Addr: uintptr(p), Offset: off, Size: size, Class: class, Site: a.sites.format(site),
			})
		}
	}
}

// ErrUseAfterFree is the sentinel of a UseAfterFreeError.
var ErrUseAfterFree = errors.New("refalloc: read or write after free")

// UseAfterFreeError reports, in guard mode, an access to a freed guarded
// object: a fault at Addr, inside the object at Object (or the rest of its
// superblocks), with the stacks that allocated it, freed it and, when
// CatchFaults caught it, made the access (GUARD-FAULT).
type UseAfterFreeError struct {
	Addr   uintptr // the address of the access
	Object uintptr // the start of the freed object
	Offset int     // Addr - Object
	Size   int     // the object's usable size
	Class  int     // its size class, or spec.Large
	// AllocSite and FreeSite are the stacks that allocated and freed it
	// ("function\n\tfile:line" lines, refalloc's own frames left out).
	AllocSite, FreeSite string
	// AccessSite is the stack of the faulting access, when CatchFaults caught it.
	AccessSite string
	// Released: the object has left the quarantine since (the fault happened
	// while it was there; its memory may be in use again).
	Released bool
}

func (e *UseAfterFreeError) Error() string {
	var b strings.Builder
	what := fmt.Sprintf("the %d-byte object (class %d)", e.Size, e.Class)
	if e.Class == spec.Large {
		what = fmt.Sprintf("the %d-byte large object", e.Size)
	}
	where := fmt.Sprintf("byte %d of %s", e.Offset, what)
	if e.Offset >= e.Size+int(b2i(mutant.ExplainPastEnd)) {
		where = fmt.Sprintf("%d bytes past the end of %s", e.Offset-e.Size, what)
	}
	fmt.Fprintf(&b, "%v [%s]: %#x is %s at %#x, which was freed", ErrUseAfterFree, spec.RuleGuardFault, e.Addr, where, e.Object)
	if e.Released != mutant.UAFReleasedText { // GUARD-FAULT: the memory may be in use again
		b.WriteString(" (it has left the quarantine since)")
	}
	for _, s := range []struct{ what, stack string }{{"accessed", e.AccessSite}, {"freed", e.FreeSite}, {"allocated", e.AllocSite}} {
		if s.stack != "" {
			fmt.Fprintf(&b, "\n%s at:\n%s", s.what, strings.TrimRight(s.stack, "\n"))
		}
	}
	return b.String()
}

func (e *UseAfterFreeError) Unwrap() error { return ErrUseAfterFree }

// Explain turns what recover() returned after a fault into a report: if
// recovered is a runtime error with an address (the panic of a fault under
// debug.SetPanicOnFault) inside a freed guarded object of a, it returns the
// UseAfterFreeError with both stacks. A UseAfterFreeError (as CatchFaults
// panics with) is returned as it is. Anything else, or a fault elsewhere,
// gives false.
//
//	debug.SetPanicOnFault(true)
//	defer func() {
//		if e, ok := a.Explain(recover()); ok {
//			t.Fatal(e) // address, object, where it was allocated and freed
//		}
//	}()
func (a *Allocator) Explain(recovered any) (*UseAfterFreeError, bool) {
	if err, ok := recovered.(error); ok {
		var e *UseAfterFreeError
		if errors.As(err, &e) {
			return e, true
		}
	}
	f, ok := recovered.(interface{ Addr() uintptr })
	if !ok {
		return nil, false
	}
	return a.ExplainAddr(f.Addr())
}

// ExplainAddr is Explain for an address: the freed guarded object whose
// superblocks hold addr, while it is in quarantine (or among the last objects
// released from it).
func (a *Allocator) ExplainAddr(addr uintptr) (*UseAfterFreeError, bool) {
	if !a.guard.on || addr-a.base >= a.size || a.closed.Load() && !mutant.ExplainClosed {
		return nil, false
	}
	i := uint32((addr - a.base) >> spec.SuperblockShift)
	a.lock()
	var e quarantined
	found, released := false, false
	for _, q := range a.quar.q {
		if q.idx <= i && i < q.idx+q.n+uint32(b2i(mutant.ExplainPastRun)) {
			e, found = q, true
		}
	}
	for j := a.quar.nrecent - 1 + int(b2i(mutant.RecentFromNext)); !found && j >= max(0, a.quar.nrecent-recentLen); j-- {
		if q := a.quar.recent[j%recentLen]; q.idx <= i && (i < q.idx+q.n || mutant.RecentPastRun && i == q.idx+q.n) { // GUARD-FAULT
			e, found, released = q, true, !mutant.ExplainReleasedFlag
		}
	}
	a.mu.Unlock()
	if !found {
		return nil, false
	}
	start := a.base + uintptr(e.idx)<<spec.SuperblockShift
	return &UseAfterFreeError{
		Addr: addr, Object: start, Offset: int(addr - start), Size: e.usable, Class: e.class,
		AllocSite: a.sites.format(e.alloc), FreeSite: a.sites.format(e.free), Released: released,
	}, true
}

// CatchFaults makes a fault of the calling goroutine a panic
// (debug.SetPanicOnFault) and returns the function to defer, which restores
// the setting and, if the goroutine is panicking with a fault on a freed
// guarded object of a, turns the panic into a UseAfterFreeError, with the
// stack of the access too: report gets it and the goroutine returns from the
// deferring function normally; with report nil, the goroutine panics again
// with it. Any other panic goes on as it was.
//
//	defer a.CatchFaults(func(e *impl.UseAfterFreeError) { t.Error(e) })()
//
// The returned function must be deferred directly (recover works only there),
// by the goroutine that called CatchFaults; each goroutine that may touch freed
// memory needs its own.
func (a *Allocator) CatchFaults(report func(*UseAfterFreeError)) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old != mutant.CatchFaultsFlip)
		r := recover()
		if r == nil {
			return
		}
		e, ok := a.Explain(r)
		if !ok {
			panic(r)
		}
		if e.AccessSite == "" {
			e.AccessSite = accessSite()
		}
		if report == nil {
			panic(e)
		}
		report(e)
	}
}

// accessSite is the stack of a fault, from inside a deferred function of the
// panicking goroutine: the frames below runtime.sigpanic.
func accessSite() string {
	var pcs [64]uintptr
	n := runtime.Callers(1, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	below := false
	for {
		f, more := frames.Next()
		if below {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		below = below || f.Function == "runtime.sigpanic"
		if !more {
			break
		}
	}
	return b.String()
}

// guardStats fills s.Guard. Under a.mu.
func (a *Allocator) guardStats() GuardStats {
	q := &a.quar
	return GuardStats{
		Allocs: q.allocs, LiveObjects: q.live, LiveBytes: q.bytes, Superblocks: a.counts.guard,
		Quarantined: len(q.q), QuarantinedBytes: uint64(q.qsbs) << spec.SuperblockShift, Released: q.released,
	}
}

// snapGuard copies guard mode's configuration and quarantine. Under a.mu.
func (a *Allocator) snapGuard() GuardState {
	g := &a.guard
	s := GuardState{Enabled: g.on, Protects: g.on && g.protects}
	if !g.on {
		return s
	}
	if g.sampled {
		s.SampleRate = int(g.rate)
	}
	s.QuarantineBytes, s.QuarantineObjects = int(g.maxSBs)<<spec.SuperblockShift, g.maxObjs
	for _, e := range a.quar.q {
		s.Quarantine = append(s.Quarantine, Quarantined{
			Addr: a.base + uintptr(e.idx)<<spec.SuperblockShift, Superblocks: int(e.n), Class: e.class, Usable: e.usable,
			Stuck: e.stuck,
		})
	}
	return s
}
