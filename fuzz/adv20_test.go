package fuzz

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv20: what FuzzProgram's and FuzzConcurrent's decoding can no
// longer reach is not checked, and no check fails.

// TestStepBadFreePastFirstSuperblock (FREE-INVALID): OpFreeBad's pick takes
// the flags as its bits 16 to 23, so an interior free (BadInterior,
// 1+pick%(cap-1)) reaches past the first 64 KiB of a large object; it is
// refused as ErrInvalidPointer there too. Mutant progbadpicknarrow (the
// pick is the victim's 16 bits alone: every interior free of a large object
// lands in its first superblock) (adv20).
func TestStepBadFreePastFirstSuperblock(t *testing.T) {
	h := stepHarness(t)
	id := h.Caches()[0]
	if err := h.Alloc(id, 200_000, 1); err != nil {
		t.Fatal(err)
	}
	capacity := cap(h.Object(h.LastAddr))
	var got []observed
	observe = func(_ *invariants.Harness, o observed) { got = append(got, o) }
	defer func() { observe = nil }()
	if err := step(h, Cmd{Op: OpFreeBad, Cache: 0, Align: invariants.BadInterior, Victim: 0, Flags: 1}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Call != "free bad" || got[0].N != invariants.BadInterior {
		t.Fatalf("OpFreeBad: calls %+v, want one interior bad free", got)
	}
	if off := 1 + got[0].A%(capacity-1); off < spec.SuperblockSize {
		t.Errorf("OpFreeBad with flags 1 picked %d: an interior free at offset %d of a %d-byte object, want past its first superblock", got[0].A, off, capacity)
	}
	if invariants.Kind(h.LastErr) != oracle.InvalidPointer {
		t.Errorf("the interior free returned %v, want ErrInvalidPointer", h.LastErr)
	}
}

// TestStepReallocBadKinds (FREE-DOUBLE, FREE-INVALID): OpRealloc's mode 3
// resizes a bad pointer of every kind, align%NumBad, the wild one (an
// arbitrary 8-byte offset of a superblock) too. Mutant progreallocbadnowild
// (the kind drawn modulo NumBad-1) (adv20).
func TestStepReallocBadKinds(t *testing.T) {
	h := stepHarness(t)
	if err := h.Alloc(h.Caches()[0], 100, 1); err != nil {
		t.Fatal(err)
	}
	var got []observed
	observe = func(_ *invariants.Harness, o observed) { got = append(got, o) }
	defer func() { observe = nil }()
	for k := range uint8(invariants.NumBad) {
		got = nil
		if err := step(h, Cmd{Op: OpRealloc, Align: k, Flags: 3 << 2, Victim: 1, Size: 50}); err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 || got[0].Call != "realloc bad" || got[0].N != int(k) {
			t.Errorf("OpRealloc mode 3, align %d: calls %+v, want a bad Realloc of kind %d", k, got, k)
		}
	}
}

// TestConcurrentLastWorkerSteps (CACHE-COHERENT): a step's first byte picks
// any of the Workers, the last one too: worker 2 allocates on its own cache
// and hands the object to worker 0, a hand-off to another worker. Mutant
// concworkerlastnever (the worker picked modulo Workers-1: worker 2 runs in
// bursts only, and this program's steps run on worker 0, which sends to
// itself) (adv20).
func TestConcurrentLastWorkerSteps(t *testing.T) {
	var n concCounts
	concEnd = func(_ *invariants.Shared, c concCounts) { n = c }
	defer func() { concEnd = nil }()
	if err := RunConcurrent([]byte{0, Workers - 1, COpAlloc, 10, 0, Workers - 1, COpSend, 0, 0}); err != nil {
		t.Fatal(err)
	}
	if n.Handoff != 1 {
		t.Errorf("worker %d sent its object to worker 0: %d hand-offs, want 1", Workers-1, n.Handoff)
	}
}
