// Large objects: runs of whole superblocks, with exact accounting (LARGE-EXACT).

package impl

import (
	"fmt"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// largeMark is the class byte a released large head keeps, so that freeing its
// address again is reported as a double free rather than an invalid pointer.
const largeMark = 0xfe

// allocLarge returns n bytes (n > the largest small class, or an alignment no
// class honours) from a run of whole superblocks; cap is n rounded up to pages.
func (a *Allocator) allocLarge(n int) ([]byte, error) {
	usable := spec.LargeUsable(n)
	m := uint32(spec.LargeSuperblocks(usable))
	var site uint32
	if a.debug || a.guard.on { // GUARD-FAULT: every large object is guarded
		site = a.sites.record()
	}
	i, dirty, dirtySB, prevSite, ok := a.takeLarge(m)
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
		a.verifyLargePoison(b, dirtySB, prevSite)
	}
	if dirty && !mutant.LargeNoClear {
		clear(b) // ZEROED
	}
	a.publishLarge(i, m, usable, site)
	return b[:n], nil
}

// takeLarge takes a run of m superblocks out of the pool for a large object:
// its first superblock (ok false if no run is long enough, even after
// releasing the quarantine), whether any of its memory may be dirty, and in
// debug mode which superblocks must hold poison and the site of the object
// that last started there. The headers still say pooled. Under its own lock.
func (a *Allocator) takeLarge(m uint32) (i uint32, dirty bool, dirtySB []bool, prevSite uint32, ok bool) {
	a.lock()
	defer a.mu.Unlock()
	i, ok = a.takeRunEvict(m)
	if !ok {
		return 0, false, nil, 0, false
	}
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		a.takeDirty(sb)
		dirty = dirty || sb.dirty
		if a.debug {
			dirtySB = append(dirtySB, sb.dirty)
		}
		sb.dirty = true
	}
	return i, dirty, dirtySB, a.header(i).site, true
}

// publishLarge makes the m superblocks at i, taken by takeLarge and zeroed,
// the large object of usable bytes allocated at site: from now on a free of
// its start frees it. Under its own lock.
func (a *Allocator) publishLarge(i, m uint32, usable int, site uint32) {
	a.lock()
	defer a.mu.Unlock()
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		gen, _, _ := unpackMeta(sb.meta.Load())
		state := uint8(stateLargeTail)
		if j == i {
			state = stateLargeHead
		}
		sb.meta.Store(packMeta(gen, state, noClass))
	}
	head := a.header(i)
	head.runLen, head.usable, head.site = m, uintptr(usable), site
	a.large.Allocs++ // LARGE-EXACT: counted at the event
	a.large.LiveObjects++
	a.large.LiveBytes += uint64(usable)
	a.counts.large += int(m)
}

// freeLarge frees the large object, or the guarded small object, starting at
// offset off for cache c, or says why not; site is where it is freed (guard
// mode). In guard mode the object is quarantined (GUARD-FAULT).
func (a *Allocator) freeLarge(c *Cache, off uintptr, site uint32) error {
	addr := a.base + off
	a.lock()
	defer a.mu.Unlock()
	head := a.lookup(off >> spec.SuperblockShift)
	_, state, k := unpackMeta(head.meta.Load())
	switch {
	case state == statePool || state == stateQuarantine:
		return a.stalePoolFree(off, k)
	case state == stateGuard && off&(spec.SuperblockSize-1) == 0:
		return a.freeGuarded(c, head, int(k), site)
	case state == stateGuard:
		return errInvalid(addr, int(k)) // FREE-INVALID: interior of a guarded object
	case state != stateLargeHead || off&(spec.SuperblockSize-1) != 0 && !mutant.LargeInterior:
		return errInvalid(addr, spec.Large) // FREE-INVALID: interior of a large object
	}
	m := head.runLen
	a.large.Frees++
	a.large.LiveObjects--
	if !mutant.LargeLiveBytes {
		a.large.LiveBytes -= uint64(head.usable)
	}
	a.counts.large -= int(m)
	if a.quarantine(head, m, spec.Large, site) {
		return nil
	}
	if a.debug {
		poison(unsafe.Slice((*byte)(a.sbAddr(head)), uintptr(m)<<spec.SuperblockShift))
	}
	a.endRun(head, m, statePool, largeMark)
	a.putRun(head.idx, m)
	a.pooled(head.idx, m)
	return nil
}

// verifyLargePoison checks, in debug mode, that the superblocks of a new large
// object that were used before still hold the poison their free left.
func (a *Allocator) verifyLargePoison(b []byte, dirty []bool, site uint32) {
	for j, d := range dirty {
		lo := j << spec.SuperblockShift
		if !d || lo >= len(b) {
			continue
		}
		for off, x := range b[lo:min(len(b), lo+spec.SuperblockSize)] {
			if x != Poison {
				if a.opt.OnError != nil {
					a.opt.OnError(&WriteAfterFreeError{
						Addr: uintptr(unsafe.Pointer(unsafe.SliceData(b))), Offset: lo + off, Size: len(b),
						Class: spec.Large, Site: a.sites.format(site),
					})
				}
				a.retiredWAF()
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
		return errInvalid(addr, -1)
	}
	switch {
	case k == largeMark && rel == 0:
		return errDouble(addr, spec.Large)
	case k < spec.NumClasses && rel%spec.ClassSize(int(k)) == 0 && rel/spec.ClassSize(int(k)) < spec.ClassObjects(int(k)):
		if mutant.StalePoolNil {
			return nil
		}
		return errDouble(addr, int(k))
	}
	return errInvalid(addr, -1)
}
