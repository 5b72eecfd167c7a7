//go:build refalloc_yield

package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestReallocNewObjectReserved (FREE-DOUBLE, INTEGRITY): a moving Realloc
// has allocated its new large object at y and not yet returned it
// (realloc.moved) when a stale pointer to y, left by an older object there,
// is freed. Nobody holds y yet, so that free is refused (the Realloc's
// object is reserved until the call returns) and y is not handed out again
// under the Realloc. Were it freed, an Alloc would get y back, and the
// Realloc would copy what it keeps into that new owner's object (kept) or,
// refused itself because a racing free took its source, free it (refused).
// Shared judges y and the source's address with every call on them; the
// snapshot, the flushed Stats and Close must agree.
func TestReallocNewObjectReserved(t *testing.T) {
	for _, refused := range []bool{false, true} {
		sh, err := invariants.NewShared(impl.Options{Reserve: 64 * spec.SuperblockSize})
		must(t, err)
		c1, id1, err := sh.OpenCache()
		must(t, err)
		c2, id2, err := sh.OpenCache()
		must(t, err)
		n := 2*spec.SuperblockSize + 100 // large: a freed run comes back on the next Alloc of its size
		o, ok := sh.Alloc(c1, id1, 100, 1, 5)
		if !ok {
			t.Fatal("Alloc failed")
		}
		w, ok := sh.Alloc(nil, invariants.Front, n, 1, 7) // the old object at y
		if !ok {
			t.Fatal("Alloc failed")
		}
		y := addrOf(w.B)
		sh.Free(nil, invariants.Front, w) // w.B is now a stale pointer to y
		p := &pauseAt{point: impl.YieldReallocMoved, paused: make(chan struct{}), resume: make(chan struct{})}
		impl.SetScheduler(p)
		done := make(chan invariants.SharedObj)
		go func() {
			r, _ := sh.Realloc(c1, id1, o, n, 6) // moves: its new object is at y
			done <- r
		}()
		<-p.paused
		impl.SetScheduler(nil)
		if refused {
			sh.StaleFree(c2, id2, o.B) // the Realloc's own free will be refused
		}
		before := sh.A.Stats().DoubleFrees
		sh.StaleFree(nil, invariants.Front, w.B) // y is the Realloc's, not yet returned
		if got := sh.A.Stats().DoubleFrees - before; got != 1 {
			t.Errorf("refused %v: the stale free of the Realloc's new object counted %d double frees, want 1", refused, got)
		}
		a, ok := sh.Alloc(nil, invariants.Front, n, 1, 8)
		if !ok {
			t.Fatal("Alloc failed")
		}
		if addrOf(a.B) == y {
			t.Errorf("refused %v: y was handed out again while the Realloc had it", refused)
		}
		close(p.resume)
		r := <-done
		if (r.B == nil) != refused {
			t.Errorf("refused %v: the Realloc returned %#x", refused, addrOf(r.B))
		}
		if !refused && addrOf(r.B) != y {
			t.Errorf("the Realloc returned %#x, want y %#x", addrOf(r.B), y)
		}
		c1.Flush()
		c2.Flush()
		sh.A.Flush()
		sh.Check(true)
		for _, x := range []invariants.SharedObj{a, r} {
			if x.B != nil && sh.Alive(x) {
				sh.Free(nil, invariants.Front, x)
			}
		}
		sh.CloseCache(c1, id1)
		sh.CloseCache(c2, id2)
		sh.Close()
		for _, v := range sh.Violations() {
			t.Errorf("refused %v: %s: %s", refused, v.Rule, v.Detail)
		}
	}
}
