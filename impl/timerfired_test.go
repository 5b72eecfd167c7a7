package impl_test

import (
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
)

// TestSnapshotCountsTimerFirings (MEM-ACCOUNT, FREE-INVALID): the decay
// timer runs on its own goroutine, so what it returns to the OS may show
// between two snapshots that a checker takes around a call (RefusalDiff,
// around a refused free). Snapshot.TimerFired, which it excuses that by,
// counts every firing, and only firings: a release that walks the pool
// itself is not one.
func TestSnapshotCountsTimerFirings(t *testing.T) {
	a, c, clock, objs := decayClock(t, 2)
	if n := a.Snapshot().TimerFired; n != 0 {
		t.Fatalf("TimerFired %d before any timer", n)
	}
	must(t, c.Free(objs[0])) // past Retain: the timer is armed
	*clock += int64(2 * time.Hour)
	must(t, c.Free(objs[1])) // walks the pool itself: the first goes back
	if n := a.Snapshot().TimerFired; n != 0 {
		t.Fatalf("TimerFired %d after a release walked the pool, no timer fired", n)
	}
	*clock += int64(2 * time.Hour)
	if !impl.FireDecayTimer(a) {
		t.Fatal("no decay timer pending after a release past Retain")
	}
	if n := a.Snapshot().TimerFired; n != 1 {
		t.Fatalf("TimerFired %d after the timer fired once", n)
	}
	if h := held(a); h != 0 {
		t.Fatalf("the pool holds %d bytes committed after the timer", h)
	}
}
