package oracle

import (
	"testing"

	"github.com/refalloc/refalloc/spec"
)

// TestAgreesWithSpec compares the oracle's statement of the size rules (sizes.go)
// with spec's derived helpers, which impl uses. The two are written independently,
// so a wrong helper (or a wrong oracle) shows up here as a disagreement; the
// literal rows of spec/golden_test.go then say which side moved.
func TestAgreesWithSpec(t *testing.T) {
	// ALIGN: every integer alignment around the valid range.
	for a := -2; a <= 2*spec.MaxAlign+1; a++ {
		if got, want := spec.ValidAlign(a), ValidAlign(a); got != want {
			t.Fatalf("spec.ValidAlign(%d) = %v, the oracle says %v", a, got, want)
		}
	}
	for k := range spec.NumClasses {
		if got, want := spec.ClassAlign(k), ClassAlign(k); got != want {
			t.Fatalf("spec.ClassAlign(%d) = %d (size %d), the oracle says %d", k, got, spec.ClassSize(k), want)
		}
	}
	for _, n := range sizes() {
		if n <= spec.MaxSmall {
			if got, want := spec.SizeToClass(n), ClassOf(n, 1); got != want {
				t.Fatalf("spec.SizeToClass(%d) = %d, the oracle says %d", n, got, want)
			}
		}
		// ZEROED, LARGE-EXACT: a large object's pages, and the superblocks
		// impl reserves for it (LargeSuperblocks of the usable size).
		if got, want := spec.LargeUsable(n), largeUsable(n); got != want {
			t.Fatalf("spec.LargeUsable(%d) = %d, the oracle says %d", n, got, want)
		}
		if got, want := spec.LargeSuperblocks(spec.LargeUsable(n)), LargeSpan(n); got != want {
			t.Fatalf("spec.LargeSuperblocks(LargeUsable(%d)) = %d, the oracle says %d", n, got, want)
		}
		if got, want := spec.LargeSuperblocks(n), LargeSpan(n); n > 0 && got != want {
			t.Fatalf("spec.LargeSuperblocks(%d) = %d, the oracle says %d", n, got, want)
		}
		for align := 1; align <= spec.MaxAlign; align *= 2 {
			if got, want := spec.AlignedClass(n, align), ClassOf(n, align); got != want {
				t.Fatalf("spec.AlignedClass(%d, %d) = %d, the oracle says %d", n, align, got, want)
			}
			if got, want := spec.Usable(n, align), UsableSize(n, align); got != want {
				t.Fatalf("spec.Usable(%d, %d) = %d, the oracle says %d", n, align, got, want)
			}
		}
	}
}

// sizes are every request size up to MaxSmall, then, up to two superblocks
// beyond, every page boundary and its neighbours plus an odd stride between.
func sizes() []int {
	var ns []int
	for n := 0; n <= spec.MaxSmall; n++ {
		ns = append(ns, n)
	}
	for p := spec.MaxSmall; p <= spec.MaxSmall+2*spec.SuperblockSize+spec.PageSize; p += spec.PageSize {
		ns = append(ns, p+1, p+spec.PageSize-1, p+spec.PageSize)
		for n := p + 2; n < p+spec.PageSize-1; n += 97 {
			ns = append(ns, n)
		}
	}
	return ns
}

// TestOwnWords pins a few of the oracle's answers by hand, so that the oracle
// is not only checked against spec: these follow from SPEC.md and the table's
// comment in spec/sizeclasses.go.
func TestOwnWords(t *testing.T) {
	for _, c := range []struct{ n, align, class, usable int }{
		{0, 1, 0, 8},                         // ZEROED: Alloc(0) is a real 8-byte object
		{8, 1, 0, 8},                         // exactly a class size: that class
		{9, 1, 1, 16},                        // one more: the next
		{100, 1, 7, 112},                     // 112-byte class
		{48, 32, 4, 64},                      // 48 is only 16-aligned: the 64-byte class
		{1, 4096, 39, 4096},                  // ALIGN: the power-of-two class
		{4097, 4096, 45, 8192},               // 4672..7936 are not 4096-aligned
		{0, spec.MaxAlign, spec.Large, 4096}, // no class is 64 KiB-aligned: one page
		{spec.MaxSmall, 1, 54, spec.MaxSmall},
		{spec.MaxSmall + 1, 1, spec.Large, spec.MaxSmall + spec.PageSize},
		{100_000, 1, spec.Large, 25 * spec.PageSize},
	} {
		if k, u := ClassOf(c.n, c.align), UsableSize(c.n, c.align); k != c.class || u != c.usable {
			t.Errorf("ClassOf(%d, %d) = %d usable %d, want %d usable %d", c.n, c.align, k, u, c.class, c.usable)
		}
	}
	for _, c := range []struct{ n, span int }{
		{0, 1}, {1, 1}, {spec.SuperblockSize, 1}, {spec.SuperblockSize + 1, 2}, {3*spec.SuperblockSize + 1, 4},
	} {
		if got := LargeSpan(c.n); got != c.span {
			t.Errorf("LargeSpan(%d) = %d, want %d", c.n, got, c.span)
		}
	}
	for _, a := range []int{0, -1, 3, 12, spec.MaxAlign + 1, 2 * spec.MaxAlign} {
		if ValidAlign(a) {
			t.Errorf("ValidAlign(%d) = true", a)
		}
	}
	for _, a := range []int{1, 2, 16, spec.MaxAlign} {
		if !ValidAlign(a) {
			t.Errorf("ValidAlign(%d) = false", a)
		}
	}
}
