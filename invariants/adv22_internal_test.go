//go:build refalloc_yield

package invariants

import (
	"testing"
	"unsafe"
)

// TestExploreRemembersEight (FREE-DOUBLE): the explorer's stale frees reach
// back over the last 8 objects a worker freed (a double free of an address
// reused several times since), no fewer, no more: after 10 frees a worker
// remembers the last 8, oldest first.
// Slip (exploreremoteremember): a worker remembers only its last free.
func TestExploreRemembersEight(t *testing.T) {
	w := &eworker{}
	objs := make([][]byte, 10)
	for i := range objs {
		objs[i] = make([]byte, 1)
		w.remember(objs[i])
	}
	if len(w.freed) != 8 {
		t.Fatalf("a worker remembers %d frees, want 8", len(w.freed))
	}
	for i, b := range w.freed {
		if unsafe.SliceData(b) != unsafe.SliceData(objs[2+i]) {
			t.Errorf("remembered free %d is not the worker's free %d", i, 2+i)
		}
	}
}
