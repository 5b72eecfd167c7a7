package fuzz

import (
	"fmt"
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestProgramOptionsReach: the header reaches every configuration Program
// documents: every superblock-cache way count, debug mode, guard mode with
// every small allocation sampled and with one in 3 and a quarantine of one,
// and the pool that returns memory at once (Retain, Decay < 0).
func TestProgramOptionsReach(t *testing.T) {
	ways := map[int]bool{}
	var debug, guard1, guard3, retain bool
	for h := range 256 {
		o := Program{Header: uint8(h)}.Options()
		ways[o.SuperblockCacheWays] = true
		debug = debug || o.Debug
		guard1 = guard1 || o.Guard == impl.GuardOptions{Enabled: true, SampleRate: 1}
		guard3 = guard3 || o.Guard == impl.GuardOptions{Enabled: true, SampleRate: 3, QuarantineObjects: 1}
		retain = retain || o.Retain == 2*spec.SuperblockSize && o.Decay < 0 && !o.Guard.Enabled
	}
	for _, w := range []int{1, 8, 16, 32, 64, 128} {
		if !ways[w] {
			t.Errorf("no header selects %d superblock-cache ways", w)
		}
	}
	if !debug || !guard1 || !guard3 || !retain {
		t.Errorf("headers reach debug %v, guard (every one) %v, guard (one in 3) %v, retain %v; want all", debug, guard1, guard3, retain)
	}
}

// TestProgramSizeReach: each of a command's size ranges reaches its bounds:
// 256, 4096, MaxSmall, and the smallest large size, MaxSmall+1.
func TestProgramSizeReach(t *testing.T) {
	lo, hi := [4]int{1 << 30, 1 << 30, 1 << 30, 1 << 30}, [4]int{}
	for f := range 4 {
		for s := range 1 << 16 {
			n := Cmd{Size: uint16(s), Flags: uint8(f)}.size()
			lo[f], hi[f] = min(lo[f], n), max(hi[f], n)
		}
	}
	if want := [3]int{256, 4096, spec.MaxSmall}; [3]int(hi[:3]) != want || lo[0] != 0 || lo[3] != spec.MaxSmall+1 {
		t.Errorf("size ranges [%v, %v], want upper bounds %v (and large from %d)", lo, hi, want, spec.MaxSmall+1)
	}
}

// TestProgramReach: the seed programs FuzzProgram runs under go test make
// every kind of call Run claims, with the invariants checked after each:
// allocations on the Allocator's methods (Front), chosen by the cache selector, an alignment of a superblock, a
// cross free on a cache other than the owner, a free through a closed cache,
// a touch of the quarantine, a realloc back to the old size, a realloc by the
// Allocator (flags mode 2, always on it), every kind of bad free, both kinds of
// tail free, an edge size aligned; and every configuration a header selects:
// every way count, debug mode, guard mode (every small allocation sampled, and
// one in 3), the pool that returns memory at every release past its Retain.
func TestProgramReach(t *testing.T) {
	seen := map[string]bool{}
	observe = func(h *invariants.Harness, o observed) {
		if !h.CheckEachStep {
			t.Fatal("Run does not check the invariants after every command")
		}
		seen[o.Call] = true
		if o.Op == OpFreeCross && o.ID == o.Owner {
			seen["cross free on its owner"] = true
		}
		switch {
		case o.ID == invariants.Front && (o.Op == OpAlloc || o.Op == OpAllocAligned):
			seen["front"] = true
		case o.Op == OpAllocAligned && o.A == spec.SuperblockSize:
			seen["superblock alignment"] = true
		case o.Op == OpFreeCross && o.ID != o.Owner:
			seen["cross free"] = true
		case o.Op == OpAllocEdge && o.A > 1:
			seen["aligned edge"] = true
		case o.Call == "free bad":
			seen[fmt.Sprintf("bad free %d", o.N)] = true
		case o.Call == "free tail":
			seen[fmt.Sprintf("free tail %d", o.N)] = true
		case o.Call == "realloc" && o.N == 2:
			seen["realloc by the Allocator"] = true
			if o.ID != invariants.Front {
				seen["realloc mode 2 not on the Allocator"] = true
			}
		}
	}
	defer func() { observe = nil }()
	ways := map[int]bool{}
	for _, p := range seedPrograms() {
		o := p.Options()
		ways[o.SuperblockCacheWays] = true
		seen["debug"] = seen["debug"] || o.Debug
		seen["guard every one"] = seen["guard every one"] || o.Guard.Enabled && o.Guard.SampleRate == 1
		seen["guard one in 3"] = seen["guard one in 3"] || o.Guard.Enabled && o.Guard.SampleRate == 3
		seen["retain pool"] = seen["retain pool"] || o.Retain > 0 && o.Decay < 0
		if err := Run(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []int{1, 8, 16, 32, 64, 128} {
		if !ways[w] {
			t.Errorf("no seed program runs %d superblock-cache ways", w)
		}
	}
	var missed []string
	want := []string{"front", "superblock alignment", "cross free", "free closed", "alloc closed", "touch", "realloc back",
		"aligned edge", "free tail 0", "free tail 1", "realloc by the Allocator",
		"debug", "guard every one", "guard one in 3", "retain pool"}
	for k := range invariants.NumBad {
		want = append(want, fmt.Sprintf("bad free %d", k))
	}
	for _, k := range want {
		if !seen[k] {
			missed = append(missed, k)
		}
	}
	if seen["cross free on its owner"] {
		t.Error("an OpFreeCross freed an object on its owner")
	}
	if seen["realloc mode 2 not on the Allocator"] {
		t.Error("an OpRealloc of mode 2 did not resize on the Allocator")
	}
	if len(missed) > 0 {
		keys := make([]string, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		t.Errorf("the seed programs never reach %v (they reach %v)", missed, keys)
	}
}

// TestConcurrentOptionsReach: a concurrent program's header reaches every
// configuration it documents: every way count, debug mode, guard mode with
// every small allocation sampled and one in 3, and both pools that return
// memory at once.
func TestConcurrentOptionsReach(t *testing.T) {
	ways := map[int]bool{}
	var debug, guard1, guard3, retain2, retainNone bool
	for h := range 256 {
		o := concurrentOptions([]byte{byte(h)})
		ways[o.SuperblockCacheWays] = true
		debug = debug || o.Debug
		guard1 = guard1 || o.Guard == impl.GuardOptions{Enabled: true, SampleRate: 1}
		guard3 = guard3 || o.Guard == impl.GuardOptions{Enabled: true, SampleRate: 3}
		retain2 = retain2 || o.Retain == 2*spec.SuperblockSize && o.Decay < 0
		retainNone = retainNone || o.Retain == -1 && o.Decay < 0
	}
	for _, w := range []int{1, 8, 16, 32, 64, 128} {
		if !ways[w] {
			t.Errorf("no header selects %d superblock-cache ways", w)
		}
	}
	if !debug || !guard1 || !guard3 || !retain2 || !retainNone {
		t.Errorf("headers reach debug %v, guard (every one) %v, guard (one in 3) %v, retain 2 superblocks %v, retain none %v; want all",
			debug, guard1, guard3, retain2, retainNone)
	}
}

// TestConcurrentReach: FuzzConcurrent's first seed allocates through the
// Allocator's methods (b odd) and checks STATS-EXACT at its barrier (a odd);
// a program of a large allocation (b's top bits) and a stale free of a freed
// address (a%3 == 0) makes them, and bursts run operations.
func TestConcurrentReach(t *testing.T) {
	var n concCounts
	var exact int
	concEnd = func(sh *invariants.Shared, c concCounts) { n, exact = c, sh.ExactChecks() }
	defer func() { concEnd = nil }()
	if err := RunConcurrent([]byte{0, 0, COpAlloc, 10, 1, 1, COpAlloc, 20, 2, 0, COpSend, 0, 1, 1, COpReceive, 0, 0, 2, COpBarrier, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Front == 0 || exact == 0 {
		t.Errorf("%d allocations through the Allocator's methods, %d checks of a flushed snapshot; want both > 0", n.Front, exact)
	}
	if err := RunConcurrent([]byte{0, 1, COpAlloc, 5, 0xc0, 0, COpAlloc, 9, 2, 0, COpFree, 0, 0, 0, COpStale, 0, 0, 2, COpBarrier, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Large == 0 || n.Stale == 0 {
		t.Errorf("%d large allocations, %d stale frees of a freed address; want both > 0", n.Large, n.Stale)
	}
	if err := RunConcurrent([]byte{1, 0, COpBurst, 31, 7, 1, COpBurst, 31, 9, 2, COpBarrier, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Burst == 0 {
		t.Error("the bursts ran no operations")
	}
}

// TestProgramMaxCmds: Decode keeps MaxCmds commands, no fewer.
func TestProgramMaxCmds(t *testing.T) {
	p := Program{Cmds: make([]Cmd, MaxCmds+1)}
	if got := len(Decode(Encode(p)).Cmds); got != MaxCmds {
		t.Errorf("Decode of %d commands kept %d, want MaxCmds = %d", MaxCmds+1, got, MaxCmds)
	}
}
