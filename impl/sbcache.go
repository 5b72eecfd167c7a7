// The superblock cache: a small direct-mapped cache of header fields on the free path.

package impl

import (
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// noKey marks an empty entry: no superblock index i gives i<<1|1 or i<<1.
const noKey = ^uintptr(0)

// sbEntry caches what the free path needs from one superblock's header, so that
// scattered frees do not reload cold headers. Entry i of a Cache serves
// superblocks whose index is i modulo the number of ways. 64 bytes: one line,
// and what a local free reads is in its first 56 bytes.
//
// CACHE-COHERENT. An entry with mine set is exact: only the owner of a small
// superblock changes its layout or owner (release, Close) and it invalidates its
// own entry when it does; acquiring a superblock (pool or orphan) invalidates the
// acquirer's entry too, so "mine" is never stale in either direction. An entry
// without mine may be stale; it is only ever acted on through a CAS on a remote
// word whose tag must equal gen, and every release stamps all remote words with
// the next generation before the layout changes.
type sbEntry struct {
	// key is the superblock index <<1 | 1 if this cache owns the superblock
	// ("mine"), so the fast path's hit test is one compare; noKey when empty.
	key uintptr
	sb  *superblock // the header
	// rw is the first of the header's remote words (remoteSet.w) in this
	// generation, nrw how many; free, for a mine entry, the first word of the
	// header's free bitmap (sb.free), which only a new small period (after
	// the owner dropped this entry) replaces. Pointers, not slices: the free
	// path indexes them with a group below the class's count (word, freeWord),
	// without two length loads and bounds checks.
	rw    *atomic.Uint64
	free  *uint32
	size  uint32 // class size
	magic uint32 // spec.ClassDivMagic: index = rel*magic>>32
	nobj  uint32 // objects in the superblock
	class uint8  // size class
	_     [3]byte
	gen   uint32 // generation the fields were read in (remote frees only)
	nrw   uint32
	_     [8]byte
}

// word is remote word g of e's period. g is a group of the class (below
// nrw): the callers check the index against nobj first.
func (e *sbEntry) word(g uint32) *atomic.Uint64 {
	if mutant.Build && g >= e.nrw {
		panic("refalloc: remote word out of range") // what the slice index did, for mutants that skip the check
	}
	return (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(e.rw), uintptr(g)*8))
}

// freeWord is word g of a mine entry's free bitmap (g as for word).
func (e *sbEntry) freeWord(g uint32) *uint32 {
	if mutant.Build && (e.free == nil || g >= uint32(len(e.sb.free))) {
		panic("refalloc: free word out of range")
	}
	return (*uint32)(unsafe.Add(unsafe.Pointer(e.free), uintptr(g)*4))
}

func (e *sbEntry) tag() uintptr { return e.key >> 1 }
func (e *sbEntry) mine() bool   { return e.key&1 != 0 && e.key != noKey }

var _ [64 - unsafe.Sizeof(sbEntry{})]byte
var _ [unsafe.Sizeof(sbEntry{}) - 64]byte

// fillEntry loads e from the authoritative header of superblock i: rs, then
// the meta (gen, stateSmall, k), then rs again, all read by the caller. The
// remote set is replaced only when a small period starts (ensureRemote), before
// the meta is stored, and a set once replaced is never used again, so an
// unchanged rs around the meta is that period's set: the entry's tag and words
// belong to one period. A set that is big enough is kept for the next period
// (restamped), so an unchanged rs does not mean an unchanged period: gen says
// which (adopt compares both).
func (c *Cache) fillEntry(e *sbEntry, i uintptr, sb *superblock, rs *remoteSet, gen uint32, k uint8) {
	key := i << 1
	if sb.owner.Load() == c || mutant.RemoteIntoLocal {
		key |= 1
	}
	var free *uint32
	if key&1 != 0 {
		free = &sb.free[0]
	}
	*e = sbEntry{
		key:   key,
		sb:    sb,
		rw:    &rs.w[0],
		nrw:   uint32(len(rs.w)),
		free:  free,
		size:  uint32(spec.ClassSize(int(k))),
		magic: spec.ClassDivMagic(int(k)),
		nobj:  uint32(spec.ClassObjects(int(k))),
		gen:   gen,
		class: k,
	}
}

// current reports whether e's superblock is still in the small period e was
// filled in: the same generation in the same remote set. Generations may repeat
// across sets (they wrap, see nextGen) but never within one.
func (e *sbEntry) current() bool {
	gen, _, _ := unpackMeta(e.sb.meta.Load())
	rs := e.sb.remote.Load()
	return gen == e.gen && len(rs.w) > 0 && e.rw != nil && (&rs.w[0] == e.rw || mutant.CurrentByLen && len(rs.w) == int(e.nrw))
}

// invalidate drops c's entry for sb, if it has one.
func (c *Cache) invalidate(sb *superblock) {
	if e := c.way(uintptr(sb.idx)); e.tag() == uintptr(sb.idx) {
		e.key = noKey
	}
}

// way is the entry for superblock i. The mask by maxWays-1 is free and lets
// the compiler drop the bounds check.
func (c *Cache) way(i uintptr) *sbEntry {
	if mutant.WaysUnmasked { // CACHE-COHERENT: Options.SuperblockCacheWays masks the index
		return &c.sbc[i&(maxWays-1)]
	}
	return &c.sbc[i&c.wayMask&(maxWays-1)]
}
