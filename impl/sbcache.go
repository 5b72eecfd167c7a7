// The superblock cache: a small direct-mapped cache of header fields on the free path.

package impl

import (
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/impl/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// noTag marks an empty entry; no superblock index can equal it.
const noTag = ^uintptr(0)

// sbEntry caches what the free path needs from one superblock's header, so that
// scattered frees do not reload cold headers. Entry i of a Cache serves
// superblocks whose index is i modulo the number of ways. 64 bytes: one line.
//
// CACHE-COHERENT. An entry with mine set is exact: only the owner of a small
// superblock changes its layout or owner (release, Close) and it invalidates its
// own entry when it does; acquiring a superblock (pool or orphan) invalidates the
// acquirer's entry too, so "mine" is never stale in either direction. An entry
// without mine may be stale; it is only ever acted on through a CAS on a remote
// word whose tag must equal gen, and every release stamps all remote words with
// the next generation before the layout changes.
type sbEntry struct {
	tag   uintptr         // superblock index, or noTag
	sb    *superblock     // the header
	rw    []atomic.Uint64 // the header's remote words (remoteSet.w) in this generation
	size  uint32          // class size
	magic uint32          // spec.ClassDivMagic: index = rel*magic>>32
	nobj  uint32          // objects in the superblock
	gen   uint32          // generation the fields were read in
	class uint8           // size class
	mine  bool            // this cache owns the superblock
	_     [6]byte         // pad to 64 bytes
}

var _ [64 - unsafe.Sizeof(sbEntry{})]byte
var _ [unsafe.Sizeof(sbEntry{}) - 64]byte

// fillEntry loads e from the authoritative header of superblock i, whose meta
// was just read as (gen, stateSmall, k). The remote set is read after the meta:
// acquisition stores it before the meta, so it is at least as new.
func (c *Cache) fillEntry(e *sbEntry, i uintptr, sb *superblock, gen uint32, k uint8) {
	*e = sbEntry{
		tag:   i,
		sb:    sb,
		rw:    sb.remote.Load().w,
		size:  uint32(spec.ClassSize(int(k))),
		magic: spec.ClassDivMagic(int(k)),
		nobj:  uint32(spec.ClassObjects(int(k))),
		gen:   gen,
		class: k,
		mine:  sb.owner.Load() == c || mutant.RemoteIntoLocal,
	}
}

// invalidate drops c's entry for sb, if it has one.
func (c *Cache) invalidate(sb *superblock) {
	if e := &c.sbc[uintptr(sb.idx)&c.wayMask]; e.tag == uintptr(sb.idx) {
		e.tag = noTag
	}
}
