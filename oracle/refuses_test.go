package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// The model is only as strict as its weakest check: a check that lets a wrong
// outcome through lets the same slip in impl through, and no test of impl can
// notice (the machines ask the model). So each test here feeds one wrong
// outcome, at the boundary of the rule, and wants the rule that refuses it.

func wantRule(t *testing.T, name string, v *oracle.Violation, rule string) {
	t.Helper()
	if (v == nil) != (rule == "") || v != nil && v.Rule != rule {
		t.Errorf("%s: %v, want rule %q", name, v, rule)
	}
}

// ALIGN: a large object starts a superblock, not merely a page.
func TestModelRefusesLargeOffSuperblock(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	wantRule(t, "large object at a page, not a superblock", m.Alloc(0, 100_000, 1, base+spec.SuperblockSize+spec.PageSize, 100_000, 102400, oracle.OK), spec.RuleAlign)
	wantRule(t, "aligned request served large, at a page", m.Alloc(0, 8, spec.MaxAlign, base+2*spec.SuperblockSize+spec.PageSize, 8, spec.PageSize, oracle.OK), spec.RuleAlign)
	wantRule(t, "large object at a superblock", m.Alloc(0, 100_000, 1, base+3*spec.SuperblockSize, 100_000, 102400, oracle.OK), "")
	// NO-OVERLAP: an object whose start is inside but whose end is not.
	wantRule(t, "last object running past the end", m.Alloc(0, 100, 1, base+size-16, 100, 112, oracle.OK), spec.RuleNoOverlap)
	wantRule(t, "last object ending at the end", m.Alloc(0, 100, 1, base+size-112, 100, 112, oracle.OK), "")
}

// FREE-DOUBLE, FREE-INVALID: every wrong answer to a free is refused, by the
// rule the right answer states.
func TestModelRefusesWrongFree(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.OpenCache(1)
	m.CloseCache(1, oracle.OK)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK) // len 100, cap 112
	for _, tc := range []struct {
		name string
		id   int
		addr uintptr
		got  oracle.Kind
		rule string
	}{
		{"between len and cap is interior", 0, base + 104, oracle.DoubleFree, spec.RuleFreeInvalid},
		{"between len and cap, accepted", 0, base + 104, oracle.OK, spec.RuleFreeInvalid},
		{"between len and cap, refused", 0, base + 104, oracle.InvalidPointer, ""},
		{"just past cap is no object's", 0, base + 112, oracle.DoubleFree, ""},
		{"foreign is not a double free", 0, base - 8, oracle.DoubleFree, spec.RuleFreeInvalid},
		{"past the reservation", 0, base + size, oracle.OK, spec.RuleFreeInvalid},
		{"a live object is not a double free", 0, base, oracle.DoubleFree, spec.RuleRefines},
		{"nor closed", 0, base, oracle.Closed, spec.RuleRefines},
		{"a closed cache frees nothing", 1, base, oracle.OK, spec.RuleRefines},
		{"a closed cache refuses as closed", 1, base, oracle.DoubleFree, spec.RuleRefines},
		{"closed", 1, base, oracle.Closed, ""},
		{"live", 0, base, oracle.OK, ""},
		{"a double free is not closed", 0, base, oracle.Closed, spec.RuleFreeDouble},
		{"nor out of memory", 0, base, oracle.OutOfMemory, spec.RuleFreeDouble},
		{"refused", 0, base, oracle.DoubleFree, ""},
	} {
		wantRule(t, tc.name, m.Free(tc.id, tc.addr, tc.got), tc.rule)
	}
	if all, deferred := m.BadFrees(); all != 3 || deferred != 0 {
		t.Errorf("bad frees %d (%d deferred), want 3 (0): the interior free, the one past cap and the double free, all refused", all, deferred)
	}
}

// EMPTY, REFINES: Close reports exactly the live objects, and a closed
// allocator or cache answers ErrClosed.
func TestModelRefusesWrongClose(t *testing.T) {
	setup := func() *oracle.Model {
		m := oracle.New(base, size)
		m.OpenCache(0)
		m.Alloc(0, 8, 1, base, 8, 8, oracle.OK)
		m.Alloc(0, 8, 1, base+8, 8, 8, oracle.OK)
		return m
	}
	wantRule(t, "fewer leaks than live", setup().Close(oracle.OK, 1), spec.RuleEmpty)
	wantRule(t, "more leaks than live", setup().Close(oracle.OK, 3), spec.RuleEmpty)
	m := setup()
	wantRule(t, "exactly the live", m.Close(oracle.OK, 2), "")
	wantRule(t, "second Close succeeds", m.Close(oracle.OK, 0), spec.RuleRefines)
	wantRule(t, "second Close", m.Close(oracle.Closed, 0), "")
	wantRule(t, "a cache after Close", m.CloseCache(0, oracle.OK), spec.RuleRefines)
	wantRule(t, "a new cache after Close", m.OpenCache(5), spec.RuleRefines)
	wantRule(t, "Alloc after Close", m.Alloc(0, 8, 1, base+16, 8, 8, oracle.OK), spec.RuleRefines)
	wantRule(t, "Alloc after Close is not out of memory", m.Alloc(-1, 8, 1, 0, 0, 0, oracle.OutOfMemory), spec.RuleRefines)
	wantRule(t, "Free after Close", m.Free(-1, base, oracle.OK), spec.RuleRefines)
	wantRule(t, "Realloc after Close", m.Realloc(-1, base, 16, base+64, 16, 16, oracle.OK), spec.RuleRefines)

	m = oracle.New(base, size)
	m.OpenCache(0)
	wantRule(t, "a cache ID reused", m.OpenCache(0), spec.RuleRefines)
	wantRule(t, "close", m.CloseCache(0, oracle.OK), "")
	wantRule(t, "close again succeeds", m.CloseCache(0, oracle.OK), spec.RuleRefines)
	wantRule(t, "close of a cache never opened succeeds", m.CloseCache(9, oracle.OK), spec.RuleRefines)
	wantRule(t, "the Allocator's methods stay usable", m.Alloc(-1, 8, 1, base, 8, 8, oracle.OK), "")
}

// STATS-LEAD, STATS-LAG, STATS-EXACT, LARGE-EXACT, FREE-DOUBLE, FREE-INVALID:
// each bound of CheckStats holds at its edge and fails one past it.
func TestModelStatsBounds(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK)
	m.Alloc(0, 100, 1, base+112, 100, 112, oracle.OK)
	m.Free(0, base+112, oracle.OK)
	m.Alloc(0, 100_000, 1, base+spec.SuperblockSize, 100_000, 102400, oracle.OK)
	m.Free(0, base+8, oracle.InvalidPointer) // interior
	m.Free(0, base+4096, oracle.OK)          // never allocated: accepted, deferred
	k := oracle.ClassOf(100, 1)
	truth := func() oracle.StatsView {
		var s oracle.StatsView
		s.Allocs[k], s.Frees[k] = 2, 1
		s.Large = oracle.Counts{Allocs: 1}
		s.LargeLiveBytes = 102400
		s.DoubleFrees, s.InvalidFrees = 1, 1
		return s
	}
	rules := func(vs []*oracle.Violation) map[string]bool {
		r := map[string]bool{}
		for _, v := range vs {
			r[v.Rule] = true
		}
		return r
	}
	check := func(name string, s oracle.StatsView, caches int, flushed bool, want string) {
		t.Helper()
		got := rules(m.CheckStats(s, caches, flushed))
		if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || !got[want]) {
			t.Errorf("%s: violations %v, want only %q", name, got, want)
		}
	}
	check("the truth, flushed", truth(), 2, true, "")
	s := truth()
	s.Allocs[k] += uint64(2 * spec.ClassObjects(k))
	check("lead of exactly what 2 caches hold", s, 2, false, "")
	s.Allocs[k]++
	check("one past it", s, 2, false, spec.RuleStatsLead)
	s = truth()
	s.Allocs[k]--
	check("allocs behind", s, 2, false, spec.RuleStatsLead)
	s = truth()
	s.Frees[k]--
	check("frees behind, unflushed", s, 2, false, "")
	check("frees behind, flushed", s, 2, true, spec.RuleStatsExact)
	s = truth()
	s.Frees[k]++
	check("frees ahead", s, 2, false, spec.RuleStatsLag)
	s = truth()
	s.LargeLiveBytes -= spec.PageSize
	check("large live bytes", s, 2, false, spec.RuleLargeExact)
	s = truth() // adv20 (mutant largebytesover): over-counted bytes too, not only lagging ones
	s.LargeLiveBytes += spec.PageSize
	check("large live bytes ahead", s, 2, false, spec.RuleLargeExact)
	s = truth()
	s.Large.Frees++
	check("large frees", s, 2, false, spec.RuleLargeExact)
	s = truth()
	s.DoubleFrees--
	check("the deferred double free not found yet", s, 2, false, "")
	check("not found after a flush", s, 2, true, spec.RuleFreeDouble)
	s = truth()
	s.DoubleFrees++
	check("a bad free counted that was not", s, 2, false, spec.RuleFreeDouble)
	s = truth()
	s.InvalidFrees--
	check("an invalid free is counted at once", s, 2, false, spec.RuleFreeInvalid)
	s = truth()
	s.InvalidFrees, s.DoubleFrees = 0, 2
	check("an invalid free counted as a double free", s, 2, false, spec.RuleFreeInvalid)
}

// REFINES, FREE-DOUBLE: a live object's Realloc is never refused as a bad
// free, and a large one that keeps its pages stays where it is.
func TestModelRefusesWrongRealloc(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	small, large := uintptr(base), uintptr(base+spec.SuperblockSize)
	m.Alloc(0, 100, 1, small, 100, 112, oracle.OK)
	m.Alloc(0, 200_000, 1, large, 200_000, 200_704, oracle.OK) // 49 pages
	elsewhere := uintptr(base + 8*spec.SuperblockSize)
	wantRule(t, "live small refused as a double free", m.Realloc(0, small, 500, 0, 0, 0, oracle.DoubleFree), spec.RuleRefines)
	wantRule(t, "live small refused as invalid", m.Realloc(0, small, 500, 0, 0, 0, oracle.InvalidPointer), spec.RuleRefines)
	wantRule(t, "live large refused as a double free", m.Realloc(0, large, 300_000, 0, 0, 0, oracle.DoubleFree), spec.RuleRefines)
	wantRule(t, "large to its own pages, moved", m.Realloc(0, large, 200_001, elsewhere, 200_001, 200_704, oracle.OK), spec.RuleRefines)
	wantRule(t, "large to its own pages, in place", m.Realloc(0, large, 200_001, large, 200_001, 200_704, oracle.OK), "")
	wantRule(t, "large one page more may move", m.Realloc(0, large, 200_705, elsewhere, 200_705, 204_800, oracle.OK), "")
}
