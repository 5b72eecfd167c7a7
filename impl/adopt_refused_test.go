package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestAdoptionByRejectedFreeIsOwnerFreed (LIFECYCLE: a full superblock its
// owner has freed into since it took it, ownerFreed, "a free published into
// it, or an adoption by freeing", stays the owner's): a free that adopts a
// full orphan sets ownerFreed even when the free itself is then refused
// (here a double free: no free is published), so the adopter's next
// acquisition of the class does not orphan it straight back. Slip: adopt
// leaves ownerFreed false, counting on the adopting free's publication.
// The refused free is a double free of an object the owner freed before it
// closed: an interior pointer, refused before any adoption, changes no state
// (FREE-INVALID; TestInvalidFreeIntoOrphanChangesNothing).
func TestAdoptionByRejectedFreeIsOwnerFreed(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	const size = 1024
	k := spec.SizeToClass(size)
	x, _ := a.NewCache()
	objs := allocObjects(t, x, size, spec.ClassObjects(k)) // exactly one superblock, full
	must(t, x.Free(objs[0]))                               // one free object: fewer than partialMin
	must(t, x.Close())
	if s := a.Stats(); s.OrphanedSuperblocks != 1 {
		t.Fatalf("%d orphans after the owner of one full superblock closed, want 1", s.OrphanedSuperblocks)
	}
	y, _ := a.NewCache()
	if err := y.Free(objs[0]); !errors.Is(err, impl.ErrDoubleFree) {
		t.Fatalf("a freed object freed again: %v, want ErrDoubleFree", err)
	}
	if s := a.Stats(); s.OrphanedSuperblocks != 0 {
		t.Fatalf("%d orphans after a free into the only one, want 0: the free adopts it", s.OrphanedSuperblocks)
	}
	b, err := y.Alloc(size) // acquires: orphanFull runs over y's full superblocks
	must(t, err)
	if s := a.Stats(); s.OrphanedSuperblocks != 0 {
		t.Fatalf("%d orphans after the adopter acquired a superblock of the class, want 0: it adopted the full one by freeing into it", s.OrphanedSuperblocks)
	}
	for _, o := range append(objs[1:], b) {
		must(t, y.Free(o))
	}
	must(t, y.Close())
}
