//go:build refalloc_yield

package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestInvalidFreeRacingCloseAdoptsNothing (FREE-INVALID): a free of an
// interior address is refused and changes no state, in an orphan too, where
// freeMiss refuses it from the header before adoption. The refusal tested
// the owner once (owned: no refusal there, the owner's fast path would
// refuse it) and adoptOnFree tested it again: if the owner closed between
// the two loads, the invalid free adopted the orphan (its owner, list,
// Stats.OrphanedSuperblocks changed; its pending frees collected, perhaps
// released) and only then refused the address. Paused between the two loads
// (free.slot) while the owner closes, the free must leave the orphan alone.
func TestInvalidFreeRacingCloseAdoptsNothing(t *testing.T) {
	const size = 48
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	owner, err := a.NewCache()
	must(t, err)
	freer, err := a.NewCache()
	must(t, err)
	x, err := owner.Alloc(size)
	must(t, err)
	bad := sliceAt(x, addrOf(x)+8, 1) // interior of x
	err = during(t, newPause(impl.YieldFreeSlot),
		func() error { return freer.Free(bad) },
		func() { must(t, owner.Close()) }) // x's superblock an orphan, x live
	if !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("free of an interior address racing its owner's Close: %v, want ErrInvalidPointer", err)
	}
	if got := a.Stats().OrphanedSuperblocks; got != 1 {
		t.Fatalf("OrphanedSuperblocks %d after an invalid free racing the owner's Close, want 1: the refused free adopted the orphan", got)
	}
	must(t, freer.Free(x)) // a good free adopts it
	must(t, freer.Close())
}
