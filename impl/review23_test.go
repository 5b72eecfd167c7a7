package impl_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// allocSiteB allocates n bytes from c: the site a report is expected to name.
func allocSiteB(t *testing.T, c *impl.Cache, n int) []byte {
	t.Helper()
	return allocN(t, c, n)
}

// wafReports opens a debug-mode Allocator of 8 superblocks whose OnError
// collects the reports, and a cache.
func wafReports(t *testing.T) (*impl.Allocator, *impl.Cache, *[]error) {
	t.Helper()
	reports := new([]error)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) { *reports = append(*reports, err) }})
	must(t, err)
	t.Cleanup(func() { a.Close() })
	c := mustCache(t, a)
	t.Cleanup(func() { c.Close() })
	return a, c, reports
}

// TestDebugWAFInLargeRunNamesSiteOfItsSuperblock (DEBUG-POISON: a write after
// free is reported naming the site that had allocated the object written):
// a new large object whose run covers the memory of two freed objects names,
// for a write found in the second, the second's site. x (one superblock, by
// allocSiteA) at superblock 0 and y (one superblock, by allocSiteB) at
// superblock 1 are freed; a byte is written into y after its free; z (two
// superblocks) takes superblocks 0 and 1 and finds it at byte 64 KiB + 8. The
// report must name allocSiteB, and not allocSiteA: x's memory was not
// written. Bug (review23): allocLarge verified the whole run against the site
// of its first superblock alone (takeLarge's prevSite), so the report named
// x's site (largerunheadsite).
func TestDebugWAFInLargeRunNamesSiteOfItsSuperblock(t *testing.T) {
	a, c, reports := wafReports(t)
	x := allocSiteA(t, c, spec.SuperblockSize)
	y := allocSiteB(t, c, spec.SuperblockSize)
	if sbOf(a, x) != 0 || sbOf(a, y) != 1 {
		t.Fatalf("x is in superblock %d and y in %d, want 0 and 1", sbOf(a, x), sbOf(a, y))
	}
	must(t, c.Free(x))
	must(t, c.Free(y))
	sliceAt(y, addrOf(y)+8, 1)[0] = 0x11 // into y, after free
	z := allocN(t, c, 2*spec.SuperblockSize)
	if sbOf(a, z) != 0 {
		t.Fatalf("z starts at superblock %d, want 0", sbOf(a, z))
	}
	if len(*reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at byte 8 of y's superblock): %v", len(*reports), *reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As((*reports)[0], &we) || we.Addr != addrOf(z) || we.Offset != spec.SuperblockSize+8 {
		t.Fatalf("report %v, want a write after free at byte %d of %#x", (*reports)[0], spec.SuperblockSize+8, addrOf(z))
	}
	if strings.Contains(we.Site, "allocSiteA") || !strings.Contains(we.Site, "allocSiteB") {
		t.Errorf("the write after free into y's memory names a site other than y's (allocSiteB):\n%s", we.Site)
	}
	must(t, c.Free(z))
}

// TestDebugGrowInPlaceWAFNamesSite (DEBUG-POISON: a write after free is
// reported naming the site that had allocated the object written): a large
// object growing in place into the superblock of a freed one, written after
// its free, names that object's site. x (one superblock) at superblock 0
// stays live; y (one superblock, by allocSiteB) at superblock 1 is freed and
// written at byte 8; Realloc(x, two superblocks) takes superblock 1 in place
// and finds the write. Bug (review23): the grow verified the superblocks it
// took against no site (0), though each header records the site of the large
// object that last held it, so the report named none (growsiteunnamed).
func TestDebugGrowInPlaceWAFNamesSite(t *testing.T) {
	a, c, reports := wafReports(t)
	x := allocN(t, c, spec.SuperblockSize)
	y := allocSiteB(t, c, spec.SuperblockSize)
	if sbOf(a, x) != 0 || sbOf(a, y) != 1 {
		t.Fatalf("x is in superblock %d and y in %d, want 0 and 1", sbOf(a, x), sbOf(a, y))
	}
	must(t, c.Free(y))
	sliceAt(y, addrOf(y)+8, 1)[0] = 0x11 // into y, after free
	r, err := c.Realloc(x, 2*spec.SuperblockSize)
	must(t, err)
	if addrOf(r) != addrOf(x) {
		t.Fatalf("Realloc to two superblocks moved the object to %#x", addrOf(r))
	}
	if len(*reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at byte 8 of y's superblock): %v", len(*reports), *reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As((*reports)[0], &we) || we.Addr != addrOf(y) || we.Offset != 8 {
		t.Fatalf("report %v, want a write after free at byte 8 of %#x", (*reports)[0], addrOf(y))
	}
	if !strings.Contains(we.Site, "allocSiteB") {
		t.Errorf("the write after free into y's memory does not name y's site (allocSiteB):\n%s", we.Site)
	}
	must(t, c.Free(r))
}

// TestGuardHeapDebugWAFReportedOnce (GUARD-FAULT under the Go-heap backend,
// DEBUG-POISON: a write after free is reported, and counted, once): in debug
// mode a write into a quarantined object is reported as the object leaves
// the quarantine, and not again when its memory is handed out. x (a guarded
// large object) is freed into the quarantine (poisoned) and written at byte
// 8; y's free evicts x (one object at most), which reports the write; z, a
// large object, then takes x's superblock. Bug (review23): the eviction
// reported the byte and left it there, in a pooled superblock that debug
// mode holds to poison throughout, so z's allocation reported the same write
// again and Stats counted two (quarrepoisonless).
func TestGuardHeapDebugWAFReportedOnce(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true, Debug: true,
		OnError: func(err error) { reports = append(reports, err) },
		Guard:   impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c := mustCache(t, a)
	defer c.Close()
	x := allocN(t, c, spec.SuperblockSize)
	must(t, c.Free(x))
	sliceAt(x, addrOf(x)+8, 1)[0] = 0x11 // into x, in quarantine
	y := allocN(t, c, spec.SuperblockSize)
	must(t, c.Free(y)) // evicts x
	if len(reports) != 1 {
		t.Fatalf("%d reports after x left the quarantine, want 1: %v", len(reports), reports)
	}
	z := allocN(t, c, spec.SuperblockSize)
	if addrOf(z) != addrOf(x) {
		t.Fatalf("z at %#x, want x's superblock %#x", addrOf(z), addrOf(x))
	}
	if len(reports) != 1 {
		t.Errorf("%d reports, want 1 (one write after free): %v", len(reports), reports)
	}
	if n := a.Stats().WriteAfterFrees; n != 1 {
		t.Errorf("Stats.WriteAfterFrees %d, want 1", n)
	}
	must(t, c.Free(z))
}

// TestDebugWAFInCarvedLargeNamesItsSite (DEBUG-POISON: a write after free is
// reported naming the site that had allocated the object written): a small
// period carved from the run of a freed large object, written after its free,
// names that object's site for the write. x (one superblock, by allocSiteB)
// is freed (poisoned) and written at byte 4096+8; the superblock is carved
// for the 4096-byte class, and its object 1, at offset 4096, is found
// written as it is handed out. Nothing verified x's memory since its free,
// so the write was into x: the report names allocSiteB. Bug (review23): the
// carving dropped the site of the superblock's large life (rightly: the new
// layout's objects have their own), and the check of an object the new
// period had not handed out yet named no site (carvedsiteunnamed).
func TestDebugWAFInCarvedLargeNamesItsSite(t *testing.T) {
	a, c, reports := wafReports(t)
	x := allocSiteB(t, c, spec.SuperblockSize)
	if sbOf(a, x) != 0 {
		t.Fatalf("x is in superblock %d, want 0", sbOf(a, x))
	}
	must(t, c.Free(x))
	sliceAt(x, addrOf(x)+4096+8, 1)[0] = 0x11 // into x, after free
	z0 := allocN(t, c, 4096)
	z1 := allocN(t, c, 4096)
	if addrOf(z0) != addrOf(x) || addrOf(z1) != addrOf(x)+4096 {
		t.Fatalf("the 4096-byte objects are not objects 0 and 1 of x's superblock")
	}
	if len(*reports) != 1 {
		t.Fatalf("%d reports, want 1 (the write at offset 4096+8): %v", len(*reports), *reports)
	}
	var we *impl.WriteAfterFreeError
	if !errors.As((*reports)[0], &we) || we.Addr != addrOf(z1) || we.Offset != 8 {
		t.Fatalf("report %v, want a write after free at byte 8 of %#x", (*reports)[0], addrOf(z1))
	}
	if !strings.Contains(we.Site, "allocSiteB") {
		t.Errorf("the write after free into x's memory does not name x's site (allocSiteB):\n%q", we.Site)
	}
	must(t, c.Free(z0))
	must(t, c.Free(z1))
}
