package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDebugWAFAtFormerTailNamesNoOldSite (DEBUG-POISON: a write after free is
// reported naming the site that had allocated the object): a large object
// whose first superblock was the tail of the large object freed there must
// not name the site of an object that started there before that one. x (one
// superblock, allocated by allocSiteA) lives at superblock 1 and is freed; y
// (two superblocks, allocated here) then takes superblocks 0 and 1, so 1 is
// its tail, and is freed; a byte is written after free into superblock 1;
// z (one superblock) takes superblock 1 and finds it. The report may name y's
// site, or none, never x's: x's memory was y's since. The real bug (adv19):
// a large object's tail superblocks kept the site they had as an earlier
// object's head, and allocLarge reported it.
func TestDebugWAFAtFormerTailNamesNoOldSite(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c := mustCache(t, a)
	defer c.Close()
	s := allocN(t, c, 64)
	x := allocSiteA(t, c, spec.SuperblockSize)
	if sbOf(a, s) != 0 || sbOf(a, x) != 1 {
		t.Fatalf("the small object is in superblock %d and x in %d, want 0 and 1", sbOf(a, s), sbOf(a, x))
	}
	must(t, c.Free(x))
	must(t, c.Free(s))
	c.Flush() // superblock 0 released: the pool is one run again
	y := allocN(t, c, 2*spec.SuperblockSize)
	if sbOf(a, y) != 0 {
		t.Fatalf("y starts at superblock %d, want 0", sbOf(a, y))
	}
	must(t, c.Free(y))
	sliceAt(y, addrOf(y)+spec.SuperblockSize+8, 1)[0] = 0x11 // into y's tail, after free
	s = allocN(t, c, 64)                                     // superblock 0 again
	z := allocN(t, c, spec.SuperblockSize)
	if sbOf(a, s) != 0 || sbOf(a, z) != 1 {
		t.Fatalf("the small object is in superblock %d and z in %d, want 0 and 1", sbOf(a, s), sbOf(a, z))
	}
	if len(reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at byte 8 of z's superblock): %v", len(reports), reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As(reports[0], &we) || we.Addr != addrOf(z) || we.Offset != 8 {
		t.Fatalf("report %v, want a write after free at byte 8 of %#x", reports[0], addrOf(z))
	}
	if strings.Contains(we.Site, "allocSiteA") {
		t.Errorf("the write after free into y's tail names the site of x, which lived there before y:\n%s", we.Site)
	}
	must(t, c.Free(s))
	must(t, c.Free(z))
}
