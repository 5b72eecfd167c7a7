package impl_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// The first benchmarks: a Cache's alloc+free pair against make([]byte, n) (its
// cost includes the GC's), at 16, 64, 256 and 4096 bytes, LIFO (one object
// allocated and freed at a time, one other kept live so the superblock never
// empties) and in batches of 1000. ns/op is per alloc+free pair. The full suite,
// with peers, is in bench/.

var sizes = []int{16, 64, 256, 4096}

var sink []byte

func BenchmarkPair(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("refalloc/%d/lifo", n), func(b *testing.B) { cachePair(b, n) })
		b.Run(fmt.Sprintf("make/%d/lifo", n), func(b *testing.B) {
			for b.Loop() {
				p := make([]byte, n)
				p[0] = 1
				sink = p
			}
		})
		b.Run(fmt.Sprintf("refalloc/%d/batch1000", n), func(b *testing.B) {
			c := benchCache(b)
			objs := make([][]byte, 1000)
			for i := 0; i < b.N; i += len(objs) {
				for j := range objs {
					objs[j], _ = c.Alloc(n)
					objs[j][0] = 1
				}
				for j := range objs {
					c.Free(objs[j])
				}
			}
		})
		b.Run(fmt.Sprintf("make/%d/batch1000", n), func(b *testing.B) {
			objs := make([][]byte, 1000)
			for i := 0; i < b.N; i += len(objs) {
				for j := range objs {
					objs[j] = make([]byte, n)
					objs[j][0] = 1
				}
				clear(objs)
			}
		})
	}
}

// cachePair is the lifo loop on one Cache: an Alloc and a Free of n bytes, with
// one object of the class kept live so that its superblock stays current.
func cachePair(b *testing.B, n int) { pairLoop(b, benchCache(b), n) }

// pairLoop is cachePair's loop on c.
func pairLoop(b *testing.B, c *impl.Cache, n int) {
	keep, _ := c.Alloc(n)
	for b.Loop() {
		p, _ := c.Alloc(n)
		p[0] = 1
		c.Free(p)
	}
	c.Free(keep)
}

func benchCache(b *testing.B) *impl.Cache {
	a, err := impl.New(impl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { a.Close() })
	c, err := a.NewCache()
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkScatteredFree is larson 100–200 on one cache: a slot array of 5000
// objects of 100–200 bytes; each op frees a random slot and allocates a new
// object into it, so frees scatter over every superblock the array spans. It
// reports the superblock-cache miss rate per free for 1, 8, 16, 32, 64 and 128 ways
// (CACHE-COHERENT's cache; issue #3's sweep).
func BenchmarkScatteredFree(b *testing.B) {
	for _, ways := range []int{1, 8, 16, 32, 64, 128} {
		b.Run(fmt.Sprintf("ways=%d", ways), func(b *testing.B) {
			a, err := impl.New(impl.Options{SuperblockCacheWays: ways})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			c, _ := a.NewCache()
			slots := make([][]byte, 5000)
			rng := uint32(4141)
			next := func() uint32 { rng = rng*1664525 + 1013904223; return rng >> 8 }
			for i := range slots {
				slots[i], _ = c.Alloc(100 + int(next()%100))
			}
			// Shuffle, so neighbouring slots come from different superblocks.
			for i := len(slots) - 1; i > 0; i-- {
				j := int(next() % uint32(i+1))
				slots[i], slots[j] = slots[j], slots[i]
			}
			miss0 := a.Stats().SuperblockCacheMisses
			b.ResetTimer()
			for range b.N {
				i := next() % uint32(len(slots))
				c.Free(slots[i])
				slots[i], _ = c.Alloc(100 + int(next()%100))
			}
			b.StopTimer()
			b.ReportMetric(float64(a.Stats().SuperblockCacheMisses-miss0)/float64(b.N), "misses/free")
			for _, s := range slots {
				c.Free(s)
			}
		})
	}
}

// BenchmarkFront measures the goroutine-safe Allocator methods: each goroutine
// keeps a ring of 64 objects of 16–256 bytes and replaces the oldest each op.
// Run with -cpu 1,2: the 2-goroutine ns/op against the 1-goroutine one is the
// front's scaling (issue #3: at least 1.7× the throughput).
func BenchmarkFront(b *testing.B) {
	a, err := impl.New(impl.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	b.RunParallel(func(pb *testing.PB) {
		var ring [64][]byte
		rng := uint32(1)
		i := 0
		for pb.Next() {
			rng = rng*1664525 + 1013904223
			a.Free(ring[i])
			ring[i], _ = a.Alloc(16 + int(rng>>24))
			i = (i + 1) % len(ring)
		}
		for _, r := range ring {
			a.Free(r)
		}
	})
}

// BenchmarkGuard is BenchmarkPair's LIFO pair in guard mode (GUARD-FAULT) at
// sample rates 1, 100 and 1000, against guard mode off, for small sizes and a
// large object (which guard mode always guards): ns/op is per alloc+free
// pair, the average over guarded and unguarded ones. A guarded pair makes
// five system calls (mprotect twice, madvise, and the page fault of the first
// touch, the quarantine's release another mprotect).
func BenchmarkGuard(b *testing.B) {
	for _, n := range []int{16, 256, 4096, 100_000} {
		for _, rate := range []int{0, 1000, 100, 1} {
			if n > 32<<10 && rate > 1 {
				continue // large objects are guarded whatever the rate
			}
			name := fmt.Sprintf("%d/rate=%d", n, rate)
			if rate == 0 {
				name = fmt.Sprintf("%d/off", n)
			}
			b.Run(name, func(b *testing.B) {
				opt := impl.Options{}
				if rate > 0 {
					opt.Guard = impl.GuardOptions{Enabled: true, SampleRate: rate}
				}
				a, err := impl.New(opt)
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				c, _ := a.NewCache()
				pairLoop(b, c, n)
				b.ReportMetric(float64(a.Stats().Guard.Allocs)/float64(b.N), "guarded/op")
			})
		}
	}
}

// BenchmarkGuardMemory measures what guard mode costs in memory: 20000 live
// 64-byte objects (and then freed into the quarantine) at sample rates 1,
// 100 and 1000 against guard mode off, reporting the resident memory the
// process gained (/proc/self/statm: the reservation's touched pages, and a
// little Go heap) and the reservation's committed and in-use
// bytes per live object. Each op is a whole measurement (a third of a second
// at rate 1): run it with -benchtime 1x.
func BenchmarkGuardMemory(b *testing.B) {
	for _, rate := range []int{0, 1000, 100, 1} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			for b.Loop() {
				opt := impl.Options{}
				if rate > 0 {
					opt.Guard = impl.GuardOptions{Enabled: true, SampleRate: rate}
				}
				a, err := impl.New(opt)
				if err != nil {
					b.Fatal(err)
				}
				c, _ := a.NewCache()
				const live = 20_000
				objs := make([][]byte, live)
				rss0 := rssKiB(b)
				for i := range objs {
					objs[i], _ = c.Alloc(64)
					objs[i][0] = 1
				}
				rss1 := rssKiB(b)
				s := a.Stats()
				for _, o := range objs {
					c.Free(o)
				}
				rss2 := rssKiB(b)
				b.ReportMetric(float64(rss1-rss0)*1024/live, "RSS-B/obj")
				b.ReportMetric(float64(s.InUse)/live, "inuse-B/obj")
				b.ReportMetric(float64(rss2-rss0)*1024/live, "RSS-after-free-B/obj")
				b.ReportMetric(float64(a.Stats().Guard.QuarantinedBytes)/(1<<20), "quarantine-MiB")
				c.Close()
				a.Close()
			}
		})
	}
}

// rssKiB is the process's resident memory, from /proc/self/statm.
func rssKiB(b *testing.B) int {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm")
	}
	var size, rss int
	fmt.Sscan(string(data), &size, &rss)
	return rss * os.Getpagesize() / 1024
}

// BenchmarkFrontPair is BenchmarkPair's lifo loop through the Allocator's own
// methods (the front), beside the Cache's, for the front's fast-path cost.
func BenchmarkFrontPair(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("cache/%d", n), func(b *testing.B) { cachePair(b, n) })
		b.Run(fmt.Sprintf("front/%d", n), func(b *testing.B) {
			a, err := impl.New(impl.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			keep, _ := a.Alloc(n)
			for b.Loop() {
				p, _ := a.Alloc(n)
				p[0] = 1
				a.Free(p)
			}
			a.Free(keep)
		})
	}
}

// BenchmarkReallocMoving: a moving Realloc of a large object (its next
// superblocks taken, so it cannot grow in place) and back, the cost of a
// resize that copies, the reservation of the new object included
// (FREE-DOUBLE: publishLarge, unreserve). ns/op is per pair of Reallocs.
func BenchmarkReallocMoving(b *testing.B) {
	for _, n := range []int{64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			c := benchCache(b)
			p, _ := c.Alloc(n)
			for b.Loop() {
				block, _ := c.Alloc(n) // right after p: p must move to grow
				q, err := c.Realloc(p, 2*n)
				if err != nil {
					b.Fatal(err)
				}
				c.Free(block)
				p, err = c.Realloc(q, n)
				if err != nil {
					b.Fatal(err)
				}
			}
			c.Free(p)
		})
	}
}
