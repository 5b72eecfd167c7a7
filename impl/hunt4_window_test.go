//go:build refalloc_yield

package impl_test

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestFlushCollectsFullAnnouncedElsewhere (STATS-EXACT): Flush
// must collect every owned superblock, the full ones too, not only those on
// its own stack. A remote free into S, paused after it marked S notified and
// before it read the owner, pushes S onto the orphans' stack once S's owner
// has closed; a free then adopts S, which stays marked notified on that
// stack. Its new owner files it full, and a later remote free into it finds
// it notified and pushes nothing: Flush's drain of the owner's stack misses
// it, the orphans' drain at the end of Flush only forwards it to that stack,
// so only the walk of the full list collects it. A remote free whose
// announcement reaches the owner's stack is collected by Flush's drain
// whatever the walk does; this schedule parks it elsewhere, on an owned full
// superblock, which is what makes the walk's full list matter.
func TestFlushCollectsFullAnnouncedElsewhere(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 64 * spec.SuperblockSize})
	must(t, err)
	defer a.Close()
	owner, _ := a.NewCache() // S's first owner, closes
	rem, _ := a.NewCache()   // frees remotely
	c, _ := a.NewCache()     // adopts S
	const size = 8192
	k := spec.SizeToClass(size)
	nobj := spec.ClassObjects(k) // 8: one group
	// c takes P from the pool now: an acquire later would drain the orphans'
	// stack, and adopt S from it, ending the window.
	var p [][]byte
	p = append(p, allocN(t, c, size))
	var s [][]byte
	for range nobj { // S: owner's, full
		s = append(s, allocN(t, owner, size))
	}
	si, pi := sbOf(a, s[0]), sbOf(a, p[0])
	err = during(t, newPause(impl.YieldNotifyPush),
		func() error { return rem.Free(s[0]) }, // S notified, the owner not read yet
		func() { must(t, owner.Close()) })      // collects s[0]; S an orphan
	must(t, err)          // pushed onto the orphans' stack
	must(t, c.Free(s[1])) // adopts S: partial, still notified on the orphans' stack
	for range nobj - 1 {  // the rest of P's held group
		p = append(p, allocN(t, c, size))
	}
	s[0], s[1] = allocN(t, c, size), allocN(t, c, size) // S current; P filed full
	must(t, c.Free(p[1]))                               // P partial
	p[1] = allocN(t, c, size)                           // P current; S filed full
	if st := sbState(t, a, si); st.List != "full" || st.Owner != c.ID() || !st.Notified || sbOf(a, p[1]) != pi {
		t.Fatalf("setup: S list %q owner %d notified %v (want full, %d, true); P reused %v",
			st.List, st.Owner, st.Notified, c.ID(), sbOf(a, p[1]) == pi)
	}
	must(t, rem.Free(s[2])) // pending in S; S is notified: no push
	c.Flush()
	rem.Flush()
	// Frees: s[0] (collected by owner's Close), s[1] (c's, local), p[1] (c's,
	// local), s[2] (remote, collected by c's Flush).
	if got := a.Stats().Classes[k].Frees; got != 4 {
		t.Errorf("every open cache flushed: %d frees of class %d, want 4", got, k)
	}
	if st := sbState(t, a, si); st.Pending[0] != 0 {
		t.Errorf("c flushed: S keeps pending remote frees %#x", st.Pending[0])
	}
	for _, c := range []*impl.Cache{rem, c} {
		must(t, c.Close())
	}
}
