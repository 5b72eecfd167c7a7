package impl_test

import (
	"errors"
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestDrainCollectFindsHeldDoubleFree (FREE-DOUBLE): a remote free of an
// object its owner holds (in the held group of its class: handed out never,
// or freed and taken back) is a double free, found when the owner collects
// it. The collection a drain makes must know the held group: here the owner
// holds objects 1-31 of S (class 256) when another cache frees object 5, and
// a refill of another class drains the owner's stack and collects S while
// that group is still held. Slip (adv14b's 10): collect passes no held
// group, the free is taken as good, and object 5 is both held and free: the
// owner hands it out, and the next Alloc of a superblock's free objects
// hands it out again.
func TestDrainCollectFindsHeldDoubleFree(t *testing.T) {
	var reports []error
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, OnError: func(err error) { reports = append(reports, err) }})
	must(t, err)
	defer a.Close()
	c, err := a.NewCache()
	must(t, err)
	r, err := a.NewCache()
	must(t, err)
	x := allocN(t, c, 256) // object 0 of S; objects 1-31 are c's held group
	held := sliceAt(x, addrOf(x)+5*256, 256)
	must(t, r.Free(held)) // a remote free of a held object: pending, S on c's stack
	if st := sbState(t, a, sbOf(a, x)); st.Pending[0] != 1<<5 || !st.Notified {
		t.Fatalf("setup: S pending %#x notified %v, want object 5 pending and S announced", st.Pending, st.Notified)
	}
	allocN(t, c, 64) // class 64's first refill drains c's stack: S is collected, group 0 still held
	st := sbState(t, a, sbOf(a, x))
	if st.Pending[0] != 0 {
		t.Fatalf("setup: S still has %#x pending after c's drain", st.Pending)
	}
	var fe *impl.FreeError
	if len(reports) != 1 || !errors.As(reports[0], &fe) || !errors.Is(fe, impl.ErrDoubleFree) || fe.Addr != addrOf(held) {
		t.Fatalf("reports %v, want the double free of held object %#x", reports, addrOf(held))
	}
	if st.Free[0]&(1<<5) != 0 {
		t.Fatalf("held object 5 is in S's free bitmap (%#x) too: it would be handed out twice", st.Free[0])
	}
	if s := a.Stats(); s.DoubleFrees != 1 {
		t.Fatalf("%d double frees counted, want 1", s.DoubleFrees)
	}
}
