package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/spec"
)

// TestConcurrentSizeReach (ZEROED, ALIGN: every class, the last one too):
// the sizes FuzzConcurrent's allocations draw from a step's two bytes, as a
// step gives them (b < 256) and as a burst does (b < 192), reach every
// class's size, MaxSmall itself (the last class's edge), 0, and large sizes
// from MaxSmall+1. Slip (adv12a a26): the small range taken modulo MaxSmall
// instead of MaxSmall+1, so the concurrent driver never asked for the last
// class's full size.
func TestConcurrentSizeReach(t *testing.T) {
	for _, bMax := range []int{256, 192} {
		got := map[int]bool{}
		lo, hi := 1<<30, 0
		for a := range 256 {
			for b := range bMax {
				n := concSize(a, b)
				got[n] = true
				if n > spec.MaxSmall {
					lo, hi = min(lo, n), max(hi, n)
				}
			}
		}
		for k := range spec.NumClasses {
			if !got[spec.ClassSize(k)] {
				t.Errorf("b < %d: no step asks for class %d's %d bytes", bMax, k, spec.ClassSize(k))
			}
		}
		if !got[0] || !got[spec.MaxSmall] {
			t.Errorf("b < %d: sizes 0 (%v) and MaxSmall (%v): want both", bMax, got[0], got[spec.MaxSmall])
		}
		if bMax == 256 && lo != spec.MaxSmall+1 {
			t.Errorf("large sizes start at %d, want %d", lo, spec.MaxSmall+1)
		}
	}
}
