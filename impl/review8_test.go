package impl_test

import (
	"errors"
	"runtime"
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

// doubleFreePending sets up, on c's current superblock of 1024-byte objects
// (64 objects, two groups), a remote double free that c's next refill of the
// class finds: c holds group 0's 32 objects, handed out (objs); c frees
// objs[0] and d frees it again, remotely (pending on a free object). c's next
// Alloc(1024) finds its held group empty; the refill takes group 0 (the
// handed-out group with a free object, before the fresh one), collects its
// remote word first (the double free, reported) and hands out objs[0]'s slot.
func doubleFreePending(t *testing.T, c, d *impl.Cache) [][]byte {
	t.Helper()
	objs := allocObjects(t, c, 1024, 32)
	must(t, c.Free(objs[0]))
	must(t, d.Free(objs[0]))
	return objs
}

// TestPanickingReportKeepsAllocation (CONSERVE, FREE-DOUBLE): OnError runs
// once the call that found the report has done its work; for an Alloc whose
// refill found a remote double free, that work is the allocation. An OnError
// that panics there (or t.Fatal) unwinds the Alloc after it took its object:
// the caller never gets it, so nothing can free it, and it stays live for good
// (Close says ErrLeaked, CheckLeaks lists it). As a moving Realloc frees the
// new object it does not return (TestReallocPanicFreesNewObject), an Alloc
// that does not return its object frees it. Before reports were queued the
// panic came from the collection, before the object was taken. Slip:
// allocpaniclost.
func TestPanickingReportKeepsAllocation(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	objs := doubleFreePending(t, c, d)
	recovered(t, "the Alloc whose refill finds the double free", impl.ErrDoubleFree, func() { c.Alloc(1024) })
	if got := live(a); got != 31 {
		t.Errorf("after the panic: %d objects live, want 31 (objs[1:]; the object the Alloc took and never returned leaked)", got)
	}
	for _, b := range objs[1:] {
		must(t, c.Free(b))
	}
	must(t, c.Close())
	must(t, d.Close())
	if err := a.Close(); err != nil {
		t.Errorf("Close after every object the program got was freed: %v", err)
	}
}

// TestPanickingReportKeepsFrontAllocation (CONSERVE, FREE-DOUBLE): as
// TestPanickingReportKeepsAllocation, through the Allocator's own Alloc: it
// delivers once it has given its cache up, and an OnError that panics there
// must not leave the object it allocated live, with nobody holding it. One P,
// so every call runs on its cache. Slip: allocpaniclost.
func TestPanickingReportKeepsFrontAllocation(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	d, _ := a.NewCache()
	objs := allocObjects(t, a, 1024, 32)
	if addrOf(objs[0])>>spec.SuperblockShift != addrOf(objs[31])>>spec.SuperblockShift {
		t.Fatal("the 32 objects are not in one superblock (not on one cache)")
	}
	must(t, a.Free(objs[0]))
	must(t, d.Free(objs[0]))
	recovered(t, "the Allocator's Alloc whose refill finds the double free", impl.ErrDoubleFree, func() { a.Alloc(1024) })
	if got := live(a); got != 31 {
		t.Errorf("after the panic: %d objects live, want 31 (the object the Alloc took and never returned leaked)", got)
	}
	for _, b := range objs[1:] {
		must(t, a.Free(b))
	}
	must(t, d.Close())
	a.Flush()
	if err := a.Close(); err != nil {
		t.Errorf("Close after every object the program got was freed: %v", err)
	}
}

// TestPanickingReportInReallocsAlloc (CONSERVE): a moving Realloc on a Cache
// allocates its new object with the Cache's own Alloc, which delivered the
// reports its refill found before Realloc had copied, freed b or set up the
// cleanup that frees the new object on a panic: OnError ran in the middle of
// the Realloc, and a panic there left the new object live for good. Slip:
// allocpaniclost.
func TestPanickingReportInReallocsAlloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	b := allocN(t, c, 100) // first: a refill drains c's notification stack
	b[0] = 7
	objs := doubleFreePending(t, c, d)
	recovered(t, "the Realloc whose Alloc finds the double free", impl.ErrDoubleFree, func() { c.Realloc(b, 1000) })
	if b[0] != 7 {
		t.Errorf("b changed under a Realloc that did not return")
	}
	if got := live(a); got != 32 {
		t.Errorf("after the panic: %d objects live, want 32 (objs[1:] and b; the new object leaked)", got)
	}
	for _, o := range append(objs[1:], b) {
		must(t, c.Free(o))
	}
	must(t, c.Close())
	must(t, d.Close())
	if err := a.Close(); err != nil {
		t.Errorf("Close after every object the program got was freed: %v", err)
	}
}

// TestPanickingReportInReallocsLargeAlloc (CONSERVE, FREE-DOUBLE,
// DEBUG-POISON): in debug mode a moving Realloc to a large size allocates its
// new object reserved (nobody's until the Realloc returns it), and that
// allocation checks the poison of reused superblocks: a write after free found
// there was delivered before the Realloc set up the cleanup that frees the new
// object. An OnError that panics left it live and reserved for good: no free
// of its address is ever accepted. Slip: allocpaniclost.
func TestPanickingReportInReallocsLargeAlloc(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, Debug: true, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	b := allocN(t, c, 100) // superblock 0
	big := allocN(t, c, spec.SuperblockSize)
	must(t, c.Free(big))
	big[5] = 1 // after its free
	recovered(t, "the Realloc whose new object holds the write after free", impl.ErrWriteAfterFree, func() { c.Realloc(b, spec.SuperblockSize) })
	if st := a.Stats(); st.Large.LiveObjects != 0 {
		t.Errorf("after the panic: %d large objects live, want 0 (the new object leaked, reserved)", st.Large.LiveObjects)
	}
	must(t, c.Free(b))
	must(t, c.Close())
	if err := a.Close(); err != nil {
		t.Errorf("Close after every object the program got was freed: %v", err)
	}
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

// TestPanickingReportInTrimStillTrims (MEM-ACCOUNT): Trim flushes the
// front's caches, then returns the pool's empty superblocks to the OS. Its
// Flush delivered the reports it found before Trim had returned anything: an
// OnError that panicked there (or t.Fatal) stopped Trim with its work undone,
// the pool's memory still committed; OnError ran in the middle of the call.
// One P, so the front's objects are on one cache. Slip: trimdeliversearly.
func TestPanickingReportInTrimStillTrims(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	d, _ := a.NewCache()
	big := allocN(t, a, 2*spec.SuperblockSize)
	must(t, a.Free(big)) // two dirty superblocks in the pool, within Retain
	objs := allocObjects(t, a, 1024, 2)
	must(t, a.Free(objs[0]))
	must(t, d.Free(objs[0])) // a remote double free, found by Trim's flush
	recovered(t, "the Trim whose flush finds the double free", impl.ErrDoubleFree, func() { a.Trim() })
	if got, want := a.Stats().Committed, uint64(spec.SuperblockSize); got != want {
		t.Errorf("after the Trim: %d bytes committed, want %d (objs[1]'s superblock: the pool's were not returned)", got, want)
	}
	must(t, a.Free(objs[1]))
	must(t, d.Close())
	a.Flush()
	must(t, a.Close())
}
