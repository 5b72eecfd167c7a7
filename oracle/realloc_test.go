package oracle_test

import (
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

func TestReallocRules(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.OpenCache(1)
	m.CloseCache(1, oracle.OK)
	small, large := uintptr(base), uintptr(base+spec.SuperblockSize)
	m.Alloc(0, 100, 1, small, 100, 112, oracle.OK)
	m.Alloc(0, 200_000, 1, large, 200_000, 200_704, oracle.OK) // 49 pages
	moved := uintptr(base + 8*spec.SuperblockSize)
	for _, tc := range []struct {
		name             string
		id               int
		old              uintptr
		n                int
		addr             uintptr
		length, capacity int
		got              oracle.Kind
		rule             string // "" when acceptable
	}{
		{"nil is Alloc", 0, 0, 8, base + 4096, 8, 8, oracle.OK, ""},
		{"grow within the class", 0, small, 112, small, 112, 112, oracle.OK, ""},
		{"not past it", 0, small, 113, small, 113, 112, oracle.OK, spec.RuleRefines},
		{"in place keeps the capacity", 0, small, 100, small, 100, 100, oracle.OK, spec.RuleRefines},
		{"shrink within the class", 0, small, 97, small, 97, 112, oracle.OK, ""},
		{"negative", 0, small, -1, 0, 0, 0, oracle.InvalidSize, ""},
		{"negative must fail", 0, small, -1, 0, 0, 0, oracle.OK, spec.RuleRefines},
		{"negative before closed", 1, small, -1, 0, 0, 0, oracle.InvalidSize, ""},
		{"closed", 1, small, 8, 0, 0, 0, oracle.Closed, ""},
		{"too large", 0, small, size + 1, 0, 0, 0, oracle.TooLarge, ""},
		{"no room leaves it live", 0, small, 500, 0, 0, 0, oracle.OutOfMemory, ""},
		{"large shrink in place, to n's pages", 0, large, 120_000, large, 120_000, 122_880, oracle.OK, ""},
		{"not keeping its capacity", 0, large, 110_000, large, 110_000, 122_880, oracle.OK, spec.RuleRefines},
		{"a shrink must stay in place", 0, large, 101_000, moved, 101_000, 102_400, oracle.OK, spec.RuleRefines},
		{"nor may it fail", 0, large, 101_000, 0, 0, 0, oracle.OutOfMemory, spec.RuleRefines},
		{"large to the same pages", 0, large, 122_880, large, 122_880, 122_880, oracle.OK, ""},
		{"large grows in place", 0, large, 200_000, large, 200_000, 200_704, oracle.OK, ""},
		{"large to less than half its pages", 0, large, 96 * 1024, large, 96 * 1024, 96 * 1024, oracle.OK, ""},
		{"large to small moves", 0, large, 1000, large, 1000, 1024, oracle.OK, spec.RuleRefines},
		{"or grows elsewhere", 0, large, 200_000, moved, 200_000, 200_704, oracle.OK, ""},
		{"the old one is gone", 0, large, 10, large, 10, 200_704, oracle.OK, spec.RuleFreeDouble},
		{"the move is an Alloc: capacity", 0, small, 500, base + 2*4096, 500, 500, oracle.OK, spec.RuleRefines},
		{"the move is an Alloc: not onto a live one", 0, small, 500, moved, 500, 512, oracle.OK, spec.RuleNoOverlap},
		{"move", 0, small, 500, base + 2*4096, 500, 512, oracle.OK, ""},
		{"stale: never itself", 0, small, 100, small, 100, 112, oracle.OK, spec.RuleFreeDouble},
		{"stale: refused", 0, small, 100, 0, 0, 0, oracle.DoubleFree, ""},
		{"stale: no longer a slot", 0, small, 100, 0, 0, 0, oracle.InvalidPointer, ""},
		{"stale: accepted remotely", 0, small, 16, base + 3*4096, 16, 16, oracle.OK, ""},
		{"interior: refused", 0, base + 2*4096 + 8, 10, 0, 0, 0, oracle.InvalidPointer, ""},
		{"interior: not a double free", 0, base + 2*4096 + 8, 10, 0, 0, 0, oracle.DoubleFree, spec.RuleFreeInvalid},
		{"interior: never accepted", 0, base + 2*4096 + 8, 10, base + 4*4096, 10, 16, oracle.OK, spec.RuleFreeInvalid},
		// FREE-INVALID: outside the reservation, refused before any Alloc
		// (review25): never for want of memory, and nothing counted in n's class.
		{"foreign: refused at once", 0, base + size, 300, 0, 0, 0, oracle.InvalidPointer, ""},
		{"foreign: never out of memory", 0, base - 64, 300, 0, 0, 0, oracle.OutOfMemory, spec.RuleFreeInvalid},
	} {
		v := m.Realloc(tc.id, tc.old, tc.n, tc.addr, tc.length, tc.capacity, tc.got)
		if (v == nil) != (tc.rule == "") || v != nil && v.Rule != tc.rule {
			t.Errorf("%s: %v, want rule %q", tc.name, v, tc.rule)
		}
	}
	live := map[uintptr]int{}
	for _, o := range m.Live() {
		live[o.Addr] = o.Size
	}
	want := map[uintptr]int{base + 4096: 8, base + 2*4096: 500, base + 3*4096: 16, moved: 200_000}
	if len(live) != len(want) {
		t.Errorf("live %v, want %v", live, want)
	}
	for a, n := range want {
		if live[a] != n {
			t.Errorf("live %v, want %v", live, want)
		}
	}
	// Counters: in place counts nothing; a move is an alloc and a free; a
	// refused stale Realloc allocated and freed its new object.
	for _, c := range []struct {
		n             int
		allocs, frees uint64
	}{{8, 1, 0}, {100, 3, 3}, {500, 1, 0}, {16, 2, 1}, {200_000, 2, 1}, {300, 0, 0}} {
		if got := m.Counts(oracle.ClassOf(c.n, 1)); got.Allocs != c.allocs || got.Frees != c.frees {
			t.Errorf("class of %d: %+v, want %d allocs %d frees", c.n, got, c.allocs, c.frees)
		}
	}
	if all, deferred := m.BadFrees(); all != 5 || deferred != 1 {
		t.Errorf("bad frees %d (%d deferred), want 5 (1)", all, deferred)
	}
}
