package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// REFINES (ALIGN's "Other alignments are ErrInvalidSize", and ErrTooLarge past
// the reservation or MaxAlloc): a request too large for the reservation with a
// valid size and alignment is ErrTooLarge, not ErrInvalidSize, on a cache and
// on the Allocator's own methods. Kills toolargeinvalid (adv17c 02), whose
// model accepted ErrInvalidSize there.
func TestModelRefusesInvalidSizeForTooLarge(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	for _, id := range []int{0, -1} {
		wantRule(t, "past the reservation, called invalid", m.Alloc(id, size+1, 1, 0, 0, 0, oracle.InvalidSize), spec.RuleRefines)
		wantRule(t, "past the reservation, aligned, called invalid", m.Alloc(id, size+1, spec.MaxAlign, 0, 0, 0, oracle.InvalidSize), spec.RuleRefines)
		wantRule(t, "past the reservation", m.Alloc(id, size+1, 1, 0, 0, 0, oracle.TooLarge), "")
		wantRule(t, "bad alignment and too large is invalid", m.Alloc(id, size+1, 3, 0, 0, 0, oracle.InvalidSize), "")
	}
}

// REFINES (impl.Cache.Realloc: "n < 0 is ErrInvalidSize, decided before
// anything else (a closed cache too)"): a Realloc to a negative size on a
// closed cache, or after Close, must answer ErrInvalidSize, not ErrClosed.
// Kills reallocnegativeclosed (adv17c 10), whose model accepted ErrClosed.
func TestModelRefusesClosedForNegativeRealloc(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.OpenCache(1)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK)
	m.CloseCache(1, oracle.OK)
	wantRule(t, "negative on a closed cache, called closed", m.Realloc(1, base, -1, 0, 0, 0, oracle.Closed), spec.RuleRefines)
	wantRule(t, "negative on a closed cache", m.Realloc(1, base, -1, 0, 0, 0, oracle.InvalidSize), "")
	wantRule(t, "closed cache", m.Realloc(1, base, 8, 0, 0, 0, oracle.Closed), "")
	m.Close(oracle.OK, 1)
	wantRule(t, "negative after Close, called closed", m.Realloc(-1, base, -1, 0, 0, 0, oracle.Closed), spec.RuleRefines)
	wantRule(t, "negative after Close", m.Realloc(-1, base, -1, 0, 0, 0, oracle.InvalidSize), "")
}
