package oracle_test

import (
	"slices"
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

func lives(outs []oracle.Outcome) []int {
	var l []int
	for _, o := range outs {
		l = append(l, o.Live)
	}
	return l
}

// TestJudgeAddress: the per-address linearizability judge accepts exactly the
// histories some order explains, and names the rule of the ones none does.
func TestJudgeAddress(t *testing.T) {
	alloc := func(b, e uint64) oracle.Call { return oracle.Call{Kind: oracle.CallAlloc, Begin: b, End: e} }
	free := func(b, e uint64, got oracle.Kind) oracle.Call {
		return oracle.Call{Kind: oracle.CallFree, Begin: b, End: e, Got: got}
	}
	for _, tc := range []struct {
		name       string
		liveBefore bool
		calls      []oracle.Call
		want       []int  // outcomes' Live, sorted
		rule       string // the violation, when none
	}{
		{"alloc then free", false, []oracle.Call{alloc(1, 2), free(3, 4, oracle.OK)}, []int{oracle.LiveNone}, ""},
		{"a live object freed", true, []oracle.Call{free(1, 2, oracle.OK)}, []int{oracle.LiveNone}, ""},
		{"a double free accepted, found later", false, []oracle.Call{free(1, 2, oracle.OK)}, []int{oracle.LiveNone}, ""},
		{"a double free refused", false, []oracle.Call{free(1, 2, oracle.DoubleFree)}, []int{oracle.LiveNone}, ""},
		{"a valid free refused", true, []oracle.Call{free(1, 2, oracle.DoubleFree)}, nil, spec.RuleFreeDouble},
		{"handed out while live", true, []oracle.Call{alloc(1, 2)}, nil, spec.RuleNoOverlap},
		{"two allocs, no free between", false, []oracle.Call{alloc(1, 3), alloc(2, 4)}, nil, spec.RuleNoOverlap},
		{"two allocs, a free between", false, []oracle.Call{alloc(1, 3), alloc(2, 6), free(4, 5, oracle.OK)}, []int{1}, ""},
		{"two allocs, a long free between", false, []oracle.Call{alloc(1, 3), alloc(2, 6), free(1, 7, oracle.OK)}, []int{0, 1}, ""},
		// A stale free racing reuse: it freed the new object, or came first and
		// was a double free to be found later.
		{"stale free racing reuse", false, []oracle.Call{free(1, 10, oracle.OK), alloc(2, 5)}, []int{oracle.LiveNone, 1}, ""},
		{"stale free after reuse", false, []oracle.Call{alloc(1, 2), free(3, 4, oracle.OK)}, []int{oracle.LiveNone}, ""},
		{"stale free refused while reused", false, []oracle.Call{free(1, 10, oracle.DoubleFree), alloc(2, 5)}, []int{1}, ""},
		{"stale free refused after reuse", false, []oracle.Call{alloc(1, 2), free(3, 4, oracle.DoubleFree)}, nil, spec.RuleFreeDouble},
		{"a free inside a live object", false, []oracle.Call{{Kind: oracle.CallFree, Begin: 1, End: 2, Got: oracle.DoubleFree, Interior: true}}, nil, spec.RuleFreeInvalid},
		{"in place realloc of a freed object", false, []oracle.Call{{Kind: oracle.CallKeep, Begin: 1, End: 2}}, nil, spec.RuleFreeDouble},
		{"in place realloc racing a stale free", true, []oracle.Call{{Kind: oracle.CallKeep, Begin: 1, End: 4}, free(2, 3, oracle.OK)}, []int{oracle.LiveNone}, ""},
	} {
		outs, v := oracle.JudgeAddress(tc.liveBefore, tc.calls)
		switch {
		case tc.rule != "" && (v == nil || v.Rule != tc.rule):
			t.Errorf("%s: got %v, %v; want a %s violation", tc.name, lives(outs), v, tc.rule)
		case tc.rule == "" && v != nil:
			t.Errorf("%s: %v", tc.name, v)
		case tc.rule == "" && !slices.Equal(lives(outs), tc.want):
			t.Errorf("%s: outcomes %v, want %v", tc.name, lives(outs), tc.want)
		}
	}
}

// TestSettle: the counts a settled address adds are the ones its outcome
// implies: each object but the survivor freed once, the extra nil frees
// deferred double frees.
func TestSettle(t *testing.T) {
	m := oracle.New(0x10000, 1<<20)
	k := 3
	obj := oracle.Object{Addr: 0x10000, Size: 10, Usable: spec.ClassSize(k), Class: k, Align: 1}
	calls := []oracle.Call{
		{Kind: oracle.CallFree, Begin: 1, End: 10, Got: oracle.OK}, // stale
		{Kind: oracle.CallAlloc, Begin: 2, End: 5},
	}
	// If the stale free had ended before the alloc began, the holder's free
	// could not be refused.
	refused := []oracle.Call{calls[0], calls[1], {Kind: oracle.CallFree, Begin: 11, End: 12, Got: oracle.DoubleFree}}
	refused[0].End = 1
	refused[0].Begin = 0
	if _, v := oracle.JudgeAddress(false, refused); v == nil {
		t.Fatal("a refused free of an object no stale free could have freed is accepted")
	}
	outs, v := oracle.JudgeAddress(false, calls)
	if v != nil || len(outs) != 2 || outs[1].Live != 1 {
		t.Fatalf("outcomes %v, %v", lives(outs), v)
	}
	m.Settle(obj.Addr, nil, calls, []oracle.Object{{}, obj}, outs[1])
	if got, ok := m.LiveAt(obj.Addr); !ok || got != obj {
		t.Fatalf("live after settling: %v %v", got, ok)
	}
	if c := m.Counts(k); c.Allocs != 1 || c.Frees != 0 {
		t.Fatalf("counts %+v", c)
	}
	if all, deferred := m.BadFrees(); all != 1 || deferred != 1 {
		t.Fatalf("bad frees %d (%d deferred)", all, deferred)
	}
}

// TestJudgeFreeOutcomes (FREE-DOUBLE, REFINES): a free's outcome is one of
// the ones a free can have; ErrClosed changes nothing; anything else (a size
// or memory error) no order explains.
func TestJudgeFreeOutcomes(t *testing.T) {
	for _, got := range []oracle.Kind{oracle.OutOfMemory, oracle.TooLarge, oracle.InvalidSize} {
		for _, live := range []bool{false, true} {
			if outs, v := oracle.JudgeAddress(live, []oracle.Call{{Kind: oracle.CallFree, Begin: 1, End: 2, Got: got}}); v == nil {
				t.Errorf("a free returning %v (live before: %v) is accepted: outcomes %v", got, live, lives(outs))
			}
		}
	}
	outs, v := oracle.JudgeAddress(true, []oracle.Call{{Kind: oracle.CallFree, Begin: 1, End: 2, Got: oracle.Closed}})
	if v != nil || !slices.Equal(lives(outs), []int{oracle.LiveBefore}) {
		t.Errorf("a free refused as closed: %v, %v; want the object still live", lives(outs), v)
	}
}

// TestSettleCounts (STATS-EXACT, FREE-INVALID): what Settle adds for each
// outcome: the object live before counts its free only if it died, a refused
// invalid free counts as invalid, and Unfree takes back exactly the free that
// Free counted.
func TestSettleCounts(t *testing.T) {
	k := 3
	obj := func(addr uintptr) oracle.Object {
		return oracle.Object{Addr: addr, Size: spec.ClassSize(k), Usable: spec.ClassSize(k), Class: k, Align: 1}
	}
	m := oracle.New(0x10000, 1<<20)
	m.OpenCache(0)
	a := obj(0x10000)
	must := func(v *oracle.Violation) {
		t.Helper()
		if v != nil {
			t.Fatal(v)
		}
	}
	must(m.Alloc(0, a.Size, 1, a.Addr, a.Size, a.Usable, oracle.OK))
	// The live object survives a failed Realloc: no free.
	noop := []oracle.Call{{Kind: oracle.CallNoop, Begin: 1, End: 2}}
	m.Forget(a.Addr)
	m.Settle(a.Addr, &a, noop, []oracle.Object{{}}, oracle.Outcome{Live: oracle.LiveBefore})
	if c := m.Counts(k); c.Allocs != 1 || c.Frees != 0 {
		t.Errorf("the object live before survived: counts %+v, want 1 alloc 0 frees", c)
	}
	if got, ok := m.LiveAt(a.Addr); !ok || got != a {
		t.Errorf("the object live before survived: live %v %v", got, ok)
	}
	// Then it dies by a free.
	free := []oracle.Call{{Kind: oracle.CallFree, Begin: 3, End: 4, Got: oracle.OK}}
	m.Forget(a.Addr)
	m.Settle(a.Addr, &a, free, []oracle.Object{{}}, oracle.Outcome{Live: oracle.LiveNone})
	if c := m.Counts(k); c.Allocs != 1 || c.Frees != 1 {
		t.Errorf("the object live before died: counts %+v, want 1 alloc 1 free", c)
	}
	if _, ok := m.LiveAt(a.Addr); ok {
		t.Error("the object live before died: still live")
	}
	// A refused free, one invalid and one double, on the dead address.
	bad := []oracle.Call{{Kind: oracle.CallFree, Begin: 5, End: 6, Got: oracle.InvalidPointer}, {Kind: oracle.CallFree, Begin: 7, End: 8, Got: oracle.DoubleFree}}
	m.Settle(a.Addr, nil, bad, []oracle.Object{{}, {}}, oracle.Outcome{Live: oracle.LiveNone})
	if double, invalid := m.BadFreeKinds(); double != 1 || invalid != 1 {
		t.Errorf("refused frees: %d double, %d invalid; want 1 and 1", double, invalid)
	}
	if all, deferred := m.BadFrees(); all != 2 || deferred != 0 {
		t.Errorf("refused frees: %d bad (%d deferred), want 2 (0)", all, deferred)
	}
	// Unfree undoes the free Free counted, nothing more.
	b := obj(0x20000)
	must(m.Alloc(0, b.Size, 1, b.Addr, b.Size, b.Usable, oracle.OK))
	must(m.Free(0, b.Addr, oracle.OK))
	m.Unfree(b)
	if c := m.Counts(k); c.Allocs != 2 || c.Frees != 1 {
		t.Errorf("after Unfree: counts %+v, want 2 allocs 1 free", c)
	}
}

// TestJudgeAddressOverlapBound (REFINES): the judge tracks the calls in
// flight on one address in a 64-bit set, so a 65th at once is refused with
// REFINES, not folded into a wrapped bit; 64 at once are judged. 64 and 65
// overlapping allocs: 64 get their verdict (NO-OVERLAP: two took effect with
// no free between), 65 the bound's. Slip: the bound checked one late (the 65th
// call's bit is 1<<64, which is 0, and its verdict becomes NO-OVERLAP too).
func TestJudgeAddressOverlapBound(t *testing.T) {
	allocs := func(n int) []oracle.Call {
		calls := make([]oracle.Call, n)
		for i := range calls {
			calls[i] = oracle.Call{Kind: oracle.CallAlloc, Begin: uint64(1 + i), End: uint64(1000 + i)}
		}
		return calls
	}
	if _, v := oracle.JudgeAddress(false, allocs(64)); v == nil || v.Rule != spec.RuleNoOverlap {
		t.Errorf("64 overlapping allocs: %v, want a %s violation", v, spec.RuleNoOverlap)
	}
	if _, v := oracle.JudgeAddress(false, allocs(65)); v == nil || v.Rule != spec.RuleRefines {
		t.Errorf("65 overlapping allocs: %v, want the bound's %s violation", v, spec.RuleRefines)
	}
}

// TestCallString: a call in a report says what it was, when, what it got,
// whether it was inside a live object, and whose it was.
func TestCallString(t *testing.T) {
	c := oracle.Call{Kind: oracle.CallFree, Begin: 3, End: 9, Got: oracle.InvalidPointer}
	const plain = "free [3,9] ErrInvalidPointer"
	if got := c.String(); got != plain {
		t.Errorf("%q, want %q", got, plain)
	}
	c.Interior, c.Who = true, "goroutine 7"
	if got, want := c.String(), plain+" (inside a live object) by goroutine 7"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	c.Interior = false
	if got, want := c.String(), plain+" by goroutine 7"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
