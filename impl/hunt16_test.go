package impl_test

// Tests of hunt16, a review of the superblock lifecycle (alloc.go,
// superblock.go), Stats, Leaks and Snapshot by injected one-line slips. Each
// names its rule and the slip it kills.

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestSnapshotListsUsedHeadersOnly (REFINES: the snapshot is the abstraction
// function's input, and lists every header ever used, no other): headers are
// created 512 at a time, and the ones not yet handed out say unused, not
// pooled. One small object uses one superblock: the snapshot lists it, small,
// and no other. Slip: a new chunk's headers say pooled (headerpooled), and the
// snapshot lists 511 pooled superblocks that were never used.
func TestSnapshotListsUsedHeadersOnly(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	b := allocN(t, c, 100)
	s := a.Snapshot()
	if len(s.Superblocks) != 1 || s.Superblocks[0].State != impl.SBSmall {
		t.Fatalf("one small object allocated: the snapshot lists %d superblocks (first %v), want the one small", len(s.Superblocks), s.Superblocks[0].State)
	}
	must(t, c.Free(b))
	must(t, c.Close())
}
