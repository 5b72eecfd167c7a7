package oracle_test

import (
	"fmt"
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

const base, size = 1 << 30, 64 * spec.SuperblockSize

func TestAllocRules(t *testing.T) {
	m := oracle.New(base, size)
	if v := m.OpenCache(0); v != nil {
		t.Fatal(v)
	}
	for _, tc := range []struct {
		name             string
		n, align         int
		addr             uintptr
		length, capacity int
		got              oracle.Kind
		rule             string // "" when acceptable
	}{
		{"ok", 100, 1, base, 100, 112, oracle.OK, ""},
		{"same address again", 8, 1, base, 8, 8, oracle.OK, spec.RuleNoOverlap},
		{"wrong cap", 100, 1, base + 4096, 100, 100, oracle.OK, spec.RuleRefines},
		{"misaligned", 64, 1, base + 8192 + 16, 64, 64, oracle.OK, spec.RuleAlign},
		{"aligned request misaligned", 8, 256, base + 8192 + 16, 8, 256, oracle.OK, spec.RuleAlign},
		{"outside", 8, 1, base + size, 8, 8, oracle.OK, spec.RuleNoOverlap},
		{"negative must fail", -1, 1, 0, 0, 0, oracle.OK, spec.RuleRefines},
		{"negative", -1, 1, 0, 0, 0, oracle.InvalidSize, ""},
		{"bad alignment", 8, 3, 0, 0, 0, oracle.InvalidSize, ""},
		{"too large", size + 1, 1, 0, 0, 0, oracle.TooLarge, ""},
		{"out of memory is the allocator's call", 8, 1, 0, 0, 0, oracle.OutOfMemory, ""},
		{"but not for bad input", -8, 1, 0, 0, 0, oracle.OutOfMemory, spec.RuleRefines},
		{"large", 100_000, 1, base + spec.SuperblockSize, 100_000, 102400, oracle.OK, ""},
	} {
		v := m.Alloc(0, tc.n, tc.align, tc.addr, tc.length, tc.capacity, tc.got)
		if (v == nil) != (tc.rule == "") || v != nil && v.Rule != tc.rule {
			t.Errorf("%s: %v, want rule %q", tc.name, v, tc.rule)
		}
	}
}

func TestFreeRules(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.OpenCache(1)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK)
	for _, tc := range []struct {
		name string
		addr uintptr
		got  oracle.Kind
		rule string
	}{
		{"nil is a no-op", 0, oracle.OK, ""},
		{"interior", base + 1, oracle.OK, spec.RuleFreeInvalid},
		{"interior rejected", base + 1, oracle.InvalidPointer, ""},
		{"interior is not a double free", base + 8, oracle.DoubleFree, spec.RuleFreeInvalid},
		{"foreign", 4096, oracle.InvalidPointer, ""},
		{"never allocated: accepted for later", base + 4096, oracle.OK, ""},
		{"never allocated", base + 4096, oracle.DoubleFree, ""},
		{"live", base, oracle.OK, ""},
		{"again", base, oracle.DoubleFree, ""},
		{"again, no longer a slot", base, oracle.InvalidPointer, ""},
	} {
		v := m.Free(0, tc.addr, tc.got)
		if (v == nil) != (tc.rule == "") || v != nil && v.Rule != tc.rule {
			t.Errorf("%s: %v, want rule %q", tc.name, v, tc.rule)
		}
	}
	if all, deferred := m.BadFrees(); all != 6 || deferred != 1 {
		t.Errorf("bad frees %d (%d deferred)", all, deferred)
	}
	if c := m.Counts(oracle.ClassOf(100, 1)); c.Allocs != 1 || c.Frees != 1 {
		t.Errorf("counts %+v", c)
	}
	m.CloseCache(1, oracle.OK)
	if v := m.Free(1, base, oracle.DoubleFree); v == nil {
		t.Error("a closed cache must return ErrClosed")
	}
}

func TestCheckStats(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	m.Alloc(0, 100, 1, base, 100, 112, oracle.OK)
	k := oracle.ClassOf(100, 1)
	var s oracle.StatsView
	s.Allocs[k] = 32 // a refill moved 32 objects; one handed out
	if vs := m.CheckStats(s, 1, false); len(vs) != 0 {
		t.Errorf("lead within one cache's holding: %v", vs)
	}
	if vs := m.CheckStats(s, 1, true); len(vs) == 0 || vs[0].Rule != spec.RuleStatsExact {
		t.Errorf("after a flush the lead must be gone: %v", vs)
	}
	s.Frees[k] = 1
	if vs := m.CheckStats(s, 1, false); len(vs) == 0 || vs[0].Rule != spec.RuleStatsLag {
		t.Errorf("frees ahead of the truth: %v", vs)
	}
}

// TestCheckStatsUncounted (STATS-LEAD): in a build without class counters
// (Uncounted) every class's Allocs and Frees must read 0, whatever the true
// counts and flushed or not; a count in any class, the last included, is
// refused, and the large objects' counts are still judged.
func TestCheckStatsUncounted(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	must(t, m.Alloc(0, 100, 1, base, 100, 112, oracle.OK))
	must(t, m.Alloc(0, 200, 1, base+spec.SuperblockSize, 200, 208, oracle.OK))
	must(t, m.Free(0, base, oracle.OK))
	for _, flushed := range []bool{false, true} {
		if vs := m.CheckStats(oracle.StatsView{Uncounted: true}, 1, flushed); len(vs) != 0 {
			t.Errorf("zero counters, flushed %v: %v", flushed, vs)
		}
		for k := range spec.NumClasses {
			for _, field := range []string{"Allocs", "Frees"} {
				s := oracle.StatsView{Uncounted: true}
				if field == "Allocs" {
					s.Allocs[k] = 1
				} else {
					s.Frees[k] = 1
				}
				if vs := m.CheckStats(s, 1, flushed); len(vs) != 1 || vs[0].Rule != spec.RuleStatsLead {
					t.Errorf("class %d, %s 1, flushed %v: %v, want one %s", k, field, flushed, vs, spec.RuleStatsLead)
				}
			}
		}
	}
	s := oracle.StatsView{Uncounted: true, Large: oracle.Counts{Allocs: 1}}
	if vs := m.CheckStats(s, 1, false); len(vs) != 1 || vs[0].Rule != spec.RuleLargeExact {
		t.Errorf("a large allocation never made: %v, want one %s", vs, spec.RuleLargeExact)
	}
}

// The model accepts an allocator's choices and predicts the rest.
func Example() {
	m := oracle.New(1<<30, 1<<20)
	m.OpenCache(7)
	fmt.Println(m.Alloc(7, 100, 1, 1<<30, 100, 112, oracle.OK)) // allowed
	fmt.Println(m.Alloc(7, 100, 1, 1<<30, 100, 112, oracle.OK)) // that address is live
	fmt.Println(m.Free(7, 1<<30+8, oracle.DoubleFree))          // inside a live object
	fmt.Println(m.Free(7, 1<<30, oracle.OK), len(m.Live()))     // freed
	// Output:
	// <nil>
	// NO-OVERLAP: Alloc(100) = 0x40000000, which is live since Alloc(100)
	// FREE-INVALID: Free(0x40000008) on cache 7 returned ErrDoubleFree, want ErrInvalidPointer (class 7)
	// <nil> 0
}
