// The rapid state machine: several caches driven from one goroutine.

package invariants

import (
	"time"

	"pgregory.net/rapid"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// machine drives several caches of one Allocator from one goroutine, with a
// small reservation so that superblocks are recycled across classes and owners
// and the allocator runs out of memory, and checks every invariant after every
// step (the "" action).
type machine struct {
	h *Harness
}

func newMachine(t *rapid.T) *machine {
	h, err := NewHarness(machineOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	m := &machine{h: h}
	for range 3 {
		m.must(t, ignoreID(h.NewCache()))
	}
	return m
}

// machineOptions draws the Options of one machine run: a reservation of 16,
// 32 or 64 superblocks, every superblock-cache way count, three pools, three
// decays, debug mode in a quarter of the runs, guard mode in a third, the
// Go-heap backend in a quarter.
func machineOptions(t *rapid.T) impl.Options {
	ways := []int{1, 8, 16, 32, 64, 128} // every valid count
	if mutant.MachineWays128 {
		ways[5] = 64
	}
	opt := impl.Options{
		Reserve:             rapid.SampledFrom([]int{16, 32, 64}).Draw(t, "superblocks") * spec.SuperblockSize,
		SuperblockCacheWays: rapid.SampledFrom(ways).Draw(t, "ways"),
		// Retain: keep everything (the default, 32 MiB), a few superblocks,
		// or return memory at once: superblocks come back fresh from the OS.
		Retain: rapid.SampledFrom([]int{0, 4 * spec.SuperblockSize, -1}).Draw(t, "retain"),
		// Decay: the default (1 s: past Retain the pool keeps what it holds for
		// the whole run, bounded by the growth rule only), at once (MEM-ACCOUNT
		// then checks at every step that the pool holds no more than Retain),
		// or never but by that rule.
		Decay: rapid.SampledFrom([]time.Duration{0, -1, time.Hour}).Draw(t, "decay"),
		// Debug: every call through the slow paths, freed memory poisoned.
		Debug: rapid.IntRange(0, 3).Draw(t, "debug") == 0,
	}
	// Guard mode in a third of the runs (GUARD-FAULT): every small allocation
	// sampled, or some, or none; a quarantine of one object, a few, or the
	// default (a quarter of the reservation), so that it fills, releases its
	// oldest and yields to allocations that find no room.
	if rapid.IntRange(0, 2).Draw(t, "guard") == 0 && !mutant.MachineNoGuard {
		opt.Guard = impl.GuardOptions{
			Enabled:           true,
			SampleRate:        rapid.SampledFrom([]int{1, 1, 3, -1}).Draw(t, "sampleRate"),
			QuarantineObjects: rapid.SampledFrom([]int{1, 3, 0}).Draw(t, "quarantineObjects"),
			QuarantineBytes:   rapid.SampledFrom([]int{2 * spec.SuperblockSize, 0}).Draw(t, "quarantineBytes"),
		}
	}
	// The Go-heap backend in a quarter of the runs, as -race builds always
	// have it: guard mode then poisons and does not protect.
	opt.HeapBackend = rapid.IntRange(0, 3).Draw(t, "heapBackend") == 0
	return opt
}

func ignoreID(_ int, err error) error { return err }

func (m *machine) must(t *rapid.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cacheID draws an open cache, or the Allocator's own methods.
func (m *machine) cacheID(t *rapid.T, label string) int {
	ids := append([]int{Front}, m.h.Caches()...)
	if mutant.MachineNoFront && len(ids) > 1 {
		ids = ids[1:]
	}
	return rapid.SampledFrom(ids).Draw(t, label)
}

func drawSize(t *rapid.T) int {
	large := rapid.IntRange(spec.MaxSmall+1, 3*spec.SuperblockSize)
	if mutant.MachineNoLarge {
		large = rapid.IntRange(0, spec.MaxSmall)
	}
	return rapid.OneOf(
		rapid.IntRange(0, 64),
		rapid.IntRange(0, 1024),
		rapid.IntRange(0, spec.MaxSmall),
		rapid.SampledFrom([]int{8, 16, 48, 256, 4096, 21840, spec.MaxSmall}),
		large,
	).Draw(t, "size")
}

func (m *machine) alloc(t *rapid.T) {
	id := m.cacheID(t, "cache")
	n, align := allocArgs(t, int(m.h.M.Size()))
	m.must(t, m.h.Alloc(id, n, align))
}

// allocArgs draws an allocation in a reservation of the given bytes: any size
// (drawSize), or one time in five an edge size (EdgeSizes); alignment 1
// (Alloc), or one time in five any power of two up to a superblock
// (AllocAligned).
func allocArgs(t *rapid.T, reservation int) (n, align int) {
	n = drawSize(t)
	if rapid.IntRange(0, 4).Draw(t, "edge?") == 0 {
		n = rapid.SampledFrom(EdgeSizes(reservation)).Draw(t, "edgeSize")
	}
	align = 1
	if rapid.IntRange(0, 4).Draw(t, "aligned?") == 0 {
		top := spec.SuperblockShift
		if mutant.MachineAlignSB {
			top--
		}
		align = 1 << rapid.IntRange(0, top).Draw(t, "alignShift")
	}
	return n, align
}

func (m *machine) pickLive(t *rapid.T) (uintptr, bool) {
	live := m.h.Live()
	if len(live) == 0 {
		return 0, false
	}
	return rapid.SampledFrom(live).Draw(t, "object"), true
}

// owner is the open cache that allocated the live object at a, or Front
// (the Allocator's methods allocated it, or its cache is closed: its superblock
// is an orphan, or adopted by whoever freed into it).
func (m *machine) owner(a uintptr) int {
	ids := m.h.Caches()
	if mutant.MachineOwnerClosed {
		ids = m.h.AllIDs()
	}
	for _, id := range ids {
		if id == m.h.Owner(a) {
			return id
		}
	}
	return Front
}

func (m *machine) free(t *rapid.T) {
	if a, ok := m.pickLive(t); ok {
		m.must(t, m.h.Free(m.owner(a), a))
	}
}

func (m *machine) freeCross(t *rapid.T) {
	a, ok := m.pickLive(t)
	if !ok {
		return
	}
	m.must(t, m.h.Free(rapid.SampledFrom(m.crossFreers(a)).Draw(t, "freer"), a))
}

// crossFreers are the callers that did not allocate the live object at a:
// the Allocator's methods and every open cache, but its allocator.
func (m *machine) crossFreers(a uintptr) []int {
	var others []int
	for _, id := range append([]int{Front}, m.h.Caches()...) {
		if id != m.h.Owner(a) || mutant.MachineCrossLocal {
			others = append(others, id)
		}
	}
	return others
}

func (m *machine) freeBad(t *rapid.T) {
	top := NumBad - 1
	if mutant.MachineNoWild {
		top--
	}
	kind := rapid.IntRange(0, top).Draw(t, "badKind")
	m.must(t, m.h.FreeBad(m.cacheID(t, "cache"), kind, rapid.IntRange(0, 1<<20).Draw(t, "pick")))
}

func (m *machine) allocBad(t *rapid.T) {
	id := m.cacheID(t, "cache")
	kinds := 2
	if mutant.MachineNoBadAlign {
		kinds = 1
	}
	switch rapid.IntRange(0, kinds).Draw(t, "badAlloc") {
	case 0:
		m.must(t, m.h.Alloc(id, -rapid.IntRange(1, 1<<40).Draw(t, "neg"), 1))
	case 1:
		m.must(t, m.h.Alloc(id, rapid.IntRange(spec.MaxAlloc+1, spec.MaxAlloc*4).Draw(t, "huge"), 1))
	case 2:
		align := rapid.SampledFrom([]int{0, -8, 3, 24, 1000, 2 * spec.MaxAlign}).Draw(t, "badAlign")
		m.must(t, m.h.Alloc(id, rapid.IntRange(0, 100).Draw(t, "n"), align))
	}
}

func (m *machine) flush(t *rapid.T) { m.must(t, m.h.Flush(m.cacheID(t, "cache"))) }

// flushFront is Allocator.Flush: every shard of the front.
func (m *machine) flushFront(t *rapid.T) { m.must(t, m.h.Flush(Front)) }

// reallocer draws who resizes the object at a: its owner, the Allocator, or
// any open cache (often not the owner: the object moves).
func (m *machine) reallocer(t *rapid.T, a uintptr) int {
	switch rapid.IntRange(0, 2).Draw(t, "reallocBy") {
	case 0:
		return m.owner(a)
	case 1:
		return Front
	}
	return m.cacheID(t, "cache")
}

// realloc resizes a live object (or nil) to a size at one of its edges
// (ReallocSizes) or any size, and sometimes again and again, so that an
// object shrinks and grows back in place.
func (m *machine) realloc(t *rapid.T) {
	a, ok := m.pickLive(t)
	if !ok || rapid.IntRange(0, 9).Draw(t, "nil?") == 0 {
		if mutant.MachineNoNilRealloc {
			return
		}
		m.must(t, m.h.Realloc(m.cacheID(t, "cache"), 0, drawSize(t)))
		return
	}
	for range rapid.IntRange(1, 3).Draw(t, "reallocs") {
		o, _ := m.h.M.LiveAt(a)
		n := drawSize(t)
		if rapid.Bool().Draw(t, "edge?") {
			n = rapid.SampledFrom(ReallocSizes(o)).Draw(t, "edge")
		}
		m.must(t, m.h.Realloc(m.reallocer(t, a), a, n))
		if m.h.LastErr != nil {
			return
		}
		a = m.h.LastAddr
	}
}

// reallocBad resizes what is not a live object: a freed one (whose slot may be
// free, held or reused), an interior or foreign pointer; or with a bad size.
func (m *machine) reallocBad(t *rapid.T) {
	id := m.cacheID(t, "cache")
	if a, ok := m.pickLive(t); ok && rapid.IntRange(0, 3).Draw(t, "badSize?") == 0 {
		n := rapid.SampledFrom([]int{-1, -1 << 40, spec.MaxAlloc + 1, int(m.h.M.Size()) + 1}).Draw(t, "badSize")
		m.must(t, m.h.Realloc(m.reallocer(t, a), a, n))
		return
	}
	kind := rapid.IntRange(0, NumBad-1).Draw(t, "badKind")
	n := drawSize(t)
	same := rapid.Bool().Draw(t, "sameClass?") // a freed object's slot may be held by its owner
	m.must(t, m.h.ReallocBad(id, kind, rapid.IntRange(0, 1<<20).Draw(t, "pick"), func(c int) int {
		if same && c > 0 {
			return c - n%2 // its own class, but not always its whole size
		}
		return n
	}))
}

// freeTail frees where no object starts, at the far edge of a live object's
// superblock or of the object itself, through any cache (owner or not) or the
// Allocator (FREE-INVALID).
func (m *machine) freeTail(t *rapid.T) {
	if a, ok := m.pickLive(t); ok {
		m.must(t, m.h.FreeTail(m.cacheID(t, "cache"), a, rapid.Bool().Draw(t, "lastByte") && !mutant.MachineNoTailLast))
	}
}

func (m *machine) flushAll(t *rapid.T) { m.must(t, m.h.FlushAll()) }

func (m *machine) trim(t *rapid.T) { m.must(t, m.h.Trim()) }

// touchFreed reads or writes a freed object in quarantine: it must fault, and
// the report name it (GUARD-FAULT).
func (m *machine) touchFreed(t *rapid.T) {
	m.must(t, m.h.TouchQuarantined(rapid.IntRange(0, 1<<30).Draw(t, "pick"), rapid.Bool().Draw(t, "write") && !mutant.MachineTouchReadOnly))
}

func (m *machine) closeCache(t *rapid.T) {
	if ids := m.h.Caches(); len(ids) > 1 {
		m.must(t, m.h.CloseCache(rapid.SampledFrom(ids).Draw(t, "closing")))
	}
}

func (m *machine) newCache(t *rapid.T) {
	if len(m.h.Caches()) < 6 {
		m.must(t, ignoreID(m.h.NewCache()))
	}
}

// useClosed calls a closed cache: every call must return ErrClosed.
func (m *machine) useClosed(t *rapid.T) {
	var closed []int
	open := map[int]bool{}
	for _, id := range m.h.Caches() {
		open[id] = true
	}
	for _, id := range m.h.AllIDs() {
		if !open[id] {
			closed = append(closed, id)
		}
	}
	if len(closed) == 0 {
		return
	}
	id := rapid.SampledFrom(closed).Draw(t, "closedCache")
	ops := 5
	if mutant.MachineClosedNoLive {
		ops = 4
	}
	switch rapid.IntRange(0, ops).Draw(t, "closedOp") {
	case 0:
		m.must(t, m.h.Alloc(id, drawSize(t), 1))
	case 1:
		if a, ok := m.pickLive(t); ok {
			m.must(t, m.h.Free(id, a))
		}
	case 2:
		m.must(t, m.h.CloseCache(id))
	case 3:
		m.must(t, m.h.Flush(id))
	case 4:
		m.must(t, m.h.Realloc(id, 0, drawSize(t)))
	case 5:
		if a, ok := m.pickLive(t); ok {
			m.must(t, m.h.Realloc(id, a, drawSize(t)))
		}
	}
}

func (m *machine) actions() map[string]func(*rapid.T) {
	acts := map[string]func(*rapid.T){
		"alloc":      m.alloc,
		"alloc2":     m.alloc,
		"alloc3":     m.alloc,
		"free":       m.free,
		"free2":      m.free,
		"freeCross":  m.freeCross,
		"freeCross2": m.freeCross,
		"freeBad":    m.freeBad,
		"allocBad":   m.allocBad,
		"flush":      m.flush,
		"flushFront": m.flushFront,
		"flushAll":   m.flushAll,
		"trim":       m.trim,
		"realloc":    m.realloc,
		"realloc2":   m.realloc,
		"reallocBad": m.reallocBad,
		"freeTail":   m.freeTail,
		"stats":      func(t *rapid.T) { m.must(t, m.h.Stats()) },
		"leaks":      func(t *rapid.T) { m.must(t, m.h.Leaks()) },
		"touchFreed": m.touchFreed,
		"closeCache": m.closeCache,
		"newCache":   m.newCache,
		"useClosed":  m.useClosed,
		"": func(t *rapid.T) {
			m.must(t, m.h.Check())
		},
	}
	if mutant.MachineNoTrim {
		delete(acts, "trim")
	}
	return acts
}

// RunMachine is the whole property, for rapid.Check and rapid.MakeFuzz: a
// machine that drives several caches of one Allocator from one goroutine (alloc
// of every size and alignment, sizes at every edge, Realloc in place and moving,
// local and cross-cache frees, bad frees and Reallocs of every kind, frees at
// superblock tails, flushes, Trim, Stats and Leaks, cache close and open, calls
// on closed caches, and in guard mode accesses to freed objects in quarantine),
// with every superblock-cache way count, in a reservation
// of 16 to 64 superblocks, so that superblocks are recycled across classes and
// owners and the allocator runs out of memory; every invariant runs after every
// step (the "" action). Then everything is freed (EMPTY) and the Allocator
// closed with nothing leaked.
func RunMachine(t *rapid.T) {
	m := newMachine(t)
	t.Repeat(m.actions())
	m.end(t)
}

// end ends a run: one time in four the Allocator is closed with objects
// live (afterClose), else everything is freed (EMPTY); then it is closed.
func (m *machine) end(t *rapid.T) {
	if rapid.IntRange(0, 3).Draw(t, "end") == 0 && !mutant.MachineNoAfterClose {
		m.afterClose(t)
	} else {
		m.must(t, m.h.FreeAll())
	}
	m.must(t, m.h.Close())
}

// afterClose closes the Allocator with objects still live (EMPTY: Close
// reports exactly them), then calls every method once more on every cache,
// open or closed, and on the Allocator itself: after Close each answers
// ErrClosed (a free of nil: nil, a no-op) and changes nothing, even though
// the fast paths test no closed flag (Allocator.Close marks every remote word
// pending instead).
func (m *machine) afterClose(t *rapid.T) {
	live := m.h.Live()
	m.must(t, m.h.CloseAllocator())
	for _, id := range append(m.h.AllIDs(), Front) {
		m.must(t, m.h.Alloc(id, drawSize(t), 1))
		m.must(t, m.h.Alloc(id, drawSize(t), rapid.SampledFrom([]int{16, 4096, spec.SuperblockSize}).Draw(t, "alignAfterClose")))
		m.must(t, m.h.Realloc(id, 0, drawSize(t)))
		if len(live) > 0 {
			a := rapid.SampledFrom(live).Draw(t, "liveAtClose")
			m.must(t, m.h.Realloc(id, a, drawSize(t)))
			m.must(t, m.h.Free(id, a))
		}
		m.must(t, m.h.FreeBad(id, BadNil, 0)) // a no-op even now (FREE-INVALID)
		m.must(t, m.h.Flush(id))
		if id != Front {
			m.must(t, m.h.CloseCache(id))
		}
	}
	ids := append(m.h.AllIDs(), Front)
	for _, a := range live { // every place in every group: the last slot's bit too
		m.must(t, m.h.Free(rapid.SampledFrom(ids).Draw(t, "freerAfterClose"), a))
	}
	_, err := m.h.NewCache()
	m.must(t, err)
	m.must(t, m.h.Trim())
	m.must(t, m.h.CloseAllocator()) // a second Close: ErrClosed
}
