package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv13b's hunt of the checkers: each breaks a good snapshot so
// that one check must see it, and requires that check's own report.

// TestConserveCatchesCurrentOfOtherClass (CONSERVE): a cache's current
// superblock of class k must be a class-k superblock. Here cache c's current
// of class k+1 names its own current class-k superblock (owned by c, marked
// current): only the class comparison sees it. Slip (mutant
// conservecurrentclass): conserve drops sb.Class != k.
func TestConserveCatchesCurrentOfOtherClass(t *testing.T) {
	h, c, _, k := fresh64(t)
	if k+1 >= spec.NumClasses {
		t.Fatalf("class %d is the last", k)
	}
	firesEach(t, h, spec.RuleConserve, []aBreak{
		{"current of class k+1 is a class-k superblock", "current superblock", func(s *impl.Snapshot) {
			cc := cacheOf(t, s, c)
			if cc.Current[k] < 0 || cc.Current[k+1] >= 0 {
				t.Fatalf("cache %d currents: %v", c, cc.Current)
			}
			cc.Current[k+1] = cc.Current[k]
		}},
	})
}
