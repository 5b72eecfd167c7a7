package impl

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/spec"
)

// DeadTag is the tag of a retired remote set (nextGen).
const DeadTag = deadTag

// SetClock makes a's clock now (nanoseconds), for the decay tests.
func SetClock(a *Allocator, now func() int64) {
	a.lock()
	defer a.mu.Unlock()
	a.now = now
}

// SetTimerFunc replaces time.AfterFunc for a's decay timer.
func SetTimerFunc(a *Allocator, after func(time.Duration, func()) *time.Timer) {
	a.lock()
	defer a.mu.Unlock()
	a.after = after
}

// DecayNow does what the decay timer does when it fires.
func DecayNow(a *Allocator) { a.decayLater() }

// FastForward moves pooled superblock i's generation forward to gen, as the
// periods in between would have if none left a trace: each one stamps the
// remote words with the next generation. The generation-wrap test cannot run
// 2^32 real periods; it runs the ones around the wrap for real. gen must be
// ahead of the current generation and not past the wrap.
func FastForward(a *Allocator, i int, gen uint32) error {
	a.lock()
	defer a.mu.Unlock()
	sb := a.lookup(uintptr(i))
	if sb == nil {
		return fmt.Errorf("superblock %d was never used", i)
	}
	cur, state, k := unpackMeta(sb.meta.Load())
	if state != statePool || gen <= cur || gen >= deadTag {
		return fmt.Errorf("superblock %d: state %d generation %d, cannot move to %d", i, state, cur, gen)
	}
	if rs := sb.remote.Load(); rs != nil && !rs.retired() {
		for g := range rs.w {
			rs.w[g].Store(uint64(gen) << 32)
		}
	}
	sb.meta.Store(packMeta(gen, statePool, k))
	return nil
}

// PoolWalks is how many times the pool was walked to decay or trim it.
func PoolWalks(a *Allocator) int {
	a.lock()
	defer a.mu.Unlock()
	return a.poolWalks
}

// LockSpins reports whether a waiter for a's central lock spins before it
// parks (Allocator.lock).
func LockSpins(a *Allocator) bool { return a.spin }

// FireDecayTimer fires the decay timer now, as if its time were up: it
// reports false, and does nothing, if no timer is pending.
func FireDecayTimer(a *Allocator) bool {
	a.lock()
	t := a.timer
	pending := t != nil && t.Stop()
	a.mu.Unlock()
	if pending {
		a.decayLater()
	}
	return pending
}

// CentralLockFree reports whether a's central lock is free now (it takes and
// gives it back if so): a call that panicked must not have left it held.
func CentralLockFree(a *Allocator) bool {
	if !a.mu.TryLock() {
		return false
	}
	a.mu.Unlock()
	return true
}

// Resizing reports whether the large object b starts is marked as being
// zeroed by an in-place Realloc (superblock.resizing).
func Resizing(a *Allocator, b []byte) bool {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	return a.lookup(off >> spec.SuperblockShift).resizing.Load()
}

// RefuseProtect makes a's backend refuse to make memory inaccessible, as the
// kernel does past its mapping limit (vm.max_map_count), so that the tests
// reach what guard mode does with a freed object it cannot quarantine
// (GUARD-FAULT: it is pooled as without guard mode). Restoring access still
// works.
func RefuseProtect(a *Allocator) { refuseProtect(a, false) }

// RefuseProtectPartway is RefuseProtect, but the refusal comes after the
// first page of the range was made inaccessible, as mprotect's may when the
// mapping limit stops it partway through a range of several mappings: the
// tests reach a freed guarded object that is neither protected nor
// accessible (GUARD-FAULT).
func RefuseProtectPartway(a *Allocator) { refuseProtect(a, true) }

func refuseProtect(a *Allocator, partway bool) {
	a.lock()
	defer a.mu.Unlock()
	a.be = refusingProtect{a.be, partway}
}

type refusingProtect struct {
	backend
	partway bool // the first page protected before the refusal
}

func (r refusingProtect) protect(p unsafe.Pointer, n uintptr, access bool) error {
	if access {
		return r.backend.protect(p, n, true)
	}
	if r.partway {
		if err := r.backend.protect(p, spec.PageSize, false); err != nil {
			return err
		}
	}
	return errors.New("protect refused (test)")
}

// RefuseDecommit makes a's backend refuse to give memory back to the OS
// (madvise), as a kernel may, so that the tests reach what guard mode does
// with a quarantined object whose memory stays committed, and dirty
// (GUARD-FAULT, DEBUG-POISON: it must hold poison when it is pooled).
func RefuseDecommit(a *Allocator) {
	a.lock()
	defer a.mu.Unlock()
	a.be = refusingDecommit{a.be}
}

type refusingDecommit struct{ backend }

func (refusingDecommit) decommit(unsafe.Pointer, uintptr) error {
	return errors.New("decommit refused (test)")
}

// StaleFreeWord points cache c's entry for superblock i at a copy of the
// header's free bitmap, as a fill that kept an old period's bitmap would:
// Snapshot must show the entry's SameFree false (CACHE-COHERENT). It reports
// whether c has a mine entry for i.
func StaleFreeWord(c *Cache, i int) bool {
	e := c.way(uintptr(i))
	if !e.mine() || e.tag() != uintptr(i) {
		return false
	}
	e.free = &slices.Clone(e.sb.free)[0]
	return true
}

// ShortRemoteCount makes cache c's entry for superblock i count one remote
// word fewer than its set has, as a fill that counted another layout's
// groups would: Snapshot must show the entry's SameRemote false
// (CACHE-COHERENT). It reports whether c has an entry for i, and returns the
// function that puts the count back.
func ShortRemoteCount(c *Cache, i int) (ok bool, undo func()) {
	e := c.way(uintptr(i))
	if e.key == noKey || e.tag() != uintptr(i) || e.nrw == 0 {
		return false, func() {}
	}
	n := e.nrw
	e.nrw--
	return true, func() { e.nrw = n }
}

// OtherRemoteSet points cache c's entry for superblock i at the words of
// another remote set of the same length, as an entry kept from a period of a
// replaced set would: Snapshot must show the entry's SameRemote false
// (CACHE-COHERENT). It reports whether c has an entry for i, and returns the
// function that puts the entry back.
func OtherRemoteSet(c *Cache, i int) (ok bool, undo func()) {
	e := c.way(uintptr(i))
	if e.key == noKey || e.tag() != uintptr(i) || e.nrw == 0 {
		return false, func() {}
	}
	rw := e.rw
	e.rw = &(&remoteSet{w: make([]atomic.Uint64, e.nrw)}).w[0]
	return true, func() { e.rw = rw }
}

// SealNotify seals cache c's notification stack as Close does before it
// unregisters c (a snapshot at YieldCloseOrphaned sees c so), and returns
// the function that puts the stack back.
func SealNotify(c *Cache) (undo func()) {
	old := c.notify.Swap(closedStack)
	return func() { c.notify.Store(old) }
}

// HoldFrontBut makes every call of a's own methods go to the front's shards,
// starting from shard home, and finds them all busy but shard free: it takes
// every per-P cache's token (as Flush does), sets every stack bucket's home
// shard to home, and locks every shard but free. It returns the number of
// shards and the function that undoes it (callable once, from any goroutine).
func HoldFrontBut(a *Allocator, home, free int) (shards int, undo func()) {
	f := &a.front
	procs := f.procs.caches()
	for _, c := range procs {
		f.procs.hold(c)
	}
	for b := range f.home {
		f.home[b].Store(uint32(home) & f.mask)
	}
	var held []*shard
	for i := range f.shards {
		if uint32(i) != uint32(free)&f.mask {
			f.shards[i].mu.Lock()
			held = append(held, &f.shards[i])
		}
	}
	return len(f.shards), func() {
		for _, s := range held {
			s.mu.Unlock()
		}
		for _, c := range procs {
			f.procs.release(c)
		}
	}
}

// FrontHomeCount is the number of stack buckets whose home is shard s.
func FrontHomeCount(a *Allocator, s int) int {
	n := 0
	for b := range a.front.home {
		if a.front.home[b].Load() == uint32(s)&a.front.mask {
			n++
		}
	}
	return n
}

// HoldCentralLock takes a's central lock and returns the function that gives
// it back, so that a test can stop a call at its next locked step (a Close
// whose flush drains the orphans) and act while it waits there. unlock may
// be called again (a test defers it too), so that a test failing while it
// holds the lock ends instead of hanging its deferred Close.
func HoldCentralLock(a *Allocator) (unlock func()) {
	a.mu.Lock()
	return sync.OnceFunc(a.mu.Unlock)
}

// RefuseRestore makes a's backend refuse to make protected memory accessible
// again, as the kernel may when restoring access splits a mapping past its
// limit (vm.max_map_count), so that the tests reach a quarantine whose oldest
// object cannot be released (GUARD-FAULT): for the superblocks of only's
// object if only is not nil, else for any. Protecting still works. It returns
// the function that gives the backend back.
func RefuseRestore(a *Allocator, only []byte) (undo func()) {
	a.lock()
	defer a.mu.Unlock()
	be := a.be
	a.be = refusingRestore{be, unsafe.Pointer(unsafe.SliceData(only))}
	return func() {
		a.lock()
		defer a.mu.Unlock()
		a.be = be
	}
}

type refusingRestore struct {
	backend
	only unsafe.Pointer
}

func (r refusingRestore) protect(p unsafe.Pointer, n uintptr, access bool) error {
	if access && (r.only == nil || r.only == p) {
		return errors.New("restore refused (test)")
	}
	return r.backend.protect(p, n, access)
}

// NotifyLate notifies superblock i as a remote free does after its CAS, with
// whatever owner i has now: for an orphan, the push a remote free makes when
// its owner closed between the free's read of the owner and its notify (a
// window only the yield build can hold open), without the free.
func NotifyLate(a *Allocator, i int) {
	a.notify(a.lookup(uintptr(i)))
}
