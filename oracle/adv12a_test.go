package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv12a, an adversarial round of one-line slips in the checkers:
// each feeds the model one wrong outcome that only the slipped check refuses.

// TestModelRefusesInPlaceWrongLength (REFINES, ZEROED: a Realloc(b, n) that
// stays in place returns len n, as Alloc(n) would): an in-place result with
// the right address and capacity but the old len, or one byte off, is refused,
// small and large; len n is accepted. Slip (adv12a a08): the in-place case of
// Model.Realloc compares the capacity only, so a Realloc that kept b's len
// went through every driver (a moving one's len is NewObject's to check).
func TestModelRefusesInPlaceWrongLength(t *testing.T) {
	small, large := uintptr(base), uintptr(base+spec.SuperblockSize)
	for _, tc := range []struct {
		name     string
		addr     uintptr
		size, to int
	}{
		{"small, same class", small, 100, 110},
		{"large, shrinking", large, 100_000, 90_000},
		{"large, same pages", large, 100_000, 100_001},
	} {
		for _, length := range []int{tc.size, tc.to - 1, tc.to + 1} {
			m := oracle.New(base, size)
			must(t, m.OpenCache(0))
			must(t, m.Alloc(0, tc.size, 1, tc.addr, tc.size, oracle.UsableSize(tc.size, 1), oracle.OK))
			wantRule(t, tc.name+", a wrong len", m.Realloc(0, tc.addr, tc.to, tc.addr, length, oracle.UsableSize(tc.to, 1), oracle.OK), spec.RuleRefines)
			wantRule(t, tc.name+", then len n", m.Realloc(0, tc.addr, tc.to, tc.addr, tc.to, oracle.UsableSize(tc.to, 1), oracle.OK), "")
		}
	}
}
