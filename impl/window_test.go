//go:build refalloc_yield

package impl_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// pauseOnce is an impl.Scheduler that stops the first goroutine to reach its
// yield point until the test lets it go; every other yield passes.
type pauseOnce struct {
	point  string
	taken  atomic.Bool
	paused chan struct{}
	resume chan struct{}
}

func newPause(point string) *pauseOnce {
	return &pauseOnce{point: point, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (p *pauseOnce) Yield(point string) {
	if point != p.point {
		return
	}
	if p.taken.CompareAndSwap(false, true) {
		close(p.paused)
		<-p.resume
	}
}

func (p *pauseOnce) Bucket() uint32 { return 0 }

// during runs free on a goroutine of its own, stopped at the scheduler's
// point while meanwhile runs, then lets it finish and returns its error.
func during(t *testing.T, p *pauseOnce, free func() error, meanwhile func()) error {
	t.Helper()
	impl.SetScheduler(p)
	defer impl.SetScheduler(nil)
	done := make(chan error)
	go func() { done <- free() }()
	select {
	case <-p.paused:
	case err := <-done:
		t.Fatalf("the free never reached %s (it returned %v)", p.point, err)
	}
	meanwhile()
	close(p.resume)
	return <-done
}

// settleStale tells the model of a stale free that had to be refused: its
// object was not live when the call began (and the call ended inside another
// object, or in another layout), so the sequential judgment at the end does
// not apply; the per-address one does (oracle.JudgeAddress).
func settleStale(t *testing.T, h *invariants.Harness, x uintptr, err error) {
	t.Helper()
	if !errors.Is(err, impl.ErrDoubleFree) && !errors.Is(err, impl.ErrInvalidPointer) {
		t.Fatalf("a stale free of %#x racing the reuse of its superblock: %v", x, err)
	}
	calls := []oracle.Call{{Kind: oracle.CallFree, Begin: 1, End: 2, Got: invariants.Kind(err)}}
	outs, v := oracle.JudgeAddress(false, calls)
	if v != nil {
		t.Fatal(v)
	}
	h.M.Settle(x, nil, calls, make([]oracle.Object, 1), outs[0])
	h.Untracked()
}

// TestAdoptionRacesReuse (CACHE-COHERENT, FREE-DOUBLE, NO-OVERLAP): a stale free
// reads an orphan's header, then, before it adopts the superblock, the orphan
// is adopted by another cache, emptied, released, carved for another class and
// orphaned again. The free must judge the address by the new layout, not by
// the header it read before (and, since review13, it does not adopt the new
// period at all: TestStaleFreeAdoptsOnlyItsPeriod). (The bug: it applied the
// old class's index to the new bitmap and freed a live object.)
func TestAdoptionRacesReuse(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 3)
	q, p, r := ids[0], ids[1], ids[2]
	var olds []uintptr
	for range 4 {
		olds = append(olds, alloc(t, h, q, 48)) // objects 0..3 of superblock 0
	}
	stale := h.Object(olds[3]) // offset 144
	must(t, h.Free(p, olds[3]))
	must(t, h.CloseCache(q)) // an orphan, objects 0..2 live
	var ys []uintptr
	err := during(t, newPause(impl.YieldFreeHeader),
		func() error { return h.Cache(r).Free(stale) }, // r has no entry: a miss
		func() {
			tid, err := h.NewCache()
			must(t, err)
			for _, o := range olds[:3] {
				must(t, h.Free(tid, o)) // adopted on the first free, released on the last
			}
			for range 4 {
				ys = append(ys, alloc(t, h, tid, 64)) // objects 0..3 of class 64
			}
			must(t, h.CloseCache(tid)) // an orphan again
		})
	if ys[0] != olds[0] {
		t.Fatalf("the superblock was not reused (%#x, %#x)", olds[0], ys[0])
	}
	// Offset 144 was a freed slot when the call began, and lies inside object
	// 2 of class 64 when it ends: refused either way.
	settleStale(t, h, addrOf(stale), err)
	must(t, h.Check()) // REFINES: object 3 of class 64 is still live
	must(t, h.FreeAll())
}

// TestRemoteFreeRacesRelease (DEBUG-POISON, INTEGRITY): a remote double free in
// debug mode reads the remote word's tag; before its CAS the owner releases
// the superblock and it becomes part of a large object. The free must fail
// and write nothing. (The bug: it poisoned the address between the tag check
// and the CAS, into the large object.)
func TestRemoteFreeRacesRelease(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize, Debug: true}, 2)
	q, p := ids[0], ids[1]
	var objs []uintptr
	for range 3 {
		objs = append(objs, alloc(t, h, q, 1024)) // superblock 0
	}
	stale := h.Object(objs[1])
	must(t, h.Free(p, objs[1])) // p's entry for the superblock: not mine
	must(t, h.Flush(q))         // collected: the stale free finds nothing pending
	var big uintptr
	err := during(t, newPause(impl.YieldRemoteTag),
		func() error { return h.Cache(p).Free(stale) }, // a hit: straight to the CAS
		func() {
			must(t, h.Free(q, objs[0]))
			must(t, h.Free(q, objs[2]))
			must(t, h.Flush(q))                                       // empty: released
			big = alloc(t, h, q, 3*spec.SuperblockSize+spec.PageSize) // superblocks 0..3
		})
	if big != objs[0] {
		t.Fatalf("the superblock is not part of the large object (%#x, %#x)", objs[0], big)
	}
	settleStale(t, h, addrOf(stale), err)
	must(t, h.Check())
	must(t, h.FreeAll()) // checks the large object's fill before freeing it (INTEGRITY)
}

// TestNotificationForwarded (CONSERVE, STATS-LAG): a remote free reads the
// owner, then, before it pushes the superblock onto that owner's stack, the
// owner releases it and another cache carves it; a second remote free finds it
// marked notified and pushes nothing. When the old owner drains its stack it
// must forward the notification to the new owner, or the second free is never
// collected.
func TestNotificationForwarded(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 4)
	c, d, r, e := ids[0], ids[1], ids[2], ids[3]
	x := alloc(t, h, c, 64)
	obj := h.Object(x)
	// r's free of x succeeds (CAS) before the pause: x leaves the model first,
	// and the state is not quiescent until r's push, so no checks meanwhile.
	if v := h.M.Free(r, x, oracle.OK); v != nil {
		t.Fatal(v)
	}
	h.CheckEachStep = false
	err := during(t, newPause(impl.YieldNotifyOwner),
		func() error { return h.Cache(r).Free(obj) }, // remote; pauses before its push
		func() {
			must(t, h.Flush(c)) // collects x: empty, released
			y := alloc(t, h, d, 128)
			if y>>spec.SuperblockShift != x>>spec.SuperblockShift {
				t.Fatalf("the superblock was not reused (%#x, %#x)", x, y)
			}
			must(t, h.Free(e, y)) // remote, marked notified already: no push
		})
	must(t, err)
	h.Untracked()
	h.CheckEachStep = true
	must(t, h.Flush(c)) // pops the stale notification: forwarded to d
	must(t, h.Check())  // CONSERVE: a pending free nobody was told of
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestNotifyRacesClose (CONSERVE): a remote free reads the owner, then, before
// it pushes, the owner closes (its stack is closed, its superblocks are
// orphans). The push must go to the orphans' stack, not to the closed one.
func TestNotifyRacesClose(t *testing.T) {
	h, ids := harness(t, impl.Options{Reserve: 4 * spec.SuperblockSize}, 3)
	c, r, e := ids[0], ids[1], ids[2]
	x := alloc(t, h, c, 64)
	keep := alloc(t, h, c, 64)
	obj := h.Object(x)
	if v := h.M.Free(r, x, oracle.OK); v != nil { // as in TestNotificationForwarded
		t.Fatal(v)
	}
	h.CheckEachStep = false
	err := during(t, newPause(impl.YieldNotifyOwner),
		func() error { return h.Cache(r).Free(obj) },
		func() { must(t, h.CloseCache(c)) }) // collects x; keep makes an orphan
	must(t, err)
	h.Untracked()
	h.CheckEachStep = true
	must(t, h.Check()) // CONSERVE: marked notified, on exactly one open stack
	must(t, h.Free(e, keep))
	must(t, h.FlushAll())
	must(t, h.FreeAll())
}

// TestLargeAllocRacesStaleFree (GUARD-FAULT, DEBUG-POISON, FREE-DOUBLE): a
// large allocation has taken its run out of the pool and not yet zeroed it
// when a stale free of the run's start (a large object freed there before)
// runs. The free must be refused (the run is not an object yet) and write
// nothing, and the allocation must hand out a zeroed object with no write
// after free reported: were the run published first, the free would free the
// new object and the zeroing would write into freed memory (a false report in
// debug mode, a fault inside the allocator in guard mode).
func TestLargeAllocRacesStaleFree(t *testing.T) {
	for _, guard := range []bool{false, true} {
		var reports []error
		opt := impl.Options{Reserve: 32 * spec.SuperblockSize, Debug: true, OnError: func(err error) { reports = append(reports, err) }}
		if guard {
			opt.Guard = impl.GuardOptions{Enabled: true, SampleRate: -1, QuarantineObjects: 1}
		}
		a, err := impl.New(opt)
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		b1, err := c.Alloc(200_000)
		must(t, err)
		b3, err := c.Alloc(200_000)
		must(t, err)
		for i := range b1 {
			b1[i] = 1
		}
		must(t, c.Free(b1))
		must(t, c.Free(b3)) // in guard mode: pushes b1 out of the quarantine, into the pool
		var b2 []byte
		stale := during(t, newPause(impl.YieldLargeTaken), func() error {
			var err error
			b2, err = c.Alloc(200_000)
			return err
		}, func() {
			if err := d.Free(b1); !errors.Is(err, impl.ErrDoubleFree) {
				t.Errorf("guard %v: a stale free of the run a large allocation is taking: %v", guard, err)
			}
		})
		must(t, stale)
		if addrOf(b2) != addrOf(b1) {
			t.Fatalf("guard %v: the allocation got %#x, not the stale free's run at %#x", guard, addrOf(b2), addrOf(b1))
		}
		for i, x := range b2[:cap(b2)] {
			if x != 0 {
				t.Fatalf("guard %v: byte %d of the new object is %#x", guard, i, x)
			}
		}
		must(t, c.Free(b2))
		c.Close()
		d.Close()
		must(t, a.Close())
		if len(reports) != 0 || a.Stats().WriteAfterFrees != 0 {
			t.Errorf("guard %v: reports %v", guard, reports)
		}
	}
}

// TestReallocRacesStaleFreeOfNewObject (GUARD-FAULT, FREE-DOUBLE): a moving
// Realloc in guard mode has allocated its new object (guarded, large or
// small) when a stale free of that address (a program's bug, racing it)
// comes: the object is reserved until the Realloc returns it, so the free is
// refused and nothing is quarantined under the copy (which would fault inside
// the allocator); the caller gets a live object.
func TestReallocRacesStaleFreeOfNewObject(t *testing.T) {
	for _, n := range []int{100, 200_000} {
		a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
		must(t, err)
		c, _ := a.NewCache()
		d, _ := a.NewCache()
		b, err := c.Alloc(n)
		must(t, err)
		for i := range b {
			b[i] = 7
		}
		// A guarded object on the superblock after b, so that b cannot grow
		// in place.
		blocker, err := c.Alloc(8)
		must(t, err)
		var nb []byte
		err = during(t, newPause(impl.YieldReallocMoved), func() error {
			var err error
			nb, err = c.Realloc(b, 2*n)
			return err
		}, func() {
			freed := 0
			snap := a.Snapshot()
			for off := uintptr(0); off < snap.Size; off += spec.SuperblockSize {
				// Every guarded object starts a superblock: free them all but b.
				p := unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), int(snap.Base+off)-int(addrOf(b)))
				if uintptr(p) != addrOf(b) && uintptr(p) != addrOf(blocker) && d.Free(unsafe.Slice((*byte)(p), 1)) == nil {
					freed++
				}
			}
			if freed != 0 {
				t.Errorf("size %d: %d stale frees accepted, want 0 (the new object is reserved)", n, freed)
			}
		})
		must(t, err)
		if addrOf(nb) == addrOf(b) {
			t.Fatalf("size %d: the guarded object did not move", n)
		}
		if err := c.Free(nb); err != nil {
			t.Errorf("size %d: the new object, live: %v", n, err)
		}
		must(t, c.Free(blocker))
		if s := a.Stats(); s.Guard.LiveObjects != 0 || s.Large.LiveObjects != 0 {
			t.Errorf("size %d: live after both frees: %+v %+v", n, s.Guard, s.Large)
		}
		c.Close()
		d.Close()
		a.Close()
	}
}
