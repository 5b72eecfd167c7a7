package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// live is the number of live objects the allocator counts: small ones of
// every superblock, and large ones.
func live(a *impl.Allocator) int {
	n := 0
	for _, st := range a.Snapshot().Superblocks {
		n += st.Live
	}
	return n + int(a.Stats().Large.LiveObjects)
}

// recovered runs f, which must panic with an error matching target (OnError's
// panic), and fails the test otherwise.
func recovered(t *testing.T, what string, target error, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if err, ok := r.(error); !ok || !errors.Is(err, target) {
			t.Fatalf("%s: recovered %v, want a panic with %v", what, r, target)
		}
	}()
	f()
	t.Fatalf("%s: no panic (OnError was not called)", what)
}

// TestPanickingReportInDebugFreeKeepsNoEntry (DEBUG-POISON): in debug mode a
// Cache keeps no superblock-cache entry (every free takes freeMiss, which
// poisons the object, freeDebug); freeDebug fills the entry, frees through
// the fast path and drops it after. That free delivers the queued reports when
// it publishes, before the entry is dropped: an OnError that panics there
// (here on a report another call left queued, its OnError having panicked on
// the one before) left the entry, and the cache's later frees into that
// superblock took the fast path, which does not poison: when the superblock
// was released, every such object was reported as written after its free,
// though nothing wrote to it (a false WriteAfterFreeError). Slip:
// debugentrykept.
func TestPanickingReportInDebugFreeKeepsNoEntry(t *testing.T) {
	panicking := true
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true, OnError: func(err error) {
		if panicking {
			panic(err)
		}
		reports = append(reports, err)
	}})
	must(t, err)
	c, _ := a.NewCache()
	y, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := allocObjects(t, c, 64, 100) // c's current superblock of 64-byte objects
	for _, b := range objs[:63] {
		must(t, c.Free(b)) // 63 local frees, unpublished
	}
	// Two remote double frees in y's superblock: y's Flush finds both, and
	// its OnError panics on the first; the second stays queued.
	ys := allocObjects(t, y, 1024, 2)
	for _, b := range ys {
		must(t, y.Free(b))
		must(t, d.Free(b))
	}
	recovered(t, "y's Flush", impl.ErrDoubleFree, y.Flush)
	// The 64th local free publishes, and delivers the second report.
	recovered(t, "c's free that publishes", impl.ErrDoubleFree, func() { c.Free(objs[63]) })
	panicking = false
	for _, b := range objs[64:] {
		must(t, c.Free(b))
	}
	c.Flush() // releases the emptied superblock, checking every object's poison
	if len(reports) != 0 {
		t.Errorf("%d reports, though nothing was written after a free; the first: %v", len(reports), reports[0])
	}
	if n := a.Stats().WriteAfterFrees; n != 0 {
		t.Errorf("Stats.WriteAfterFrees %d, want 0", n)
	}
	must(t, c.Close())
	must(t, y.Close())
	must(t, d.Close())
	must(t, a.Close())
}
