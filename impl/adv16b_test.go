package impl_test

// Tests of adv16b (ordering slips) that need no yield point.

import (
	"testing"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestReleaseAfterTrimDecaysAtOnce (MEM-ACCOUNT): with Decay negative (what
// the pool holds past Retain goes back at once) and Retain one superblock, a
// Trim that returns everything leaves the pool no deadline; the free of a
// large object of two superblocks then puts the pool past Retain, and its
// release returns them to the OS (down to half of Retain: none) in the free
// itself, arming no timer. Slip (adv16b 29, decaynextlate): the release sets
// the pool's deadline after it decays the pool instead of before: it finds
// Trim's "never" and does not walk, and the superblocks stay committed until
// a timer fires on its own goroutine (the snapshot, read under the central
// lock, shows them committed or the timer fired).
func TestReleaseAfterTrimDecaysAtOnce(t *testing.T) {
	a, err := impl.New(impl.Options{Reserve: 16 * spec.SuperblockSize, Retain: spec.SuperblockSize, Decay: -1})
	must(t, err)
	defer a.Close()
	c, _ := a.NewCache()
	must(t, c.Free(allocN(t, c, spec.SuperblockSize))) // pooled dirty, within Retain
	must(t, a.Trim())                                  // returned: the pool has no deadline
	must(t, c.Free(allocN(t, c, 2*spec.SuperblockSize)))
	s := a.Snapshot()
	if st := a.Stats(); st.Committed != 0 || s.TimerFired != 0 {
		t.Fatalf("after freeing two superblocks past a Retain of one with Decay negative: Committed %d, timer fired %d times; want 0 and 0",
			st.Committed, s.TimerFired)
	}
}
