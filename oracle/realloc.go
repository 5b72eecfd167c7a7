package oracle

import (
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// ReallocRefusal is the error Realloc(b, n) on cache id must return for n and
// the cache alone, before it looks at b, which it leaves untouched; OK if
// there is none.
func (m *Model) ReallocRefusal(id, n int) Kind {
	switch {
	case n < 0:
		return InvalidSize
	case !m.usable(id):
		return Closed
	case n > spec.MaxAlloc || mutant.ReallocMaxEdge && n == spec.MaxAlloc || uintptr(n) > m.size:
		return TooLarge
	}
	return OK
}

// Realloc checks Realloc(b, n) on cache id (-1: the Allocator's), where old is
// b's address (0: a nil or zero-capacity b), which returned an object at addr
// with len length and capacity capacity, or the error got. The rules, in the
// words of impl.Cache.Realloc's doc:
//
//   - Realloc(nil, n) is Alloc(n).
//   - n < 0 is ErrInvalidSize, decided before anything else (a closed cache
//     too); then a closed cache or Allocator is ErrClosed, a size beyond the
//     reservation ErrTooLarge. b is untouched.
//   - A live b may stay in place, len n, capacity UsableSize(n, 1) as Alloc(n)
//     would give: a small object whose class also serves n (its capacity
//     unchanged; and the cache owns it: the model does not know owners, so in
//     place is allowed, not required; invariants.Harness.Realloc judges it by a
//     snapshot), or a large object that stays large: required when it does not
//     grow (its pages past n's go back), allowed when it grows (if the
//     superblocks after it are free). In place changes no count of allocations
//     or frees; a large object's bytes change with its capacity (LARGE-EXACT).
//   - Otherwise it moves: Alloc(n) (natural alignment: capacity UsableSize(n, 1)),
//     copy, Free(b). That is one allocation of n's class and one free of b's.
//     Running out of memory leaves b untouched and still live.
//   - A b outside the reservation (the Go heap, another Allocator) is
//     ErrInvalidPointer at once: nothing is allocated (FREE-INVALID).
//   - Any other b that is not live is never resized: the move's Alloc(n) happens (and
//     may fail as above), then the free of b is refused as Free judges it
//     (FREE-DOUBLE, FREE-INVALID) and the new object is freed again — one
//     allocation and one free of n's class — or, a remote free that cannot see
//     the owner's state, accepted to be found later, and the new object is live.
//     Never is b's own address the result: that would be a freed object.
func (m *Model) Realloc(id int, old uintptr, n int, addr uintptr, length, capacity int, got Kind) *Violation {
	if old == 0 {
		return m.Alloc(id, n, 1, addr, length, capacity, got)
	}
	if want := m.ReallocRefusal(id, n); want != OK {
		if got != want && !(mutant.ReallocNegativeClosed && want == InvalidSize && got == Closed) { // REFINES: n < 0 is ErrInvalidSize before ErrClosed
			return violation(spec.RuleRefines, "Realloc(%#x, %d) returned %v, want %v", old, n, got, want)
		}
		return nil
	}
	o, live := m.live[old]
	inPlace := live && resizable(o, n)
	if got == OK && addr == old {
		switch {
		case !inPlace && !live && (n > 0 || !mutant.ReallocFreedZero): // FREE-DOUBLE: Realloc(b, 0) of a freed b is called REFINES
			return violation(spec.RuleFreeDouble, "Realloc(%#x, %d) of an object that is not live returned it", old, n)
		case !inPlace:
			return violation(spec.RuleRefines, "Realloc(%#x, %d) stayed in place, but class %d of %d bytes cannot hold it there", old, n, o.Class, o.Usable)
		case length != n && !mutant.ModelInPlaceLen || capacity != UsableSize(n, 1):
			return violation(spec.RuleRefines, "Realloc(%#x, %d) in place: len %d cap %d, want len %d cap %d", old, n, length, capacity, n, UsableSize(n, 1))
		}
		o.Size, o.Usable = n, UsableSize(n, 1)
		m.live[old] = o
		return nil
	}
	if inPlace && o.Class == spec.Large && largeUsable(n) <= o.Usable {
		return violation(spec.RuleRefines, "Realloc(%#x, %d) of a large object of %d bytes returned %v at %#x, want it in place (it does not grow)", old, n, o.Usable, got, addr)
	}
	if got == OutOfMemory {
		if m.foreign(old) && !mutant.ModelForeignAllocs {
			// FREE-INVALID: refused before the move's Alloc, so never for
			// want of memory.
			return violation(spec.RuleFreeInvalid, "Realloc(%#x, %d) of a slice outside the reservation returned %v, want %v", old, n, got, InvalidPointer)
		}
		return nil // the allocator's call (OOM-REAL: invariants); b is untouched
	}
	if live {
		if got != OK {
			return violation(spec.RuleRefines, "Realloc(%#x, %d) of a live object returned %v", old, n, got)
		}
		if v := m.moved(id, n, addr, length, capacity); v != nil {
			return v
		}
		delete(m.live, old)
		m.counts[o.Class].Frees++
		return nil
	}
	free, class := m.judgeFree(id, old)
	switch {
	case got == InvalidPointer || got == DoubleFree && free == DoubleFree:
		m.badFrees++
		if got == InvalidPointer && !mutant.ReallocInvalidUncounted { // FREE-INVALID: not counted as invalid
			m.invalid++
		}
		if !m.foreign(old) || mutant.ModelForeignAllocs {
			m.RefusedRealloc(n)
		}
		return nil
	case got == OK && free == DoubleFree:
		m.badFrees++
		m.deferred++
		return m.moved(id, n, addr, length, capacity)
	}
	rule := spec.RuleFreeDouble
	if free == InvalidPointer {
		rule = spec.RuleFreeInvalid
	}
	return violation(rule, "Realloc(%#x, %d) of an object that is not live returned %v, its free is %v (class %d)", old, n, got, free, class)
}

// foreign reports whether addr is outside the reservation: no object's.
func (m *Model) foreign(addr uintptr) bool { return addr-m.base >= m.size }

// moved records the new object of a Realloc that moved: Alloc(n) on cache id.
func (m *Model) moved(id, n int, addr uintptr, length, capacity int) *Violation {
	o, v := m.NewObject(id, n, 1, addr, length, capacity)
	if v != nil {
		return v
	}
	if old, ok := m.live[addr]; ok { // NO-OVERLAP
		return violation(spec.RuleNoOverlap, "Realloc(_, %d) = %#x, which is live since Alloc(%d)", n, addr, old.Size)
	}
	m.live[addr] = o
	m.counts[o.Class].Allocs++
	return nil
}

// resizable reports whether the live object o may become n bytes without
// moving (Realloc): a small object whose class also serves n, so its capacity
// does not change; a large object that stays large.
func resizable(o Object, n int) bool {
	return ClassOf(n, 1) == o.Class
}

// RefusedRealloc counts what a Realloc to n bytes refused for a bad free of
// its object (DoubleFree, InvalidPointer) did: it allocated the new object
// before it could know, and freed it again. The bad free itself is counted by
// whoever judges it (Realloc here, Settle for a concurrent driver).
func (m *Model) RefusedRealloc(n int) {
	k := ClassOf(n, 1)
	m.counts[k].Allocs++
	m.counts[k].Frees++
}
