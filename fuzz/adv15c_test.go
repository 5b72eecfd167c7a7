package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestProgramReserveReach (REFINES): the header's bits 0-1 select every
// reservation Program documents, 16<<n superblocks for n = 0..3. The small
// ones run a program into OOM-REAL and the pool's bounds; the large ones let
// large objects of many superblocks and many caches fit. A header that drew
// the reservation from bit 0 alone would never run 64 or 128 superblocks,
// and nothing downstream would notice. Slip: progreservenarrow.
func TestProgramReserveReach(t *testing.T) {
	seen := map[int]bool{}
	for h := range 256 {
		seen[Program{Header: uint8(h)}.Options().Reserve/spec.SuperblockSize] = true
	}
	for _, n := range []int{16, 32, 64, 128} {
		if !seen[n] {
			t.Errorf("no header selects a reservation of %d superblocks (selected: %v)", n, seen)
		}
	}
}

// stepHarness is the harness Run starts a program on: three caches open.
func stepHarness(t *testing.T) *invariants.Harness {
	t.Helper()
	h, err := invariants.NewHarness(Program{}.Options())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for range 3 {
		if _, err := h.NewCache(); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// TestStepOpensCaches (REFINES): OpNewCache, on the three caches Run opens
// before the first command, opens a fourth, up to six. A bound of 3 would make
// the command a no-op in every program: no cache opened after others closed,
// no fresh cache on a reused ID's superblocks. Slip: prognewcachenever.
func TestStepOpensCaches(t *testing.T) {
	h := stepHarness(t)
	for want := 4; want <= 6; want++ {
		if err := step(h, Cmd{Op: OpNewCache}); err != nil {
			t.Fatal(err)
		}
		if got := len(h.Caches()); got != want {
			t.Fatalf("after OpNewCache %d caches are open, want %d", got, want)
		}
	}
	if err := step(h, Cmd{Op: OpNewCache}); err != nil || len(h.Caches()) != 6 {
		t.Errorf("OpNewCache with 6 open: %v, %d open; want the bound of 6 kept", err, len(h.Caches()))
	}
}

// TestStepAllocBadKinds (REFINES, and the bad-size/alignment refusals of the
// harness's model): OpAllocBad makes each of its three kinds by align%3: a
// negative size, a size past MaxAlloc, and an alignment that is not a power
// of two (3+2v). Each is refused and changes nothing. A driver that drew the
// kind by align%2 would never ask for a bad alignment, and a slip that
// accepts one would go unseen. Slip: progbadalignnever.
func TestStepAllocBadKinds(t *testing.T) {
	h := stepHarness(t)
	var got []observed
	observe = func(_ *invariants.Harness, o observed) { got = append(got, o) }
	defer func() { observe = nil }()
	for al := range uint8(3) {
		got = nil
		if err := step(h, Cmd{Op: OpAllocBad, Align: al, Size: 5, Victim: 2}); err != nil {
			t.Fatal(err)
		}
		if h.LastErr == nil {
			t.Errorf("OpAllocBad align %d: allocation succeeded", al)
		}
		if len(got) != 1 || got[0].Call != "alloc bad" {
			t.Fatalf("OpAllocBad align %d: calls %+v, want one bad allocation", al, got)
		}
		o := got[0]
		var ok bool
		switch al {
		case 0:
			ok = o.N < 0 && o.A == 1
		case 1:
			ok = o.N > spec.MaxAlloc && o.A == 1
		case 2:
			ok = o.N == 5 && o.A == 7
		}
		if !ok {
			t.Errorf("OpAllocBad align %d asked for %d bytes aligned to %d", al, o.N, o.A)
		}
	}
	if n := len(h.Live()); n != 0 {
		t.Errorf("%d objects live after bad allocations, want 0", n)
	}
}

// TestStepAllocEdgeLast (REFINES, OOM-REAL): OpAllocEdge reaches the last of
// invariants.EdgeSizes, one byte more than the reservation: a request that
// must be refused, not satisfied by any of the allocator's boundaries. The
// size it allocates is the one it draws (and names to observe). A driver
// taking the index modulo len-1 never asks for it, and allocates another
// edge than it says. Slip: progedgelastnever.
func TestStepAllocEdgeLast(t *testing.T) {
	h := stepHarness(t)
	edges := invariants.EdgeSizes(int(h.M.Size()))
	if err := step(h, Cmd{Op: OpAllocEdge, Size: uint16(len(edges) - 1)}); err != nil {
		t.Fatal(err)
	}
	if h.LastErr == nil || len(h.Live()) != 0 {
		t.Errorf("OpAllocEdge of the last edge (%d bytes, the reservation %d plus one): err %v, %d live; want a refusal",
			edges[len(edges)-1], h.M.Size(), h.LastErr, len(h.Live()))
	}
	// And the first: an 8-byte object.
	if err := step(h, Cmd{Op: OpAllocEdge, Size: uint16(len(edges))}); err != nil {
		t.Fatal(err)
	}
	if live := h.Live(); h.LastErr != nil || len(live) != 1 {
		t.Fatalf("OpAllocEdge of the first edge: err %v, %d live", h.LastErr, len(live))
	} else if o, _ := h.M.LiveAt(live[0]); o.Size != edges[0] {
		t.Errorf("OpAllocEdge of edge 0 allocated %d bytes, want %d", o.Size, edges[0])
	}
}

// TestConcurrentBurstsCallAllocator (REFINES, STATS-LAG/LEAD at any instant,
// MEM-ACCOUNT under Trim): bursts run the Allocator's methods (Flush, Trim,
// Stats) while the other workers allocate and free, the one place these run
// concurrently with cache traffic. A burst that drew from the first seven
// operations only would never make that call. Slip: concburstnoallocator.
func TestConcurrentBurstsCallAllocator(t *testing.T) {
	var n concCounts
	concEnd = func(_ *invariants.Shared, c concCounts) { n = c }
	defer func() { concEnd = nil }()
	prog := []byte{0}
	for b := range 6 {
		prog = append(prog, 0, COpBurst, 31, byte(b))
	}
	if err := RunConcurrent(prog); err != nil {
		t.Fatal(err)
	}
	if n.Burst == 0 || n.BurstAllocator == 0 {
		t.Errorf("bursts ran %d operations, %d of them the Allocator's methods; want both > 0", n.Burst, n.BurstAllocator)
	}
}
