package invariants

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv8: the machine (TestMachine) drives what RunMachine and
// newMachine claim. A driver that stops drawing a configuration, a size, an
// alignment, an action or a front cache fails no check: what it no longer
// drives is simply not checked. So these count what the draws reach, from
// fixed seeds (rapid's Example), as fuzz/reach_test.go does for the fuzzers.

// TestMachineOptionsReach (CACHE-COHERENT: every way count; OOM-REAL:
// reservations of 16 to 64 superblocks; MEM-ACCOUNT: Retain default, 4
// superblocks and none, every decay; DEBUG-POISON; GUARD-FAULT with every
// sample rate and quarantine; the Go-heap backend): newMachine's options reach
// every value its comments list.
func TestMachineOptionsReach(t *testing.T) {
	gen := rapid.Custom(machineOptions)
	reserve, ways, retain, decay := map[int]bool{}, map[int]bool{}, map[int]bool{}, map[time.Duration]bool{}
	rate, qobjs, qbytes := map[int]bool{}, map[int]bool{}, map[int]bool{}
	debug, guard, heap := map[bool]bool{}, map[bool]bool{}, map[bool]bool{}
	for seed := range 400 {
		o := gen.Example(seed)
		reserve[o.Reserve/spec.SuperblockSize] = true
		ways[o.SuperblockCacheWays] = true
		retain[o.Retain] = true
		decay[o.Decay] = true
		debug[o.Debug], guard[o.Guard.Enabled], heap[o.HeapBackend] = true, true, true
		if o.Guard.Enabled {
			rate[o.Guard.SampleRate] = true
			qobjs[o.Guard.QuarantineObjects] = true
			qbytes[o.Guard.QuarantineBytes] = true
		}
	}
	want := func(name string, got map[int]bool, vals ...int) {
		t.Helper()
		for _, v := range vals {
			if !got[v] {
				t.Errorf("no machine runs with %s %d (reached: %v)", name, v, got)
			}
		}
	}
	want("superblocks", reserve, 16, 32, 64)
	want("superblock-cache ways", ways, 1, 8, 16, 32, 64, 128)
	want("Retain", retain, 0, 4*spec.SuperblockSize, -1)
	want("guard SampleRate", rate, 1, 3, -1)
	want("guard QuarantineObjects", qobjs, 1, 3, 0)
	want("guard QuarantineBytes", qbytes, 2*spec.SuperblockSize, 0)
	for _, d := range []time.Duration{0, -1, time.Hour} {
		if !decay[d] {
			t.Errorf("no machine runs with Decay %v (reached: %v)", d, decay)
		}
	}
	for name, m := range map[string]map[bool]bool{"debug mode": debug, "guard mode": guard, "the Go-heap backend": heap} {
		if !m[true] || !m[false] {
			t.Errorf("machine runs with %s: %v; want both", name, m)
		}
	}
}

// TestMachineAllocReach (ALIGN, ZEROED, LARGE-EXACT): the machine's
// allocations reach every alignment AllocAligned accepts, up to a superblock
// (64 KiB), and sizes from 0 through MaxSmall into large objects of more than
// two superblocks, both from drawSize alone (which Realloc draws from) and
// with the edge sizes.
func TestMachineAllocReach(t *testing.T) {
	const reservation = 16 * spec.SuperblockSize
	gen := rapid.Custom(func(t *rapid.T) [2]int {
		n, a := allocArgs(t, reservation)
		return [2]int{n, a}
	})
	aligns, sizes := map[int]bool{}, map[int]bool{}
	for seed := range 2000 {
		x := gen.Example(seed)
		sizes[x[0]], aligns[x[1]] = true, true
	}
	for a := 1; a <= spec.SuperblockSize; a *= 2 {
		if !aligns[a] {
			t.Errorf("the machine never allocates aligned to %d", a)
		}
	}
	for _, n := range []int{0, spec.MaxSmall, spec.MaxSmall + 1, reservation + 1} {
		if !sizes[n] {
			t.Errorf("the machine never allocates %d bytes", n)
		}
	}
	size := rapid.Custom(drawSize)
	var small, large, huge bool
	for seed := range 500 {
		n := size.Example(seed)
		small = small || n == spec.MaxSmall
		large = large || n > spec.MaxSmall
		huge = huge || n > 2*spec.SuperblockSize
	}
	if !small || !large || !huge {
		t.Errorf("drawSize reaches MaxSmall %v, a large size %v, one past two superblocks %v; want all", small, large, huge)
	}
}

// TestMachineActions (REFINES, and every rule the actions drive): the
// machine's actions include every call RunMachine's comment lists, and the
// check after every step ("").
func TestMachineActions(t *testing.T) {
	acts := (&machine{}).actions()
	for _, name := range []string{"alloc", "free", "freeCross", "freeBad", "allocBad", "flush", "flushFront",
		"flushAll", "trim", "realloc", "reallocBad", "freeTail", "stats", "leaks", "touchFreed", "closeCache",
		"newCache", "useClosed", ""} {
		if acts[name] == nil {
			t.Errorf("the machine has no action %q", name)
		}
	}
}

// TestFrontCallsReachEveryFrontCache (FRONT-EXCLUSIVE, STATS-EXACT through
// Allocator.Flush): the Harness's calls on Front run on every one of the
// front's internal caches in turn (WithFrontCache) and, between them, through
// the Allocator's own methods, at every stack depth of its cycle (for the
// shards), so that what Flush and Trim do to each internal cache is checked.
func TestFrontCallsReachEveryFrontCache(t *testing.T) {
	h, err := NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n := h.A.FrontCaches()
	routes, depths := map[int]int{}, map[int]bool{}
	for range 2 * max(n, frontDepths) {
		h.call(Front, func() {
			routes[h.route]++
			depths[runtime.Callers(0, make([]uintptr, 256))] = true
		})
	}
	for i := -1; i < n; i++ {
		if routes[i] == 0 {
			t.Errorf("no call on Front ran on route %d of %d front caches (-1: the Allocator's methods): %v", i, n, routes)
		}
	}
	if len(depths) != frontDepths {
		t.Errorf("calls on Front ran at %d stack depths, want %d", len(depths), frontDepths)
	}
	h.call(3, func() {
		if h.route != -1 {
			t.Errorf("a call on cache 3 runs with route %d", h.route)
		}
	})
}

// TestMachineFreers (FREE-DOUBLE, CACHE-COHERENT): the machine's free action
// frees through the object's own cache while it is open and through the
// Allocator once it is closed (never through the closed cache, which would
// only answer ErrClosed and leave the object live); freeCross frees through
// anyone but the object's own cache, the Allocator included.
func TestMachineFreers(t *testing.T) {
	h, err := NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{h: h}
	var ids []int
	for range 3 {
		id, err := h.NewCache()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	alloc := func(id int) uintptr {
		t.Helper()
		if err := h.Alloc(id, 100, 1); err != nil {
			t.Fatal(err)
		}
		return h.LastAddr
	}
	want := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	a, f := alloc(ids[0]), alloc(Front)
	want("owner of cache's object", m.owner(a), ids[0])
	want("cross freers of cache's object", m.crossFreers(a), []int{Front, ids[1], ids[2]})
	want("owner of the Allocator's object", m.owner(f), Front)
	want("cross freers of the Allocator's object", m.crossFreers(f), ids)
	if err := h.CloseCache(ids[0]); err != nil {
		t.Fatal(err)
	}
	want("owner of a closed cache's object", m.owner(a), Front)
	want("cross freers of a closed cache's object", m.crossFreers(a), []int{Front, ids[1], ids[2]})
	if err := h.FreeAll(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReallocSizesBracketEveryChange (ZEROED, REFINES: oracle.Model.Realloc):
// for a live object of every class, and large ones of 1 to 48 pages, the
// machine's and TestBoundaries' Realloc edge sizes hold both sides of every
// size where the model's answer changes: a small object stays in place
// exactly while the oracle's class of n is its class; a large one may stay
// exactly while n is large, and must stay while n also fits its pages.
func TestReallocSizesBracketEveryChange(t *testing.T) {
	const top = 3 * spec.SuperblockSize
	class := make([]int, top+2)
	for n := range class {
		class[n] = oracle.ClassOf(n, 1)
	}
	check := func(o oracle.Object, upto int, answer func(n int) [2]bool) {
		t.Helper()
		sizes := map[int]bool{}
		for _, n := range ReallocSizes(o) {
			sizes[n] = true
		}
		for n := 0; n <= upto; n++ {
			if answer(n) != answer(n+1) && !(sizes[n] && sizes[n+1]) {
				t.Errorf("Realloc of a %d-byte object of class %d changes its answer between %d and %d bytes: ReallocSizes has %v and %v",
					o.Usable, o.Class, n, n+1, sizes[n], sizes[n+1])
			}
		}
	}
	for k := range spec.NumClasses {
		check(oracle.Object{Class: k, Usable: spec.ClassSize(k)}, spec.MaxSmall+1, func(n int) [2]bool { return [2]bool{class[n] == k} })
	}
	for p := 1; p <= 48; p++ {
		u := p * spec.PageSize
		check(oracle.Object{Class: spec.Large, Usable: u}, top, func(n int) [2]bool {
			return [2]bool{class[n] == spec.Large, class[n] == spec.Large && oracle.UsableSize(n, 1) <= u}
		})
	}
}

// TestNilFreeOnClosedAgrees (FREE-INVALID: a nil or zero-capacity slice is a
// no-op): a nil or empty free through a closed cache, and through every cache
// and the Allocator after Allocator.Close, returns nil from impl, and the
// model allows exactly that. (The model used to say ErrClosed; no driver
// freed nil through a closed cache, so nothing compared the two.)
func TestNilFreeOnClosedAgrees(t *testing.T) {
	h, err := NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var ids []int
	for range 2 {
		id, err := h.NewCache()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	frees := func(when string, id int, c interface{ Free([]byte) error }) {
		t.Helper()
		for _, b := range [][]byte{nil, make([]byte, 0)} {
			err := c.Free(b)
			if err != nil {
				t.Errorf("%s: Free(%v) through %d returned %v, want nil (a no-op)", when, b, id, err)
			}
			if v := h.M.Free(id, addr(b), Kind(err)); v != nil {
				t.Errorf("%s: the model refuses Free(%v) through %d returning %v: %v", when, b, id, err, v)
			}
		}
	}
	if err := h.CloseCache(ids[0]); err != nil {
		t.Fatal(err)
	}
	frees("closed cache", ids[0], h.closedCache(ids[0]))
	if err := h.CloseAllocator(); err != nil {
		t.Fatal(err)
	}
	frees("after Allocator.Close", ids[0], h.closedCache(ids[0]))
	frees("after Allocator.Close", ids[1], h.caches[ids[1]])
	frees("after Allocator.Close", Front, h.A)
}

// TestFreeTailOffsets (FREE-INVALID: interior pointer, tail of a superblock,
// inside a large object): Harness.FreeTail frees where it says: for a small
// object whose class leaves a tail, the first byte past the superblock's last
// object, or with last the last object's last byte; for a large object the
// first byte past its pages, or with last its last byte.
func TestFreeTailOffsets(t *testing.T) {
	h, err := NewHarness(impl.Options{Reserve: 16 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	id, err := h.NewCache()
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	freeTailHook = func(_ uintptr, delta int) { got = append(got, delta) }
	defer func() { freeTailHook = nil }()
	k := -1 // a class whose objects leave a tail in their superblock
	for c := range spec.NumClasses {
		if spec.ClassObjects(c)*spec.ClassSize(c) < spec.SuperblockSize {
			k = c
			break
		}
	}
	if k < 0 {
		t.Fatal("no class leaves a tail")
	}
	for _, n := range []int{spec.ClassSize(k), spec.MaxSmall + spec.PageSize + 1} {
		if err := h.Alloc(id, n, 1); err != nil {
			t.Fatal(err)
		}
		a := h.LastAddr
		o, _ := h.M.LiveAt(a)
		end := o.Usable
		if o.Class != spec.Large {
			end = spec.ClassObjects(o.Class)*spec.ClassSize(o.Class) - int((a-h.M.Base())%spec.SuperblockSize)
		}
		got = got[:0]
		for _, last := range []bool{false, true} {
			if err := h.FreeTail(id, a, last); err != nil {
				t.Fatal(err)
			}
		}
		if want := []int{end, end - 1}; !reflect.DeepEqual(got, want) {
			t.Errorf("FreeTail of a %d-byte object (class %d) freed at offsets %v, want %v", n, o.Class, got, want)
		}
	}
	if err := h.FreeAll(); err != nil {
		t.Fatal(err)
	}
}
