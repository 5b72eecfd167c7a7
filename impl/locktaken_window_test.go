//go:build refalloc_yield

package impl_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/refalloc/refalloc/impl"
)

// recordPoints records every yield point reached, and reports the first
// lock.wait on waiting.
type recordPoints struct {
	mu      sync.Mutex
	points  []string
	waiting chan struct{}
	once    sync.Once
}

func (r *recordPoints) Yield(point string) {
	r.mu.Lock()
	r.points = append(r.points, point)
	r.mu.Unlock()
	if point == impl.YieldLockWait {
		r.once.Do(func() { close(r.waiting) })
	}
}

func (r *recordPoints) Bucket() uint32 { return 0 }

// TestLockWaitEndsAtLockTaken (FRONT-EXCLUSIVE; the interleaving explorer's
// deadlock check): a wait at a busy lock (lock.wait) ends at lock.taken once
// the lock is the waiter's, for a per-P cache's token (procCaches.take) and for
// a shard's mutex (lockMu). The explorer takes a worker whose yield points go
// lock.wait, lock.wait for one that has not got its lock; without lock.taken a
// worker that got one lock, released another and waited again (an Allocator
// call that ran out gives its token back, then flushes every internal cache:
// OOM-REAL) looked stuck, and two such workers a deadlock.
func TestLockWaitEndsAtLockTaken(t *testing.T) {
	a, err := impl.New(impl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, i := range []int{0, a.FrontCaches() - 1} { // a P's cache (but in the portable build), a shard's
		r := &recordPoints{waiting: make(chan struct{})}
		impl.SetScheduler(r)
		done := make(chan struct{})
		a.WithFrontCache(i, func(*impl.Cache) {
			go func() {
				defer close(done)
				a.Flush() // waits for cache i, which this holds
			}()
			select {
			case <-r.waiting:
			case <-time.After(30 * time.Second):
				t.Errorf("cache %d: Flush never waited at lock.wait for the cache held", i)
			}
		})
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("cache %d: Flush did not return once the cache was released", i)
		}
		impl.SetScheduler(nil)
		r.mu.Lock()
		points := slices.Clone(r.points)
		r.mu.Unlock()
		w := slices.Index(points, impl.YieldLockWait)
		if w < 0 {
			continue // reported above
		}
		rest := points[w:]
		end := slices.IndexFunc(rest, func(p string) bool { return p != impl.YieldLockWait })
		if end < 0 || rest[end] != impl.YieldLockTaken {
			t.Errorf("cache %d: the wait at lock.wait ended without lock.taken: %v", i, points)
		}
	}
}
