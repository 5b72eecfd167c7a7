package invariants_test

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv21's one-line slips in the judges (invariants.go, oracle/):
// each feeds a check a snapshot or a history that the slip lets through.

// TestConserveFreeAndHeldEveryObject (CONSERVE): an object both free in its
// superblock and held by a cache is reported whichever object of the group it
// is, the group's first included.
// Slip (freeheldfirstobj): the overlap is masked with &^1, so object 0 of a
// group, free and held at once, passes.
func TestConserveFreeAndHeldEveryObject(t *testing.T) {
	h, c, _, k := fresh64(t)
	for b := range 32 {
		t.Run(fmt.Sprint(b), func(t *testing.T) {
			s := clean(t, h)
			cacheOf(t, s, c).Held[0].Bits |= 1 << b
			smallOf(t, s, k).Free[0] |= 1 << b
			fires(t, spec.RuleConserve, "both free and held", invariants.Check(s, h.M))
		})
	}
}
