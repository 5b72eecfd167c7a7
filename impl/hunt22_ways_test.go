package impl_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontFreeHitsEveryWay (CACHE-COHERENT: entry i mod W for superblock i,
// in the front's pinned free as in Cache.free): on one P, for every way
// count, objects of another cache in W superblocks that fall in W distinct
// ways are freed through the Allocator twice over. The first round fills
// each way once (W misses); the second must hit every way, so it adds no
// miss. A pinned free that looked at the wrong entry would fall to the slow
// path, whose Cache.free still finds the object: every behaviour but the
// miss count (and the speed) stays right (hunt22's slip).
func TestFrontFreeHitsEveryWay(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	k := spec.NumClasses - 1
	size, per := spec.ClassSize(k), spec.ClassObjects(k)
	for _, w := range []int{1, 8, 16, 32, 64, 128} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			a, c := newAllocCache(t, impl.Options{Reserve: (w + 16) * sbBytes, SuperblockCacheWays: w})
			defer c.Close()
			// Two objects of each superblock whose way is not taken yet.
			byWay := map[int][][]byte{}
			bySB := map[int][][]byte{}
			for len(byWay) < w {
				b := allocN(t, c, size)
				sb := sbOf(a, b)
				bySB[sb] = append(bySB[sb], b)
				if len(bySB[sb]) == min(2, per) {
					if _, taken := byWay[sb%w]; !taken {
						byWay[sb%w] = bySB[sb]
					}
				}
			}
			c.Flush()
			a.Flush()
			for round := range 2 {
				before := a.Stats().SuperblockCacheMisses
				for _, objs := range byWay {
					must(t, a.Free(objs[round]))
				}
				a.Flush()
				got := a.Stats().SuperblockCacheMisses - before
				if want := uint64(w * (1 - round)); got != want {
					t.Fatalf("round %d: %d frees through the front into %d superblocks of %d distinct ways missed %d times, want %d",
						round+1, w, w, w, got, want)
				}
			}
		})
	}
}
