package impl_test

// From the adv12b mutant hunt: each test names the one-line slip that passed
// the suite before it.

import (
	"runtime"
	"testing"

	"github.com/refalloc/refalloc/impl"
)

// TestShardSpillMovesHome (FRONT-EXCLUSIVE, front.lock): a call that finds
// its stack bucket's home shard busy takes the next free shard and makes it
// the bucket's home, so goroutines that run at the same time soon sit in
// shards of their own (slip: the home is not moved, and every call of a
// goroutine whose home another one uses scans past it again).
func TestShardSpillMovesHome(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // at least 4 shards in either front
	a, err := impl.New(impl.Options{Reserve: 16 * sbBytes})
	must(t, err)
	defer a.Close()
	n, undo := impl.HoldFrontBut(a, 0, 2) // every bucket's home shard 0, busy; only shard 2 free
	if n < 3 {
		undo()
		t.Skipf("%d shards", n)
	}
	b, err := a.Alloc(8)
	undo()
	must(t, err)
	if got := impl.FrontHomeCount(a, 2); got != 1 {
		t.Fatalf("a call whose home shard 0 was busy was served by shard 2: %d stack buckets have it as home, want the caller's", got)
	}
	must(t, a.Free(b))
}
