package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
)

// TestStepAllocatorCalls (REFINES: Allocator.Leaks, Stats, Trim, Flush):
// OpAllocator makes each of the Allocator's calls its align picks, Leaks
// included (adv18b, mutant progleaksasstats: with Leaks read as Stats, no
// FuzzProgram command ever called Allocator.Leaks, and nothing noticed).
func TestStepAllocatorCalls(t *testing.T) {
	seen := map[string]bool{}
	observe = func(_ *invariants.Harness, o observed) {
		if o.Op == OpAllocator {
			seen[o.Call] = true
		}
	}
	defer func() { observe = nil }()
	p := Program{Cmds: []Cmd{{Op: OpAlloc, Size: 100}}}
	for k := range 4 {
		p.Cmds = append(p.Cmds, Cmd{Op: OpAllocator, Align: uint8(k)})
	}
	if err := Run(p); err != nil {
		t.Fatal(err)
	}
	for _, call := range []string{"stats", "leaks", "trim", "flush front"} {
		if !seen[call] {
			t.Errorf("OpAllocator never made the %s call (made %v)", call, seen)
		}
	}
}

// TestConcurrentHandsOffAndJudgesFrontOOM (CACHE-COHERENT, OOM-REAL): a
// concurrent program's COpSend hands an object to the worker b names, who
// frees it (a remote free made step by step, not in a burst); and an
// out-of-memory of the Allocator's Alloc (b odd) is judged by CheckOOM
// against the front's caches (adv18b, mutants concsendself and
// concfrontoomunjudged: with the object sent to the sender itself, or the
// front's out-of-memory left unjudged, everything passed).
func TestConcurrentHandsOffAndJudgesFrontOOM(t *testing.T) {
	var n concCounts
	concEnd = func(_ *invariants.Shared, c concCounts) { n = c }
	defer func() { concEnd = nil }()
	if err := RunConcurrent([]byte{0, 0, COpAlloc, 10, 0, 0, COpSend, 0, 1, 1, COpReceive, 0, 0, 2, COpBarrier, 1, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Handoff == 0 {
		t.Error("COpSend from worker 0 to worker 1 handed nothing to another worker")
	}
	// 32 superblocks; each large allocation takes 3: the eleventh runs out.
	prog := []byte{0}
	for range 16 {
		prog = append(prog, 0, COpAlloc, 255, 0xc1)
	}
	if err := RunConcurrent(prog); err != nil {
		t.Fatal(err)
	}
	if n.FrontOOM == 0 {
		t.Errorf("no out-of-memory of the Allocator's Alloc was judged (%d large allocations)", n.Large)
	}
}
