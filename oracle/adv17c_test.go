package oracle_test

import (
	"fmt"
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

// REFINES: where two refusals apply, exactly the one the precedence gives is
// right, and every other outcome is refused. Alloc: closed first, then
// ErrInvalidSize (n < 0 or a bad alignment), then ErrTooLarge. Realloc: n < 0
// first, then closed, then ErrTooLarge. Each wrong kind at each of those
// crossings is a REFINES violation: a model that excuses one (as
// toolargeinvalid and reallocnegativeclosed, adv17c 02 and 10, did) lets the
// same precedence slip in impl through.
func TestModelRefusesEveryWrongRefusal(t *testing.T) {
	kinds := []oracle.Kind{oracle.OK, oracle.InvalidSize, oracle.TooLarge, oracle.OutOfMemory, oracle.DoubleFree, oracle.InvalidPointer, oracle.Closed}
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.OpenCache(1)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK)
	m.CloseCache(1, oracle.OK)
	type call struct {
		id, n, align int
		want         oracle.Kind
	}
	allocs := func(closed bool) []call {
		out := []call{
			{1, -1, 1, oracle.Closed}, {1, 8, 3, oracle.Closed}, {1, size + 1, 1, oracle.Closed}, {1, -1, 3, oracle.Closed},
		}
		for _, id := range []int{0, -1} {
			want := func(k oracle.Kind) oracle.Kind {
				if closed {
					return oracle.Closed
				}
				return k
			}
			out = append(out,
				call{id, -1, 1, want(oracle.InvalidSize)}, call{id, 8, 3, want(oracle.InvalidSize)},
				call{id, size + 1, 3, want(oracle.InvalidSize)}, call{id, -1, 2 * spec.MaxAlign, want(oracle.InvalidSize)},
				call{id, size + 1, 1, want(oracle.TooLarge)}, call{id, size + 1, spec.MaxAlign, want(oracle.TooLarge)})
		}
		return out
	}
	reallocs := func(closed bool) []call {
		closedOr := func(k oracle.Kind) oracle.Kind {
			if closed {
				return oracle.Closed
			}
			return k
		}
		return []call{
			{1, -1, 0, oracle.InvalidSize}, {1, size + 1, 0, oracle.Closed}, {1, 8, 0, oracle.Closed},
			{0, -1, 0, oracle.InvalidSize}, {0, size + 1, 0, closedOr(oracle.TooLarge)},
			{-1, -1, 0, oracle.InvalidSize}, {-1, size + 1, 0, closedOr(oracle.TooLarge)},
		}
	}
	check := func(closed bool) {
		for _, c := range allocs(closed) {
			for _, got := range kinds {
				rule := ""
				if got != c.want {
					rule = spec.RuleRefines
				}
				wantRule(t, fmt.Sprintf("closed %v: Alloc(%d, align %d) on %d returned %v, want %v", closed, c.n, c.align, c.id, got, c.want),
					m.Alloc(c.id, c.n, c.align, 0, 0, 0, got), rule)
			}
		}
		for _, c := range reallocs(closed) {
			for _, got := range kinds {
				rule := ""
				if got != c.want {
					rule = spec.RuleRefines
				}
				wantRule(t, fmt.Sprintf("closed %v: Realloc(%#x, %d) on %d returned %v, want %v", closed, uintptr(base), c.n, c.id, got, c.want),
					m.Realloc(c.id, base, c.n, 0, 0, 0, got), rule)
			}
		}
	}
	check(false)
	m.Close(oracle.OK, 1)
	check(true)
}
