package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestSharedReallocRefusedForSize (REFINES; a false positive): Realloc(b, n)
// with n < 0 (ErrInvalidSize) or n beyond the reservation (ErrTooLarge) leaves
// b untouched and live (impl.Cache.Realloc's doc, oracle.Model.Realloc). Shared
// took b out of the Model before the call (startFree) and has no branch for
// these errors: it reports the refusal as a violation and never puts b back,
// so every later check disagrees with the snapshot (b live, not in the Model)
// and Close reports it leaked.
func TestSharedReallocRefusedForSize(t *testing.T) {
	for _, n := range []int{-1, 128 * spec.SuperblockSize} {
		sh, err := invariants.NewShared(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		o, ok := sh.Alloc(nil, invariants.Front, 100, 1, 0x11)
		if !ok {
			t.Fatal("Alloc failed")
		}
		r, ok := sh.Realloc(nil, invariants.Front, o, n, 0x22)
		if ok {
			o = r
		}
		sh.A.Flush()
		sh.Check(true)
		if sh.Alive(o) {
			sh.Free(nil, invariants.Front, o)
		}
		sh.Close()
		for _, v := range sh.Violations() {
			t.Errorf("n %d: %s: %s", n, v.Rule, v.Detail)
		}
	}
}

// TestSharedMixedSurvivorNeverChecked (INTEGRITY; a false negative): a moving
// Realloc whose result lands on an address judged later returns a Mixed
// object (its caller cannot fill it). When Settle finds it is the survivor it
// enters Shared's live set still Mixed, and since Free, Realloc and CheckFills
// read Mixed (and Fill) from the caller's copy, no byte of it is ever checked
// again, however long it lives. Here the allocator's corruption of it is
// simulated by a write into it at a quiescent point (as INTEGRITY's mutants
// do: a flush that poisons live objects); the same write into an ordinary
// object is reported (the control).
func TestSharedMixedSurvivorNeverChecked(t *testing.T) {
	for _, judged := range []bool{false, true} {
		sh, err := invariants.NewShared(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		n := 2*spec.SuperblockSize + 100
		p := alloc(t, sh, invariants.Front, 100, 0x22)
		q := alloc(t, sh, invariants.Front, n, 0x11)
		y := addrOf(q.B)
		if judged {
			sh.StaleFree(nil, invariants.Front, q.B) // y is judged later
		} else {
			sh.Free(nil, invariants.Front, q)
		}
		r, ok := sh.Realloc(nil, invariants.Front, p, n, 0x33) // lands on y
		if !ok || addrOf(r.B) != y {
			t.Fatalf("the Realloc did not land on y")
		}
		sh.A.Flush()
		sh.Check(true) // judged: Settle finds r is the survivor
		if !sh.Alive(r) {
			t.Fatal("r is not live")
		}
		n0 := len(sh.Violations())
		r.B[:cap(r.B)][cap(r.B)-1] ^= 0xff // the allocator writes into a live object
		sh.Check(true)
		sh.Free(nil, invariants.Front, r)
		sh.A.Flush()
		sh.Check(true)
		sh.Close()
		vs := sh.Violations()
		for _, v := range vs[:n0] {
			t.Errorf("judged %v: before the write: %s: %s", judged, v.Rule, v.Detail)
		}
		if len(vs) == n0 {
			t.Errorf("judged %v: the write into live object %#x (Mixed %v) was not reported", judged, y, r.Mixed)
		} else {
			t.Logf("judged %v: reported: %s: %s", judged, vs[n0].Rule, vs[n0].Detail)
		}
	}
}

// TestSharedSettlePicksAllocOverMovedRealloc (ZEROED; a false positive): at an
// address judged later, an Alloc A and a moving Realloc R2 both get y, a stale
// free between them. A's call took effect first, R2's last, so y holds what
// R2 copied; but A's call ended after R2's (a goroutine preempted between the
// allocator's return and Shared's lock; the hook holds it there).
// Both orders are possible, both leave an object of the same usable size, and
// Settle's tie-break, the highest call index, takes A (indices follow ends):
// A is not Mixed, must read zero, and does not.
func TestSharedSettlePicksAllocOverMovedRealloc(t *testing.T) {
	sh, g := newSh(t, 64)
	n := 2*spec.SuperblockSize + 100
	p := alloc(t, sh, invariants.Front, 100, 0x22) // R2's source
	q := alloc(t, sh, invariants.Front, n, 0x11)
	y := addrOf(q.B)
	sh.StaleFree(nil, invariants.Front, q.B) // y is judged later
	ha := g.hold(y, invariants.HookHandedOut)
	var a invariants.SharedObj
	aDone := async(func() { a, _ = sh.Alloc(nil, invariants.Front, n, 1, 0x33) })
	<-ha.reached // A has y, its call has not ended
	h := g.hold(addrOf(p.B), invariants.HookCall)
	var r invariants.SharedObj
	rDone := async(func() { r, _ = sh.Realloc(nil, invariants.Front, p, n, 0x44) })
	<-h.reached                              // R2 has begun
	sh.StaleFree(nil, invariants.Front, q.B) // frees A
	close(h.release)
	<-rDone // R2 got y, copied p's bytes, ended
	if addrOf(r.B) != y {
		t.Fatalf("R2 did not land on y")
	}
	close(ha.release)
	<-aDone // A ends last
	sh.A.Flush()
	sh.Check(true)
	t.Logf("alive after Settle: A %v, R2 %v; y[0] = %#x", sh.Alive(a), sh.Alive(r), r.B[0])
	finish(t, sh, a, r)
}
