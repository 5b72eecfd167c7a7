//go:build refalloc_yield

package impl_test

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestSnapshotCountsOfItsHeadersInstant (MEM-ACCOUNT): a Snapshot's central
// counts and its headers are of one instant, so that the checker may compare
// them (invariants.memAccount: Committed is exactly the superblocks used
// since fresh). Snapshot reads Stats first and then the headers under the
// central lock; the decay timer, on its own goroutine, can return a pooled
// superblock to the OS in between (here it fires while Snapshot is paused
// there, snapshot.lock). Slip: the counts kept from that Stats
// (snapstatsearly): Committed still counts the superblock its header says is
// fresh, and the checker reports a violation that is none.
func TestSnapshotCountsOfItsHeadersInstant(t *testing.T) {
	a, c, clock, objs := decayClock(t, 1)
	must(t, c.Free(objs[0])) // past Retain: the timer is armed
	*clock += int64(2 * time.Hour)
	var s *impl.Snapshot
	must(t, during(t, newPause(impl.YieldSnapshotLock),
		func() error { s = a.Snapshot(); return nil },
		func() {
			if !impl.FireDecayTimer(a) {
				t.Error("setup: no decay timer pending")
			}
		}))
	dirty := 0
	for _, st := range s.Superblocks {
		if st.Dirty {
			dirty++
		}
	}
	if want := uint64(dirty) * spec.SuperblockSize; s.Stats.Committed != want || s.TimerFired != 1 {
		t.Fatalf("the timer fired while Snapshot was reading: Committed %d, %d superblocks dirty (%d bytes), TimerFired %d (want 1)", s.Stats.Committed, dirty, want, s.TimerFired)
	}
}
