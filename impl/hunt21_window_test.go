//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFlushWalksPastFullHead (STATS-EXACT): Flush collects every
// superblock on each list, not only the list's head. As in
// TestFlushCollectsFullAnnouncedElsewhere, S is adopted while its
// notification is parked on the orphans' stack, so a later remote free into
// it is announced nowhere and only the walk of c's full list collects it;
// here a superblock filed full after S (Q) is the list's head and S comes
// second. Every refill after the window takes a partial superblock, never
// the pool: an acquire would drain the orphans' stack and end the parking.
// Slip: the walk steps to a superblock's prev instead of its next, which at
// a head is nil (flushwalkprev).
func TestFlushWalksPastFullHead(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache() // S's first owner, closes
	rem, _ := a.NewCache()   // frees remotely
	c, _ := a.NewCache()     // adopts S
	const size = 8192
	k := spec.SizeToClass(size)
	nobj := spec.ClassObjects(k) // 8: one group
	var p, q [][]byte
	for range nobj { // P: c's, filled
		p = append(p, allocN(t, c, size))
	}
	q = append(q, allocN(t, c, size)) // Q current, P filed full
	var s [][]byte
	for range nobj { // S: owner's, full
		s = append(s, allocN(t, owner, size))
	}
	si, qi := sbOf(a, s[0]), sbOf(a, q[0])
	err = during(t, newPause(impl.YieldNotifyPush),
		func() error { return rem.Free(s[0]) }, // S notified, the owner not read yet
		func() { must(t, owner.Close()) })      // collects s[0]; S an orphan
	must(t, err)          // pushed onto the orphans' stack
	must(t, c.Free(s[1])) // adopts S: partial, still notified on the orphans' stack
	for range nobj - 1 {  // the rest of Q
		q = append(q, allocN(t, c, size))
	}
	s[0], s[1] = allocN(t, c, size), allocN(t, c, size) // S current; Q filed full
	must(t, c.Free(q[1]))                               // Q partial
	q[1] = allocN(t, c, size)                           // Q current; S filed full
	must(t, c.Free(p[1]))                               // P partial
	p[1] = allocN(t, c, size)                           // P current; Q filed full: Q, S
	if st := sbState(t, a, si); st.List != "full" || st.Owner != c.ID() || !st.Notified {
		t.Fatalf("setup: S list %q owner %d notified %v, want full, %d, true", st.List, st.Owner, st.Notified, c.ID())
	}
	if st := sbState(t, a, qi); st.List != "full" {
		t.Fatalf("setup: Q list %q, want full", st.List)
	}
	must(t, rem.Free(s[2])) // pending in S; S is notified: no push
	c.Flush()
	if st := sbState(t, a, si); st.Pending[0] != 0 {
		t.Errorf("c flushed: S, second on its full list, keeps pending remote frees %#x", st.Pending[0])
	}
	rem.Flush()
	if got := a.Stats().Classes[k].Frees; got != 5 {
		t.Errorf("every open cache flushed: %d frees of class %d, want 5", got, k)
	}
	for _, c := range []*impl.Cache{rem, c} {
		must(t, c.Close())
	}
}
