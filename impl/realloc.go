// Realloc: resizing an object, in place when its class allows.

package impl

import (
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// Realloc resizes b, an object of this Cache's Allocator, to n bytes. The
// result keeps the first min(len(b), n) bytes of b; every byte after them, up
// to the result's capacity, reads zero, as after Alloc (ZEROED), whether it
// moved or not: reslicing the result up to cap never shows what b held beyond
// what was kept. It stays in place when that is free: a small object of this
// cache whose class also serves n, or a large object whose pages hold n and are
// not more than twice what n needs. Otherwise it allocates (natural alignment
// of the new class only), copies and frees b. Realloc(nil, n) is Alloc(n).
//
// If Realloc fails — ErrInvalidSize, ErrTooLarge, ErrOutOfMemory, ErrClosed, or
// b is not a live object (ErrInvalidPointer, ErrDoubleFree) — b is untouched
// and, if it was live, still is.
func (c *Cache) Realloc(b []byte, n int) ([]byte, error) {
	if cap(b) == 0 {
		return c.Alloc(n)
	}
	if n < 0 {
		return nil, errSize(n, 1)
	}
	keep := min(len(b), n)
	if c.resizable(b, n) {
		clear(b[keep:cap(b)]) // ZEROED: [keep, cap), not only [keep, n)
		return b[:n], nil
	}
	nb, err := c.Alloc(n)
	if err != nil {
		return nil, err
	}
	if p := unsafe.SliceData(b); unsafe.SliceData(nb) == p {
		// Alloc handed out b's own address, so b was not live (NO-OVERLAP);
		// freeing b now would free nb under the caller (FREE-DOUBLE).
		c.Free(nb)
		k := spec.Large
		if n <= spec.MaxSmall {
			k = spec.SizeToClass(n)
		}
		return nil, c.reject(errDouble(uintptr(unsafe.Pointer(p)), k))
	}
	copy(nb, b[:keep])
	if err := c.Free(b); err != nil {
		c.Free(nb)
		return nil, err
	}
	return nb, nil
}

// resizable reports whether b is a live object that can become n bytes in
// place: it checks liveness the way a free does, without freeing.
func (c *Cache) resizable(b []byte, n int) bool {
	a := c.a
	if c.closed || a.closed.Load() || n > cap(b) {
		return false
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	if off >= a.size {
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
		if sb.owner.Load() != c || n > spec.MaxSmall || spec.SizeToClass(n) != int(k) || cap(b) != spec.ClassSize(int(k)) {
			return false
		}
		rel := uint32(off) & (spec.SuperblockSize - 1)
		idx := rel / uint32(cap(b))
		if rel%uint32(cap(b)) != 0 || idx >= uint32(spec.ClassObjects(int(k))) {
			return false
		}
		e := sbEntry{sb: sb, rw: sb.remote.Load().w, class: k}
		return !c.notLive(&e, idx>>5, 1<<(idx&31))
	case stateLargeHead:
		a.lock()
		defer a.mu.Unlock()
		_, state, _ = unpackMeta(sb.meta.Load())
		u := spec.LargeUsable(n)
		return state == stateLargeHead && off&(spec.SuperblockSize-1) == 0 &&
			uintptr(cap(b)) == sb.usable && 2*u >= cap(b)
	}
	return false
}
