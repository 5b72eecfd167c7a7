// Debug mode: poisoned free memory, write-after-free reports, allocation sites.

package impl

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Poison is the byte debug mode fills freed memory with.
const Poison = 0xdf

// ErrWriteAfterFree is the sentinel of a WriteAfterFreeError.
var ErrWriteAfterFree = errors.New("refalloc: write after free")

// WriteAfterFreeError reports memory that was written after it was freed: in
// debug mode, found when the allocator was about to hand it out again or
// re-poisons it as its superblock is released; in guard mode under the Go-heap
// backend (GuardOptions), found as a quarantined object leaves the quarantine.
// It is given to Options.OnError and counted in Stats.WriteAfterFrees.
type WriteAfterFreeError struct {
	Addr   uintptr // the object
	Offset int     // the first byte that is not Poison
	Size   int     // its usable size
	Class  int     // its size class, or spec.Large
	Site   string  // where the freed object had been allocated, when recorded
}

func (e *WriteAfterFreeError) Error() string {
	site := ""
	if e.Site != "" {
		site = "; it was allocated at\n" + e.Site
	}
	return fmt.Sprintf("%v: byte %d of the %d-byte object at %#x was written after it was freed%s",
		ErrWriteAfterFree, e.Offset, e.Size, e.Addr, site)
}

func (e *WriteAfterFreeError) Unwrap() error { return ErrWriteAfterFree }

// alwaysPending stands in, in debug mode, for a held group's remote word: it
// reads as "a free is pending on every object", so every allocation leaves the
// fast path for allocSlow, where debug mode lives. The fast path itself does not
// know debug mode exists: it costs nothing when off.
var alwaysPending = func() *atomic.Uint64 {
	w := new(atomic.Uint64)
	w.Store(1<<32 - 1)
	if mutant.PendingShort {
		w.Store(1<<31 - 1)
	}
	return w
}()

// sites interns allocation stacks: a superblock records a small ID per object.
type sites struct {
	mu     sync.Mutex
	ids    map[[siteDepth]uintptr]uint32
	stacks [][siteDepth]uintptr // ID-1 → stack; ID 0 is "not recorded"
}

const siteDepth = 32

// record returns the ID of the stack that called into impl (format drops the
// impl frames that remain).
func (s *sites) record() uint32 {
	var pcs [siteDepth]uintptr
	runtime.Callers(3, pcs[:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[[siteDepth]uintptr]uint32{}
	}
	id, ok := s.ids[pcs]
	if !ok {
		s.stacks = append(s.stacks, pcs)
		id = uint32(len(s.stacks))
		s.ids[pcs] = id
	}
	return id
}

// format renders a stack as "function\n\tfile:line" lines, like a panic.
func (s *sites) format(id uint32) string {
	if id == 0 {
		return ""
	}
	s.mu.Lock()
	pcs := s.stacks[id-1]
	s.mu.Unlock()
	n := 0
	for n < len(pcs)-int(b2i(mutant.SiteDropLast)) && pcs[n] != 0 { // DEBUG-POISON: a full stack whole
		n++
	}
	var b strings.Builder
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if mutant.SiteImplFrames || !strings.HasPrefix(f.Function, "github.com/refalloc/refalloc/impl.") {
			fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		}
		if !more {
			break
		}
	}
	return b.String()
}

// handOutDebug is allocClass in debug mode: it verifies that a recycled object
// still holds the poison its free left (else it reports a write after free),
// records the allocation site, and zeroes the object.
func (c *Cache) handOutDebug(n, k int) []byte {
	cc := &c.cls[k]
	b := cc.bits
	cc.bits = b & (b - 1)
	i := bits.TrailingZeros32(b)
	s := unsafe.Slice((*byte)(unsafe.Add(cc.base, uintptr(i)*uintptr(cc.size))), cc.size)
	idx := int(cc.group)*32 + i
	if mutant.DebugSiteWrong {
		cc.sb.sites[idx] = c.a.sites.record()
	}
	if cc.needzero && !mutant.DebugNoVerify {
		c.a.verifyPoison(c, s, k, cc.sb.objectSite(idx))
	}
	// Always: a stale remote free of a held object poisoned it (and was
	// dropped as a double free), fresh or not.
	clear(s)
	cc.sb.sites[idx] = c.a.sites.record()
	return s[:n]
}

// verifyPoison reports (to OnError, counted against c, or the Allocator when c
// is nil) the first byte of s that is not Poison.
func (a *Allocator) verifyPoison(c *Cache, s []byte, k int, site uint32) {
	if mutant.WAFClass {
		k = 0
	}
	for off, x := range s {
		if x != Poison {
			if c != nil && !mutant.WAFRetired {
				c.ev.waf.Add(1)
			} else {
				a.retiredWAF()
			}
			if a.opt.OnError != nil {
				a.report(&WriteAfterFreeError{
					Addr: uintptr(unsafe.Pointer(unsafe.SliceData(s))), Offset: off, Size: len(s), Class: k,
					Site: a.sites.format(site),
				})
			}
			if !mutant.PoisonReportEach {
				return
			}
		}
	}
}

// verifyReleased checks, as an empty superblock is released, that every object
// that held data since the superblock was last fresh still holds the poison
// its free left: release poisons the whole superblock, which would erase the
// evidence. Objects at or above zeroedFrom were never handed out: still zero.
func (a *Allocator) verifyReleased(c *Cache, sb *superblock) {
	k := int(sb.class)
	size := spec.ClassSize(k)
	base := a.sbAddr(sb)
	for idx := range min(int(sb.zeroedFrom)-int(b2i(mutant.VerifyReleasedShort)), spec.ClassObjects(k)) {
		a.verifyPoison(c, unsafe.Slice((*byte)(unsafe.Add(base, idx*size)), size), k, sb.objectSite(idx*int(1-b2i(mutant.ReleaseSiteFirst))))
	}
}

// freeDebug is the local free in debug mode: the superblock cache keeps no
// entries (so the fast path never runs), and a free that will succeed poisons
// the object first (the free may release the superblock, which verifies it).
// A free that will fail writes nothing: the object may be held, fresh zeros
// about to be handed out unzeroed. The entry goes also when OnError panics in
// the free (it delivers the queued reports when it publishes): left, it would
// send the cache's next frees into sb down the fast path, unpoisoned.
func (c *Cache) freeDebug(e *sbEntry, off uintptr) error {
	rel := uint32(off) & (spec.SuperblockSize - 1)
	idx := uint32(uint64(rel) * uint64(e.magic) >> 32)
	if (mutant.DebugInteriorPoison || idx*e.size == rel) && idx < e.nobj && (mutant.DebugPoisonDead || !c.notLive(e, idx>>5, 1<<(idx&31))) {
		poison(unsafe.Slice((*byte)(unsafe.Add(c.a.start, off)), e.size))
	}
	if mutant.DebugEntryKept {
		err := c.free(off)
		e.key = noKey
		return err
	}
	defer func() { e.key = noKey }()
	return c.free(off)
}

// poisonObjects poisons the objects of group g of sb that bits names.
func (a *Allocator) poisonObjects(sb *superblock, g int, bits32 uint32) {
	size := spec.ClassSize(int(sb.class))
	base := a.sbAddr(sb)
	for b := bits32; b != 0; b &= b - 1 {
		idx := g*32 + bits.TrailingZeros32(b)
		poison(unsafe.Slice((*byte)(unsafe.Add(base, idx*size)), size))
	}
}

// poison fills b with Poison, doubling what is filled with each copy: memmove
// speed, and one range access for the race detector instead of one a byte.
func poison(b []byte) {
	if len(b) == 0 {
		return
	}
	b[0] = Poison
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// notPoison returns the offset of the first byte of b that is not Poison, or
// -1. All poison (the common case) is one comparison of b with itself shifted
// by a byte, at memequal speed.
func notPoison(b []byte) int {
	m := len(b)
	if mutant.NotPoisonLast {
		m--
	}
	if len(b) == 0 || (b[0] == Poison) != mutant.NotPoisonUniform && bytes.Equal(b[1:m], b[:m-1]) {
		return -1
	}
	return slices.IndexFunc(b, func(x byte) bool { return x != Poison })
}
