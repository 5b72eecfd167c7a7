package impl_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestInvalidFreeIntoOrphanChangesNothing (FREE-INVALID): a free of an
// address that is not a slot start returns ErrInvalidPointer and changes no
// state, also when the address lies in an orphan. It adopted the orphan
// first (adoption on free, meant for frees of its objects), then found the
// address bad: the orphan had a new owner and Stats.OrphanedSuperblocks
// dropped. FuzzBadFree compares the snapshots around a refused free the same
// way, but its caches never close, so it meets no orphan. The interior of
// an object and the tail past the last slot, through a Cache and the front.
func TestInvalidFreeIntoOrphanChangesNothing(t *testing.T) {
	const size = 48 // 1365 objects, a 16-byte tail
	tail := spec.ClassObjects(spec.SizeToClass(size)) * size
	for _, tc := range []struct {
		name  string
		off   int // from the orphan's first object, at its start
		front bool
	}{
		{"interior", 8, false},
		{"tail", tail, false},
		{"interior, front", 8, true},
		{"tail, front", tail, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
			must(t, err)
			defer a.Close()
			owner, err := a.NewCache()
			must(t, err)
			freer, err := a.NewCache()
			must(t, err)
			x, err := owner.Alloc(size)
			must(t, err)
			must(t, owner.Close()) // x's superblock an orphan, x live
			bad := sliceAt(x, addrOf(x)+uintptr(tc.off), 1)
			before := a.Snapshot()
			if tc.front {
				err = a.Free(bad)
			} else {
				err = freer.Free(bad)
			}
			if !errors.Is(err, impl.ErrInvalidPointer) {
				t.Fatalf("free of offset %d of an orphan: %v, want ErrInvalidPointer", tc.off, err)
			}
			// The bad-free counter counts it; an entry filled on the way is a
			// cache, not state (as FuzzBadFree).
			ignore := cmpopts.IgnoreFields(impl.Snapshot{}, "Stats", "Now")
			ignoreCache := cmpopts.IgnoreFields(impl.CacheState{}, "CacheCounters", "Entries")
			if diff := cmp.Diff(before, a.Snapshot(), ignore, ignoreCache); diff != "" {
				t.Fatalf("a refused free (%v) changed the state:\n%s", err, diff)
			}
			if got := a.Stats().OrphanedSuperblocks; got != 1 {
				t.Fatalf("OrphanedSuperblocks %d after a refused free into the orphan, want 1", got)
			}
			must(t, freer.Free(x)) // a good free adopts it
			must(t, freer.Close())
		})
	}
}
