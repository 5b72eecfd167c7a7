package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFrontOOMFlushesEveryInternalCache (OOM-REAL): the Allocator's own
// methods run on internal caches (one per P, then the shards) that the user
// never sees. Each keeps the current superblock of every class it served,
// empty once its objects are freed, until it is flushed. An allocation through
// the Allocator that runs out must flush them all before it answers
// ErrOutOfMemory: every object is freed, the memory is the Allocator's own,
// and which internal cache holds it (another P's, a shard's) is not the
// user's to know. Before, only the cache serving the call was flushed, and a
// program that had freed everything (goroutines that ran on other Ps, or a
// GOMAXPROCS lowered since) got ErrOutOfMemory.
func TestFrontOOMFlushesEveryInternalCache(t *testing.T) {
	nc := frontCacheCount(t)
	a, err := impl.New(impl.Options{Reserve: (nc + 2) * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	for i := range nc {
		keepEmptySuperblock(t, a, i)
	}
	if s := a.Stats(); s.SmallSuperblocks != nc {
		t.Fatalf("%d small superblocks held by the %d internal caches, want one each", s.SmallSuperblocks, nc)
	}
	for _, alloc := range []struct {
		name string
		f    func(n int) ([]byte, error)
	}{
		{"Alloc", a.Alloc},
		{"AllocAligned", func(n int) ([]byte, error) { return a.AllocAligned(n, 64) }},
		{"Realloc", func(n int) ([]byte, error) { return a.Realloc(nil, n) }},
	} {
		// The whole reservation, every object having been freed.
		b, err := alloc.f((nc + 2) * spec.SuperblockSize)
		if err != nil {
			t.Fatalf("%s of the whole reservation with every object freed: %v (%d small superblocks still held by internal caches)",
				alloc.name, err, a.Stats().SmallSuperblocks)
		}
		must(t, a.Free(b))
		for i := range nc { // held again for the next case
			a.WithFrontCache(i, func(c *impl.Cache) {
				b, err := c.Alloc(16)
				must(t, err)
				must(t, c.Free(b))
			})
		}
	}
}

// frontCacheCount is how many internal caches an Allocator has here
// (FRONT-EXCLUSIVE: per-P ones and shards).
func frontCacheCount(t *testing.T) int {
	a, err := impl.New(impl.Options{Reserve: spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	return a.FrontCaches()
}

// keepEmptySuperblock makes internal cache i take a superblock for one 16-byte
// object, freed: it keeps it, empty, as its current superblock of the class
// until it is flushed (OOM-REAL).
func keepEmptySuperblock(t *testing.T, a *impl.Allocator, i int) {
	a.WithFrontCache(i, func(c *impl.Cache) {
		b, err := c.Alloc(16)
		must(t, err)
		must(t, c.Free(b))
	})
}
