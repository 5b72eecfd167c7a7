package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// The tests below hold calls on one address in flight (the hook, gates) in
// the overlaps that Shared must judge right without a false report (REFINES,
// FREE-DOUBLE, INTEGRITY, ZEROED): a Realloc in place racing a stale free, a
// handout while an older free is in flight, two stale frees with reuse
// between them, a moving Realloc whose result lands on a judged address, OOM
// inside a judged Realloc. Each ends with a flushed Check and Close.

const sb = spec.SuperblockSize

func newSh(t *testing.T, reserveSB int) (*invariants.Shared, *gates) {
	t.Helper()
	sh, err := invariants.NewShared(impl.Options{Reserve: reserveSB * sb})
	must(t, err)
	return sh, newGates(sh)
}

func finish(t *testing.T, sh *invariants.Shared, free ...invariants.SharedObj) {
	t.Helper()
	sh.A.Flush()
	sh.Check(true)
	for _, o := range free {
		if sh.Alive(o) {
			sh.Free(nil, invariants.Front, o)
		}
	}
	sh.A.Flush()
	sh.Check(true)
	sh.Close()
	report(t, sh)
}

// a large Realloc in place (shrink), returned, not ended; a stale free
// of its address frees the result.
func TestSharedReallocInPlaceReturnedThenStale(t *testing.T) {
	sh, g := newSh(t, 64)
	o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
	x := addrOf(o.B)
	h := g.hold(x, invariants.HookReturn)
	var r invariants.SharedObj
	var ok bool
	done := async(func() { r, ok = sh.Realloc(nil, invariants.Front, o, sb+100, 0x22) })
	<-h.reached
	sh.StaleFree(nil, invariants.Front, o.B)
	close(h.release)
	<-done
	t.Logf("realloc ok %v at %#x (in place %v)", ok, addrOf(r.B), addrOf(r.B) == x)
	finish(t, sh, r)
}

// A2/A3: a large Realloc held before its call; a stale free frees o; an Alloc
// of o's size gets x; the Realloc then resizes the new object in place.
func TestSharedReallocInPlaceOnNewObject(t *testing.T) {
	for _, n := range []int{sb + 100, 3*sb - 100} {
		sh, g := newSh(t, 64)
		o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
		x := addrOf(o.B)
		h := g.hold(x, invariants.HookCall)
		var r invariants.SharedObj
		var ok bool
		done := async(func() { r, ok = sh.Realloc(nil, invariants.Front, o, n, 0x22) })
		<-h.reached
		sh.StaleFree(nil, invariants.Front, o.B)
		a := alloc(t, sh, invariants.Front, 3*sb-100, 0x33)
		if addrOf(a.B) != x {
			t.Fatalf("A not at x")
		}
		close(h.release)
		<-done
		t.Logf("n %d: realloc ok %v at %#x (in place %v)", n, ok, addrOf(r.B), addrOf(r.B) == x)
		sh.A.Flush()
		sh.Check(true)
		t.Logf("alive: a %v r %v", sh.Alive(a), sh.Alive(r))
		finish(t, sh, r, a)
	}
}

// OOM inside a judged Realloc.
func TestSharedReallocOOMJudged(t *testing.T) {
	for _, at := range []invariants.HookPoint{invariants.HookCall, invariants.HookReturn} {
		sh, g := newSh(t, 16)
		o := alloc(t, sh, invariants.Front, 4*sb-100, 0x11)
		f := alloc(t, sh, invariants.Front, 5*sb-100, 0x12) // after o: no growth in place
		x := addrOf(o.B)
		h := g.hold(x, at)
		var r invariants.SharedObj
		var ok bool
		done := async(func() { r, ok = sh.Realloc(nil, invariants.Front, o, 14*sb, 0x22) })
		<-h.reached
		sh.StaleFree(nil, invariants.Front, o.B)
		close(h.release)
		<-done
		t.Logf("at %v: realloc ok %v r %#x", at, ok, addrOf(r.B))
		finish(t, sh, r, f)
	}
}

// a moving Realloc whose result lands on an address judged later.
func TestSharedReallocResultOnJudged(t *testing.T) {
	sh, _ := newSh(t, 64)
	p := alloc(t, sh, invariants.Front, 100, 0x22)
	q := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
	y := addrOf(q.B)
	sh.StaleFree(nil, invariants.Front, q.B)
	r, ok := sh.Realloc(nil, invariants.Front, p, 3*sb-100, 0x33)
	if !ok || addrOf(r.B) != y || !r.Mixed {
		t.Fatalf("the Realloc did not land on y: ok %v at %#x", ok, addrOf(r.B))
	}
	finish(t, sh, r)
}

// a held Free before its call; a stale free frees o; an Alloc gets x;
// the held Free then frees the new object.
func TestSharedHeldFreeFreesNewObject(t *testing.T) {
	sh, g := newSh(t, 64)
	o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
	x := addrOf(o.B)
	h := g.hold(x, invariants.HookCall)
	done := async(func() { sh.Free(nil, invariants.Front, o) })
	<-h.reached
	sh.StaleFree(nil, invariants.Front, o.B)
	a := alloc(t, sh, invariants.Front, 3*sb-100, 0x33)
	if addrOf(a.B) != x {
		t.Fatalf("A not at x")
	}
	close(h.release)
	<-done
	finish(t, sh, a)
}

// two stale frees racing a held free and a reuse.
func TestSharedTwoStaleFrees(t *testing.T) {
	sh, g := newSh(t, 64)
	o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
	x := addrOf(o.B)
	h := g.hold(x, invariants.HookReturn)
	done := async(func() { sh.Free(nil, invariants.Front, o) })
	<-h.reached
	sh.StaleFree(nil, invariants.Front, o.B)
	a := alloc(t, sh, invariants.Front, 3*sb-100, 0x33)
	sh.StaleFree(nil, invariants.Front, o.B)
	close(h.release)
	<-done
	finish(t, sh, a)
}

// A handout while an older free is in flight (returned, not ended): a stale
// free then judges the new object (Forget), not the older free; the new
// object's own free, held before its call, and a Realloc of it, are judged
// with it.
func TestSharedHandoutWhileOlderFreeInFlight(t *testing.T) {
	for _, second := range []string{"none", "free", "realloc"} {
		sh, g := newSh(t, 64)
		o := alloc(t, sh, invariants.Front, 3*sb-100, 0x11)
		x := addrOf(o.B)
		h1 := g.hold(x, invariants.HookReturn)
		done1 := async(func() { sh.Free(nil, invariants.Front, o) })
		<-h1.reached
		a := alloc(t, sh, invariants.Front, 3*sb-100, 0x33)
		if addrOf(a.B) != x {
			t.Fatal("A not at x")
		}
		var done2 chan struct{}
		var r invariants.SharedObj
		if second != "none" {
			h2 := g.hold(x, invariants.HookCall)
			done2 = async(func() {
				if second == "free" {
					sh.Free(nil, invariants.Front, a)
				} else {
					r, _ = sh.Realloc(nil, invariants.Front, a, sb+100, 0x44)
				}
			})
			<-h2.reached
			sh.StaleFree(nil, invariants.Front, o.B)
			close(h1.release)
			<-done1
			close(h2.release)
			<-done2
		} else {
			sh.StaleFree(nil, invariants.Front, o.B)
			close(h1.release)
			<-done1
		}
		t.Logf("%s: alive a %v", second, sh.Alive(a))
		finish(t, sh, a, r)
	}
}
