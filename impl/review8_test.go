package impl_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

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
	closeClean(t, a, c, d)
}

// TestPanickingReportKeepsFrontAllocation (CONSERVE, FREE-DOUBLE): as
// TestPanickingReportKeepsAllocation, through the Allocator's own Alloc: it
// delivers once it has given its cache up, and an OnError that panics there
// must not leave the object it allocated live, with nobody holding it. One P,
// so every call runs on its cache. Slip: allocpaniclost.
func TestPanickingReportKeepsFrontAllocation(t *testing.T) {
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack")
	}
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
	a.Flush()
	closeClean(t, a, d)
}

// TestPanickingReportInReallocsAlloc (CONSERVE): a moving Realloc on a Cache
// allocates its new object with the Cache's own Alloc, which delivered the
// reports its refill found before Realloc had copied, freed b or set up the
// cleanup that frees the new object on a panic: OnError ran in the middle of
// the Realloc, and a panic there left the new object live for good. Slip:
// allocpaniclost.
//
// In sampled guard mode (hunt21) that allocation is "reserving", and only a
// guarded object comes back reserved; an unsampled one is an ordinary object
// of the held group, and must be freed as what it is: given to freeReserved,
// which frees only a large or guarded object, the small one stays live with
// nobody holding it. The sample rate is the largest, so nothing here is
// guarded (the draw is seeded by the cache's ID: the same every run). Slip:
// the refill's delivery treats the new object as reserved whenever the cache
// is reserving (sampledallocreserved).
func TestPanickingReportInReallocsAlloc(t *testing.T) {
	for _, guard := range []impl.GuardOptions{{}, {Enabled: true, SampleRate: 1 << 30}} {
		t.Run(fmt.Sprintf("guard=%v", guard.Enabled), func(t *testing.T) {
			a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: guard, OnError: func(err error) { panic(err) }})
			must(t, err)
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			b := allocN(t, c, 100) // first: a refill drains c's notification stack
			b[0] = 7
			objs := doubleFreePending(t, c, d)
			recovered(t, "the Realloc whose Alloc finds the double free", impl.ErrDoubleFree, func() { c.Realloc(b, 1000) })
			if g := a.Stats().Guard.Allocs; g != 0 {
				t.Fatalf("%d allocations guarded at SampleRate 2^30", g)
			}
			if b[0] != 7 {
				t.Errorf("b changed under a Realloc that did not return")
			}
			if got := live(a); got != 32 {
				t.Errorf("after the panic: %d objects live, want 32 (objs[1:] and b; the new object leaked)", got)
			}
			for _, o := range append(objs[1:], b) {
				must(t, c.Free(o))
			}
			closeClean(t, a, c, d)
		})
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
	closeClean(t, a, c)
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
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack")
	}
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

// TestOnErrorMayCallTheAllocatorAtEverySite (FREE-DOUBLE, DEBUG-POISON,
// LIFECYCLE): OnError runs where a public call has done its work, no internal
// lock held, not pinned, the front's cache given up: from there a call of the
// Allocator (Alloc, Realloc, Free, Stats, Flush; on another goroutine, so
// that one blocked on a lock or a token the interrupted call still held shows
// as a timeout rather than a hang) returns. One case for each place reports
// are delivered, each set up so that its call finds a report; what an
// allocating call returns is the caller's (a free of it succeeds). One P, so
// the front's objects are on one cache.
func TestOnErrorMayCallTheAllocatorAtEverySite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	// frontDouble: a front cache's 1024-byte object freed twice, the second
	// time remotely by d; found when the front cache collects it.
	frontDouble := func(t *testing.T, a *impl.Allocator) [][]byte {
		d, _ := a.NewCache()
		objs := allocObjects(t, a, 1024, 32)
		must(t, a.Free(objs[0]))
		must(t, d.Free(objs[0]))
		return objs
	}
	// releaseDouble: c's superblock of 4096-byte objects, whose last free
	// releases it; objs[0] freed remotely again, pending.
	releaseDouble := func(t *testing.T, a *impl.Allocator, c *impl.Cache) [][]byte {
		d, _ := a.NewCache()
		objs := allocObjects(t, c, 4096, 17)
		must(t, c.Free(objs[0]))
		must(t, d.Free(objs[0]))
		return objs
	}
	cases := []struct {
		name  string
		debug bool
		run   func(t *testing.T, a *impl.Allocator)
	}{
		{"Cache.Alloc", false, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			doubleFreePending(t, c, d)
			must(t, c.Free(allocN(t, c, 1024))) // the caller's: OnError returned
		}},
		{"Cache.Alloc large, debug", true, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			big := allocN(t, c, spec.SuperblockSize)
			must(t, c.Free(big))
			big[5] = 1
			must(t, c.Free(allocN(t, c, spec.SuperblockSize)))
		}},
		{"Cache.Free", false, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			for _, b := range releaseDouble(t, a, c)[1:16] {
				must(t, c.Free(b))
			}
		}},
		{"Cache.Free, debug", true, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			objs := allocObjects(t, c, 4096, 17)
			must(t, c.Free(objs[0]))
			objs[0][5] = 1
			for _, b := range objs[1:16] {
				must(t, c.Free(b))
			}
		}},
		{"Cache.Flush", false, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			doubleFreePending(t, c, d)
			c.Flush()
		}},
		{"Cache.Close", false, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			d, _ := a.NewCache()
			doubleFreePending(t, c, d)
			must(t, c.Close())
		}},
		{"Cache.Realloc", false, func(t *testing.T, a *impl.Allocator) {
			c, _ := a.NewCache()
			objs := releaseDouble(t, a, c)
			for _, b := range objs[1:15] {
				must(t, c.Free(b))
			}
			r, err := c.Realloc(objs[15], 2*spec.SuperblockSize)
			must(t, err)
			must(t, c.Free(r))
		}},
		{"Allocator.Alloc", false, func(t *testing.T, a *impl.Allocator) {
			frontDouble(t, a)
			must(t, a.Free(allocN(t, a, 1024)))
		}},
		{"Allocator.Free", false, func(t *testing.T, a *impl.Allocator) {
			d, _ := a.NewCache()
			objs := allocObjects(t, a, 4096, 17)
			must(t, a.Free(objs[0]))
			must(t, d.Free(objs[0]))
			for _, b := range objs[1:16] {
				must(t, a.Free(b))
			}
		}},
		{"Allocator.Flush", false, func(t *testing.T, a *impl.Allocator) {
			frontDouble(t, a)
			a.Flush()
		}},
		{"Allocator.Realloc", false, func(t *testing.T, a *impl.Allocator) {
			b := allocN(t, a, 100)
			frontDouble(t, a)
			r, err := a.Realloc(b, 1000)
			must(t, err)
			must(t, a.Free(r))
		}},
		{"Allocator.Trim", false, func(t *testing.T, a *impl.Allocator) {
			frontDouble(t, a)
			must(t, a.Trim())
		}},
		{"Allocator.WithFrontCache", false, func(t *testing.T, a *impl.Allocator) {
			frontDouble(t, a)
			for i := range a.FrontCaches() {
				a.WithFrontCache(i, func(c *impl.Cache) { c.Flush() })
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if portable && strings.HasPrefix(tc.name, "Allocator.") {
				t.Skip("no per-P caches: a call's shard depends on its stack")
			}
			var a *impl.Allocator
			var mu sync.Mutex
			reports := 0
			onError := func(err error) {
				mu.Lock()
				reports++
				mu.Unlock()
				done := make(chan error, 1)
				go func() {
					b, err := a.Alloc(100)
					if err == nil {
						b, err = a.Realloc(b, 3000)
					}
					if err == nil {
						err = a.Free(b)
					}
					_ = a.Stats()
					a.Flush()
					done <- err
				}()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("OnError's calls of the Allocator: %v", err)
					}
				case <-time.After(5 * time.Second):
					t.Errorf("OnError's call of the Allocator blocked: OnError runs under a lock or a token the call needs")
				}
			}
			var err error
			a, err = impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: tc.debug, OnError: onError})
			must(t, err)
			tc.run(t, a)
			mu.Lock()
			defer mu.Unlock()
			if reports == 0 {
				t.Errorf("no report")
			}
		})
	}
}

// TestReportsDeliveredOnceEach (FREE-DOUBLE, STATS-EXACT): every report is
// given to OnError exactly once: after an OnError that panics mid-queue (the
// rest wait for the next call that ends), and when several goroutines'
// calls end at once and deliver from the same queue. Stats counts each bad
// free once, at the finding, before OnError hears of it.
func TestReportsDeliveredOnceEach(t *testing.T) {
	var mu sync.Mutex
	seen := map[uintptr]int{}
	panicking := true
	a, err := impl.New(impl.Options{Reserve: 32 * spec.SuperblockSize, OnError: func(err error) {
		var fe *impl.FreeError
		if !errors.As(err, &fe) || !errors.Is(err, impl.ErrDoubleFree) {
			t.Errorf("OnError: %v, want a double free", err)
			return
		}
		mu.Lock()
		seen[fe.Addr]++
		p := panicking
		mu.Unlock()
		if p {
			panic(err)
		}
	}})
	must(t, err)
	d, _ := a.NewCache()
	// Four caches, each with 16 remote double frees pending in its superblock.
	var cs []*impl.Cache
	want := map[uintptr]bool{}
	for range 4 {
		c, _ := a.NewCache()
		cs = append(cs, c)
		for _, b := range allocObjects(t, c, 1024, 16) {
			must(t, c.Free(b))
			must(t, d.Free(b))
			want[addrOf(b)] = true
		}
	}
	recovered(t, "the first Flush", impl.ErrDoubleFree, cs[0].Flush)     // 16 queued, one delivered
	recovered(t, "an unrelated later call", impl.ErrDoubleFree, d.Flush) // the next one
	if n := a.Stats().DoubleFrees; n != 16 {
		t.Errorf("Stats.DoubleFrees %d after the first Flush, want 16", n)
	}
	mu.Lock()
	panicking = false
	mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Flush()
		}()
	}
	wg.Wait()
	for addr := range want {
		if seen[addr] != 1 {
			t.Errorf("the double free of %#x: given to OnError %d times, want once", addr, seen[addr])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("OnError heard of %d addresses, want %d", len(seen), len(want))
	}
	if n := a.Stats().DoubleFrees; n != 64 {
		t.Errorf("Stats.DoubleFrees %d, want 64", n)
	}
}

// TestCloseDeliversQueuedReports (FREE-DOUBLE): reports left queued by an
// OnError that panicked are delivered by the next call that ends, and by
// Allocator.Close if none does, before it releases the reservation: none is
// dropped with the Allocator. Close with reports queued and an OnError that
// panics again does not close (it can be called again).
func TestCloseDeliversQueuedReports(t *testing.T) {
	mode := "panic"
	var got []error
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) {
		got = append(got, err)
		if mode == "panic" {
			panic(err)
		}
	}})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	for _, b := range allocObjects(t, c, 1024, 3) {
		must(t, c.Free(b))
		must(t, d.Free(b))
	}
	recovered(t, "the Flush that finds three double frees", impl.ErrDoubleFree, c.Flush)
	if len(got) != 1 {
		t.Fatalf("before Close: OnError called %d times, want 1", len(got))
	}
	recovered(t, "Close, OnError panicking on the second", impl.ErrDoubleFree, func() { a.Close() })
	mode = "record"
	if _, err := a.NewCache(); err != nil {
		t.Fatalf("after a Close whose OnError panicked: NewCache %v, want the Allocator open", err)
	}
	must(t, a.Close())
	if len(got) != 3 {
		t.Errorf("OnError called %d times, want 3 (each double free once)", len(got))
	}
}

// closeClean closes caches, then a, which must find nothing live: every
// object the program got was freed.
func closeClean(t *testing.T, a *impl.Allocator, caches ...*impl.Cache) {
	t.Helper()
	for _, c := range caches {
		must(t, c.Close())
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close after every object the program got was freed: %v", err)
	}
}
