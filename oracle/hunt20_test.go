package oracle_test

import (
	"slices"
	"testing"

	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// REFINES: cache 0 is a cache like any other, and the Allocator's methods
// (cache -1) are the only caller that is usable without being opened. Cache
// 0 never opened, or opened and closed, answers ErrClosed: an Alloc or a Free
// on it that succeeds is refused.
// Slip: usable(id) takes id <= 0 for the Allocator's methods.
func TestModelCacheZeroCloses(t *testing.T) {
	m := oracle.New(base, size)
	wantRule(t, "Alloc on cache 0, never opened, succeeds", m.Alloc(0, 8, 1, base, 8, 8, oracle.OK), spec.RuleRefines)
	wantRule(t, "Alloc on cache 0, never opened, closed", m.Alloc(0, 8, 1, 0, 0, 0, oracle.Closed), "")
	wantRule(t, "open cache 0", m.OpenCache(0), "")
	wantRule(t, "Alloc on open cache 0", m.Alloc(0, 8, 1, base, 8, 8, oracle.OK), "")
	wantRule(t, "close cache 0", m.CloseCache(0, oracle.OK), "")
	wantRule(t, "Alloc on closed cache 0 succeeds", m.Alloc(0, 8, 1, base+8, 8, 8, oracle.OK), spec.RuleRefines)
	wantRule(t, "Free on closed cache 0 succeeds", m.Free(0, base, oracle.OK), spec.RuleRefines)
	wantRule(t, "Free on closed cache 0, closed", m.Free(0, base, oracle.Closed), "")
	wantRule(t, "Realloc on closed cache 0 succeeds", m.Realloc(0, base, 16, base+16, 16, 16, oracle.OK), spec.RuleRefines)
	wantRule(t, "close cache 0 again", m.CloseCache(0, oracle.OK), spec.RuleRefines)
	if got := m.ReallocRefusal(0, 16); got != oracle.Closed {
		t.Errorf("ReallocRefusal on closed cache 0 = %v, want ErrClosed", got)
	}
}

// REFINES (ErrTooLarge): MaxAlloc (1 TiB = 1099511627776 bytes) is the largest
// request ever accepted, so in a reservation of 2 TiB (the model needs no
// memory for it) Alloc and Realloc of exactly 1 TiB are not too large, and may
// only run out of memory; one byte more is ErrTooLarge. Likewise a request of
// exactly the reservation's size (4 MiB here) is not too large.
// Slips: Alloc or ReallocRefusal say TooLarge from n >= spec.MaxAlloc; Alloc
// says TooLarge from uintptr(n) >= m.size.
func TestModelTooLargeBoundaries(t *testing.T) {
	const maxAlloc = 1099511627776 // spec.MaxAlloc: 1 << 40
	big := oracle.New(base, 2*maxAlloc)
	wantRule(t, "Alloc(MaxAlloc) out of memory", big.Alloc(-1, maxAlloc, 1, 0, 0, 0, oracle.OutOfMemory), "")
	wantRule(t, "Alloc(MaxAlloc) too large", big.Alloc(-1, maxAlloc, 1, 0, 0, 0, oracle.TooLarge), spec.RuleRefines)
	wantRule(t, "Alloc(MaxAlloc+1) too large", big.Alloc(-1, maxAlloc+1, 1, 0, 0, 0, oracle.TooLarge), "")
	if got := big.ReallocRefusal(-1, maxAlloc); got != oracle.OK {
		t.Errorf("ReallocRefusal(MaxAlloc) = %v, want ok", got)
	}
	if got := big.ReallocRefusal(-1, maxAlloc+1); got != oracle.TooLarge {
		t.Errorf("ReallocRefusal(MaxAlloc+1) = %v, want ErrTooLarge", got)
	}
	const reservation = 4194304 // size: 64 superblocks of 64 KiB
	m := oracle.New(base, reservation)
	wantRule(t, "Alloc of the reservation's size out of memory", m.Alloc(-1, reservation, 1, 0, 0, 0, oracle.OutOfMemory), "")
	wantRule(t, "Alloc of the reservation's size too large", m.Alloc(-1, reservation, 1, 0, 0, 0, oracle.TooLarge), spec.RuleRefines)
	wantRule(t, "Alloc of one byte more too large", m.Alloc(-1, reservation+1, 1, 0, 0, 0, oracle.TooLarge), "")
}

// REFINES (replay): OpenCaches returns the open caches' IDs in order, and Live
// the live objects by address, whatever the order of the calls: the fuzzers
// and machines pick among them by index, so a replay picks what the run that
// failed picked.
// Slip: OpenCaches returns the IDs in map order (sort dropped).
func TestModelListsSorted(t *testing.T) {
	m := oracle.New(base, size)
	for _, id := range []int{5, 2, 9, 7} {
		m.OpenCache(id)
	}
	m.CloseCache(7, oracle.OK)
	for _, a := range []uintptr{base + 448, base + 112, base + 336, base, base + 224} {
		if v := m.Alloc(5, 100, 1, a, 100, 112, oracle.OK); v != nil {
			t.Fatal(v)
		}
	}
	for range 20 { // map order differs from call to call
		if got := m.OpenCaches(); !slices.Equal(got, []int{2, 5, 9}) {
			t.Fatalf("OpenCaches() = %v, want [2 5 9]", got)
		}
		var got []uintptr
		for _, o := range m.Live() {
			got = append(got, o.Addr)
		}
		if want := []uintptr{base, base + 112, base + 224, base + 336, base + 448}; !slices.Equal(got, want) {
			t.Fatalf("Live() addresses %#x, want %#x", got, want)
		}
	}
}

// REFINES: Forget takes a live object out of the model without counting a
// free: it is no longer live (not in Live, not at its address, not containing
// its interior), its class's counts are unchanged, and Restore puts it back.
// A concurrent driver relies on it: between Forget and Settle the address is
// judged with the calls on it, not as the object live before them.
// Slip: Forget returns the object but leaves it live.
func TestModelForgetTakesOut(t *testing.T) {
	m := oracle.New(base, size)
	m.OpenCache(0)
	if v := m.Alloc(0, 100, 1, base, 100, 112, oracle.OK); v != nil {
		t.Fatal(v)
	}
	o, ok := m.Forget(base)
	if !ok || o.Addr != base || o.Usable != 112 || o.Class != 7 {
		t.Fatalf("Forget = %+v, %v; want the 112-byte object at base", o, ok)
	}
	if _, ok := m.LiveAt(base); ok || len(m.Live()) != 0 {
		t.Errorf("after Forget: live %v", m.Live())
	}
	if _, ok := m.Containing(base + 8); ok {
		t.Error("after Forget: an object still contains base+8")
	}
	if c := m.Counts(7); c.Allocs != 1 || c.Frees != 0 {
		t.Errorf("after Forget: counts %+v, want 1 alloc 0 frees", c)
	}
	if _, ok := m.Forget(base); ok {
		t.Error("a second Forget found the object again")
	}
	m.Restore(o)
	if got, ok := m.LiveAt(base); !ok || got != o {
		t.Errorf("after Restore: %+v, %v", got, ok)
	}
}

// FREE-INVALID, REFINES: a free on a closed cache (or Allocator) is ErrClosed
// whatever the pointer, so one inside an object live all along that returned
// ErrClosed is right, and leaves the address as it was; InvalidPointer is
// right too, and anything else is FREE-INVALID.
// Bug (found by hunt20): JudgeAddress required ErrInvalidPointer of every
// free inside a live object, ErrClosed included.
func TestJudgeAddressInteriorClosed(t *testing.T) {
	inside := func(got oracle.Kind) []oracle.Call {
		return []oracle.Call{{Kind: oracle.CallFree, Begin: 1, End: 2, Got: got, Interior: true}}
	}
	for _, tc := range []struct {
		got  oracle.Kind
		rule string
	}{
		{oracle.Closed, ""},
		{oracle.InvalidPointer, ""},
		{oracle.DoubleFree, spec.RuleFreeInvalid},
		{oracle.OK, spec.RuleFreeInvalid},
	} {
		outs, v := oracle.JudgeAddress(false, inside(tc.got))
		switch {
		case tc.rule == "" && (v != nil || !slices.Equal(lives(outs), []int{oracle.LiveNone})):
			t.Errorf("a free inside a live object returned %v: %v, %v; want nothing live, no violation", tc.got, lives(outs), v)
		case tc.rule != "" && (v == nil || v.Rule != tc.rule):
			t.Errorf("a free inside a live object returned %v: %v; want a %s violation", tc.got, v, tc.rule)
		}
	}
}
