// Realloc: resizing an object, in place when its class allows.

package impl

import (
	"errors"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Realloc resizes b, an object of this Cache's Allocator, to n bytes. The
// result keeps the first min(len(b), n) bytes of b; every byte after them, up
// to the result's capacity, reads zero, as after Alloc (ZEROED), whether it
// moved or not: reslicing the result up to cap never shows what b held beyond
// what was kept. It stays in place when it can: a small object of this cache
// whose class also serves n (its capacity unchanged); a large object that
// stays large, when it shrinks (its superblocks past n's go back to the pool;
// in guard mode, to the quarantine, GUARD-FAULT)
// or when the superblocks right after it are free (it takes them), its
// capacity then n rounded up to pages, as Alloc(n)'s. Otherwise it allocates
// (natural alignment of the new class only), copies and frees b.
// Realloc(nil, n) is Alloc(n).
//
// If Realloc fails — ErrInvalidSize, ErrTooLarge, ErrOutOfMemory, ErrClosed, or
// b is not a live object (ErrInvalidPointer, ErrDoubleFree) — b is untouched
// and, if it was live, still is. A b outside the reservation is refused
// before anything is allocated; one inside it that is not live is found so
// as the move frees it (its Alloc may fail first, ErrOutOfMemory).
func (c *Cache) Realloc(b []byte, n int) ([]byte, error) {
	r, err := c.realloc(b, n)
	if moved(r, b) {
		c.deliverAlloc(r, mutant.ReallocNewReserved) // CONSERVE: r is the cache's, not reserved
	} else {
		c.deliver() // in place: b is the caller's still
	}
	return r, err
}

// moved reports whether r, what Realloc of b returns, is a new object.
func moved(r, b []byte) bool {
	return unsafe.SliceData(r) != unsafe.SliceData(b)
}

func (c *Cache) realloc(b []byte, n int) ([]byte, error) {
	if cap(b) == 0 {
		return c.Alloc(n)
	}
	if n < 0 {
		return nil, errSize(n, 1)
	}
	keep := min(len(b), n)
	if r, ok := c.resize(b, n, keep); ok {
		return r, nil
	}
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p-c.a.base >= c.a.size+uintptr(b2i(mutant.ReallocEndAllocs)) && !mutant.ReallocForeignAllocs {
		// FREE-INVALID: never an object of this Allocator: refused as its
		// free is, before anything is allocated (a full reservation would
		// say ErrOutOfMemory, and in guard mode the new object, freed
		// again, would push a freed one out of the quarantine). What the
		// model refuses before it looks at b comes first (ReallocRefusal).
		switch {
		case c.closed && !mutant.ReallocForeignOpen || c.a.closed.Load(): // FREE-INVALID: a closed cache says ErrClosed first
			return nil, ErrClosed
		case n > spec.MaxAlloc || uintptr(n) > c.a.size || mutant.ReallocForeignSize && uintptr(n) == c.a.size: // FREE-INVALID: the reservation's size is not too large
			return nil, errTooLarge(n, c.a.size)
		}
		return nil, c.reject(errInvalid(p, -1))
	}
	// A large new object, or in guard mode a guarded small one, stays
	// reserved until this call returns it: a stale free of its address
	// meanwhile is refused, so the address cannot be handed out again under
	// the copy and the frees below (FREE-DOUBLE, INTEGRITY). Any other small
	// one is in this cache's held group, which only this call uses: a stale
	// free of it waits as a remote free, as for any object Alloc returned.
	large := n > spec.MaxSmall || mutant.ReallocMaxSmallLarge && n == spec.MaxSmall // CONSERVE: MaxSmall is a small class's
	var nb []byte
	var err error
	reserved := large
	if large {
		nb, err = c.allocOther(n, 1, true)
		if errors.Is(err, ErrOutOfMemory) && !mutant.ReallocOOMNoRegrow {
			// OOM-REAL: the move found no run, but what its allocation gave
			// up first (this cache's empty superblocks, the quarantine) may
			// be the superblocks right after b: grow in place into them, as
			// the same call made again would.
			if r, ok := c.resize(b, n, keep); ok {
				return r, nil
			}
		}
	} else if c.a.guard.sampled {
		nb, err = c.allocReserving(n)
		reserved = err == nil && (c.gotReserved || mutant.ReservedGuardAll)
	} else {
		nb, err = c.Alloc(n)
	}
	if err != nil {
		return nil, err
	}
	release := func() {
		if reserved {
			c.a.unreserve(nb)
		}
	}
	drop := func() {
		if reserved && mutant.ReserveCleanupGap {
			c.a.unreserve(nb)
			c.Free(nb)
		} else if reserved {
			c.a.freeReserved(c, nb)
		} else {
			c.Free(nb)
		}
	}
	// Every way out but the last drops nb, the panic of an OnError in the
	// free of b below too (a release that finds a remote double free): the
	// caller never gets nb, so nothing else could free it or end its
	// reservation (CONSERVE).
	returned := false
	defer func() {
		if !returned && !mutant.ReallocPanicLeak {
			drop()
		}
	}()
	if p := unsafe.SliceData(b); unsafe.SliceData(nb) == p && !mutant.ReallocStaleSelf {
		// Alloc handed out b's own address, so b was not live (NO-OVERLAP);
		// freeing b now would free nb under the caller (FREE-DOUBLE).
		if mutant.ReallocDropTwice {
			drop()
		}
		k := spec.Large
		if n < spec.MaxSmall || n == spec.MaxSmall && !mutant.ReallocSelfClass {
			k = spec.SizeToClass(n)
		}
		return nil, c.reject(errDouble(uintptr(unsafe.Pointer(p)), k))
	}
	yield(YieldReallocMoved)
	src := b[:keep-int(b2i(mutant.ReallocShortCopy && keep > 0))]
	if c.a.guard.on && (c.a.guard.sampled || !mutant.CopyOutUnsampled) {
		c.a.copyOut(nb, src) // GUARD-FAULT: never from memory it protected
	} else {
		copy(nb, src)
	}
	if err := c.Free(b); err != nil {
		return nil, err
	}
	returned = true
	release()
	return nb, nil
}

// resize makes b n bytes in place if it is a live object that can be: a small
// one of this cache whose class serves n (every byte past keep up to cap
// cleared: ZEROED, not only [keep, n)), or a large one that stays large
// (resizeLarge).
func (c *Cache) resize(b []byte, n, keep int) ([]byte, bool) {
	if c.resizable(b, n) {
		if mutant.ReallocNoZero {
			clear(b[keep:n])
			return b[:n], true
		}
		clear(b[keep:cap(b)])
		return b[:n], true
	}
	// Past MaxAlloc the run's length would not even fit its uint32 (n>>16
	// wraps from 2^48 on): the moving path says ErrTooLarge.
	if n <= spec.MaxSmall-int(b2i(mutant.ResizeAtMaxSmall)) || n > spec.MaxAlloc && !mutant.ReallocHuge || (c.closed || c.a.closed.Load()) && !mutant.ResizeAfterClose {
		return nil, false
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - c.a.base
	if off >= c.a.size && !mutant.ResizeForeign {
		return nil, false
	}
	if sb := c.a.lookup(off >> spec.SuperblockShift); sb == nil && !mutant.ResizeNoHeader {
		return nil, false
	} else if _, state, _ := unpackMeta(sb.meta.Load()); state != stateLargeHead {
		return nil, false
	}
	return c.a.resizeLarge(b, n, keep)
}

// resizable reports whether b is a small live object of this cache that can
// become n bytes in place: it checks liveness the way a free does, without
// freeing.
func (c *Cache) resizable(b []byte, n int) bool {
	a := c.a
	if c.closed || a.closed.Load() || n > cap(b) {
		return false
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	if off >= a.size+uintptr(b2i(mutant.ResizableEnd)) {
		return false
	}
	sb := a.lookup(off >> spec.SuperblockShift)
	if sb == nil {
		return false
	}
	_, state, k := unpackMeta(sb.meta.Load())
	switch state {
	case stateSmall:
		// n may exceed MaxSmall when b is stale: a large object's slice whose
		// superblock is small now.
		if sb.owner.Load() != c || n > spec.MaxSmall || spec.SizeToClass(n) != int(k) || cap(b) != spec.ClassSize(int(k)) && !mutant.ResizableNoCap {
			return false
		}
		rel := uint32(off) & (spec.SuperblockSize - 1)
		idx := rel / uint32(cap(b))
		if rel%uint32(cap(b)) != 0 && !mutant.ResizableNoSlot || idx >= uint32(spec.ClassObjects(int(k)))+uint32(b2i(mutant.ResizableTail)) {
			return false
		}
		rs := sb.remote.Load()
		e := sbEntry{sb: sb, rw: &rs.w[0], nrw: uint32(len(rs.w)), free: &sb.free[0], class: k}
		if mutant.ReallocHeldClass {
			e.class = 0
		}
		return !c.notLive(&e, idx>>5, 1<<(idx&31))
	}
	return false
}

// allocReserving is Alloc for a moving Realloc in guard mode: a guarded new
// object is reserved (c.gotReserved).
func (c *Cache) allocReserving(n int) ([]byte, error) {
	c.reserving = true
	if !mutant.GotReservedKept { // FREE-DOUBLE/CONSERVE: a flag of the previous guarded Realloc
		c.gotReserved = false
	}
	defer func() {
		if !mutant.ReservingKept { // FREE-DOUBLE: or later guarded objects are born reserved
			c.reserving = false
		}
	}()
	return c.Alloc(n)
}
