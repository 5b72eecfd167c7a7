//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestStatsNeverUnderReportsLive (STATS-LEAD, STATS-LAG): Stats may be read
// from any goroutine while others allocate and free, and its Allocs-Frees
// must never under-report the live objects of a class (the doc of Stats;
// expvarstats serves it as live_upper_bound). A cache holds 100 live objects
// of a class; Stats stops between its reads of the class counters while the
// cache allocates and frees 128 more, its frees published (Flush). Read
// allocs first, Stats took 100 allocations and 128 frees: Allocs-Frees
// wrapped below zero, under the 100 objects live throughout the call.
func TestStatsNeverUnderReportsLive(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	const size, live = 64, 100
	k := spec.SizeToClass(size)
	var objs [][]byte
	for range live {
		b, err := c.Alloc(size)
		must(t, err)
		objs = append(objs, b)
	}
	c.Flush() // the counters exact: Allocs 100, Frees 0
	var st impl.Stats
	must(t, during(t, newPause(impl.YieldStatsRead),
		func() error { st = a.Stats(); return nil },
		func() {
			for range 2 * 64 {
				b, err := c.Alloc(size)
				must(t, err)
				must(t, c.Free(b))
			}
			c.Flush() // the 128 frees published, the held group given back
		}))
	cs := st.Classes[k]
	if cs.Allocs < cs.Frees || cs.Allocs-cs.Frees < live {
		t.Fatalf("Stats read during 128 alloc+free pairs with %d objects live throughout: Allocs %d, Frees %d: Allocs-Frees %d under-reports the live objects",
			live, cs.Allocs, cs.Frees, cs.Allocs-cs.Frees)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
}

// TestStatsCountGuardedAllocBeforeItsFree (STATS-LEAD, STATS-LAG, GUARD-FAULT):
// a guarded small object is counted at the event, its free under the central
// lock, so a free may be published as soon as its header says guard; a stale
// free of its address (the start of a guarded object freed there before) may
// free it before Alloc returns it (FREE-DOUBLE: frees racing reuse). Its
// allocation must be counted by then: if it was counted after the unlock,
// Stats in between counted the free and not the allocation, Allocs-Frees
// below zero (wrapped) with no object live.
func TestStatsCountGuardedAllocBeforeItsFree(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	d, err := a.NewCache()
	must(t, err)
	const size = 64
	k := spec.SizeToClass(size)
	o1, err := c.Alloc(size) // guarded: a superblock of its own
	must(t, err)
	o2, err := c.Alloc(size)
	must(t, err)
	stale := addrOf(o1)
	must(t, c.Free(o1)) // quarantined
	must(t, c.Free(o2)) // quarantined, o1 released to the pool (one object at most)
	var o3 []byte
	var st impl.Stats
	must(t, during(t, newPause(impl.YieldGuardMade),
		func() error { var err error; o3, err = c.Alloc(size); return err },
		func() {
			// o1's address again: the stale free frees the new object.
			if err := d.Free(o1); err != nil {
				t.Fatalf("the stale free of %#x, a guarded object's start again: %v", stale, err)
			}
			st = a.Stats()
		}))
	if addrOf(o3) != stale {
		t.Fatalf("the guarded allocation is at %#x, not at o1's %#x: the set-up did not reuse it", addrOf(o3), stale)
	}
	cs := st.Classes[k]
	if cs.Allocs < cs.Frees {
		t.Fatalf("Stats after a guarded object was made and freed: Allocs %d, Frees %d: the free counted before its allocation", cs.Allocs, cs.Frees)
	}
	must(t, c.Close())
	must(t, d.Close())
}
