// The rest of the public API in the Harness: Realloc, the Allocator's Stats
// and Leaks, frees at the edges of superblocks and objects, and every front
// shard.

package invariants

import (
	"fmt"
	"slices"
	"sort"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/oracle"
	"github.com/refalloc/refalloc/spec"
)

// frontDepths is how many stack depths, 8 KiB apart, calls on Front cycle
// through (call).
const frontDepths = 16

// call runs f, a call on cache id. A single goroutine would meet one of the
// front's internal caches only — its P's (FRONT-EXCLUSIVE), or, in the portable
// build, the home shard of its stack address — and what Allocator.Flush and
// Trim do to the others would go unchecked. So every other call on Front runs
// on one internal cache after another (Allocator.WithFrontCache, through
// frontAPI), and the rest go through the Allocator's methods, deeper on the
// stack by a multiple of 8 KiB that changes from call to call (for the shards).
func (h *Harness) call(id int, f func()) {
	if id != Front {
		f()
		return
	}
	h.frontCalls++
	h.served = -1
	if h.frontCalls%2 == 1 {
		n := h.A.FrontCaches()
		if mutant.FrontRouteLast {
			n = max(1, n-1)
		}
		h.route = h.frontCalls / 2 % n
	}
	defer func() { h.route = -1 }()
	d := h.frontCalls % frontDepths
	if mutant.FrontDepthFixed {
		d = 0
	}
	deeper(d, f)
}

// frontAPI is Front's api: the Allocator's methods, or, for a call that call
// routed, one of the front's internal caches.
type frontAPI struct{ h *Harness }

func (f frontAPI) via(do func(api)) {
	if i := f.h.route; i >= 0 {
		f.h.A.WithFrontCache(i, func(c *impl.Cache) { f.h.served = c.ID(); do(c) })
		return
	}
	do(f.h.A)
}

func (f frontAPI) Alloc(n int) (b []byte, err error) {
	f.via(func(x api) { b, err = x.Alloc(n) })
	return b, err
}

func (f frontAPI) AllocAligned(n, align int) (b []byte, err error) {
	f.via(func(x api) { b, err = x.AllocAligned(n, align) })
	return b, err
}

func (f frontAPI) Realloc(b []byte, n int) (r []byte, err error) {
	f.via(func(x api) { r, err = x.Realloc(b, n) })
	return r, err
}

func (f frontAPI) Free(b []byte) (err error) {
	f.via(func(x api) { err = x.Free(b) })
	return err
}

// deeper runs f d frames of 8 KiB further down the stack. What it returns
// keeps each frame's pad in use (no global: the harnesses of parallel tests
// call it at once).
//
//go:noinline
func deeper(d int, f func()) byte {
	if d == 0 {
		f()
		return 0
	}
	var pad [8 << 10]byte
	pad[d] = byte(d)
	return deeper(d-1, f) + pad[d]
}

func flushedIDs(s *impl.Snapshot, id int) []int {
	if id == Front {
		if ids := frontIDs(s); mutant.FlushedFirstFront && len(ids) > 1 { // STATS-EXACT: the other front caches unchecked after Flush
			return ids[:1]
		}
		return frontIDs(s)
	}
	return []int{id}
}

// flushed (STATS-EXACT, the mechanism): caches ids (nil: all) have just
// flushed, so they hold no objects, and every superblock they own has its
// remote frees collected and its local frees published.
func flushed(s *impl.Snapshot, ids []int) []*Violation {
	var vs []*Violation
	mine := func(id int) bool { return ids == nil || slices.Contains(ids, id) }
	for _, c := range s.Caches {
		if mine(c.ID) && len(c.Held) != 0 {
			vs = append(vs, violation(spec.RuleStatsExact, "cache %d holds %d groups after Flush", c.ID, len(c.Held)))
		}
	}
	for _, st := range s.Superblocks {
		if st.State != impl.SBSmall || st.Owner < 0 || mutant.FlushedSkipCacheZero && st.Owner == 0 || !mine(st.Owner) { // STATS-EXACT: cache 0 taken for no owner
			continue
		}
		// STATS-EXACT: Flush publishes every local free (flushedlocalfreed skips that).
		if st.LocalFreed != 0 && !mutant.FlushedLocalFreed || !mutant.FlushedSkipPending && slices.ContainsFunc(st.Pending, func(p uint32) bool { return p != 0 }) {
			vs = append(vs, violation(spec.RuleStatsExact, "superblock %d of cache %d after Flush: %d local frees unpublished, pending %x",
				st.Index, st.Owner, st.LocalFreed, st.Pending))
		}
	}
	return vs
}

// Realloc resizes the live object at a (0: Realloc(nil, n)) to n bytes on
// cache id (Front: the Allocator's) after checking its fill, and checks the
// outcome: with the model (oracle.Model.Realloc), with the snapshot's exact
// prediction of whether a small object stays in place (expectInPlace), and the
// bytes: the first min(len, n) keep the fill (INTEGRITY), every byte from there
// to the capacity reads zero (ZEROED), and a failed call leaves the object as
// it was.
func (h *Harness) Realloc(id int, a uintptr, n int) error {
	var b []byte
	if a != 0 {
		var ok bool
		if b, ok = h.live[a]; !ok {
			return fmt.Errorf("harness: %#x is not live", a)
		}
		if v := h.intact(a); v != nil {
			return v
		}
	}
	return h.realloc(id, b, n)
}

// ReallocSlice is Realloc of b, whatever it is: a freed object, an interior
// or foreign pointer. A live object goes to Realloc.
func (h *Harness) ReallocSlice(id int, b []byte, n int) error {
	if _, ok := h.live[addr(b)]; ok {
		return h.Realloc(id, addr(b), n)
	}
	return h.realloc(id, b, n)
}

// intact (INTEGRITY) checks that every byte of the live object at a holds its fill.
func (h *Harness) intact(a uintptr) *Violation {
	if h.M.Closed() {
		return nil // Close gave the memory back: there are no bytes to read
	}
	b := h.live[a]
	for i, x := range b[:cap(b)] {
		if x != h.fills[a] {
			return violation(spec.RuleIntegrity, "object %#x byte %d is %#x, was filled with %#x", a, i, x, h.fills[a])
		}
	}
	return nil
}

func (h *Harness) realloc(id int, b []byte, n int) error {
	old := addr(b)
	h.saw(sawCall{Call: "realloc", ID: id, Addr: old, N: n, Align: 1})
	_, live := h.live[old]
	c := h.cache(id)
	inPlace, sure := false, false
	if c == nil {
		c = h.closedCache(id)
	} else if o, _ := h.M.LiveAt(old); live && n >= 0 && !h.M.Closed() && o.Class != spec.Large {
		// A small object moves to another class for sure; only within its
		// class does the owner decide, which takes a snapshot to know.
		inPlace, sure = false, true
		if oracle.ClassOf(n, 1) == o.Class {
			inPlace, sure = expectInPlace(h.A.Snapshot(), id, old, n)
		}
	}
	var r []byte
	var err error
	m0 := h.missesNow()
	h.call(id, func() { r, err = c.Realloc(b, n) })
	h.misses += h.missesNow() - m0 // a moving Realloc frees: maybe a miss
	h.LastErr = err
	got := Kind(err)
	if v := h.M.Realloc(id, old, n, addr(r), len(r), cap(r), got); v != nil {
		return v
	}
	if sure && got == oracle.OK && (addr(r) == old) != inPlace {
		return violation(spec.RuleRefines, "Realloc(%#x, %d) on cache %d: in place %v, the snapshot says %v (a small object stays exactly when the cache owns it and its class serves n)",
			old, n, id, addr(r) == old, inPlace)
	}
	if err != nil {
		if v := h.reallocFailed(id, b, n, got, live); v != nil {
			return v
		}
		return h.step(nil)
	}
	keep := min(len(b), n)
	full := r[:cap(r)]
	kept := keep
	if mutant.KeptLastByte && keep > 0 { // INTEGRITY: the last kept byte unchecked
		kept--
	}
	for i := range kept {
		if live && full[i] != h.fills[old] {
			return violation(spec.RuleIntegrity, "Realloc(%#x, %d) = %#x: kept byte %d is %#x, was filled with %#x", old, n, addr(r), i, full[i], h.fills[old])
		}
	}
	end := len(full)
	if mutant.ReallocZeroLen {
		end = len(r)
	}
	for i := keep; i < end; i++ {
		if full[i] != 0 {
			return violation(spec.RuleZeroed, "Realloc(%#x, %d) = %#x: byte %d of %d past the %d kept is %#x", old, n, addr(r), i, cap(r), keep, full[i])
		}
	}
	if live {
		delete(h.live, old)
		delete(h.fills, old)
		if addr(r) != old {
			h.freed = append(h.freed, b)
		}
	}
	return h.hold(r)
}

// reallocFailed checks a Realloc(b, n) on cache id that returned the error
// got, b live (live) or not: an out-of-memory must be one (OOM-REAL: checkOOM,
// CheckReallocOOM), and a live b is left untouched, every byte holding its
// fill (INTEGRITY, OOM-REAL).
func (h *Harness) reallocFailed(id int, b []byte, n int, got oracle.Kind, live bool) *Violation {
	old := addr(b)
	if got == oracle.OutOfMemory {
		s := h.A.Snapshot()
		if vs := h.checkOOM(s, id, n, 1); len(vs) > 0 {
			return vs[0]
		}
		if live {
			if v := CheckReallocOOM(s, old, cap(b), n); v != nil {
				return v
			}
		}
	}
	if live && !mutant.ReallocIntactOOM { // INTEGRITY: b is untouched and still live (unchecked)
		return h.intact(old)
	}
	return nil
}

// expectInPlace predicts from a snapshot whether cache id's Realloc of the live
// object at a to n >= 0 bytes stays in place, for a small object: exactly when
// the cache owns its superblock and the oracle's class of n is its class
// (impl.Cache.Realloc: "a small object of this cache whose class also serves
// n"). sure is false when the snapshot cannot say: a large object (the model
// decides those), or Front with a front cache owning it (which shard serves the
// call is the front's business).
func expectInPlace(s *impl.Snapshot, id int, a uintptr, n int) (inPlace, sure bool) {
	i := int((a - s.Base) / uintptr(s.SuperblockSize))
	k := slices.IndexFunc(s.Superblocks, func(st impl.SuperblockState) bool { return st.Index == i })
	if k >= 0 && s.Superblocks[k].State == impl.SBGuard {
		if mutant.InPlaceGuardUnsure { // GUARD-FAULT: unsure of a guarded object, one resized in place passes
			return false, false
		}
		return false, true // GUARD-FAULT: a guarded object's superblock is nobody's: it moves
	}
	if k < 0 || s.Superblocks[k].State != impl.SBSmall {
		return false, false
	}
	st := &s.Superblocks[k]
	switch {
	case oracle.ClassOf(n, 1) != st.Class:
		return false, true
	case id == Front:
		return false, !slices.Contains(frontIDs(s), st.Owner) && !mutant.InPlaceFrontUnsure
	}
	if mutant.InPlaceOwnerUnsure && st.Owner != id { // REFINES: a non-owner's Realloc in place passes
		return false, false
	}
	return st.Owner == id, true
}

// Stats reads Allocator.Stats at this quiescent point and checks every field
// the model and the harness predict: it is the snapshot's (which Check
// judges); the classes are the table's; Reserved is the reservation; the
// counters keep STATS-LEAD, STATS-LAG and LARGE-EXACT against the model
// (oracle.Model.CheckStats, StatsNow); the large objects and their superblocks
// are the model's (LARGE-EXACT, MEM-ACCOUNT); the small and orphaned superblocks
// and the event counters are the snapshot's (statsFields; InvalidFrees and
// DoubleFrees are the model's, by badFrees); no write after free was made
// (DEBUG-POISON).
func (h *Harness) Stats() error {
	if h.M.Closed() {
		return nil
	}
	st := h.A.Stats()
	s := h.A.Snapshot()
	vs := append(h.M.CheckStats(StatsView(st), len(s.Caches), false), StatsNow(st)...)
	vs = append(vs, NoFalsePoison(s)...)
	if d := cmp.Diff(s.Stats, st); d != "" {
		vs = append(vs, violation(spec.RuleRefines, "Stats differs from the snapshot's at a quiescent point (-snapshot +Stats):\n%s", d))
	}
	vs = append(vs, statsTable(st, h.M.Size())...)
	var large, spans uint64
	for _, o := range h.M.Live() {
		if o.Class == spec.Large {
			large++
			spans += uint64(oracle.LargeSpan(o.Usable))
		}
	}
	if st.Large.LiveObjects != large || uint64(st.LargeSuperblocks) != spans && !mutant.StatsSpansIgnored {
		vs = append(vs, violation(spec.RuleLargeExact, "Stats: %d large objects in %d superblocks, the model has %d in %d",
			st.Large.LiveObjects, st.LargeSuperblocks, large, spans))
	}
	sbs, _ := smalls(s)
	vs = append(vs, statsFields(s, sbs)...) // the superblocks by kind, the event counters
	return join(vs)
}

// statsTable checks what Stats says of the reservation and of the size-class
// table, whatever the allocator did: Reserved is the reservation (reserved
// bytes), there is one row per class, and row k is class k with its size
// and slab object count (MEM-ACCOUNT, REFINES).
func statsTable(st impl.Stats, reserved uintptr) []*Violation {
	var vs []*Violation
	if st.Reserved != uint64(reserved) && !mutant.StatsReservedUnchecked || len(st.Classes) != spec.NumClasses { // MEM-ACCOUNT: Reserved unchecked
		vs = append(vs, violation(spec.RuleMemAccount, "Stats: Reserved %d, %d classes; the reservation is %d bytes", st.Reserved, len(st.Classes), reserved))
	}
	for k, c := range st.Classes {
		if c.Class != k || c.Size != spec.ClassSize(k) || c.SlabObjects != spec.ClassObjects(k) && !mutant.StatsSlabUnchecked {
			vs = append(vs, violation(spec.RuleRefines, "Stats.Classes[%d] is %+v, not the table's class", k, c))
		}
	}
	return vs
}

// Leaks checks Allocator.Leaks at this quiescent point: exactly the model's
// live objects, each with its address, usable size and class (held objects are
// not live: REFINES), and an allocation site in debug mode only.
func (h *Harness) Leaks() error {
	if h.M.Closed() {
		return nil
	}
	got := h.A.Leaks()
	sort.Slice(got, func(i, j int) bool { return got[i].Addr < got[j].Addr })
	want := h.M.Live()
	type leak struct {
		Addr        uintptr
		Size, Class int
	}
	// Sites: every object's in debug mode; in guard mode every guarded
	// object's (GUARD-FAULT: large ones, and small ones on a guard superblock).
	s := h.A.Snapshot()
	guarded := map[uintptr]bool{}
	for _, st := range s.Superblocks {
		if st.State == impl.SBGuard {
			guarded[st.Addr] = true
		}
	}
	var g, w []leak
	for _, l := range got {
		g = append(g, leak{l.Addr, l.Size, l.Class})
		site := h.debug || s.Guard.Enabled && (l.Class == spec.Large || guarded[l.Addr])
		if (l.Site != "") != site && !(mutant.LeaksSiteExtra && l.Site != "") {
			return violation(spec.RuleRefines, "Leaks: object %#x has site %q, debug mode %v, guard mode %v", l.Addr, l.Site, h.debug, s.Guard.Enabled)
		}
	}
	for _, o := range want {
		w = append(w, leak{o.Addr, o.Usable, o.Class})
	}
	if d := cmp.Diff(w, g); d != "" {
		return violation(spec.RuleRefines, "Leaks lists other objects than the live ones (-model +Leaks):\n%s", d)
	}
	return nil
}

// FreeTail frees, on cache id, an address at the far edge of the live object
// at a where no object starts. For a small object: the tail of its superblock,
// the first byte past its last object (ClassObjects(k)*ClassSize(k), when that
// is inside the superblock; else nothing is freed), or with last, the last
// object's last byte. For a large object: the first byte past its pages, or
// with last, its last byte. ExpectFree says ErrInvalidPointer for each
// (FREE-INVALID), and free checks it.
func (h *Harness) FreeTail(id int, a uintptr, last bool) error {
	o, ok := h.M.LiveAt(a)
	if !ok {
		return fmt.Errorf("harness: %#x is not live", a)
	}
	end := o.Usable // large: past its pages
	if o.Class != spec.Large {
		sb := int((a - h.M.Base()) % spec.SuperblockSize)
		end = spec.ClassObjects(o.Class)*spec.ClassSize(o.Class) - sb
		if !last && sb+end >= spec.SuperblockSize {
			return nil // the objects fill the superblock: no tail
		}
	}
	if last && !mutant.FreeTailPast {
		end--
	}
	if freeTailHook != nil {
		freeTailHook(a, end)
	}
	return h.FreeOffset(id, h.live[a], end)
}

// freeTailHook, if set (by a test), sees each address FreeTail frees: the
// object's start and the offset from it.
var freeTailHook func(a uintptr, delta int)

// FreeOffset frees, on cache id, the byte delta bytes from the start of
// anchor (an object of the Allocator, live or freed), if that is inside the
// reservation, and checks the outcome (model, ExpectFree).
func (h *Harness) FreeOffset(id int, anchor []byte, delta int) error {
	p := int(addr(anchor)-h.M.Base()) + delta
	if p < 0 || p >= int(h.M.Size()) {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(anchor)), delta)), 1)
	if _, ok := h.live[addr(b)]; ok {
		return h.Free(id, addr(b))
	}
	if _, err := h.free(id, b); err != nil {
		return err
	}
	return h.step(nil)
}

// CheckReallocOOM (OOM-REAL) judges an out-of-memory answer to a Realloc of
// the live object at old, of capacity usable, to n bytes: a large object that
// stays large grows in place into the free superblocks right after it, so
// none of the pool's runs may start there long enough for it (what the failed
// move gave up first, a cache's empty superblocks or the quarantine, may be
// those superblocks: impl.Cache.realloc looks again in place).
func CheckReallocOOM(s *impl.Snapshot, old uintptr, usable, n int) *Violation {
	if mutant.OOMGrowUnchecked || usable <= spec.MaxSmall || n <= spec.MaxSmall || n > spec.MaxAlloc || uintptr(n) > s.Size || old-s.Base >= s.Size {
		return nil
	}
	have := oracle.LargeSpan(usable)
	end, need := int((old-s.Base)/spec.SuperblockSize)+have, oracle.LargeSpan(n)-have
	for _, r := range s.FreeRuns {
		if r.Start == end && r.N >= need {
			return violation(spec.RuleOOMReal, "Realloc(%#x, %d) of a large object of %d superblocks ran out of memory with %d free superblocks right after it, %d needed to grow in place",
				old, n, have, r.N, need)
		}
	}
	return nil
}
