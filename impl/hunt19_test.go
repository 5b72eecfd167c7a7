package impl_test

// Tests of hunt19, a mechanical mutation sweep (go/ast: relational flips,
// && and ||, negated conditions, literals ±1, + and -, dropped statements)
// over guard.go, debug.go, snapshot.go, front.go, errors.go and the report
// queue of alloc.go. Each names its rule and the slip it kills.

import (
	"testing"

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
