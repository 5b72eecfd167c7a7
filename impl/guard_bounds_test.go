package impl_test

import (
	"slices"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// guardedAt returns the indices, among n small allocations of one cache, of
// the ones guard mode sampled (Stats.Guard.Allocs went up), calling Flush
// after every flushEvery-th allocation (0: never).
func guardedAt(t *testing.T, n, flushEvery int) []int {
	t.Helper()
	a, err := impl.New(impl.Options{Reserve: 1024 * spec.SuperblockSize,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 20, QuarantineObjects: 4}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	var at []int
	var objs [][]byte
	for i := range n {
		before := a.Stats().Guard.Allocs
		b, err := c.Alloc(16)
		must(t, err)
		objs = append(objs, b)
		if a.Stats().Guard.Allocs != before {
			at = append(at, i)
		}
		if flushEvery > 0 && i%flushEvery == flushEvery-1 {
			c.Flush()
		}
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	must(t, c.Close())
	return at
}

// TestGuardSamplingIgnoresFlush (GUARD-FAULT, guarded objects: the interval
// between two sampled allocations of a cache and class is drawn by a
// generator seeded with the cache's ID, and counts allocations): the objects a
// Flush gives back from the held group were never handed out, so they do not
// count towards the next sampled allocation, and flushing leaves the sampled
// allocations where they are. Slip: Cache.flush does not give the objects it
// returns back to guardLeft, and every Flush brings the next sample forward.
func TestGuardSamplingIgnoresFlush(t *testing.T) {
	want := guardedAt(t, 400, 0)
	if len(want) < 5 {
		t.Fatalf("only %d of 400 allocations sampled at rate 20", len(want))
	}
	if got := guardedAt(t, 400, 7); !slices.Equal(got, want) {
		t.Fatalf("with a Flush after every 7th allocation the sampled ones are\n%v\nwithout a Flush\n%v", got, want)
	}
}

// TestQuarantineTakesObjectOfExactBound (GUARD-FAULT, free: "a freed object
// larger than QuarantineBytes ... is not quarantined"; the bound is
// inclusive): a large object whose superblocks are exactly QuarantineBytes
// is quarantined, one superblock more is pooled. Slip: quarantine refuses an
// object of m >= maxSBs superblocks.
func TestQuarantineTakesObjectOfExactBound(t *testing.T) {
	const m = 4
	a := newGuarded(t, impl.GuardOptions{QuarantineBytes: m * spec.SuperblockSize})
	c, _ := a.NewCache()
	defer c.Close()
	for _, tc := range []struct {
		sbs  int
		want int
	}{{m, 1}, {m + 1, 0}} {
		b, err := c.Alloc(tc.sbs * spec.SuperblockSize)
		must(t, err)
		if got := spec.LargeSuperblocks(cap(b)); got != tc.sbs {
			t.Fatalf("a large object of %d bytes takes %d superblocks, want %d", cap(b), got, tc.sbs)
		}
		before := a.Stats().Guard.Quarantined
		must(t, c.Free(b))
		if got := a.Stats().Guard.Quarantined - before; got != tc.want {
			t.Errorf("QuarantineBytes %d: freeing an object of %d superblocks quarantined %d objects, want %d", m*spec.SuperblockSize, tc.sbs, got, tc.want)
		}
	}
}
