// Yield points: where the interleaving explorer (invariants/explore.go, build tag
// refalloc_yield) may pause a goroutine and run another. The races that matter
// here live inside an operation, between an unlocked read and the locked action
// or CAS that trusts it, so each point sits in such a window. In normal builds
// yield is an empty function: the points cost nothing.

package impl

import "sync"

// The yield points, by name.
const (
	YieldFreeHeader     = "free.header"     // freeMiss read the header, before acting on it
	YieldFreeRemoteSet  = "free.rs"         // freeMiss (or fillPinned) read the remote set, before the header
	YieldFreeSlot       = "free.slot"       // freeMiss judged the address against the header's layout (an orphan's bad slot refused), before adoptOnFree reads the owner again
	YieldAdoptLock      = "adopt.lock"      // adoptOnFree saw no owner, before taking a.mu
	YieldAdoptCollect   = "adopt.collect"   // adoptOnFree adopted, before collecting
	YieldRemoteTag      = "remote.tag"      // freeRemote read the remote word, before the CAS
	YieldRemoteNotify   = "remote.notify"   // freeRemote's CAS succeeded, before notifying
	YieldNotifyPush     = "notify.push"     // notify owns the link, before pushing
	YieldNotifyOwner    = "notify.owner"    // notify read the owner, before reading its stack
	YieldNotifyPushed   = "notify.pushed"   // notify pushed the superblock, before reading its owner again
	YieldRerouteSwap    = "reroute.swap"    // reroute read the stack of the owner that gave a superblock up, before taking it
	YieldDrainPop       = "drain.pop"       // drainNotify popped its stack, before collecting
	YieldCollectSwap    = "collect.swap"    // collectWord read a word, before swapping it
	YieldReleaseLock    = "release.lock"    // Cache.release dropped its entry, before a.mu
	YieldReleaseStamp   = "release.stamp"   // releaseLocked read a remote word, before its CAS stamps it
	YieldReleaseStamped = "release.stamped" // releaseLocked stamped the words, before relabelling
	YieldAcquireCarve   = "acquire.carve"   // acquireSmall set the remote set and owner, before the layout
	YieldOrphanDrain    = "orphan.drain"    // drainOrphanNotify popped an orphan, before collecting
	YieldCloseOrphaned  = "close.orphaned"  // Cache.Close orphaned its superblocks, before closing its stack
	YieldLargeFree      = "large.free"      // freeMiss saw a large head, before freeLarge locks
	YieldLargeTaken     = "large.taken"     // allocLarge took its run out of the pool, before zeroing and publishing it
	YieldLargeResized   = "large.resized"   // resizeLarge resized the run in place, before zeroing it outside the central lock
	YieldLargeZeroed    = "large.zeroed"    // resizeLarge zeroed the run resized in place, before frees of it may take effect
	YieldLockWait       = "lock.wait"       // a lock is busy
	YieldLockTaken      = "lock.taken"      // a wait at lock.wait ended: the lock is the caller's
	YieldReallocMoved   = "realloc.moved"   // a moving Realloc allocated its new object, before copying into it
	YieldRefillAcquire  = "refill.acquire"  // refill drained its stack and found no partial superblock, before acquiring (orphanFull)
	YieldAllocTaken     = "alloc.taken"     // allocSlow took the current superblock's next group (takeGroupPinned), before checking its lowest object's pending bit
	YieldStatsRead      = "stats.read"      // Stats read one kind of class counter of every cache, before the other kind
	YieldGuardMade      = "guard.made"      // allocGuarded made its superblock a guarded object and unlocked, before returning it
	YieldSnapshotLock   = "snapshot.lock"   // Snapshot read Stats, before taking a.mu to read the headers
	YieldDeliverLoad    = "deliver.load"    // deliver saw reports queued, before taking their lock (another call may deliver them meanwhile)
)

// lockMu locks mu. In refalloc_yield builds it yields while mu is busy, so the
// explorer can run the goroutine that holds it; yield points may sit inside a
// locked section.
func lockMu(mu *sync.Mutex) {
	if !yieldPoints {
		mu.Lock()
		return
	}
	waited := false
	for !mu.TryLock() {
		if !lockWait() {
			mu.Lock()
			return
		}
		waited = true
	}
	lockTaken(waited)
}

// lock takes the central lock. Its holders hold it for a refill's or a
// release's few hundred nanoseconds, so a waiter spins a few microseconds
// before it parks: sync.Mutex spins only while its P has nothing else to run,
// and a waiter that parks makes the goroutines behind it on its P (a front
// slow path holds its P cache's token while it waits) take the shards.
// On xmalloc-test, its producers' refills and consumers' releases meeting
// here, the Allocator at T=2 went from 47-63 to 71-113 M frees/s (5
// interleaved runs; see the essay).
func (a *Allocator) lock() {
	if !a.mu.TryLock() {
		a.lockSlow()
	}
}

func (a *Allocator) lockSlow() {
	if !yieldPoints && a.spin {
		for range lockSpins {
			spinPause(100)
			if a.mu.TryLock() {
				return
			}
		}
	}
	lockMu(&a.mu)
}

// lockSpins pauses of 100 steps: about 2.5 µs in all.
const lockSpins = 100

// spinPause waits without touching shared memory (the runtime's procyield is
// not linkable): n steps of a dependent chain the compiler keeps.
//
//go:noinline
func spinPause(n int) int {
	s := 0
	for i := range n {
		s += i ^ s
	}
	return s
}
