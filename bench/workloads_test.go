package bench

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// testParams are smaller still than QuickParams: every workload against every
// allocator, through the Checker, in a few seconds. Larson's rounds are cut so
// that successors take over several times.
func testParams() Params {
	p := QuickParams()
	// The timed windows are long enough for a batch to get through on a
	// loaded machine under -race.
	p.LarsonSeconds = 0.1
	p.LarsonChunks = 300
	p.LarsonRounds = 3
	p.TTIterations = 3
	p.TTObjects = 2000
	p.LSIterations = 3000
	p.CacheIterations = 20
	p.CacheReps = 1000
	p.XMSeconds = 0.2
	p.XMBatch = 128
	p.XMQueue = 4
	p.PairKeepN = 5000
	p.PairBatchN = 5000
	p.GrowMax = 3 << 20
	p.GrowCycles = 2
	p.FillBytes = 4 << 20
	return p
}

// TestEveryWorkloadEveryAllocator runs each workload against each allocator
// that supports it, checking every object (length, zeroed, never handed out
// twice, never freed twice) and that everything allocated is freed.
func TestEveryWorkloadEveryAllocator(t *testing.T) {
	p := testParams()
	counted := p
	counted.LarsonOps = 5000
	counted.XMFrees = 1000
	for _, mode := range []struct {
		name string
		p    Params
	}{{"timed", p}, {"counted", counted}} {
		for _, w := range Workloads(mode.p) {
			if mode.name == "counted" && !strings.HasPrefix(w.Name, "larson") && !strings.HasPrefix(w.Name, "xmalloc") {
				continue
			}
			for _, k := range Kinds {
				if k.PairOnly && !strings.HasPrefix(w.Name, "pair-") {
					continue
				}
				for _, threads := range []int{1, 2} {
					if w.SingleThreaded && threads > 1 {
						continue
					}
					name := fmt.Sprintf("%s/%s/%s/threads=%d", mode.name, w.Name, k.Name, threads)
					t.Run(name, func(t *testing.T) { checkRun(t, w, k, threads, mode.name == "counted", mode.p) })
				}
			}
		}
	}
}

func checkRun(t *testing.T, w Workload, k Kind, threads int, counted bool, p Params) {
	a, err := k.New(Config{RemoteFrees: w.RemoteFrees})
	if err != nil {
		t.Fatal(err)
	}
	chk := NewChecker()
	var starts, stops int
	env := &Env{Alloc: chk.Wrap(a), Threads: threads,
		OnStart: func() { starts++ }, OnStop: func() { stops++ }}
	res := w.Run(env)
	if err := chk.Err(); err != nil {
		t.Fatal(err)
	}
	allocs, frees, live := chk.Counts()
	if live != 0 || allocs != frees || allocs == 0 {
		t.Fatalf("allocs %d frees %d live %d: every object must be freed", allocs, frees, live)
	}
	if starts != 1 || stops != 1 {
		t.Errorf("timed window hooks ran %d/%d times, want 1/1", starts, stops)
	}
	if res.Elapsed <= 0 || res.Ops < 0 || (!raceBuild || counted) && (res.Ops == 0 || res.Value <= 0) {
		t.Errorf("result %+v: nothing measured", res)
	}
	if res.Ops > allocs+chk.Reallocs() {
		t.Errorf("%d ops counted but only %d allocations and %d reallocs", res.Ops, allocs, chk.Reallocs())
	}
	if counted {
		want := p.LarsonOps
		if strings.HasPrefix(w.Name, "xmalloc") {
			want = p.XMFrees
		}
		if res.Ops < want {
			t.Errorf("counted mode: %d ops, want at least %d", res.Ops, want)
		}
	}
	if r, ok := a.(Refallocer); ok {
		r.Refalloc().Flush()
		st := r.Refalloc().Stats()
		var sa, sf uint64
		for _, c := range st.Classes {
			sa += c.Allocs
			sf += c.Frees
		}
		sa += st.Large.Allocs
		sf += st.Large.Frees
		// A Realloc that moves counts in Stats as an alloc and a free.
		re := uint64(chk.Reallocs())
		if sa != sf || sa < uint64(allocs) || sa > uint64(allocs)+re {
			t.Errorf("refalloc Stats after flush: %d allocs %d frees, the workload made %d and %d reallocs", sa, sf, allocs, re)
		}
	}
	if err := a.Close(); err != nil {
		if errors.Is(err, impl.ErrLeaked) {
			t.Fatalf("Close: %v", err)
		}
		t.Fatal(err)
	}
}

// TestPoolClass pins the sync.Pool classes: a block's cap must map back to
// the class it came from, or Free would put it in the wrong pool.
func TestPoolClass(t *testing.T) {
	for n := 0; n <= 1<<16; n++ {
		c := poolClass(n)
		if 1<<c < n || (n > 1 && 1<<(c-1) >= n) || poolClass(1<<c) != c {
			t.Fatalf("poolClass(%d) = %d", n, c)
		}
	}
}
