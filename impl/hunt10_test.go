package impl_test

import (
	"testing"
	"unsafe"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// Tests from a second mutant hunt of the Cache's fast paths, refill, flush and
// Close (cache.go).

// TestZeroedAfterLowerGroupRetaken (ZEROED): taking a lower group again never
// lowers the mark below which objects may be dirty. 64 objects of 8 bytes
// (groups 0 and 1 of a fresh superblock) are dirtied and freed; the refill
// takes group 0 back, then group 1, and all 32 objects of group 1 must come
// back zeroed. Slip: take sets zeroedFrom to (g+1)*32 of the group it takes,
// not the max with what it was, so group 1 counts as never handed out.
func TestZeroedAfterLowerGroupRetaken(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	var bs [][]byte
	for range 64 {
		b, err := c.Alloc(8)
		must(t, err)
		for i := range b[:cap(b)] {
			b[:cap(b)][i] = 0xa5
		}
		bs = append(bs, b)
	}
	for _, b := range bs {
		must(t, c.Free(b))
	}
	for i := range 64 {
		b, err := c.Alloc(8)
		must(t, err)
		for j, x := range b[:cap(b)] {
			if x != 0 {
				t.Fatalf("allocation %d after the frees: byte %d is %#x, want 0", i, j, x)
			}
		}
	}
}

// TestPendingOnLaterHeldObject (FREE-DOUBLE): a remote free pending on an
// object of the held group other than its lowest does not stop the fast path
// handing out the lowest. Cache A takes object 0 of a fresh superblock of the
// 64-byte class and holds objects 1 to 31; cache B frees object 2 (never
// handed out: a double free that only the owner can find). A's next two
// allocations are objects 1 and then, after collecting the stale free,
// object 2 itself, and the double free is counted once. Slip: next() refuses
// the group when any held object has a free pending, not only the lowest, and
// allocSlow, which tests the lowest, sends it straight back: no end.
func TestPendingOnLaterHeldObject(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	ca, err := a.NewCache()
	must(t, err)
	cb, err := a.NewCache()
	must(t, err)
	x, err := ca.Alloc(64)
	must(t, err)
	base := addrOf(x)
	stale := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(x)), 2*64)), 64)
	must(t, cb.Free(stale)) // remote: accepted, found later
	y, err := ca.Alloc(64)
	must(t, err)
	if addrOf(y) != base+64 {
		t.Fatalf("second allocation at %#x, want object 1 at %#x", addrOf(y), base+64)
	}
	z, err := ca.Alloc(64)
	must(t, err)
	if addrOf(z) != base+2*64 {
		t.Fatalf("third allocation at %#x, want object 2 at %#x", addrOf(z), base+2*64)
	}
	for _, b := range [][]byte{x, y, z} {
		must(t, ca.Free(b))
	}
	ca.Flush()
	cb.Flush()
	if d := a.Stats().DoubleFrees; d != 1 {
		t.Fatalf("DoubleFrees %d after the flushes, want 1", d)
	}
}

// TestGuardCutGroupStatsExact (STATS-LEAD, STATS-EXACT): when guard sampling
// cuts the group a refill takes short of the next sampled allocation, the
// refill credits only the objects it took, not the group's free ones. With
// one allocation in 8 sampled, 300 allocations and frees of 64 bytes, then a
// Flush, count exactly 300 and 300.
// Slip: take counts popcount(b) before guardLimit cuts b.
func TestGuardCutGroupStatsExact(t *testing.T) {
	needClassCounters(t)
	a := newGuarded(t, impl.GuardOptions{SampleRate: 8})
	c, err := a.NewCache()
	must(t, err)
	defer c.Close()
	var bs [][]byte
	for range 300 {
		bs = append(bs, allocN(t, c, 64))
	}
	for _, b := range bs {
		must(t, c.Free(b))
	}
	c.Flush()
	s := a.Stats()
	k := spec.SizeToClass(64)
	if s.Guard.Allocs == 0 {
		t.Fatalf("no allocation of 300 sampled at one in 8: %+v", s.Guard)
	}
	if got := s.Classes[k]; got.Allocs != 300 || got.Frees != 300 {
		t.Fatalf("after 300 allocations and frees and a Flush: class %d %+v (%d sampled); want 300 and 300", k, got, s.Guard.Allocs)
	}
}
