package invariants_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/invariants"
	"github.com/refalloc/refalloc/spec"
)

// TestTwoFreesInFlightAtOneAddress (REFINES, FREE-DOUBLE): the free of an
// object can still be in flight (the allocator has freed it, its call has not
// returned) when its address is handed out again and the new object's free
// begins. A stale free on the address then races the newer free, and both
// must be judged together; the older free's end must not drop the newer one
// from the frees in flight. The soak found this as a Free of a held object
// refused as a double free (a guarded object whose address came back fast).
// Here the first call is a Free or a moving Realloc, held at its return; the
// second a Free held at its call; the stale free frees the second object in
// between, so the second free is refused, which is right.
func TestTwoFreesInFlightAtOneAddress(t *testing.T) {
	for _, first := range []string{"free", "realloc"} {
		t.Run(first, func(t *testing.T) {
			sh, err := invariants.NewShared(impl.Options{Reserve: 64 * spec.SuperblockSize})
			must(t, err)
			n := 2*spec.SuperblockSize + 100 // large: its address comes back on the next Alloc of its size
			o1, ok := sh.Alloc(nil, invariants.Front, n, 1, 0x11)
			if !ok {
				t.Fatal("Alloc failed")
			}
			x := addrOf(o1.B)
			g := newGates(sh)
			h1 := g.hold(x, invariants.HookReturn) // the first call's return
			done1 := make(chan struct{})
			var moved invariants.SharedObj // the Realloc's result
			go func() {
				defer close(done1)
				if first == "free" {
					sh.Free(nil, invariants.Front, o1)
				} else if moved, ok = sh.Realloc(nil, invariants.Front, o1, 100, 0x22); !ok {
					t.Error("Realloc failed")
				}
			}()
			<-h1.reached
			o2, ok := sh.Alloc(nil, invariants.Front, n, 1, 0x33)
			if !ok || addrOf(o2.B) != x {
				t.Fatalf("the second Alloc did not reuse %#x", x)
			}
			h2 := g.hold(x, invariants.HookCall) // the second free's call
			done2 := make(chan struct{})
			go func() {
				defer close(done2)
				sh.Free(nil, invariants.Front, o2)
			}()
			<-h2.reached
			close(h1.release) // the first call ends while the second is in flight
			<-done1
			sh.StaleFree(nil, invariants.Front, o1.B) // frees o2: address reuse
			close(h2.release)
			<-done2
			sh.A.Flush()
			sh.Check(true)
			if sh.Alive(o2) {
				t.Error("o2 is still live after its free and a stale free of its address")
			}
			if moved.B != nil {
				sh.Free(nil, invariants.Front, moved)
			}
			if s := sh.A.Stats(); s.DoubleFrees != 1 {
				t.Errorf("DoubleFrees = %d, want 1 (the second free, refused)", s.DoubleFrees)
			}
			sh.Close()
			for _, v := range sh.Violations() {
				t.Errorf("%s: %s", v.Rule, v.Detail)
			}
		})
	}
}
