//go:build refalloc_yield

package impl

import (
	"sync/atomic"

	"github.com/refalloc/refalloc/internal/mutant"
)

const yieldPoints = true

// Scheduler is what the interleaving explorer installs (refalloc_yield builds
// only). Yield is called at every yield point, with its name, on the goroutine
// that reached it, and returns when the scheduler lets that goroutine go on.
// Bucket gives the front the calling goroutine's bucket, which otherwise comes
// from its stack address, so that a schedule replays exactly.
type Scheduler interface {
	Yield(point string)
	Bucket() uint32
}

var sched atomic.Pointer[Scheduler]

// SetScheduler installs s for every Allocator; nil removes it.
func SetScheduler(s Scheduler) {
	if s == nil {
		sched.Store(nil)
		return
	}
	sched.Store(&s)
}

func yield(point string) {
	if s := sched.Load(); s != nil {
		(*s).Yield(point)
	}
}

// lockWait yields at a busy lock, so that the goroutine holding it (paused at a
// yield point) can run; without a scheduler it reports false and the caller
// blocks.
func lockWait() bool {
	if s := sched.Load(); s != nil {
		(*s).Yield(YieldLockWait)
		return true
	}
	return false
}

// lockTaken ends a wait at lock.wait (refalloc_yield builds): the explorer
// takes a worker at lock.wait whose next yield point is lock.wait again for one
// that has not got its lock, and lets it run only once another worker makes
// progress. A worker that got the lock may release others before it next waits
// (a front slow path gives its P cache's token back, then flushes: OOM-REAL),
// so the end of a wait is a yield point of its own.
func lockTaken(waited bool) {
	if waited && !mutant.LockTakenMissing { // FRONT-EXCLUSIVE
		yield(YieldLockTaken)
	}
}

func schedBucket() (uint32, bool) {
	if s := sched.Load(); s != nil {
		return (*s).Bucket(), true
	}
	return 0, false
}
