// Sizes at the edges: where a rule changes its answer by one byte.

package invariants

import (
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// EdgeSizes are the request sizes where the answer changes by one byte, for a
// reservation of the given bytes: every class's size and one more (ZEROED,
// ALIGN: the next class), MaxSmall and one more (large), the page boundaries
// above it up to three superblocks (k*4096-1, k*4096, k*4096+1: one page more),
// and the reservation's size and one less (ErrOutOfMemory unless the pool is
// whole) and one more (ErrTooLarge).
func EdgeSizes(reservation int) []int {
	var out []int
	for k := range spec.NumClasses {
		out = append(out, spec.ClassSize(k))
		if !mutant.EdgeNoNext {
			out = append(out, spec.ClassSize(k)+1)
		}
	}
	for p := spec.MaxSmall / spec.PageSize; p <= 3*spec.SuperblockSize/spec.PageSize; p++ {
		out = append(out, p*spec.PageSize-1, p*spec.PageSize, p*spec.PageSize+1)
	}
	return append(out, 0, reservation-1, reservation, reservation+1)
}

// ReallocSizes are the sizes where Realloc of the live object o changes its
// answer (oracle.Model.Realloc). Small, of class k: the class's bounds,
// ClassSize(k) and one more (moves), ClassSize(k-1)+1 (the least that stays)
// and one less, and MaxSmall+1 (large). Large, of p pages: its pages and one
// byte more (grows: moves unless the superblocks after it are free), one page
// less and one byte more, and 0; a large object that does not grow stays in
// place whatever it shrinks to (the model has no shrink limit), so half its
// size, ((p+1)/2-1) pages and a byte, and one byte less are there for an
// implementation that would move on a large shrink; and MaxSmall+1 (the
// least large size) and MaxSmall (the largest small one).
func ReallocSizes(o oracle.Object) []int {
	if o.Class != spec.Large {
		k, lo := o.Class, 0
		if k > 0 {
			lo = spec.ClassSize(k-1) + 1
		}
		next := spec.ClassSize(k) + 1
		if mutant.ReallocSizesNext {
			next = spec.ClassSize(k)
		}
		return []int{spec.ClassSize(k), next, lo, max(lo-1, 0), (lo + spec.ClassSize(k)) / 2, spec.MaxSmall + 1}
	}
	p := o.Usable / spec.PageSize
	least := ((p+1)/2-1)*spec.PageSize + 1
	if mutant.ReallocSizesLeast { // a shrink limit's edge a page low: both sizes on one side of it
		least--
	}
	out := []int{o.Usable, o.Usable + 1, o.Usable - spec.PageSize, o.Usable - spec.PageSize + 1, least, least - 1, 0, o.Usable / 2,
		spec.MaxSmall + 1, spec.MaxSmall}
	if mutant.ReallocSizesSmall {
		out = out[:len(out)-2]
	}
	return out
}
