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

// TestStaleFreeAdoptsOnlyItsPeriod (FREE-INVALID, CACHE-COHERENT): a stale
// free reads an orphan's header (class 48: offset 144 is slot 3, freed);
// before it adopts, the orphan is adopted, emptied, released, carved for
// class 64 (its remote set reused: same pointer) and orphaned again. Offset
// 144 is inside object 2 of class 64 now, so the free is refused (as
// TestAdoptionRacesReuse checks), and a refused free changes no state: it
// must not adopt the new orphan first. It did: adoptOnFree adopted whatever
// orphan sb was by then, and only the re-read header found the address bad.
func TestStaleFreeAdoptsOnlyItsPeriod(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 4 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	q, err := a.NewCache()
	must(t, err)
	r, err := a.NewCache()
	must(t, err)
	var olds [][]byte
	for range 4 {
		b, err := q.Alloc(48) // objects 0..3 of superblock 0
		must(t, err)
		olds = append(olds, b)
	}
	stale := olds[3] // offset 144
	must(t, q.Free(olds[3]))
	must(t, q.Close()) // an orphan, objects 0..2 live
	var ys [][]byte
	err = during(t, newPause(impl.YieldFreeHeader),
		func() error { return r.Free(stale) }, // r has no entry: a miss
		func() {
			d, err := a.NewCache()
			must(t, err)
			for _, o := range olds[:3] {
				must(t, d.Free(o)) // adopted on the first free, released on the last
			}
			for range 4 {
				y, err := d.Alloc(64) // objects 0..3 of class 64
				must(t, err)
				ys = append(ys, y)
			}
			must(t, d.Close()) // an orphan again
		})
	if addrOf(ys[0]) != addrOf(olds[0]) {
		t.Fatalf("the superblock was not reused (%#x, %#x)", addrOf(olds[0]), addrOf(ys[0]))
	}
	if !errors.Is(err, impl.ErrInvalidPointer) && !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("a stale free racing its superblock's reuse: %v, want it refused", err)
	}
	if got := a.Stats().OrphanedSuperblocks; got != 1 {
		t.Fatalf("OrphanedSuperblocks %d after a refused stale free (%v), want 1: the free adopted the new period's orphan", got, err)
	}
	e, err := a.NewCache()
	must(t, err)
	for _, y := range ys {
		must(t, e.Free(y))
	}
	must(t, e.Close())
	must(t, r.Close())
}
