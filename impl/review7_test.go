package impl_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestPanickingReportKeepsCollectedFrees (CONSERVE, FREE-DOUBLE): an OnError
// that panics when a collection finds a remote double free (as in
// TestPanicUnderLockUnlocks and TestReallocPanicFreesNewObject: the panic
// reaches the caller, and the allocator goes on) must not lose the legitimate
// remote frees collected from the same remote word. Schedule, one goroutine:
// c allocates o0 and o1 (one group of one superblock); c frees o0; d frees o0
// again (a remote double free, pending on a free object) and o1 (a remote
// free of a live object); c.Flush collects the group, and OnError panics on
// o0. collectWord swapped both pending bits out of the word and reported o0
// before it moved o1 into the free bitmap: the panic dropped o1, which was
// then neither free nor pending (live, for the allocator, for good), and a
// second free of o1 by its owner was accepted.
func TestPanickingReportKeepsCollectedFrees(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	o0, err := c.Alloc(4096)
	must(t, err)
	o1, err := c.Alloc(4096)
	must(t, err)
	if addrOf(o0)>>spec.SuperblockShift != addrOf(o1)>>spec.SuperblockShift {
		t.Fatal("o0 and o1 in different superblocks")
	}
	must(t, c.Free(o0))
	must(t, d.Free(o0)) // pending on a free object: found when c collects
	must(t, d.Free(o1)) // pending on a live object: a free
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Fatalf("the Flush that collects o0's double free: recovered %v", r)
			}
		}()
		c.Flush()
	}()
	c.Flush()
	i := (addrOf(o1) - a.Snapshot().Base) >> spec.SuperblockShift
	for _, st := range a.Snapshot().Superblocks {
		if uintptr(st.Index) == i && st.Live != 0 {
			t.Errorf("after the report: %d objects of o1's superblock live, want 0 (o1's remote free was lost)", st.Live)
		}
	}
	if err := c.Free(o1); !errors.Is(err, impl.ErrDoubleFree) {
		t.Errorf("the owner's second free of o1 (d freed it): %v, want a double free", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close: %v, want nothing live", err)
	}
}

// TestPanickingReportLeavesCollectionWhole (STATS-EXACT, CONSERVE): the rest
// of a collection an OnError panic interrupts. Schedule, one goroutine: c
// allocates the 64 objects of a 1024-byte superblock (two remote words); c
// frees o0; d frees o0 again (a remote double free in word 0), o1 (word 0)
// and o40 (word 1); c.Flush drains its stack (sb's notified is reset),
// collects word 0 and OnError panics on o0. The panic unwinds collectAll and
// collect: o1 is in the free bitmap (TestPanickingReportKeepsCollectedFrees)
// but its free is never published, so Stats.Frees stays one short after every
// cache has flushed; and o40 stays pending in word 1 with sb marked on no
// stack, unannounced, until some walk collects it. drainNotify loses the rest
// of its popped stack the same way (marked, on no stack, never announced
// again), as does the orphans' drain. Reports are queued now (report) and
// given to OnError where the call has done its work (deliver): the Flush
// panics after its collection, publication and drain are whole. Slip:
// reportatonce (OnError called where the double free is found).
func TestPanickingReportLeavesCollectionWhole(t *testing.T) {
	needClassCounters(t)
	a, err := impl.New(impl.Options{Reserve: 8 * spec.SuperblockSize, OnError: func(err error) { panic(err) }})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	k := spec.SizeToClass(1024)
	var objs [][]byte
	for range spec.ClassObjects(k) {
		b, err := c.Alloc(1024)
		must(t, err)
		objs = append(objs, b)
	}
	must(t, c.Free(objs[0]))
	must(t, d.Free(objs[0]))
	must(t, d.Free(objs[1]))
	must(t, d.Free(objs[40]))
	func() {
		defer func() {
			if r := recover(); r == nil || !errors.Is(r.(error), impl.ErrDoubleFree) {
				t.Fatalf("the Flush that collects o0's double free: recovered %v", r)
			}
		}()
		c.Flush()
	}()
	for _, st := range a.Snapshot().Superblocks {
		for g, p := range st.Pending {
			if p != 0 && !st.Notified {
				t.Errorf("after the report: superblock %d has remote frees pending in word %d (%#x), unannounced", st.Index, g, p)
			}
		}
	}
	c.Flush()
	d.Flush()
	if got := a.Stats().Classes[k].Frees; got != 3 {
		t.Errorf("after every cache flushed: Frees %d, want 3 (o0 by c, o1 and o40 by d)", got)
	}
}

// TestOnErrorMayCallTheAllocator (FREE-DOUBLE, LIFECYCLE): OnError runs once
// the call that found the bad free has done its work, with no internal lock
// held and the front's caches given up, so it may use the Allocator. A late
// double free is found by a Cache's Flush (its own superblock), by the
// Allocator's Flush (a per-P or shard cache's superblock), and in debug mode
// a write after free by the release of its superblock (under the central
// lock), and OnError
// allocates, frees and reads Stats through the Allocator each time. Slip:
// reportatonce (OnError called under the central lock or with the front's
// tokens held: its call blocks until the Flush returns, 10 s here). One P:
// with two, the goroutine may move between a.Alloc(u) and a.Free(u), which is
// then a remote free, and d's repeat is found at once (CI saw it).
func TestOnErrorMayCallTheAllocator(t *testing.T) {
	if portable {
		t.Skip("no per-P caches: a call's shard depends on its stack") // a stack moved between a.Alloc(u) and a.Free(u) fails it as a migration does
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var a *impl.Allocator
	var reports []error
	onError := func(err error) {
		reports = append(reports, err)
		done := make(chan error, 1)
		go func() {
			b, err := a.Alloc(100)
			if err == nil {
				err = a.Free(b)
			}
			_ = a.Stats()
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("OnError's Alloc and Free: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("OnError's call to the Allocator blocked: OnError runs under a lock the call needs")
		}
	}
	var err error
	a, err = impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, OnError: onError})
	must(t, err)
	c, _ := a.NewCache()
	d, _ := a.NewCache()
	x, y := allocN(t, c, 48), allocN(t, c, 48)
	must(t, c.Free(x))
	must(t, d.Free(x)) // remote, pending on a free object: a double free found late
	c.Flush()
	if len(reports) != 1 || !errors.Is(reports[0], impl.ErrDoubleFree) {
		t.Fatalf("the Cache's Flush: OnError got %v, want one double free", reports)
	}
	u, err := a.Alloc(48)
	must(t, err)
	v, err := a.Alloc(48)
	must(t, err)
	must(t, a.Free(u))
	must(t, d.Free(u)) // a front cache's object, freed twice
	a.Flush()
	if len(reports) != 2 || !errors.Is(reports[1], impl.ErrDoubleFree) {
		t.Fatalf("the Allocator's Flush: OnError got %v, want a second double free", reports)
	}
	must(t, c.Free(y))
	must(t, a.Free(v))
	must(t, c.Close())
	must(t, d.Close())
	must(t, a.Close())

	// Debug mode: a write after free found when the emptied superblock is
	// released, under the central lock.
	a, err = impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true, OnError: onError})
	must(t, err)
	c, _ = a.NewCache()
	x = allocN(t, c, 48)
	must(t, c.Free(x))
	x[5] = 1 // after its free
	c.Flush()
	var waf *impl.WriteAfterFreeError
	if len(reports) != 3 || !errors.As(reports[2], &waf) || waf.Offset != 5 {
		t.Fatalf("the release: OnError got %v, want a write after free at byte 5", reports)
	}
	must(t, c.Close())
	must(t, a.Close())
}
