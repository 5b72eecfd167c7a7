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
