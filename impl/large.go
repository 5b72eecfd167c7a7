// Large objects: runs of whole superblocks, with exact accounting (LARGE-EXACT).

package impl

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// largeMark is the class byte a released large head keeps, so that freeing its
// address again is reported as a double free rather than an invalid pointer.
const largeMark = 0xfe

// allocLarge returns n bytes (n > the largest small class, or an alignment no
// class honours) from a run of whole superblocks; cap is n rounded up to pages.
func (a *Allocator) allocLarge(n int, reserve bool) ([]byte, error) {
	usable := spec.LargeUsable(n)
	m := uint32(spec.LargeSuperblocks(usable))
	var site uint32
	if a.debug || a.guard.on { // GUARD-FAULT: every large object is guarded
		site = a.sites.record()
	}
	i, dirty, dirtySB, prevSites, ok := a.takeLarge(m)
	if !ok {
		return nil, fmt.Errorf("%w: no free run of %d superblocks for %d bytes", ErrOutOfMemory, m, n)
	}
	// The run is out of the pool but not yet a large object: a stale free of
	// its start meanwhile is judged by the pool's marks and writes nothing, so
	// the check and the zeroing below write into no object a free could have
	// taken back (DEBUG-POISON: no false report; GUARD-FAULT: no fault inside
	// the allocator on memory the free protected).
	b := unsafe.Slice((*byte)(unsafe.Add(a.start, uintptr(i)<<spec.SuperblockShift)), usable)
	yield(YieldLargeTaken)
	if a.debug {
		// The whole run, past the capacity too: its free poisons all of it
		// (DEBUG-POISON: TestDebugWAFPastNewObjectsCapReported).
		a.verifyLargePoison(wholeRun(b, m), dirtySB, prevSites, spec.Large)
	}
	if dirty && !mutant.LargeNoClear {
		clear(b) // ZEROED
	}
	a.publishLarge(i, m, usable, site, reserve)
	return b[:n], nil
}

// takeLarge takes a run of m superblocks out of the pool for a large object:
// its first superblock (ok false if no run is long enough, even after
// releasing the quarantine), whether any of its memory may be dirty, and in
// debug mode which superblocks must hold poison and, for each, the site of
// the large or guarded object that last held it (stampSite). The headers
// still say pooled.
func (a *Allocator) takeLarge(m uint32) (i uint32, dirty bool, dirtySB []bool, prevSites []uint32, ok bool) {
	a.lock()
	defer a.mu.Unlock()
	i, ok = a.takeRunEvict(m)
	if !ok {
		return 0, false, nil, nil, false
	}
	dirty, dirtySB = a.takeDirtyRun(i, m, a.debug)
	if a.debug {
		prevSites = a.runSites(i, m)
	}
	return i, dirty, dirtySB, prevSites, true
}

// runSites returns the sites the headers of [i, i+m) record: each, the site
// of the large or guarded object that last held that superblock (0 if none,
// or if a small period came since). Under a.mu.
func (a *Allocator) runSites(i, m uint32) []uint32 {
	sites := make([]uint32, m)
	for j := range sites {
		sites[j] = a.header(i + uint32(j)).site
		if mutant.LargeRunHeadSite { // DEBUG-POISON: the head's site for the whole run
			sites[j] = a.header(i).site
		}
	}
	return sites
}

// publishLarge makes the m superblocks at i, taken by takeLarge and zeroed,
// the large object of usable bytes allocated at site: from now on a free of
// its start frees it, unless it is reserved for a moving Realloc (unreserve).
func (a *Allocator) publishLarge(i, m uint32, usable int, site uint32, reserve bool) {
	a.lock()
	defer a.mu.Unlock()
	a.markLarge(i, m, true)
	head := a.header(i)
	head.runLen, head.usable = m, uintptr(usable)
	if mutant.TailKeepsSite { // DEBUG-POISON: the head alone
		head.site = site
	} else {
		a.stampSite(i, m, site)
	}
	head.reserved = reserve && !mutant.ReallocNoReserve
	a.large.Allocs++ // LARGE-EXACT: counted at the event
	a.large.LiveObjects++
	a.large.LiveBytes += uint64(usable)
}

// unreserve ends the reservation of b, a moving Realloc's new object, large
// (publishLarge) or guarded (allocGuarded): from now on a free of it frees it.
func (a *Allocator) unreserve(b []byte) {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	a.lock()
	defer a.mu.Unlock()
	a.lookup(off >> spec.SuperblockShift).reserved = false
}

// freeLarge frees the large object, or the guarded small object, starting at
// offset off for cache c, or says why not; site is where it is freed (guard
// mode). In guard mode the object is quarantined (GUARD-FAULT).
func (a *Allocator) freeLarge(c *Cache, off uintptr, site uint32) error {
	for waited := false; ; waited = true {
		if err := a.freeLargeOnce(c, off, site); err != errResizing {
			lockTaken(waited)
			return err
		}
		// The object is live and a Realloc is zeroing it in place (resizing):
		// the free takes effect once that is done (INTEGRITY).
		if !lockWait() {
			runtime.Gosched()
		}
	}
}

func (a *Allocator) freeLargeOnce(c *Cache, off uintptr, site uint32) error {
	a.lock()
	defer a.mu.Unlock()
	return a.freeLargeLocked(c, off, site, false)
}

// errResizing: freeLargeLocked found the object being zeroed by an in-place
// Realloc outside a.mu; freeLarge tries again once it is done.
var errResizing = errors.New("refalloc: large object being resized")

// freeReserved frees b, a moving Realloc's reserved new object it will not
// return, ending the reservation in the same hold of a.mu: no stale free of
// its address can come between (FREE-DOUBLE). After Close it does nothing.
func (a *Allocator) freeReserved(c *Cache, b []byte) {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	var site uint32
	if a.guard.on && !mutant.ReservedNoFreeSite { // GUARD-FAULT: the stack that freed it, for the report
		site = a.sites.record()
	}
	a.lock()
	defer a.mu.Unlock()
	if !a.closed.Load() {
		a.freeLargeLocked(c, off, site, true)
	}
}

// freeLargeLocked is freeLarge under a.mu; own: the caller is the Realloc
// that reserved the object, which it frees.
func (a *Allocator) freeLargeLocked(c *Cache, off uintptr, site uint32, own bool) error {
	addr := a.base + off
	head := a.lookup(off >> spec.SuperblockShift)
	_, state, k := unpackMeta(head.meta.Load())
	switch {
	case state == statePool || state == stateQuarantine && !mutant.LargeFreeQuarInvalid: // FREE-DOUBLE: freed by a racing free
		return a.stalePoolFree(off, k)
	case state == stateGuard && off&(spec.SuperblockSize-1) == 0 && head.reserved && (!own || mutant.GuardReservedOwn):
		return errDouble(addr, int(k)) // FREE-DOUBLE: a moving Realloc's, not returned yet
	case state == stateGuard && (off&(spec.SuperblockSize-1) == 0 || mutant.GuardPageStart && off&(spec.PageSize-1) == 0): // FREE-INVALID
		head.reserved = false
		return a.freeGuarded(c, head, int(k), site)
	case state == stateGuard && mutant.InteriorClassUnknown:
		return errInvalid(addr, -1)
	case state == stateGuard:
		return errInvalid(addr, int(k)) // FREE-INVALID: interior of a guarded object, named by its class
	case state != stateLargeHead || off&(spec.SuperblockSize-1) != 0 && !mutant.LargeInterior:
		if mutant.InteriorClassUnknown {
			return errInvalid(addr, -1)
		}
		return errInvalid(addr, spec.Large) // FREE-INVALID: interior of a large object, named spec.Large
	case head.resizing.Load() && !mutant.ResizeNoWait:
		return errResizing // live, being zeroed outside a.mu: wait (freeLarge)
	case head.reserved && !own:
		// FREE-DOUBLE: a stale pointer to the address, racing the moving
		// Realloc that has it and has not returned it; nobody holds it.
		return errDouble(addr, spec.Large)
	}
	head.reserved = false
	m := head.runLen
	a.large.Frees++
	a.large.LiveObjects--
	if !mutant.LargeLiveBytes {
		a.large.LiveBytes -= uint64(head.usable)
	}
	if a.quarantine(head, m, spec.Large, site) {
		if !mutant.QuarLargeCount { // MEM-ACCOUNT: else quarantined superblocks stay in use
			a.counts.large -= int(m)
		}
		return nil
	}
	if a.debug {
		n := uintptr(m) << spec.SuperblockShift
		if mutant.LargeFreePoisonUsable { // DEBUG-POISON: the run past the usable bytes keeps what it held
			n = uintptr(head.usable)
		}
		poison(unsafe.Slice((*byte)(a.sbAddr(head)), n))
	}
	a.poolRun(head.idx, m, largeMark)
	return nil
}

// carveRun makes the pool's superblocks [i, i+m), just taken from it, a large
// object's (its head too, if head). It reports whether any of their memory may
// be dirty and, if each, which (in debug mode those must hold poison). Under
// a.mu.
func (a *Allocator) carveRun(i, m uint32, head, each bool) (dirty bool, dirtySB []bool) {
	dirty, dirtySB = a.takeDirtyRun(i, m, each)
	a.markLarge(i, m, head)
	return dirty, dirtySB
}

// takeDirtyRun accounts for the superblocks [i, i+m), just taken from the
// pool, as used (committed), and reports whether any of their memory may be
// dirty and, if each, which. Under a.mu.
func (a *Allocator) takeDirtyRun(i, m uint32, each bool) (dirty bool, dirtySB []bool) {
	fresh := 0
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		if a.takeDirty(sb) {
			fresh++
		}
		dirty = dirty || sb.dirty
		if each {
			dirtySB = append(dirtySB, sb.dirty)
		}
		sb.dirty = true
	}
	a.purgeOnGrowth(fresh)
	return dirty, dirtySB
}

// stampSite records site, where the large object now holding the superblocks
// [i, i+m) was allocated, in each of their headers (debug and guard mode;
// 0 otherwise). DEBUG-POISON: a later large object whose run starts at any
// of them, the head or a tail, names this site when it finds a write after
// free there (allocLarge's prevSite); a tail that kept the site it had as an
// earlier object's head named that object, which the memory had stopped
// being (TestDebugWAFAtFormerTailNamesNoOldSite). Under a.mu.
func (a *Allocator) stampSite(i, m uint32, site uint32) {
	if !a.debug && !a.guard.on {
		return // no site is ever recorded: every header's is 0 already
	}
	for j := i; j < i+m; j++ {
		a.header(j).site = site
	}
}

// markLarge makes the headers of [i, i+m) say large (the first the head, if
// head). Under a.mu.
func (a *Allocator) markLarge(i, m uint32, head bool) {
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		gen, _, _ := unpackMeta(sb.meta.Load())
		state := uint8(stateLargeTail)
		if head && j == i {
			state = stateLargeHead
		}
		sb.meta.Store(packMeta(gen, state, noClass))
	}
	a.counts.large += int(m)
}

// poolRun returns a large object's superblocks [i, i+m) to the pool, the
// first marked mark (largeMark for a head: a second free of it is a double
// free). Under a.mu.
func (a *Allocator) poolRun(i, m uint32, mark uint8) {
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		gen, _, _ := unpackMeta(sb.meta.Load())
		next, tag := nextGen(gen)
		if tag == deadTag {
			sb.retire()
		}
		sb.meta.Store(packMeta(next, statePool, mark))
		if !mutant.PoolRunMarkAll {
			mark = noClass
		}
	}
	a.counts.large -= int(m)
	a.putRun(i, m)
	a.pooled(i, m)
}

// resizeLarge makes b, a large object of this Allocator, n bytes (n > MaxSmall)
// in place if it can, keeping its first keep bytes: shrinking always, the
// superblocks past n's going back to the pool; growing when the superblocks
// right after it are free in the pool, which it takes. Its capacity becomes
// n's usable size, as Alloc(n)'s (LARGE-EXACT), and every byte past keep reads
// zero (ZEROED): the object's old memory is cleared, taken superblocks only if
// they may be dirty, so a buffer that doubles in place touches each page once.
func (a *Allocator) resizeLarge(b []byte, n, keep int) ([]byte, bool) {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	head := a.lookup(off >> spec.SuperblockShift)
	u := spec.LargeUsable(n)
	zero := func(old uint32, dirtySB []bool, sites []uint32) {
		r := unsafe.Slice((*byte)(a.sbAddr(head)), u) // the run holds u bytes now
		if a.debug && len(dirtySB) > int(b2i(mutant.LargeGrowVerifyOne)) {
			lo := int(old) << spec.SuperblockShift
			a.verifyLargePoison(wholeRun(r, uint32(spec.LargeSuperblocks(u)))[lo:], dirtySB, sites, spec.Large)
		}
		clear(r[keep:min(u, int(old)<<spec.SuperblockShift)])
		for j, d := range dirtySB {
			if lo := (int(old) + j) << spec.SuperblockShift; d && !mutant.LargeGrowDirty {
				end := lo + spec.SuperblockSize
				if mutant.LargeGrowPage {
					end = lo + spec.PageSize
				}
				clear(r[lo:min(u, end)])
			}
		}
	}
	// In debug and guard mode the zeroing runs under the central lock: a
	// stale free racing this Realloc cannot take the object back (poison or
	// protect it) while the zeroing writes into it (DEBUG-POISON: no false
	// report; GUARD-FAULT: no fault inside the allocator). Otherwise it runs
	// after, with the head marked resizing: a free racing it (a stale pointer
	// to the live object) waits until it is done, since once the run is
	// pooled an Alloc may hand it out and its new owner write into it before
	// the zeroing ends (INTEGRITY; TestResizeInPlaceRacesFree).
	locked := a.debug || a.guard.on
	var site uint32 // GUARD-FAULT: where a shrink freed the superblocks it gives back
	if a.guard.on && spec.LargeSuperblocks(u) < spec.LargeSuperblocks(cap(b)) && !mutant.ShrinkNoFreeSite {
		site = a.sites.record()
	}
	var under func(uint32, []bool, []uint32)
	if locked {
		under = zero
	}
	var old uint32
	var dirtySB []bool
	for waited := false; ; waited = true {
		var ok, busy bool
		old, dirtySB, ok, busy = a.resizeRun(head, off, cap(b), uint32(spec.LargeSuperblocks(u)), u, site, under)
		if ok || !busy {
			lockTaken(waited)
		}
		if ok {
			break
		}
		if !busy {
			return nil, false
		}
		// Another Realloc of the address is zeroing it (a stale slice of
		// the live object): this one takes effect after it, as a free does.
		if !lockWait() {
			runtime.Gosched()
		}
	}
	if !locked {
		yield(YieldLargeResized)
		if mutant.ResizeUnmarkEarly {
			head.resizing.Store(false)
		}
		zero(old, dirtySB, nil) // not debug mode: nothing is verified
		yield(YieldLargeZeroed)
		head.resizing.Store(false)
	}
	return unsafe.Slice((*byte)(a.sbAddr(head)), u)[:n], true
}

// resizeRun is resizeLarge's part under a.mu: it checks that head is still
// the head of b's object (off, capacity), changes its run to m superblocks and
// its usable size to u, and returns the run's old length and, for superblocks
// it took, whether each may be dirty; zero, if not nil, gets them before the
// lock is released, else the head stays resizing until the caller has zeroed
// them, with (debug mode) the sites their headers recorded before the object
// took them. busy: another Realloc of the object is zeroing it; try again.
// site: where a shrink in guard mode freed the superblocks it gives back.
func (a *Allocator) resizeRun(head *superblock, off uintptr, capacity int, m uint32, u int, site uint32, zero func(uint32, []bool, []uint32)) (old uint32, dirtySB []bool, ok, busy bool) {
	a.lock()
	defer a.mu.Unlock()
	_, state, _ := unpackMeta(head.meta.Load())
	if state == stateLargeHead && off&(spec.SuperblockSize-1) == 0 && head.resizing.Load() && !mutant.ResizeNoWait {
		return 0, nil, false, true
	}
	if state != stateLargeHead || off&(spec.SuperblockSize-1) != 0 || uintptr(capacity) != head.usable && !mutant.ResizeCapCheck || head.reserved {
		return 0, nil, false, false // not b's object: not live, another one, or nobody's yet
	}
	old = head.runLen
	var sites []uint32
	switch {
	case m < old && mutant.LargeShrinkKeep:
		m = old
	case m < old:
		// GUARD-FAULT: the superblocks given back are freed memory of a
		// guarded object, quarantined as one (a large object of their bytes,
		// at the first of them) so that an access through the slice this
		// Realloc was given faults (TestGuardShrinkInPlaceTailFaults).
		tail := a.header(head.idx + m)
		if a.guard.on && !mutant.GuardShrinkPooled {
			usable, alloc := tail.usable, tail.site
			tail.usable, tail.site = uintptr(old-m)<<spec.SuperblockShift, head.site
			if mutant.ShrinkTailUsable { // GUARD-FAULT: the tail quarantined as the whole old run
				tail.usable = uintptr(old) << spec.SuperblockShift
			}
			if a.quarantine(tail, old-m, spec.Large, site) {
				if !mutant.ShrinkQuarLargeCount { // MEM-ACCOUNT: else the quarantined tail stays in use
					a.counts.large -= int(old - m)
				}
				break
			}
			tail.usable, tail.site = usable, alloc
		}
		if a.debug {
			poison(unsafe.Slice((*byte)(a.sbAddr(tail)), uintptr(old-m-uint32(b2i(mutant.ShrinkPoisonShort)))<<spec.SuperblockShift))
		}
		a.poolRun(head.idx+m, old-m, noClass)
	case m > old:
		if !a.takeRunAt(head.idx+old, m-old) {
			return 0, nil, false, false
		}
		_, dirtySB = a.carveRun(head.idx+old, m-old, false, true)
		// DEBUG-POISON: a write after free found in a superblock taken names
		// the object that held it, whose site its header records until the
		// stamp below (TestDebugGrowInPlaceWAFNamesSite).
		if a.debug && !mutant.GrowSiteUnnamed {
			sites = a.runSites(head.idx+old, m-old)
		}
		if !mutant.TailKeepsSite {
			a.stampSite(head.idx+old, m-old, head.site) // DEBUG-POISON
		}
	}
	head.runLen = m
	a.large.LiveBytes += uint64(u) - uint64(head.usable) // LARGE-EXACT
	head.usable = uintptr(u)
	if zero != nil {
		zero(old, dirtySB, sites)
	} else {
		head.resizing.Store(true) // the caller zeroes after the lock; frees wait (resizeLarge)
	}
	return old, dirtySB, true, false
}

// wholeRun is b, the start of a run of m superblocks, with its capacity the
// whole run: what verifyLargePoison checks, past b's length too.
func wholeRun(b []byte, m uint32) []byte {
	n := int(m) << spec.SuperblockShift
	if mutant.WAFVerifyCapOnly { // DEBUG-POISON: past the new object's capacity goes unverified
		n = len(b)
	}
	return unsafe.Slice(unsafe.SliceData(b), n)[:len(b)]
}

// verifyLargePoison checks, in debug mode, that the superblocks of a new large
// object that were used before still hold the poison their free left, whole:
// up to the capacity of b, which may go past its length (the object's usable
// size, the report's Size), since the object's free poisons them whole. A write
// after free found in superblock j of b names sites[j] (0, none, past the
// slice's end): the site of the object that held that superblock, which may
// not be the one that held the first (DEBUG-POISON;
// TestDebugWAFInLargeRunNamesSiteOfItsSuperblock). The report names b as
// an object of class k: spec.Large, or a guarded small object's class
// (allocGuarded; TestGuardedAllocNamesFreedObjectsSite).
func (a *Allocator) verifyLargePoison(b []byte, dirty []bool, sites []uint32, k int) {
	for j, d := range dirty {
		var site uint32
		if j < len(sites) {
			site = sites[j]
		}
		lo := j << spec.SuperblockShift
		whole := b[:cap(b)]
		if !d || lo >= len(whole) {
			continue
		}
		for off, x := range whole[lo:min(len(whole), lo+spec.SuperblockSize)] {
			if x != Poison {
				if a.opt.OnError != nil {
					a.report(&WriteAfterFreeError{
						Addr: uintptr(unsafe.Pointer(unsafe.SliceData(b))), Offset: lo + off, Size: len(b),
						Class: k, Site: a.sites.format(site),
					})
				}
				a.retiredWAF()
				if mutant.LargeWAFEach {
					break
				}
				return
			}
		}
	}
}

// stalePoolFree classifies a free into a pooled or quarantined superblock: the
// start of a slot of its last layout (a large object's or a guarded object's
// start, or a slot of its last class) is a double free (FREE-DOUBLE), anything
// else is invalid.
func (a *Allocator) stalePoolFree(off uintptr, k uint8) error {
	addr, rel := a.base+off, int(off&(spec.SuperblockSize-1))
	if g, ok := isGuardMark(k); ok {
		if rel == 0 {
			return errDouble(addr, g)
		}
		if mutant.StaleGuardInteriorClass {
			return errInvalid(addr, g)
		}
		return errInvalid(addr, -1) // FREE-INVALID: inside no object now, its class unknown
	}
	switch {
	case k == largeMark && rel == 0:
		return errDouble(addr, spec.Large)
	case k < spec.NumClasses-uint8(b2i(mutant.StalePoolLastClass)) && rel%spec.ClassSize(int(k)) == 0 && rel/spec.ClassSize(int(k)) < spec.ClassObjects(int(k))+int(b2i(mutant.StalePoolTail)):
		if mutant.StalePoolNil {
			return nil
		}
		return errDouble(addr, int(k))
	}
	return errInvalid(addr, -1)
}
