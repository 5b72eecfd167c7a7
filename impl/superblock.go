// Superblock headers: the out-of-band metadata of one 64 KiB superblock.

package impl

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Superblock states, kept in the state byte of superblock.meta.
const (
	stateUnused     = iota // never handed out; the memory is fresh
	statePool              // free, in the central pool
	stateSmall             // carved into objects of one class; owned by a cache, or orphaned
	stateLargeHead         // first superblock of a large object
	stateLargeTail         // a later superblock of a large object
	stateGuard             // guard mode: one sampled small object at its start (GUARD-FAULT)
	stateQuarantine        // guard mode: part of a freed guarded object, inaccessible, kept out of reuse
)

// noClass is the class byte of a superblock that never held small objects.
const noClass = 0xff

func packMeta(gen uint32, state, class uint8) uint64 {
	return uint64(gen)<<32 | uint64(state)<<8 | uint64(class)
}

func unpackMeta(m uint64) (gen uint32, state, class uint8) {
	return uint32(m >> 32), uint8(m >> 8), uint8(m)
}

// remoteSet holds the pending remote frees of a small superblock: word g covers
// objects 32g..32g+31 in its low 32 bits, and carries the superblock's generation
// in its high 32 bits. A remote free is a CAS that only succeeds when the tag
// equals the generation the freeing cache believes in (CACHE-COHERENT), so a free
// computed from stale layout can never land in a repurposed superblock.
type remoteSet struct {
	w []atomic.Uint64
}

// superblock is the header of one superblock. Headers are created once per address
// range and reused for its whole life, so a *superblock is stable. Headers live on
// the Go heap, never in the superblock (INTEGRITY: nothing is written into objects).
//
// Three kinds of fields, by who may touch them, on lines of their own (a header
// is three cache lines; chunks of headers are page-aligned):
//   - owner-private: touched only by the owning cache, with plain loads and stores;
//     while the superblock is orphaned or pooled they belong to whoever holds a.mu.
//     The first line holds what the free path touches.
//   - shared: atomics, read by any goroutine that frees into the superblock; its
//     line is written by remote frees (notified) and must not be the owner's.
//   - central: under a.mu.
type superblock struct {
	// owner-private, the free path's line
	free       []uint32 // bit set: the object is free in the superblock
	localFreed int32    // local frees since the last publication (STATS-LAG)
	limit      int32    // localFreed that sends the free path to publishLocal
	nfree      int32    // set bits in free minus localFreed (negative while taken bits are unfolded)
	cursor     int32    // next group refill looks at
	zeroedFrom int32    // objects at or above this index are known to read as zero
	class      uint8
	list       uint8 // which list prev/next link it into
	ownerFreed bool  // its owner has freed into it since it took it (orphanFull keeps those)
	prev, next *superblock

	// shared
	meta   atomic.Uint64 // gen<<32 | state<<8 | class: the authoritative layout
	owner  atomic.Pointer[Cache]
	remote atomic.Pointer[remoteSet]
	// notified is true while the superblock is on (or being pushed onto) a
	// notification stack; only the goroutine that set it may link it (nextNotify).
	notified   atomic.Bool
	nextNotify atomic.Pointer[superblock]
	_          [24]byte

	// central, and debug mode's
	idx    uint32
	runLen uint32   // large head, guard superblock: superblocks in the run
	usable uintptr  // large head, guard superblock: usable bytes
	dirty  bool     // used since it was last fresh: may be committed and nonzero
	site   uint32   // debug or guard mode, large or guard superblock: the allocation site (small: objectSite)
	sites  []uint32 // debug mode, owner-private: each object's allocation site
	// pooledAt is when it last entered the pool dirty (Options.Decay).
	pooledAt int64
	// reserved: a large head or a guard superblock, the new object of a
	// moving Realloc that has not returned it (FREE-DOUBLE: nobody holds it
	// yet, so a free of it is refused). Under a.mu.
	reserved bool
	_        [3]byte
	// resizing: a large head whose object a Realloc resized in place and is
	// zeroing outside a.mu (resizeLarge). A free of it waits until it is
	// done, and so does another resize of it: until then no part of the run
	// may be pooled, or the zeroing would write into its next owner's object
	// (INTEGRITY). Set under a.mu, cleared by the Realloc.
	resizing atomic.Bool
}

var _ = [1]struct{}{}[unsafe.Sizeof(superblock{})-192]
var _ = [1]struct{}{}[unsafe.Offsetof(superblock{}.meta)-64]

// Lists a superblock can be on (superblock.list).
const (
	listNone    = iota
	listPartial // owned, not current, some objects free
	listFull    // owned, not current, no object free
	listOrphan  // orphaned (its cache closed), on a.orphans[class]
	listCurrent // owned, the class's current superblock
)

func (sb *superblock) groups() int { return len(sb.free) }

// initSmall prepares the owner-private state for class k. gen is the new
// generation; the remote set's words are already tagged with it.
func (sb *superblock) initSmall(k int, debug bool) {
	n := spec.ClassObjects(k)
	g := (n + 31) / 32
	reused := cap(sb.free) >= g
	if reused {
		sb.free = sb.free[:g]
	} else {
		sb.free = make([]uint32, g)
	}
	for i := range sb.free {
		if mutant.InitSmallStaleBits && reused { // CONSERVE: a reused bitmap keeps the last layout's bits
			break
		}
		sb.free[i] = ^uint32(0)
	}
	if n%32 != 0 {
		sb.free[g-1] = 1<<(n%32) - 1
	}
	sb.nfree = int32(n)
	sb.localFreed = 0
	sb.cursor = 0
	sb.class = uint8(k)
	// DEBUG-POISON: a small period's sites are per object; while it lasts,
	// site is the site of the large or guarded object whose memory this was,
	// if that memory may still hold what its free left (dirty): an object of
	// the new layout not handed out yet names it (objectSite;
	// TestDebugWAFInCarvedLargeNamesItsSite). Fresh memory holds nothing of
	// it. The release, which verifies and poisons every object, clears it
	// (releaseLocked).
	if !sb.dirty || mutant.CarvedSiteUnnamed {
		sb.site = 0
	}
	if debug && (!mutant.DebugSitesReused || len(sb.sites) < n) {
		sb.sites = make([]uint32, n)
	}
	if sb.dirty && !mutant.DirtyAsFresh {
		sb.zeroedFrom = int32(n) - b2i(mutant.DirtyLastFresh)
	} else {
		sb.zeroedFrom = 0
	}
}

// objectSite is the site a write after free found in object idx of a small
// superblock names (DEBUG-POISON): the site that allocated it in this small
// period or, if it was not handed out in this period, that of the large or
// guarded object whose memory it still is (site: 0 when the superblock was
// small before, its poison verified at that release, or fresh).
func (sb *superblock) objectSite(idx int) uint32 {
	if s := sb.sites[idx]; s != 0 {
		return s
	}
	return sb.site
}

// objects is the number of objects of the superblock's class.
func (sb *superblock) objects() int32 { return int32(spec.ClassObjects(int(sb.class))) }

// foldFreed moves localFreed into nfree and returns how many it moved, for the
// caller to publish (STATS-LAG: frees are published in batches).
func (sb *superblock) foldFreed() int32 {
	n := sb.localFreed
	sb.nfree += n
	sb.localFreed = 0
	return n
}

func (sb *superblock) empty() bool { return sb.nfree+sb.localFreed == sb.objects() }

// ensureRemote gives the superblock a remote set with at least g words, tagged
// with gen, the generation of the small period that starts. A set that is too
// small or retired (nextGen) is replaced by a new one, never reused, so that an
// entry's words name one era of generations; a set that is kept is restamped,
// since a large life may have advanced the generation since the last small
// release stamped it. The plain store cannot lose a remote free: no entry holds
// a generation the words carried while the superblock was not small (entries are
// filled only from a small superblock), so no CAS on them can have succeeded.
func (sb *superblock) ensureRemote(g int, gen uint32) {
	rs := sb.remote.Load()
	if rs != nil && len(rs.w) >= g+int(b2i(mutant.RemoteSetStrict)) && !rs.retired() { // CACHE-COHERENT: a set big enough is kept
		if mutant.NoRestamp {
			return
		}
		for i := range rs.w {
			rs.w[i].Store(uint64(gen) << 32)
		}
		return
	}
	nrs := &remoteSet{w: make([]atomic.Uint64, g)}
	for i := range nrs.w {
		nrs.w[i].Store(uint64(gen) << 32)
	}
	sb.remote.Store(nrs)
}

// deadTag is the tag of a retired remote set: no generation ever takes this
// value, so no CAS on a retired set can succeed.
const deadTag = 1<<32 - 1

// nextGen returns the generation after gen and the tag that ends gen's period
// in the remote set: the next generation, or deadTag when the 32-bit count
// wraps. CACHE-COHERENT needs a stale entry's CAS to fail; an entry holds its
// remote set and a generation, and a generation may recur only after a wrap,
// which retires the set (its words stay deadTag for good and the next small
// period gets a new set). So within one set no generation repeats, and there
// is no bound to state: a wrap costs one new set per 2^32-1 periods of a
// superblock.
func nextGen(gen uint32) (next, tag uint32) {
	if gen+1 == deadTag && !mutant.GenWrap {
		return 0, deadTag
	}
	return gen + 1 + uint32(b2i(mutant.GenStep)), gen + 1
}

func (rs *remoteSet) retired() bool {
	return uint32(rs.w[0].Load()>>32) == deadTag && !mutant.GenWrap
}

// retire stamps every word of sb's remote set, if it has one, with deadTag.
// Under a.mu, when the superblock is not small (no CAS can be pending on it).
func (sb *superblock) retire() {
	if rs := sb.remote.Load(); rs != nil {
		for i := range rs.w[:len(rs.w)-int(b2i(mutant.RetireKeepsLast))] {
			rs.w[i].Store(deadTag << 32)
		}
	}
}

// pendingBits reports whether any remote free is pending.
func (rs *remoteSet) pending() bool {
	ws := rs.w
	if mutant.PendingGroupZero {
		ws = ws[:1]
	}
	for i := range ws {
		if (uint32(ws[i].Load()) != 0) != mutant.PendingNone {
			return true
		}
	}
	return false
}

// popcount of a group.
func popcount(x uint32) int32 { return int32(bits.OnesCount32(x)) }
