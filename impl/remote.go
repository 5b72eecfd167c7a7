// Remote frees: the lock-free path of a free into a superblock another cache owns,
// the owners' notification stacks, and collection.

package impl

import (
	"math/bits"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// closedStack marks the notification stack of a closed cache: a pusher that sees
// it re-reads the superblock's owner, which the closing cache set to nil first.
var closedStack = new(superblock)

// freeRemote frees the object at offset off of a superblock c does not own, using
// the entry e (a hit, or just filled): remoteFree, and what its outcome calls for.
func (c *Cache) freeRemote(e *sbEntry, off uintptr) error {
	why := c.remoteFree(e, off)
	switch {
	case why == remoteDone:
		return nil
	case why != remotePending && !e.current():
		// Not a slot start, or the tag moved on: the entry's layout is stale, and
		// a stale entry decides nothing (CACHE-COHERENT): judge by the header's.
		e.key = noKey
		return c.freeMiss(off)
	case c.closed || c.a.closed.Load() && !mutant.RemoteSkipsClosed:
		return ErrClosed // Allocator.Close marked every word pending
	case why == remoteNotSlot && mutant.NotSlotNoClass:
		return c.reject(errInvalid(c.a.base+off, -1))
	case why == remoteNotSlot:
		return c.reject(errInvalid(c.a.base+off, int(e.class)))
	}
	// remotePending: a repeated remote free still pending (FREE-DOUBLE).
	// remoteTagged with the entry current: stamped but not yet relabelled, the
	// owner is releasing the superblock, which it only does when no object is
	// live.
	if mutant.RemoteErrAddr {
		off = -off
	}
	return c.reject(errDouble(c.a.base+off, int(e.class)))
}

// What remoteFree did.
type remoteOutcome uint8

const (
	remoteDone    remoteOutcome = iota // freed: the pending bit is set, the owner notified
	remoteNotSlot                      // off is not a slot start in e's layout
	remoteTagged                       // the word's tag is not e's generation
	remotePending                      // the object has a remote free pending already
)

// remoteFree is the lock-free heart of a remote free: it sets the object's
// pending bit with a CAS that carries e.gen, so it succeeds only if the
// superblock is still in the period e describes (CACHE-COHERENT), and
// notifies the owner. Unless it reports remoteDone it changed nothing. It
// never blocks (the front runs it pinned to a P), and never writes into the
// object: until the CAS it is not known to be live, and after it the owner may
// hand it out again; debug mode's poison is the owner's, when it collects
// (collectWord).
func (c *Cache) remoteFree(e *sbEntry, off uintptr) remoteOutcome {
	rel := uint32(off) & (spec.SuperblockSize - 1)
	idx := uint32(uint64(rel) * uint64(e.magic) >> 32)
	if idx*e.size != rel || idx >= e.nobj && !mutant.RemoteTail {
		return remoteNotSlot
	}
	g, m := idx>>5, uint32(1)<<(idx&31)
	w := e.word(g)
	if mutant.LostRemote && mutant.Drop() {
		return remoteDone
	}
	for {
		old := w.Load()
		yield(YieldRemoteTag)
		if mutant.PendingBeforeTag && uint32(old)&m != 0 {
			return remotePending
		}
		if uint32(old>>32) != e.gen && !mutant.StaleSBCache {
			return remoteTagged
		}
		if uint32(old)&m != 0 {
			return remotePending // FREE-DOUBLE: a repeated remote free still pending
		}
		if mutant.PoisonBeforeTag && c.a.debug {
			poison(unsafe.Slice((*byte)(unsafe.Add(c.a.start, off)), e.size))
		}
		if mutant.RemoteStore { // FREE-DOUBLE, CONSERVE: a Store, not a CAS: a free landing since the Load is wiped
			w.Store(old | uint64(m))
			break
		}
		if w.CompareAndSwap(old, old|uint64(m)) {
			break
		}
		if mutant.RemoteCASLost { // CONSERVE: a CAS lost to another free into the group taken as done
			break
		}
	}
	yield(YieldRemoteNotify)
	if !mutant.FrontNoNotify || !c.front {
		c.a.notify(e.sb)
	}
	return remoteDone
}

// notify makes sure sb's owner (or, for an orphan, whoever next holds a.mu) learns
// that sb has pending remote frees. Only the goroutine whose CAS sets notified
// may link sb into a stack, so nextNotify has one writer at a time.
func (a *Allocator) notify(sb *superblock) {
	if mutant.NotifyNotMarked {
		if sb.notified.Load() && !sb.notified.CompareAndSwap(false, true) {
			return
		}
	} else if sb.notified.Load() || !sb.notified.CompareAndSwap(false, true) {
		return
	}
	yield(YieldNotifyPush)
	var first *Cache
	if mutant.NotifyOwnerHoisted {
		first = sb.owner.Load()
	}
	for {
		head := &a.orphanNotify
		o := sb.owner.Load()
		if mutant.NotifyOwnerHoisted { // LIFECYCLE: the owner read once, before the retry loop
			o = first
		}
		if o != nil {
			head = &o.notify
		}
		yield(YieldNotifyOwner)
		h := head.Load()
		if h == closedStack {
			// The owner closed after we read it; sb.owner is already nil, as
			// Close orphans before it seals. An owner still there is a closed
			// cache that kept sb: fail now, for a retry would spin for good,
			// and pinned on the only P not even the watchdog would run.
			if o != nil && sb.owner.Load() == o {
				panic("refalloc: internal error: a closed cache still owns a superblock it orphaned (LIFECYCLE)")
			}
			continue
		}
		if !mutant.NotifyLinkLate {
			sb.nextNotify.Store(h)
		}
		if head.CompareAndSwap(h, sb) {
			yield(YieldNotifyPushed)
			if mutant.NotifyLinkLate { // LIFECYCLE: linked after the push: a drain meanwhile follows the old link
				sb.nextNotify.Store(h)
			}
			if o != nil && sb.owner.Load() != o && !mutant.NoReroute && !(mutant.RerouteOrphanOnly && sb.owner.Load() != nil) {
				a.reroute(o) // LIFECYCLE: o gave sb up (orphanFull) and may never drain
			}
			return
		}
	}
}

// reroute forwards what is on o's stack, as o's drain would, for a notify that
// pushed a superblock onto it after o gave the superblock up (orphanFull, at a
// refill of o that acquires): o may go idle and never drain again, and while
// the superblock is marked notified no other free announces it, so its remote
// frees would stay pending for good. What o still owns goes back onto o's
// stack. Close seals the stack (closedStack) and forwards it itself.
func (a *Allocator) reroute(o *Cache) {
	for {
		h := o.notify.Load()
		if h == nil || h == closedStack && !mutant.RerouteUnseals {
			return
		}
		yield(YieldRerouteSwap)
		if mutant.RerouteStore { // LIFECYCLE: a Store, not a CAS: a push since the Load is wiped
			o.notify.Store(nil)
		}
		if mutant.RerouteStore || o.notify.CompareAndSwap(h, nil) {
			for sb := h; sb != nil; {
				next := sb.nextNotify.Load() // before forward: its push overwrites the link
				if !mutant.RerouteNotifiedKept {
					sb.notified.Store(false) // LIFECYCLE: else forward's notify pushes nothing
				}
				a.forward(sb)
				if mutant.RerouteNextLate {
					next = sb.nextNotify.Load()
				}
				sb = next
			}
			return
		}
	}
}

// forward re-notifies a superblock popped from a stack it no longer belongs on.
func (a *Allocator) forward(sb *superblock) {
	if rs := sb.remote.Load(); rs != nil && (rs.pending() || mutant.ForwardAll) {
		a.notify(sb)
	}
}

// drainNotify collects the remote frees of every superblock on c's stack.
func (c *Cache) drainNotify() {
	if c.notify.Load() == nil {
		return // the common case, without the locked swap
	}
	popped := uint32(0)
	var head *superblock
	if mutant.DrainLoadStore { // LIFECYCLE, CONSERVE: a Load, and a Store(nil) once done: a push meanwhile is wiped
		head = c.notify.Load()
		defer c.notify.Store(nil)
	} else {
		head = c.notify.Swap(nil)
	}
	for sb := head; sb != nil; {
		if mutant.Build {
			if popped++; popped > c.a.nsb {
				panic("refalloc: a notification stack longer than the reservation: a cycle") // a mutant's double push, a failure rather than a hang
			}
		}
		// The link first: once notified is reset, a notify may push sb again
		// and overwrite it.
		next := sb.nextNotify.Load()
		if mutant.DrainNextLate {
			sb.notified.Store(false)
		}
		yield(YieldDrainPop)
		if mutant.DrainNextLate {
			next = sb.nextNotify.Load()
		}
		// Reset before collecting: a bit set after the collection below will find
		// notified false and push sb again.
		if !mutant.DrainNotifiedLate {
			sb.notified.Store(false)
		}
		if sb.owner.Load() == c || mutant.DrainForeign && sb.owner.Load() != nil {
			c.collect(sb)
			if mutant.DrainNotifiedLate { // CONSERVE: a free landing in a group collected is not announced
				sb.notified.Store(false)
			}
		} else if !mutant.DropForward {
			if mutant.DrainNotifiedLate {
				sb.notified.Store(false)
			}
			c.a.forward(sb)
		}
		sb = next
	}
}

// collect moves sb's pending remote frees into its free bitmap, publishes them
// with its local frees, and files sb (or releases it) by its new free count.
func (c *Cache) collect(sb *superblock) {
	k := int(sb.class)
	held := &c.cls[k]
	if mutant.CollectNoHeld { // FREE-DOUBLE: a remote free of a held object taken as good
		held = nil
	}
	n := c.a.collectAll(c, held, sb)
	if !mutant.CollectNoPublish {
		c.publishFrees(k, n)
	}
	c.publishLocal(sb)
}

// collectAll collects every group of sb; see collectWord.
func (a *Allocator) collectAll(c *Cache, held *classCache, sb *superblock) int32 {
	rs := sb.remote.Load()
	var n int32
	for g := range sb.groups() {
		n += a.collectWord(c, held, sb, rs, g)
	}
	return n
}

// collectWord moves the pending remote frees of group g into sb's free bitmap and
// returns how many there were. A pending bit on an object that is not live (free
// in the superblock, or in held, the owner's held group) is a double free
// (FREE-DOUBLE): counted against c and dropped. In debug mode the objects freed
// are poisoned here, by the owner (DEBUG-POISON): only it may write into an
// object that is not live. Caller owns sb (or holds a.mu for an orphan).
func (a *Allocator) collectWord(c *Cache, held *classCache, sb *superblock, rs *remoteSet, g int) int32 {
	w := &rs.w[g]
	old := w.Load()
	if uint32(old) == 0 {
		return 0
	}
	yield(YieldCollectSwap)
	if mutant.CollectLoadStore {
		w.Store(old &^ (1<<32 - 1))
	} else {
		old = w.Swap(old &^ (1<<32 - 1 - uint64(b2i(mutant.CollectMaskShort))<<31)) // the tag cannot change while we own sb
	}
	bad := sb.free[g]
	if held != nil && (held.sb == sb || mutant.CollectHeldAnySB) && held.group == int32(g) { // FREE-DOUBLE
		bad |= held.bits
	}
	pending := uint32(old)
	good := pending &^ bad
	if a.debug {
		a.poisonObjects(sb, g, good)
	}
	sb.free[g] |= good
	sb.nfree += popcount(good)
	// The good frees are in the bitmap before the double frees are reported:
	// OnError may panic, and the bits are out of the word already.
	for d := pending & bad; d != 0; d &= d - 1 {
		a.lateDouble(c, sb, int(sb.class), g*32+bits.TrailingZeros32(d))
	}
	return popcount(good)
}
