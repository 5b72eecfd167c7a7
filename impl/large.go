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
	if a.debug {
		site = a.sites.record()
	}
	head, dirty, dirtySB, prevSite := a.carveLarge(m, usable, site)
	if head == nil {
		return nil, fmt.Errorf("%w: no free run of %d superblocks for %d bytes", ErrOutOfMemory, m, n)
	}
	b := unsafe.Slice((*byte)(a.sbAddr(head)), usable)
	if a.debug {
		a.verifyLargePoison(b, dirtySB, prevSite)
	}
	if dirty && !mutant.LargeNoClear {
		clear(b) // ZEROED
	}
	return b[:n], nil
}

// carveLarge takes a run of m superblocks for a large object of usable bytes:
// its head (nil if no run is long enough), whether any of its memory may be
// dirty, and in debug mode which superblocks must hold poison and the site of
// the object that last started there.
func (a *Allocator) carveLarge(m uint32, usable int, site uint32) (head *superblock, dirty bool, dirtySB []bool, prevSite uint32) {
	a.lock()
	defer a.mu.Unlock()
	i, ok := a.takeRun(m)
	if !ok {
		return nil, false, nil, 0
	}
	for j := i; j < i+m; j++ {
		sb := a.header(j)
		a.takeDirty(sb)
		gen, _, _ := unpackMeta(sb.meta.Load())
		dirty = dirty || sb.dirty
		if a.debug {
			dirtySB = append(dirtySB, sb.dirty)
		}
		sb.dirty = true
		state := uint8(stateLargeTail)
		if j == i {
			state = stateLargeHead
		}
		sb.meta.Store(packMeta(gen, state, noClass))
	}
	head = a.header(i)
	prevSite = head.site
	head.runLen, head.usable, head.site = m, uintptr(usable), site
	a.large.Allocs++ // LARGE-EXACT: counted at the event
	a.large.LiveObjects++
	a.large.LiveBytes += uint64(usable)
	a.counts.large += int(m)
	return head, dirty, dirtySB, prevSite
}

// freeLarge frees the large object starting at offset off, or says why not.
func (a *Allocator) freeLarge(off uintptr) error {
	addr := a.base + off
	a.lock()
	defer a.mu.Unlock()
	head := a.lookup(off >> spec.SuperblockShift)
	_, state, k := unpackMeta(head.meta.Load())
	switch {
	case state == statePool:
		return a.stalePoolFree(off, k)
	case state != stateLargeHead || off&(spec.SuperblockSize-1) != 0 && !mutant.LargeInterior:
		return errInvalid(addr, spec.Large) // FREE-INVALID: interior of a large object
	}
	m := head.runLen
	if a.debug {
		poison(unsafe.Slice((*byte)(a.sbAddr(head)), uintptr(m)<<spec.SuperblockShift))
	}
	for j := head.idx; j < head.idx+m; j++ {
		sb := a.header(j)
		gen, _, _ := unpackMeta(sb.meta.Load())
		mark := uint8(noClass)
		if j == head.idx {
			mark = largeMark
		}
		next, tag := nextGen(gen)
		if tag == deadTag {
			sb.retire()
		}
		sb.meta.Store(packMeta(next, statePool, mark))
	}
	a.large.Frees++
	a.large.LiveObjects--
	if !mutant.LargeLiveBytes {
		a.large.LiveBytes -= uint64(head.usable)
	}
	a.counts.large -= int(m)
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

// stalePoolFree classifies a free into a pooled superblock: the start of a slot
// of its last layout is a double free (FREE-DOUBLE), anything else is invalid.
func (a *Allocator) stalePoolFree(off uintptr, k uint8) error {
	addr, rel := a.base+off, int(off&(spec.SuperblockSize-1))
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
