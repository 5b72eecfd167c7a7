package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// Tests from adv22: harness checks only a misbehaving allocator reaches,
// each fed what such an allocator would leave.

// TestRefusalVerdict (FREE-INVALID): a free refused as an invalid pointer
// changes nothing: one whose snapshots before and after differ (here by an
// allocation between them) is reported; the same snapshots around a free that
// succeeded, or the same snapshot twice around a refusal, pass.
// Slip (hrefusaldiff): the harness never compares the snapshots around a
// refusal.
func TestRefusalVerdict(t *testing.T) {
	h, id := setup(t)
	before := h.A.Snapshot()
	must(t, h.Alloc(id, 100, 1))
	after := h.A.Snapshot()
	v := invariants.RefusalVerdict(id, 0x1000, oracle.InvalidPointer, before, after)
	fires(t, spec.RuleFreeInvalid, "changed the state", one(v))
	if v := invariants.RefusalVerdict(id, 0x1000, oracle.InvalidPointer, after, after); v != nil {
		t.Errorf("a refusal that changed nothing: %v", v)
	}
	if v := invariants.RefusalVerdict(id, 0x1000, oracle.OK, before, after); v != nil {
		t.Errorf("a free that succeeded: %v", v)
	}
}

// TestReallocFailedLeavesObjectIntact (INTEGRITY, OOM-REAL): a Realloc that
// fails leaves its live object as it was: a byte of it changed by the failed
// call (here by hand, between the call and the check) is reported, (here
// a refusal, ErrInvalidSize, which an out-of-memory shares the check with);
// the object untouched passes.
// Slip (reallocintactoom): the harness does not read the object after a
// failed Realloc.
func TestReallocFailedLeavesObjectIntact(t *testing.T) {
	h, id := setup(t)
	must(t, h.Alloc(id, 100, 1))
	a := h.Live()[0]
	b := h.Object(a)
	if v := h.ReallocFailed(id, b, -1, oracle.InvalidSize, true); v != nil {
		t.Fatalf("untouched object: %v", v)
	}
	full := b[:cap(b)]
	full[cap(b)-1] ^= 0xff
	fires(t, spec.RuleIntegrity, "was filled with", one(h.ReallocFailed(id, b, -1, oracle.InvalidSize, true)))
	full[cap(b)-1] ^= 0xff
}

// one is v as a list of violations: none if v is nil.
func one(v *invariants.Violation) []*invariants.Violation {
	if v == nil {
		return nil
	}
	return []*invariants.Violation{v}
}

// TestSharedSettleLiveWhereNoneMust (REFINES): a stale free that returned nil
// while its object was live freed it, so the calls on its address leave
// nothing live there; an object the snapshot shows live there (allocated
// behind Shared's back, as a free that did not free would leave it) is
// reported.
// Slip (settlelivenone): Settle takes the outcome "nothing live" whatever the
// snapshot shows.
func TestSharedSettleLiveWhereNoneMust(t *testing.T) {
	sh, _ := newSh(t, 16)
	defer sh.Close()
	n := 2*sb + 100
	o := alloc(t, sh, invariants.Front, n, 0x11)
	x := addrOf(o.B)
	sh.StaleFree(nil, invariants.Front, o.B) // nil: it frees o
	p, err := sh.A.Alloc(n)                  // behind Shared's back
	must(t, err)
	if addrOf(p) != x {
		t.Fatalf("the object behind Shared's back is at %#x, want %#x", addrOf(p), x)
	}
	sh.Settle()
	fires(t, spec.RuleRefines, "which no order of its calls leaves", sh.Violations())
	must(t, sh.A.Free(p))
}

// TestSharedSettlePicksTheOutcomeThatFits (ZEROED, INTEGRITY, REFINES): a
// Realloc in place K of o, held after its call returned, overlaps a stale
// free F of o's address and an Alloc A that gets the address back. K, F, A
// leaves A's object live; F, A, K leaves K's: both have o's usable size, so
// the snapshot cannot tell them apart, and the bytes must. K's result is Mixed
// (its caller could not fill it), A's must read zero. Settle tries the
// objects handed out last first and takes the first whose bytes fit: as they
// are (zero), A; after a write into the address (by K's holder, in the order
// F, A, K), which makes A's bytes wrong and K's right, K, with nothing
// reported either way.
// Slip (settlepickfirst): the candidates are tried in call order, so K is
// taken where A, handed out last, fits.
func TestSharedSettlePicksTheOutcomeThatFits(t *testing.T) {
	for _, write := range []bool{false, true} {
		sh, g := newSh(t, 16)
		n := 2*sb + 100
		o := alloc(t, sh, invariants.Front, n, 0x11)
		x := addrOf(o.B)
		h := g.hold(x, invariants.HookReturn)
		var k invariants.SharedObj
		var ok bool
		kDone := async(func() { k, ok = sh.Realloc(nil, invariants.Front, o, n-50, 0x22) })
		<-h.reached                                  // K shrank o in place, its call has not ended
		sh.StaleFree(nil, invariants.Front, o.B)     // F: frees K's object
		a := alloc(t, sh, invariants.Front, n, 0x33) // A: gets x back
		close(h.release)
		<-kDone
		if !ok || addrOf(k.B) != x || addrOf(a.B) != x || !k.Mixed {
			t.Fatalf("K %v at %#x (Mixed %v), A at %#x; want both at %#x", ok, addrOf(k.B), k.Mixed, addrOf(a.B), x)
		}
		if write {
			k.B[:cap(k.B)][0] = 0x44 // K's holder writes its object
		}
		sh.Settle()
		if sh.Alive(k) != write || sh.Alive(a) == write {
			t.Errorf("write %v: after Settle K alive %v, A alive %v; want K %v, A %v", write, sh.Alive(k), sh.Alive(a), write, !write)
		}
		finish(t, sh, k, a)
	}
}

// TestSharedSettleChecksZeroLengthSurvivor (INTEGRITY): Alloc(0) is a real
// object of 8 bytes (its cap), filled like any other; a survivor of stale
// frees on its address (one through a closed cache, refused) whose last byte
// changed is reported.
// Slip (settlezeroskip): Settle takes a survivor of length 0 as holding its
// fill, unread.
func TestSharedSettleChecksZeroLengthSurvivor(t *testing.T) {
	sh, _ := newSh(t, 16)
	defer sh.Close()
	c, id, err := sh.OpenCache()
	must(t, err)
	d, closed, err := sh.OpenCache()
	must(t, err)
	sh.CloseCache(d, closed)
	o, ok := sh.Alloc(c, id, 0, 1, 0x11)
	if !ok || len(o.B) != 0 || cap(o.B) == 0 {
		t.Fatalf("Alloc(0): %v, len %d cap %d", ok, len(o.B), cap(o.B))
	}
	sh.StaleFree(d, closed, o.B) // ErrClosed: o lives on
	o.B[:cap(o.B)][cap(o.B)-1] ^= 0xff
	sh.Settle()
	fires(t, spec.RuleIntegrity, "live after stale frees on it", sh.Violations())
}

// TestReallocSizesHalfPagesEdge (REFINES): the model lets a large object
// that does not grow stay in place whatever it shrinks to, so the model never
// tells apart the sizes ReallocSizes adds for an implementation that would
// move a large object shrunk to half its pages or less: for p pages, a size of
// ceil(p/2) pages and the one byte less (ceil(p/2)-1 pages) are both there.
// Slip (rszleast): the edge is one byte low, both sizes of ceil(p/2)-1 pages.
func TestReallocSizesHalfPagesEdge(t *testing.T) {
	pages := func(n int) int { return (n + spec.PageSize - 1) / spec.PageSize }
	for p := 3; p <= 48; p++ {
		h := (p + 1) / 2
		sizes := map[int]bool{}
		for _, n := range invariants.ReallocSizes(oracle.Object{Class: spec.Large, Usable: p * spec.PageSize}) {
			sizes[n] = true
		}
		found := false
		for n := range sizes {
			found = found || pages(n) == h && sizes[n-1] && pages(n-1) == h-1
		}
		if !found {
			t.Errorf("%d pages: ReallocSizes %v has no sizes of %d pages and one byte less", p, sizes, h)
		}
	}
}
