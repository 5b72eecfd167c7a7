package impl_test

import (
	"slices"
	"strings"
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

// TestGuardSampleRateBound (GUARD-FAULT, options: SampleRate is at most
// 2^30, and the bound is a valid rate): New accepts SampleRate 1<<30 and
// refuses one more. Slip: initGuard refuses the bound itself.
func TestGuardSampleRateBound(t *testing.T) {
	for _, tc := range []struct {
		rate int
		ok   bool
	}{{1 << 30, true}, {1<<30 + 1, false}} {
		a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Guard: impl.GuardOptions{Enabled: true, SampleRate: tc.rate}})
		if err == nil {
			a.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("SampleRate %d: New returned %v", tc.rate, err)
		}
	}
}

// TestGuardReleasedPoolsDirty (MEM-ACCOUNT, GUARD-FAULT): where guard mode
// cannot protect (the Go-heap backend) a quarantined object keeps its memory
// committed, poisoned, and when it leaves the quarantine its superblocks are
// pooled dirty like any released superblock: Trim then gives every one of
// them back, and Committed comes down to what is in use plus the quarantine.
// Slip: evictOldest puts the run back without pooled, the pool's count of
// its dirty superblocks falls short, and Trim stops before it reaches them.
func TestGuardReleasedPoolsDirty(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize, HeapBackend: true,
		Guard: impl.GuardOptions{Enabled: true, SampleRate: 1, QuarantineObjects: 1}})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	defer c.Close()
	var objs [][]byte
	for range 4 {
		b, err := c.Alloc(64)
		must(t, err)
		objs = append(objs, b)
	}
	for _, b := range objs {
		must(t, c.Free(b))
	}
	if g := a.Stats().Guard; g.Released != 3 || g.Quarantined != 1 {
		t.Fatalf("guard stats %+v, want 3 released and 1 quarantined", g)
	}
	must(t, a.Trim())
	if s := a.Stats(); s.Committed != s.InUse+s.Guard.QuarantinedBytes {
		t.Errorf("after Trim: Committed %d, InUse %d, quarantined %d: the released guard superblocks stayed committed",
			s.Committed, s.InUse, s.Guard.QuarantinedBytes)
	}
}

// TestExplainJustPastTheEnd (GUARD-FAULT, the report names the object and
// where in it the access was): an access at offset Size is the first byte
// past the end of the object, not a byte of it. Slip: Error tests Offset >
// Size, and calls it "byte 64 of the 64-byte object".
func TestExplainJustPastTheEnd(t *testing.T) {
	a := newGuarded(t, impl.GuardOptions{})
	c, _ := a.NewCache()
	defer c.Close()
	b, err := c.Alloc(64)
	must(t, err)
	must(t, c.Free(b))
	for _, tc := range []struct {
		off  int
		want string
	}{{63, "byte 63 of the 64-byte object"}, {64, "0 bytes past the end of the 64-byte object"}} {
		e, ok := a.ExplainAddr(addrOf(b) + uintptr(tc.off))
		if !ok || e.Offset != tc.off || !strings.Contains(e.Error(), tc.want) {
			t.Errorf("ExplainAddr(object+%d): %v, want %q", tc.off, e, tc.want)
		}
	}
}
