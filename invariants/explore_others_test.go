//go:build refalloc_yield

package invariants

import (
	"strings"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/spec"
)

// TestExploreLeavesOtherGoroutinesAlone (the explorer's own soundness): a
// goroutine that is not a worker (the decay timer's, or here the test's)
// reaches impl's yield points too. The explorer must not schedule it as the
// worker that runs (it waited for that worker's wake, and the round hung or
// deadlocked), and a lock it holds for an instant while every worker waits
// for it is not a deadlock: the workers try again until it is released.
func TestExploreLeavesOtherGoroutinesAlone(t *testing.T) {
	sh, err := NewShared(impl.Options{Reserve: 8 * spec.SuperblockSize})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	x, err := newExplorer(adv8Seeded(3), ExploreConfig{Workers: 2, Watchdog: 30 * time.Second, SwitchOdds: 6}, sh)
	if err != nil {
		t.Fatal(err)
	}
	impl.SetScheduler(x)
	defer impl.SetScheduler(nil)

	// A yield point reached outside the workers, in a round, goes on.
	x.inRound, x.cur = true, x.workers[0]
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.Yield(impl.YieldLockWait)
	}()
	select {
	case <-done:
	case ev := <-x.events:
		t.Fatalf("a goroutine that is no worker was scheduled as worker %d", ev.w.idx)
	case <-time.After(10 * time.Second):
		t.Fatal("a goroutine that is no worker waits in Yield")
	}
	x.inRound = false

	// Both workers flush while the test holds the first internal cache (its
	// token or its shard's lock): every worker waits for a lock that no
	// worker holds, until the test lets go of it.
	held, release := make(chan struct{}), make(chan struct{})
	go sh.A.WithFrontCache(0, func(*impl.Cache) {
		close(held)
		<-release
	})
	<-held
	time.AfterFunc(20*time.Millisecond, func() { close(release) })
	flush := eop{name: "Allocator.Flush", run: sh.A.Flush}
	if err := x.round([][]eop{{flush}, {flush}}); err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		t.Fatalf("a lock held 20 ms outside the workers: %s", first)
	}
	if !strings.Contains(strings.Join(x.trace, " "), impl.YieldLockWait) {
		t.Errorf("no worker waited for the cache held: %v", x.trace)
	}
}
