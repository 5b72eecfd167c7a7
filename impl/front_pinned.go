//go:build !refalloc_portable

// The per-P caches of the front (see front.go): the fast paths of the
// Allocator's own methods run on the cache of the P they are pinned to.

package impl

import (
	"runtime"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// procPin and procUnpin are the runtime's, as sync.Pool uses them: procPin
// disables preemption of the calling goroutine (so it stays on its P, and no
// other goroutine runs on that P, until procUnpin) and returns the P's id, in
// [0, GOMAXPROCS). The runtime keeps both linkable (go.dev/issue/67401).
//
//go:linkname procPin runtime.procPin
func procPin() int

//go:linkname procUnpin runtime.procUnpin
func procUnpin()

// shardsPerP: with per-P caches the shards are only the fallback.
const shardsPerP = 1

// The values of a per-P cache's token (Cache.busy).
const (
	tokenFree    = iota
	tokenP       // a call that pinned on the cache's P, now in a slow path, unpinned
	tokenOutside // Allocator.Flush
)

// procCaches are the per-P caches, by P id, made at New: max(GOMAXPROCS,
// NumCPU) of them. P ids past them (GOMAXPROCS raised later) use the shards.
// The caches are inline, so that the fast path finds P p's by arithmetic
// rather than by a load.
type procCaches struct {
	slots []procSlot
}

// procSlot puts its cache where a Cache of its own allocation sits: 8 bytes
// past a line boundary, so that the superblock cache's entries are lines
// (TestCacheLinesAligned). Its size is a multiple of a line, and the slots are
// one large allocation, which starts at a page.
type procSlot struct {
	_ [8]byte
	c Cache
	_ [24]byte // to a multiple of a line; the assertion below says when it changes
}

var _ = [1]struct{}{}[unsafe.Sizeof(procSlot{})%64]

func (pc *procCaches) init(a *Allocator) {
	n := max(runtime.GOMAXPROCS(0), runtime.NumCPU())
	if mutant.ProcsGomaxprocsOnly { // FRONT-EXCLUSIVE: the Ps past GOMAXPROCS at New get none
		n = runtime.GOMAXPROCS(0)
	}
	// Room for at least 32 KiB, so that the Go heap gives the slots pages of
	// their own (a large object starts at a page).
	pc.slots = make([]procSlot, n, max(n, (32<<10)/int(unsafe.Sizeof(procSlot{}))+1))
	for i := range pc.slots {
		a.initCache(&pc.slots[i].c)
		pc.slots[i].c.front = true
	}
}

// caches are the per-P caches.
func (pc *procCaches) caches() []*Cache {
	cs := make([]*Cache, len(pc.slots))
	for i := range pc.slots {
		cs[i] = &pc.slots[i].c
	}
	return cs
}

// pin pins the calling goroutine to its P and returns the P's id, the index
// of its slot. In refalloc_yield builds under the explorer it does not pin
// (a yield point blocks, which a pinned goroutine must not): it returns
// schedSlot plus the goroutine's bucket modulo 2, so that a schedule replays
// whatever P each worker runs on, and the fast path takes the token, since
// "pinned" then means only that the explorer runs one worker at a time.
func pin() int {
	if yieldPoints {
		if b, ok := schedBucket(); ok {
			return schedSlot + int(b%2)
		}
	}
	return procPin()
}

// schedSlot marks pin's result under the explorer.
const schedSlot = 1 << 20

// unpinP undoes pin(p).
func unpinP(p int) {
	if yieldPoints && p >= schedSlot {
		return
	}
	procUnpin()
}

// pinned returns P p's cache if its token is free: the caller, pinned to p,
// may use it until it unpins (unpin), without blocking. In pinSync (-race)
// builds, and under the explorer, it takes the token. Else nil.
func (pc *procCaches) pinned(p int) *Cache {
	i := p
	if yieldPoints && i >= schedSlot {
		i -= schedSlot
	}
	if uint(i) >= uint(len(pc.slots)) {
		return nil
	}
	c := &pc.slots[i].c
	switch {
	case mutant.FrontNoToken:
	case pinSync || yieldPoints && p >= schedSlot:
		if !c.busy.CompareAndSwap(tokenFree, tokenP) {
			return nil
		}
	case c.busy.Load() != tokenFree && (!mutant.TokenOutsideIgnored || c.busy.Load() == tokenP):
		return nil
	}
	if (checks || yieldPoints) && !c.tryEnter() { // FRONT-EXCLUSIVE
		unpinP(p)
		panic(c.overlap())
	}
	return c
}

// unpin ends a fast path on c, which pinned(p) returned.
func unpin(p int, c *Cache) {
	c.exit()
	if pinSync || yieldPoints && p >= schedSlot {
		c.busy.Store(tokenFree)
	}
	unpinP(p)
}

// acquire is the start of a slow path: the caller is pinned to p, and c is
// what pinned(p) returned. It unpins, and returns a cache for the caller's
// exclusive use until release: c with its token taken, or else a locked
// shard (P p's cache is busy, or there is none for p).
func (f *front) acquire(p int, c *Cache) (*Cache, *shard) {
	if c != nil && (pinSync || yieldPoints && p >= schedSlot || c.busy.CompareAndSwap(tokenFree, tokenP)) {
		unpinP(p)
		return c, nil
	}
	if c != nil && !mutant.AcquireNoExit { // FRONT-EXCLUSIVE: Flush took the token since pinned
		c.exit()
	}
	unpinP(p)
	s := f.lock()
	s.c.enter()
	return s.c, s
}

// release gives back c's token, taken by acquire.
func (pc *procCaches) release(c *Cache) { c.busy.Store(tokenFree) }

// flush flushes every per-P cache from outside the Ps: it takes each token
// (waiting out slow paths that hold one), then waits until no fast path that
// found a token free before it was taken is still running (waitUnpinned).
func (pc *procCaches) flush() {
	var held []*Cache
	defer func() {
		for _, c := range held {
			c.busy.Store(tokenFree)
		}
	}()
	slots := pc.slots
	if mutant.FlushRunningPs { // STATS-EXACT: the caches of Ps gone keep what they hold
		slots = slots[:min(len(slots), runtime.GOMAXPROCS(0))]
	}
	if mutant.FlushWaitsFirst && !pinSync { // FRONT-EXCLUSIVE: waits before the tokens are taken
		waitUnpinned()
	}
	for i := range slots {
		c := &pc.slots[i].c
		pc.take(c)
		held = append(held, c)
	}
	if !pinSync && !mutant.FlushNoWait && !mutant.FlushWaitsFirst {
		waitUnpinned()
	}
	flushing := held
	if mutant.FlushTokensEarly { // FRONT-EXCLUSIVE: the tokens go back first
		for _, c := range held {
			c.busy.Store(tokenFree)
		}
		held = nil
	}
	for _, c := range flushing {
		func() {
			c.enter() // FRONT-EXCLUSIVE
			defer c.exit()
			c.Flush()
		}()
	}
}

// take takes c's token from outside its P, waiting out the slow path that
// holds it, if one does. A fast path may still be running on c: see
// waitUnpinned.
func (pc *procCaches) take(c *Cache) {
	waited := false
	for !c.busy.CompareAndSwap(tokenFree, tokenOutside) {
		if !lockWait() {
			runtime.Gosched()
		}
		waited = true
	}
	lockTaken(waited)
}

// hold takes c, a per-P cache, for the caller's exclusive use from outside its
// P, as flush does one by one: release gives it back.
func (pc *procCaches) hold(c *Cache) {
	pc.take(c)
	if !pinSync {
		waitUnpinned()
	}
}

// waitUnpinned returns once every goroutine that was pinned (procPin) when it
// was called has unpinned. runtime.ReadMemStats stops the world, and the world
// cannot stop while a goroutine is pinned: a pinned goroutine is not
// preemptible (the guarantee sync.Pool's cleanup rests on).
// TestWaitUnpinned checks that this still holds.
func waitUnpinned() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
}

// Alloc is Cache.Alloc, safe for concurrent use.
func (a *Allocator) Alloc(n int) ([]byte, error) {
	p := pin()
	c := a.front.procs.pinned(p)
	if c != nil && uint(n) <= spec.MaxSmall {
		k := spec.SizeToClass(n)
		cc := &c.cls[k&(clsSlots-1)]
		b := cc.next()
		// FREE-DOUBLE: a held group whose lowest object has a remote free
		// pending is the slow path's, which drops the free.
		if b == 0 && (cc.bits == 0 || mutant.PinnedRefillHeld) && c.refillPinned(p, k) {
			b = cc.next()
		}
		if b != 0 {
			// cc.pop, by hand: with zero inlined it is over the inliner's budget.
			o := cc.lowest(b)
			if cc.needzero && !mutant.NoZero { // ZEROED: the capacity, not n
				m := uintptr(cc.size)
				if mutant.FrontZeroesLen {
					m = uintptr(n)
				}
				zero(o, m)
			}
			r := object(o, n, cc.size) // FRONT-EXCLUSIVE: cc is not ours after unpin
			unpin(p, c)
			return r, nil
		}
	}
	return a.allocSlow(p, c, n, 1)
}

// refillPinned is the first step of a refill, pinned: the current
// superblock's next group (Cache.takeGroupPinned), and the check STATS-LEAD
// makes of it in refalloc_check builds (a pinned goroutine must not panic).
func (c *Cache) refillPinned(p, k int) bool {
	if !c.takeGroupPinned(k) {
		return false
	}
	if checks {
		if msg := c.leadMismatch(k); msg != "" {
			unpinP(p)
			panic(msg)
		}
	}
	return true
}

// AllocAligned is Cache.AllocAligned, safe for concurrent use.
func (a *Allocator) AllocAligned(n, align int) ([]byte, error) {
	p := pin()
	c := a.front.procs.pinned(p)
	if c != nil && uint(n) <= spec.MaxSmall && spec.ValidAlign(align) {
		k := spec.AlignedClass(n, align)
		if mutant.FrontAlignedClass { // ALIGN: a class of n alone, whatever its objects' alignment
			k = spec.SizeToClass(n)
		}
		if k != spec.Large {
			cc := &c.cls[k&(clsSlots-1)]
			b := cc.next()
			if b == 0 && cc.bits == 0 && c.refillPinned(p, k) {
				b = cc.next()
			}
			if b != 0 {
				if mutant.AlignedPopUnpinned { // FRONT-EXCLUSIVE: the pop after the token went back
					unpin(p, c)
					return cc.pop(b, n), nil
				}
				r := cc.pop(b, n)
				unpin(p, c)
				return r, nil
			}
		}
	}
	return a.allocSlow(p, c, n, align)
}

// Free frees an object of any cache of a, safe for concurrent use.
func (a *Allocator) Free(b []byte) error {
	if cap(b) == 0 || mutant.FreeLenNotCap && len(b) == 0 {
		return nil
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - a.base
	p := pin()
	c := a.front.procs.pinned(p)
	if c != nil {
		// Cache.free's fast path, by hand (a call costs), with the same checks
		// (and mutants), declining what would need more; the remote free of a
		// hit on another cache's superblock, lock-free (Cache.free); and, on a
		// miss, the entry filled without blocking, and again.
		i := off >> spec.SuperblockShift
		e := &c.sbc[i&a.wayMask&(maxWays-1)] // c.way(i)
		if e.key != i<<1|1 && e.key != i<<1 {
			c.fillPinned(off) // fills e, or leaves it to freeSlow
		}
		if e.key == i<<1|1 || mutant.FreeKeyBit && e.key&1 != 0 {
			if checks {
				if msg := c.hitMismatch(e); msg != "" {
					unpinP(p)
					panic(msg)
				}
			}
			rel := uint32(off) & (spec.SuperblockSize - 1)
			idx := uint32(uint64(rel) * uint64(e.magic) >> 32)
			g, m := idx>>5, uint32(1)<<(idx&31)
			sb := e.sb
			if idx*e.size == rel && (idx < e.nobj+uint32(b2i(mutant.FrontTail)) || mutant.LocalTail) && // FREE-INVALID
				(mutant.NoDoubleFreeCheck || !c.notLive(e, g, m)) { // FREE-DOUBLE
				switch {
				case sb.localFreed+1 < sb.limit+b2i(mutant.PublishLate || mutant.PinnedPublishLate): // STATS-LAG
					*e.freeWord(g) |= m
					sb.localFreed++
					unpin(p, c)
					return nil
				case sb.nfree+sb.localFreed+1 < sb.objects()+b2i(mutant.PinnedPublishEmpty):
					// The free that reaches the limit publishes, pinned, when it
					// does not empty sb: relist then files it and never releases,
					// which locks (LIFECYCLE). larson's superblocks on the full
					// list publish every few frees, each a slow path before.
					*e.freeWord(g) |= m
					sb.localFreed++
					if mutant.PinnedPublishNoFold {
						c.relist(sb, false)
						unpin(p, c)
						return nil
					}
					c.publish(sb, false)
					unpin(p, c)
					return nil
				}
			}
		} else if e.key == i<<1 && (e.sb.owner.Load() != nil) != mutant.PinnedOrphanRemote && c.remoteFree(e, off) == remoteDone {
			unpin(p, c)
			return nil
		}
	}
	return a.freeSlow(p, c, off)
}
