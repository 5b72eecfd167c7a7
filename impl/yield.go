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
	YieldAdoptLock      = "adopt.lock"      // adoptOnFree saw no owner, before taking a.mu
	YieldAdoptCollect   = "adopt.collect"   // adoptOnFree adopted, before collecting
	YieldRemoteTag      = "remote.tag"      // freeRemote read the remote word, before the CAS
	YieldRemoteNotify   = "remote.notify"   // freeRemote's CAS succeeded, before notifying
	YieldNotifyPush     = "notify.push"     // notify owns the link, before pushing
	YieldNotifyOwner    = "notify.owner"    // notify read the owner, before reading its stack
	YieldDrainPop       = "drain.pop"       // drainNotify popped its stack, before collecting
	YieldCollectSwap    = "collect.swap"    // collectWord read a word, before swapping it
	YieldReleaseLock    = "release.lock"    // Cache.release dropped its entry, before a.mu
	YieldReleaseStamped = "release.stamped" // releaseLocked stamped the words, before relabelling
	YieldAcquireCarve   = "acquire.carve"   // acquireSmall set the remote set and owner, before the layout
	YieldOrphanDrain    = "orphan.drain"    // drainOrphanNotify popped an orphan, before collecting
	YieldCloseOrphaned  = "close.orphaned"  // Cache.Close orphaned its superblocks, before closing its stack
	YieldLargeFree      = "large.free"      // freeMiss saw a large head, before freeLarge locks
	YieldLargeTaken     = "large.taken"     // allocLarge took its run out of the pool, before zeroing and publishing it
	YieldLockWait       = "lock.wait"       // a lock is busy
	YieldReallocMoved   = "realloc.moved"   // a moving Realloc allocated its new object, before copying into it
	YieldRefillAcquire  = "refill.acquire"  // refill drained its stack and found no partial superblock, before acquiring (orphanFull)
)

// lockMu locks mu. In refalloc_yield builds it yields while mu is busy, so the
// explorer can run the goroutine that holds it; yield points may sit inside a
// locked section.
func lockMu(mu *sync.Mutex) {
	if !yieldPoints {
		mu.Lock()
		return
	}
	for !mu.TryLock() {
		if !lockWait() {
			mu.Lock()
			return
		}
	}
}

// lock takes the central lock.
func (a *Allocator) lock() { lockMu(&a.mu) }
