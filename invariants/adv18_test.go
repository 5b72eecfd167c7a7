package invariants

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv18: the machine's actions reach what RunMachine claims, seen
// through sawHook (each call an action asks the Harness for), from fixed
// seeds, as adv8's tests count what the draws reach. A draw that stops
// reaching a value fails no check: what it no longer drives is simply not
// checked.

// runAction runs a machine action once per seed, with rapid's Example.
func runAction(act func(*rapid.T), seeds int) {
	gen := rapid.Custom(func(t *rapid.T) int { act(t); return 0 })
	for seed := range seeds {
		gen.Example(seed)
	}
}

// adv18Machine is a machine on a new Harness with opt and n open caches.
func adv18Machine(t *testing.T, opt impl.Options, n int) *machine {
	t.Helper()
	h, err := NewHarness(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for range n {
		if _, err := h.NewCache(); err != nil {
			t.Fatal(err)
		}
	}
	return &machine{h: h}
}

// sawCalls runs act once per seed and returns the calls it asked for.
func sawCalls(t *testing.T, act func(*rapid.T), seeds int) []sawCall {
	t.Helper()
	var calls []sawCall
	sawHook = func(c sawCall) { calls = append(calls, c) }
	defer func() { sawHook = nil }()
	runAction(act, seeds)
	return calls
}

// TestMachineDrawsReach (REFINES, ALIGN, FREE-INVALID, FREE-DOUBLE, EMPTY:
// what RunMachine's comment lists): alloc allocates through the Allocator's
// methods (Front) as well as caches; allocBad asks for a bad alignment as well
// as a negative and a too large size; freeBad makes every kind of bad free,
// and its double frees free more than the last object freed; realloc calls
// Realloc(nil, n); freeTail frees both at a large object's end and at its last
// byte; useClosed resizes a live object through a closed cache; and a run
// ends one time in four with the Allocator closed while objects are live
// (afterClose: every call after Close).
func TestMachineDrawsReach(t *testing.T) {
	m := adv18Machine(t, impl.Options{Reserve: 64 * spec.SuperblockSize}, 3)
	ids := m.h.Caches()
	alloc := func(id, n int) uintptr {
		t.Helper()
		if err := m.h.Alloc(id, n, 1); err != nil {
			t.Fatal(err)
		}
		return m.h.LastAddr
	}
	free := func(a uintptr) {
		t.Helper()
		if err := m.h.Free(m.owner(a), a); err != nil {
			t.Fatal(err)
		}
	}

	var front, cache bool // REFINES: Allocator.Alloc as well as Cache.Alloc
	for _, c := range sawCalls(t, m.alloc, 60) {
		front, cache = front || c.ID == Front, cache || c.ID != Front
	}
	if !front || !cache {
		t.Errorf("the machine's alloc allocates through the Allocator %v, through a cache %v; want both", front, cache)
	}

	var neg, huge, badAlign bool // ALIGN, REFINES: every kind of bad allocation
	for _, c := range sawCalls(t, m.allocBad, 60) {
		neg, huge = neg || c.N < 0, huge || c.N > spec.MaxAlloc
		badAlign = badAlign || c.Align <= 0 || c.Align&(c.Align-1) != 0 || c.Align > spec.MaxAlign
	}
	if !neg || !huge || !badAlign {
		t.Errorf("the machine's allocBad asks for a negative size %v, a too large one %v, a bad alignment %v; want all", neg, huge, badAlign)
	}
	if err := m.h.FreeAll(); err != nil {
		t.Fatal(err)
	}

	// FREE-INVALID, FREE-DOUBLE: every kind of bad free, double frees of
	// every object freed (not only the last).
	var objs []uintptr
	for range 6 {
		objs = append(objs, alloc(ids[0], 100))
	}
	for _, a := range objs[:3] {
		free(a)
	}
	kinds, doubles := map[int]bool{}, map[uintptr]bool{}
	for _, c := range sawCalls(t, m.freeBad, 200) {
		kinds[c.N] = true
		if c.N == BadDouble {
			doubles[c.Addr] = true
		}
	}
	for k := range NumBad {
		if !kinds[k] {
			t.Errorf("the machine's freeBad never makes a bad free of kind %d (made %v)", k, kinds)
		}
	}
	if len(doubles) < 2 {
		t.Errorf("the machine's double frees free %d distinct objects of the 3 freed; want more than one", len(doubles))
	}

	var nilRealloc bool // REFINES: Realloc(nil, n) is Alloc(n)
	for _, c := range sawCalls(t, m.realloc, 60) {
		nilRealloc = nilRealloc || c.Call == "realloc" && c.Addr == 0
	}
	if !nilRealloc {
		t.Error("the machine's realloc never calls Realloc(nil, n)")
	}

	// REFINES: a closed cache's Realloc of a live object (ErrClosed, the
	// object untouched), not only of nil.
	if err := m.h.CloseCache(ids[2]); err != nil {
		t.Fatal(err)
	}
	var closedLive, closedNil bool
	for _, c := range sawCalls(t, m.useClosed, 60) {
		if c.Call == "realloc" && c.Closed {
			closedLive, closedNil = closedLive || c.Addr != 0, closedNil || c.Addr == 0
		}
	}
	if !closedLive || !closedNil {
		t.Errorf("the machine's useClosed resizes through a closed cache a live object %v, nil %v; want both", closedLive, closedNil)
	}
	if err := m.h.FreeAll(); err != nil {
		t.Fatal(err)
	}

	// FREE-INVALID: a large object's first byte past its pages and its last byte.
	a := alloc(ids[0], spec.MaxSmall+spec.PageSize+1)
	o, _ := m.h.M.LiveAt(a)
	deltas := map[int]bool{}
	freeTailHook = func(_ uintptr, delta int) { deltas[delta] = true }
	runAction(m.freeTail, 40)
	freeTailHook = nil
	if !deltas[o.Usable] || !deltas[o.Usable-1] {
		t.Errorf("the machine's freeTail of a %d-byte large object freed at offsets %v; want %d and %d", o.Usable, deltas, o.Usable, o.Usable-1)
	}
	if err := m.h.FreeAll(); err != nil {
		t.Fatal(err)
	}

	// EMPTY, REFINES: some runs end with the Allocator closed while objects
	// are live, every method then called on it; the others free everything.
	var closedLiveEnd, freedEnd int
	for seed := range 24 {
		m := adv18Machine(t, impl.Options{Reserve: 16 * spec.SuperblockSize}, 1)
		if err := m.h.Alloc(m.h.Caches()[0], 100, 1); err != nil {
			t.Fatal(err)
		}
		after := false
		sawHook = func(c sawCall) { after = after || c.Call == "alloc" && c.Closed }
		rapid.Custom(func(t *rapid.T) int { m.end(t); return 0 }).Example(seed)
		sawHook = nil
		if after {
			closedLiveEnd++
		} else {
			freedEnd++
		}
	}
	if closedLiveEnd == 0 || freedEnd == 0 {
		t.Errorf("of 24 machine runs, %d end closing the Allocator with objects live, %d freeing everything; want both", closedLiveEnd, freedEnd)
	}
}

// TestMachineTouchReach (GUARD-FAULT): touchFreed reads and writes a freed
// object in quarantine, and touches both the object itself and the rest of
// its quarantined superblock (past its end), where guard mode protects memory;
// and every object in quarantine, not only the oldest (adv20, mutant
// toucholdestonly: two of 112 and 512 bytes).
func TestMachineTouchReach(t *testing.T) {
	m := adv18Machine(t, impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}}, 1)
	if !m.h.A.GuardProtects() {
		t.Skip("guard mode does not protect memory here (the Go-heap backend)")
	}
	id := m.h.Caches()[0]
	if err := m.h.Alloc(id, 100, 1); err != nil {
		t.Fatal(err)
	}
	a := m.h.LastAddr
	if err := m.h.Alloc(id, 100, 1); err != nil { // a live object: a pointer into the reservation
		t.Fatal(err)
	}
	if err := m.h.Free(id, a); err != nil {
		t.Fatal(err)
	}
	if err := m.h.Alloc(id, 500, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.h.Free(id, m.h.LastAddr); err != nil {
		t.Fatal(err)
	}
	var read, write, inside, past bool
	sizes := map[int]bool{}
	for _, c := range sawCalls(t, m.touchFreed, 30) {
		read, write = read || !c.Write, write || c.Write
		inside, past = inside || c.Offset < c.Size, past || c.Offset >= c.Size
		sizes[c.Size] = true
	}
	if !read || !write || !inside || !past {
		t.Errorf("the machine's touchFreed reads %v, writes %v, touches the object %v, past its end %v; want all", read, write, inside, past)
	}
	if len(sizes) != 2 {
		t.Errorf("the machine's touchFreed touches objects of sizes %v of the two in quarantine", sizes)
	}
	if err := m.h.FreeAll(); err != nil {
		t.Fatal(err)
	}
}
