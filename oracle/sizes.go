package oracle

import "github.com/refalloc/refalloc/spec"

// The size rules of spec/SPEC.md (ALIGN, ZEROED, LARGE-EXACT), stated here in the
// oracle's own words.
//
// The oracle judges impl, and impl computes sizes with spec's derived helpers
// (SizeToClass, AlignedClass, ClassAlign, ValidAlign, LargeUsable,
// LargeSuperblocks, Usable). If the oracle called them too, a wrong helper would
// be wrong on both sides and nothing would notice. So this file reads only the
// raw table, spec.ClassSize(k) and spec.ClassObjects(k) for k in
// [0, spec.NumClasses), as data, and the constants, and restates each rule from
// the spec's text. The two are compared in TestAgreesWithSpec, and the table and
// the helpers are pinned by literal rows in spec/golden_test.go.

// classAlign[k] is ClassAlign(k), computed once at init by the loop in
// largestPowerOfTwoDividing, so the per-call scan in ClassOf stays cheap.
var classAlign [spec.NumClasses]int

func init() {
	for k := range spec.NumClasses {
		classAlign[k] = largestPowerOfTwoDividing(spec.ClassSize(k))
	}
}

// largestPowerOfTwoDividing returns the largest power of two dividing s > 0.
func largestPowerOfTwoDividing(s int) int {
	a := 1
	for s%(2*a) == 0 {
		a *= 2
	}
	return a
}

// ValidAlign (ALIGN): AllocAligned accepts an alignment that is a power of two
// from 1 to MaxAlign (64 KiB); anything else is ErrInvalidSize.
func ValidAlign(align int) bool {
	if align < 1 || align > spec.MaxAlign {
		return false
	}
	p := 1
	for p < align {
		p *= 2
	}
	return p == align
}

// ClassAlign (ALIGN): every object of class k is aligned to the largest power of
// two dividing its size, because objects start at a superblock-aligned base plus
// a multiple of the size.
func ClassAlign(k int) int { return classAlign[k] }

// ClassOf (ALIGN, ZEROED) is the class that serves n bytes aligned to align (1 for
// Alloc): the smallest class whose size is at least n and whose alignment is at
// least align, or spec.Large when there is none or n exceeds MaxSmall (larger
// requests are page runs). The caller has checked n >= 0 and ValidAlign(align).
func ClassOf(n, align int) int {
	if n > spec.MaxSmall {
		return spec.Large
	}
	for k := range spec.NumClasses {
		if spec.ClassSize(k) >= n && ClassAlign(k) >= align {
			return k
		}
	}
	return spec.Large
}

// UsableSize (ZEROED) is the capacity Alloc(n) / AllocAligned(n, align) must
// return: the class size for a small object (so Alloc(0) is a real 8-byte
// object), or largeUsable(n) for a large one.
func UsableSize(n, align int) int {
	if k := ClassOf(n, align); k != spec.Large {
		return spec.ClassSize(k)
	}
	return largeUsable(n)
}

// largeUsable (ZEROED, LARGE-EXACT): a large object's usable size is n rounded up
// to whole 4 KiB pages, and at least one page (a zero-byte request aligned beyond
// every class is still a real object).
func largeUsable(n int) int {
	pages := (n + spec.PageSize - 1) / spec.PageSize
	if pages < 1 {
		pages = 1
	}
	return pages * spec.PageSize
}

// LargeSpan (CONSERVE, OOM-REAL) is the number of whole superblocks a large object
// of n requested bytes occupies: its usable size divided by 64 KiB, rounded up.
// A page multiple is its own usable size, so LargeSpan(o.Usable) == LargeSpan(n).
func LargeSpan(n int) int {
	u := largeUsable(n)
	return (u + spec.SuperblockSize - 1) / spec.SuperblockSize
}
