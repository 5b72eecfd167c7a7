package impl_test

// Tests of hunt19, a mechanical mutation sweep (go/ast: relational flips,
// && and ||, negated conditions, literals ±1, + and -, dropped statements)
// over guard.go, debug.go, snapshot.go, front.go, errors.go and the report
// queue of alloc.go. Each names its rule and the slip it kills.

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestGuardFirstSampleDrawn (GUARD-FAULT, guarded objects: "one small
// allocation in SampleRate on average, the interval between two drawn
// uniformly from [1, 2·SampleRate−1]"): a cache's first sampled allocation of
// a class comes after a drawn interval too, not at once. At the largest rate,
// 2^30, a few hundred allocations of a few caches sample none: the generator
// is seeded by the cache's ID, so this is not luck but the same draw every
// run (the chance of a draw below 400 is 2·10^-7 a class). Slip: NewCache
// starts each class's countdown at 1 minus the interval (a negative count),
// and the second allocation of every class is guarded
// (guardfirstsoon).
func TestGuardFirstSampleDrawn(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 256 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1 << 30}})
	must(t, err)
	defer a.Close()
	for range 4 {
		c, _ := a.NewCache()
		for _, size := range []int{16, 1000} {
			objs := allocObjects(t, c, size, 200)
			if g := a.Stats().Guard.Allocs; g != 0 {
				t.Fatalf("cache %d, %d allocations of %d bytes at SampleRate 2^30: %d guarded", c.ID(), len(objs), size, g)
			}
			for _, b := range objs {
				must(t, c.Free(b))
			}
		}
		must(t, c.Close())
	}
}

// TestExplainAfterCloseFindsNothing (GUARD-FAULT, report; Close: the
// reservation is given back): once the Allocator is closed, an address of
// what was its reservation may be anyone's memory, and ExplainAddr explains
// nothing there, not even the address of an object that was in quarantine
// at Close. Slip: ExplainAddr tests the closed flag only for an address
// outside the reservation (|| for &&), and a closed Allocator still explains
// its old quarantine (explainclosed).
func TestExplainAfterCloseFindsNothing(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1}})
	must(t, err)
	c, _ := a.NewCache()
	b := allocN(t, c, 100)
	p := addrOf(b)
	must(t, c.Free(b))
	if _, ok := a.ExplainAddr(p); !ok {
		t.Fatal("setup: a freed guarded object in quarantine is not explained")
	}
	must(t, c.Close())
	must(t, a.Close())
	if e, ok := a.ExplainAddr(p); ok {
		t.Fatalf("after Close, ExplainAddr of the freed object's address explains it: %v", e)
	}
}

// TestWriteAfterFreeCountedByFinder (DEBUG-POISON, STATS-EXACT: a write after
// free is counted in Stats.WriteAfterFrees, against the cache that found it;
// Snapshot's CacheState counters are "the events this cache counted", and
// Retired what closed caches left): a write after free that cache c's
// allocation finds is counted in c's counters while c is open, and only
// retired to the Allocator when c closes. Slip: verifyPoison's test of its
// cache is flipped (c == nil), and every write after free found by an open
// cache is counted as retired (wafretired).
func TestWriteAfterFreeCountedByFinder(t *testing.T) {
	var reports []error
	a := newDebugReporting(t, &reports)
	c, _ := a.NewCache()
	b := allocN(t, c, 4096)
	must(t, c.Free(b))
	b[:cap(b)][7] = 1 // after free
	c.Flush()         // the superblock is released, and its poison verified
	if len(reports) != 1 {
		t.Fatalf("setup: %d reports, want the write after free", len(reports))
	}
	s := a.Snapshot()
	var found uint64
	for _, cs := range s.Caches {
		if cs.ID == c.ID() {
			found = cs.WriteAfterFrees
		}
	}
	if found != 1 || s.Retired.WriteAfterFrees != 0 {
		t.Fatalf("write after free found by cache %d: its counter %d, retired %d; want 1 and 0", c.ID(), found, s.Retired.WriteAfterFrees)
	}
	must(t, c.Close())
	if s := a.Snapshot(); s.Retired.WriteAfterFrees != 1 || a.Stats().WriteAfterFrees != 1 {
		t.Fatalf("after Close: retired %d, Stats %d; want 1 and 1", s.Retired.WriteAfterFrees, a.Stats().WriteAfterFrees)
	}
}

// TestEveryQueuedReportDelivered (DEBUG-POISON: every write after free found is
// reported; the reports found in one call are queued and all given to OnError
// as the call ends): a Flush that releases a superblock with two objects
// written after their free finds both, and OnError hears of both. Slip:
// deliver's test after taking a report is flipped (!= for ==), and what is
// left of the queue is dropped after the first (deliverdrops).
func TestEveryQueuedReportDelivered(t *testing.T) {
	var reports []error
	a := newDebugReporting(t, &reports)
	c, _ := a.NewCache()
	objs := allocObjects(t, c, 4096, 3)
	for _, b := range objs {
		must(t, c.Free(b))
	}
	objs[0][:cap(objs[0])][1] = 1 // after free
	objs[2][:cap(objs[2])][2] = 1 // after free
	c.Flush()                     // the superblock is released: both found, in one call
	if len(reports) != 2 || a.Stats().WriteAfterFrees != 2 {
		t.Fatalf("two writes after free found by one Flush: %d reports (%v), Stats.WriteAfterFrees %d; want 2",
			len(reports), reports, a.Stats().WriteAfterFrees)
	}
	must(t, c.Close())
}

// TestHeapGuardPoolsPoisonThroughout (DEBUG-POISON: a dirty pooled superblock
// holds poison throughout; GUARD-FAULT, where memory cannot be protected:
// guard mode poisons what it quarantines): in debug mode under the Go-heap
// backend, a guarded small object's free poisons its whole superblock, not
// only its usable bytes, so that when the quarantine releases it to the pool
// a large allocation that takes it finds poison throughout and reports
// nothing. Slip: poisoned's test of debug mode is negated, and debug mode
// poisons only the object's 64 bytes: the large allocation finds the fresh
// zeros after them and reports a write after free nobody made
// (quarpoisonusable).
func TestHeapGuardPoolsPoisonThroughout(t *testing.T) {
	var reports []error
	_, c := heapQuarantineOfOne(t, true, &reports)
	x := allocN(t, c, 64)
	must(t, c.Free(x))
	must(t, c.Free(allocN(t, c, 64))) // pushes x out of the quarantine, to the pool
	big := allocN(t, c, spec.SuperblockSize)
	if addrOf(big) != addrOf(x) {
		t.Fatalf("setup: the large object is at %#x, not on x's superblock at %#x", addrOf(big), addrOf(x))
	}
	if len(reports) != 0 {
		t.Fatalf("no write after free was made: reports %v", reports)
	}
	must(t, c.Free(big))
}

// TestFrontTakesAnyFreeShard (FRONT-EXCLUSIVE, the shards: a caller whose home
// shard is busy takes the first free one after it, round to the one before
// its home; "only when every shard is busy does a caller wait"): with every
// per-P cache's token held, every bucket's home at shard 0 and every shard
// locked but one, an Alloc and a Free of the Allocator's own methods pass
// over the busy ones and are served by the free one at once: shard 2 (past
// shard 1, busy), and the last shard (the scan's last). Four shards or more:
// GOMAXPROCS 4 at New. Slips: front.lock's scan does not advance past the
// shard after the home (its i++ dropped: shardscanstuck) and spins on shard
// 1 while shard 2 is free; the scan stops one short (< for <=:
// shardscanshort), never tries the last shard, and waits for the home. The
// call never returns, and the test fails after 3 s.
func TestFrontTakesAnyFreeShard(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	n, undo := impl.HoldFrontBut(a, 0, 0)
	undo()
	if n < 4 {
		t.Fatalf("setup: %d shards, want at least 4", n)
	}
	for _, free := range []int{2, n - 1} {
		_, undo := impl.HoldFrontBut(a, 0, free)
		done := make(chan error, 1)
		go func() {
			b, err := a.Alloc(64)
			if err == nil {
				err = a.Free(b)
			}
			done <- err
		}()
		select {
		case err := <-done:
			undo()
			must(t, err)
		case <-time.After(3 * time.Second):
			undo() // the stuck call takes its shard and returns
			<-done
			t.Fatalf("shard %d free, every other busy, home shard 0: an Alloc (or Free) did not take the free shard, and waited 3 s", free)
		}
	}
}

// TestFrontCallsDeliverTheirReports (DEBUG-POISON, FREE-DOUBLE: a bad free
// found late, or a write after free, is reported to OnError "once the call
// that found it has done its work"): when an Alloc, a Free or a Realloc of the
// Allocator's own methods finds a write after free, OnError has heard of it
// by the time the call returns, not at some later call. Alloc and Realloc:
// debug mode, a large object written after its free, and the call's large
// allocation reuses its run. Free: guard mode under the Go-heap backend with
// a quarantine of one object, a guarded object written after its free, and
// the free of the next pushes it out of the quarantine, where its poison is
// verified. Slips: allocSlow, freeSlow or Realloc does not deliver the
// reports queued during the call (allocnodeliver, freenodeliver,
// reallocnodeliver): they wait for the next Flush.
func TestFrontCallsDeliverTheirReports(t *testing.T) {
	debugLarge := func(t *testing.T) (*impl.Allocator, *[]error, []byte) {
		var reports []error
		a := newDebugReporting(t, &reports)
		big := allocN(t, a, 100_000)
		must(t, a.Free(big))
		big[:cap(big)][5] = 1 // after free
		return a, &reports, big
	}
	t.Run("Alloc", func(t *testing.T) {
		a, reports, big := debugLarge(t)
		again := allocN(t, a, 100_000)
		if addrOf(again) != addrOf(big) || len(*reports) != 1 {
			t.Fatalf("an Alloc on the run of a large object written after its free (%#x, was %#x) returned with %d reports, want 1",
				addrOf(again), addrOf(big), len(*reports))
		}
		must(t, a.Free(again))
	})
	t.Run("Realloc", func(t *testing.T) {
		var reports []error
		a := newDebugReporting(t, &reports)
		s := allocN(t, a, 64)
		big := allocN(t, a, 100_000)
		must(t, a.Free(big))
		big[:cap(big)][5] = 1 // after free
		r, err := a.Realloc(s, 100_000)
		must(t, err)
		if addrOf(r) != addrOf(big) || len(reports) != 1 {
			t.Fatalf("a Realloc onto the run of a large object written after its free (%#x, was %#x) returned with %d reports, want 1",
				addrOf(r), addrOf(big), len(reports))
		}
		must(t, a.Free(r))
	})
	t.Run("Free", func(t *testing.T) {
		var reports []error
		a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, HeapBackend: true,
			OnError: func(err error) { reports = append(reports, err) },
			Guard:   impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
		must(t, err)
		defer a.Close()
		x := allocN(t, a, 64)
		must(t, a.Free(x))
		x[:cap(x)][5] = 1 // after free, in quarantine (poisoned, not protected)
		y := allocN(t, a, 64)
		if len(reports) != 0 {
			t.Fatalf("setup: reports before x leaves the quarantine: %v", reports)
		}
		must(t, a.Free(y)) // pushes x out of the quarantine: its poison verified
		if len(reports) != 1 {
			t.Fatalf("a Free that pushed an object written after its free out of the quarantine returned with %d reports, want 1", len(reports))
		}
	})
}

// TestHeapGuardReportsUniformOverwrite (GUARD-FAULT where memory cannot be
// protected: a write after free of a quarantined object is reported as it
// leaves the quarantine; DEBUG-POISON's report): a freed guarded object
// overwritten whole with one byte value (cleared to zeros, the commonest
// write after free) is reported like any other. Slip: notPoison's fast
// test of "all poison" compares the first byte with != for ==, so that a
// uniform run of any other byte passes as poison (notpoisonuniform).
func TestHeapGuardReportsUniformOverwrite(t *testing.T) {
	var reports []error
	_, c := heapQuarantineOfOne(t, false, &reports)
	x := allocN(t, c, 64)
	must(t, c.Free(x))
	clear(x[:cap(x)])                 // after free: the whole object
	must(t, c.Free(allocN(t, c, 64))) // pushes x out of the quarantine: its poison verified
	var waf *impl.WriteAfterFreeError
	if len(reports) != 1 || !errors.As(reports[0], &waf) || waf.Addr != addrOf(x) || waf.Offset != 0 {
		t.Fatalf("a quarantined object cleared after its free: reports %v, want a write after free at byte 0 of %#x", reports, addrOf(x))
	}
}

// TestFrontDeliversAfterGivingUpItsCache (FRONT-EXCLUSIVE, DEBUG-POISON: a
// report is given to OnError once the call that found it has done its work,
// with no lock held and the front's caches given up): an OnError that calls
// Allocator.Flush, which takes every internal cache, returns, also when the
// report was found inside an Alloc of the Allocator's own methods (a large
// allocation on the run of an object written after its free). Slip:
// Cache.deliver delivers on a front cache too (frontdeliversheld), inside the
// call, with the P's token or the shard's lock held: the Flush in OnError
// waits for it forever, and the test fails after 3 s.
func TestFrontDeliversAfterGivingUpItsCache(t *testing.T) {
	var a *impl.Allocator
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Debug: true,
		OnError: func(err error) {
			a.Flush()
			reports = append(reports, err)
		}})
	must(t, err)
	big := allocN(t, a, 100_000)
	must(t, a.Free(big))
	big[:cap(big)][5] = 1 // after free
	done := make(chan []byte, 1)
	go func() {
		b, err := a.Alloc(100_000)
		if err != nil {
			b = nil
		}
		done <- b
	}()
	select {
	case b := <-done:
		if b == nil || len(reports) != 1 {
			t.Fatalf("Alloc on the run of an object written after its free: %d bytes, %d reports; want the object and 1", len(b), len(reports))
		}
		must(t, a.Free(b))
		must(t, a.Close())
	case <-time.After(3 * time.Second):
		t.Fatal("an OnError that calls Allocator.Flush, given a report found by an Alloc of the Allocator's own methods, did not return in 3 s")
	}
}
