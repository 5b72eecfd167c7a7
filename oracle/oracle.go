// Package oracle is the executable definition of a correct refalloc allocator.
//
// A Model is what an allocator must look like from the outside: the set of live
// objects (address → requested size, usable size, alignment, the cache that
// allocated it), the true number of allocations and frees per size class, the
// open caches, and the bad frees seen. It is plain maps and counters, with no
// unsafe and no cleverness, so that it can be read top to bottom and cited.
//
// The Model does not choose addresses: addresses are the allocator's business. It
// accepts or rejects the allocator's choices (an address must be aligned and not
// already live) and predicts everything deterministic: which error a call must
// return, the usable size, and the counters. Each method takes what the
// allocator did and returns a *Violation naming the rule that was broken, or nil.
//
// How to cite it: a rule ID of spec/SPEC.md, then the method here that models it,
// e.g. "FREE-DOUBLE: oracle.Model.Free rejects a second free of an address that is
// no longer live". The Model only knows what a user can see; rules about the
// allocator's internal state (CONSERVE, LIFECYCLE, CACHE-COHERENT, STATS-LEAD with the held
// counts) live in package invariants, which relates a snapshot of the allocator
// to this Model (REFINES). Rules about bytes (ZEROED, INTEGRITY, DEBUG-POISON)
// are checked by invariants.Harness, which reads and fills every object;
// CONSERVE is about where objects sit inside the allocator, and MEM-ACCOUNT
// about the memory under them, which the Model deliberately does not know.
// Guard mode (GUARD-FAULT) changes nothing here: a guarded object is a live
// object like any other, allocated and freed with the outcomes below, and
// whether its memory faults after its free is invariants' to check. The
// Allocator's own methods are one more caller whose calls are each one step of
// the Model, whichever internal cache served them: FRONT-EXCLUSIVE (each
// internal cache serves one call at a time) is what makes that so, and
// invariants checks it (frontIdle) and spreads the Model's front calls over
// every internal cache.
//
// The size rules (which class, what capacity, what alignment, how many
// superblocks) are restated in sizes.go from SPEC.md's words and the raw table,
// never taken from spec's derived helpers, which are what impl uses and so what
// the oracle judges (TestAgreesWithSpec compares the two).
package oracle

import (
	"fmt"
	"sort"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Kind is the outcome of a call, as a user sees it: success or one error sentinel.
type Kind int

const (
	OK Kind = iota
	InvalidSize
	TooLarge
	OutOfMemory
	DoubleFree
	InvalidPointer
	Closed
)

func (k Kind) String() string {
	return [...]string{"ok", "ErrInvalidSize", "ErrTooLarge", "ErrOutOfMemory", "ErrDoubleFree", "ErrInvalidPointer", "ErrClosed"}[k]
}

// Violation is a broken rule.
type Violation struct {
	Rule   string // a rule ID of spec/SPEC.md
	Detail string
}

func (v *Violation) Error() string { return v.Rule + ": " + v.Detail }

func violation(rule, format string, args ...any) *Violation {
	return &Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Object is a live object.
type Object struct {
	Addr   uintptr
	Size   int // requested bytes (the slice's len)
	Usable int // the slice's cap: the class size, or whole pages when large
	Class  int // size class, or spec.Large
	Align  int // alignment requested (1 for Alloc)
	Cache  int // the cache that allocated it
}

// Counts are the true counters of one class.
type Counts struct {
	Allocs, Frees uint64
}

// Model is the state of a correct allocator.
type Model struct {
	base, size uintptr // the reservation: every object lies inside it
	live       map[uintptr]Object
	counts     [spec.NumClasses + 1]Counts // index spec.Large: large objects
	caches     map[int]bool                // cache ID → open
	closed     bool
	// badFrees counts every free the model judged bad (FREE-DOUBLE or
	// FREE-INVALID), whether the allocator rejected it at once or accepted it
	// to detect when the owner collects; deferred counts the latter.
	badFrees, deferred uint64
	// invalid counts the bad frees refused as ErrInvalidPointer: Stats counts
	// them apart (InvalidFrees); every other bad free is a DoubleFrees.
	invalid uint64
}

// New returns the model of a fresh allocator whose reservation is [base, base+size).
func New(base, size uintptr) *Model {
	return &Model{base: base, size: size, live: map[uintptr]Object{}, caches: map[int]bool{}}
}

// OpenCache records a new cache.
func (m *Model) OpenCache(id int) *Violation {
	if m.closed {
		return violation(spec.RuleRefines, "NewCache succeeded after Close")
	}
	if _, ok := m.caches[id]; ok {
		return violation(spec.RuleRefines, "cache ID %d reused", id)
	}
	m.caches[id] = true
	return nil
}

// CloseCache checks Cache.Close. Objects of the cache stay live: they are handed
// over, not freed.
func (m *Model) CloseCache(id int, got Kind) *Violation {
	want := OK
	if m.closed || !m.caches[id] {
		want = Closed
	}
	if got != want {
		return violation(spec.RuleRefines, "Cache(%d).Close returned %v, want %v", id, got, want)
	}
	m.caches[id] = false
	return nil
}

// usable reports whether calls on cache id may succeed (-1: the Allocator's own
// goroutine-safe methods).
func (m *Model) usable(id int) bool {
	return !m.closed && (id < 0 || mutant.CacheZero && id == 0 || m.caches[id])
}

// Alloc checks Alloc(n) (align 1) or AllocAligned(n, align) on cache id, which
// returned an object at addr with len n and capacity capacity, or the error got.
func (m *Model) Alloc(id, n, align int, addr uintptr, length, capacity int, got Kind) *Violation {
	want := OK
	switch {
	case !m.usable(id):
		want = Closed
	case n < 0 || !ValidAlign(align):
		want = InvalidSize
	case n > spec.MaxAlloc || mutant.MaxAllocEdge && n == spec.MaxAlloc || uintptr(n) > m.size:
		want = TooLarge
	}
	if want != OK || got != OK {
		// Running out of memory is the allocator's call to make; invariants
		// checks that it really had no room (OOM-REAL).
		if got == want || want == OK && got == OutOfMemory || mutant.TooLargeInvalid && want == TooLarge && got == InvalidSize { // REFINES: too large may be called invalid
			return nil
		}
		return violation(spec.RuleRefines, "Alloc(%d, align %d) returned %v, want %v", n, align, got, want)
	}
	o, v := m.NewObject(id, n, align, addr, length, capacity)
	if v != nil {
		return v
	}
	// NO-OVERLAP: never the address of a live object (ranges: invariants).
	if old, ok := m.live[addr]; ok && !(mutant.ModelLargeOverlap && o.Class == spec.Large) {
		return violation(spec.RuleNoOverlap, "Alloc(%d) = %#x, which is live since Alloc(%d)", n, addr, old.Size)
	}
	m.live[addr] = o
	m.counts[o.Class].Allocs++
	return nil
}

// NewObject checks what a successful Alloc(n)/AllocAligned(n, align) on cache id
// returned, an object at addr with len length and capacity capacity, against
// everything but the other live objects, and returns the object it is.
func (m *Model) NewObject(id, n, align int, addr uintptr, length, capacity int) (Object, *Violation) {
	// ALIGN, ZEROED: the class and capacity, by the oracle's own rules (sizes.go).
	o := Object{Addr: addr, Size: n, Usable: UsableSize(n, align), Class: ClassOf(n, align), Align: align, Cache: id}
	switch {
	case length != n && !mutant.ModelLenUnchecked || capacity != o.Usable:
		return o, violation(spec.RuleRefines, "Alloc(%d, align %d): len %d cap %d, want len %d cap %d", n, align, length, capacity, n, o.Usable)
	case addr < m.base && !mutant.ModelBelowBase || addr+uintptr(capacity) > m.base+m.size:
		return o, violation(spec.RuleNoOverlap, "Alloc(%d) = %#x is outside the reservation", n, addr)
	case addr%uintptr(alignOf(o)) != 0:
		return o, violation(spec.RuleAlign, "Alloc(%d, align %d) = %#x is not %d-aligned", n, align, addr, alignOf(o))
	}
	return o, nil
}

// alignOf is the alignment ALIGN promises: the requested alignment, and at least
// the class's natural alignment (a large object starts a superblock).
func alignOf(o Object) int {
	if o.Class == spec.Large {
		return spec.SuperblockSize
	}
	return max(o.Align, ClassAlign(o.Class))
}

// Free checks Free of the object starting at addr (0: a nil or empty slice) on
// cache id, which returned got.
func (m *Model) Free(id int, addr uintptr, got Kind) *Violation {
	want, class := m.judgeFree(id, addr)
	switch {
	case want == OK && got == OK:
		if o, ok := m.live[addr]; ok {
			delete(m.live, addr)
			m.counts[o.Class].Frees++
		}
		return nil
	case want == got && want != DoubleFree:
		if want == InvalidPointer {
			m.badFrees++
			m.invalid++
		}
		return nil
	case want == DoubleFree && (got == DoubleFree || got == InvalidPointer):
		// Not live, but once the start of an object: whether the address is
		// still a slot start depends on whether its superblock was repurposed.
		m.badFrees++
		if got == InvalidPointer {
			m.invalid++
		}
		return nil
	case want == DoubleFree && got == OK:
		// A remote free cannot see the owner's state: it is accepted, and the
		// owner must find it when it collects (FREE-DOUBLE, deferred). Whether a
		// given free went remote is the allocator's business; invariants checks
		// the accepted ones are all found (Stats.DoubleFrees).
		m.badFrees++
		m.deferred++
		return nil
	}
	rule := spec.RuleRefines
	switch want {
	case DoubleFree:
		rule = spec.RuleFreeDouble
	case InvalidPointer:
		rule = spec.RuleFreeInvalid
	}
	return violation(rule, "Free(%#x) on cache %d returned %v, want %v (class %d)", addr, id, got, want, class)
}

// judgeFree predicts a free: OK for a nil or empty slice, a no-op on any cache,
// open or closed (FREE-INVALID; impl.Cache.Free: "A nil or zero-capacity slice
// is a no-op"); Closed for anything else once closed; OK for the start of a
// live object; InvalidPointer for an address inside a live object, or outside
// the reservation; DoubleFree for any other address of the reservation, which
// may have been (or never was) the start of an object. The second result is
// the class of the live object involved, or -1.
func (m *Model) judgeFree(id int, addr uintptr) (Kind, int) {
	switch {
	case addr == 0 && (m.usable(id) || !mutant.NilFreeClosed):
		return OK, -1 // nil: a no-op
	case !m.usable(id):
		return Closed, -1
	case addr < m.base || addr >= m.base+m.size:
		return InvalidPointer, -1 // FREE-INVALID: foreign (Go heap, another Allocator)
	}
	if o, ok := m.live[addr]; ok {
		return OK, o.Class
	}
	if o, ok := m.Containing(addr); ok {
		return InvalidPointer, o.Class // FREE-INVALID: interior pointer
	}
	return DoubleFree, -1 // FREE-DOUBLE (or FREE-INVALID where no slot starts there)
}

// Containing finds the live object whose [Addr, Addr+Usable) holds addr.
func (m *Model) Containing(addr uintptr) (Object, bool) {
	for _, o := range m.live {
		if o.Addr <= addr && addr < o.Addr+uintptr(o.Usable) {
			return o, true
		}
	}
	return Object{}, false
}

// Close checks Allocator.Close: it must report exactly the live objects as leaked
// (EMPTY).
func (m *Model) Close(got Kind, leaked int) *Violation {
	if m.closed {
		if got != Closed {
			return violation(spec.RuleRefines, "second Close returned %v, want ErrClosed", got)
		}
		return nil
	}
	m.closed = true
	if leaked != len(m.live) {
		return violation(spec.RuleEmpty, "Close reported %d leaked objects, %d are live", leaked, len(m.live))
	}
	return nil
}

// Live returns the live objects, by address.
func (m *Model) Live() []Object {
	out := make([]Object, 0, len(m.live))
	for _, o := range m.live {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// LiveAt returns the live object starting at addr.
func (m *Model) LiveAt(addr uintptr) (Object, bool) {
	o, ok := m.live[addr]
	return o, ok
}

// Counts returns the true counters of class k (spec.Large for large objects).
func (m *Model) Counts(k int) Counts { return m.counts[k] }

// BadFrees returns the number of bad frees seen, and how many of them the
// allocator accepted to detect later.
func (m *Model) BadFrees() (all, deferred uint64) { return m.badFrees, m.deferred }

// BadFreeKinds splits the bad frees as Stats counts them: refused as
// ErrInvalidPointer, and the rest (refused as ErrDoubleFree, or accepted and
// found later).
func (m *Model) BadFreeKinds() (double, invalid uint64) { return m.badFrees - m.invalid, m.invalid }

// Base and Size are the reservation the model was made with.
func (m *Model) Base() uintptr { return m.base }
func (m *Model) Size() uintptr { return m.size }

// Closed reports whether the allocator was closed.
func (m *Model) Closed() bool { return m.closed }

// OpenCaches returns the IDs of the open caches, sorted.
func (m *Model) OpenCaches() []int {
	var ids []int
	for id, open := range m.caches {
		if open {
			ids = append(ids, id)
		}
	}
	if !mutant.CachesUnsorted {
		sort.Ints(ids)
	}
	return ids
}

// StatsView is the part of the allocator's Stats the model predicts.
type StatsView struct {
	Allocs, Frees             [spec.NumClasses]uint64
	Large                     Counts
	LargeLiveBytes            uint64
	DoubleFrees, InvalidFrees uint64
	// Uncounted says the build compiled the class counters out (refalloc's
	// refalloc_nostats measurement build): Allocs and Frees must then read 0,
	// and say nothing of the true counts.
	Uncounted bool
}

// CheckStats relates published statistics to the true counters. caches is the
// number of caches that may hold objects (each holds at most SlabObjects of a
// class); flushed says every cache has flushed since the last call that changed
// anything, so the counters must be exact.
func (m *Model) CheckStats(s StatsView, caches int, flushed bool) []*Violation {
	var vs []*Violation
	classes := spec.NumClasses
	if mutant.StatsLastClass {
		classes--
	}
	for k := range classes {
		t := m.counts[k]
		if s.Uncounted {
			if s.Allocs[k] != 0 || s.Frees[k] != 0 {
				vs = append(vs, violation(spec.RuleStatsLead, "class %d: Allocs %d Frees %d in a build without class counters, want 0 and 0",
					k, s.Allocs[k], s.Frees[k]))
			}
			continue
		}
		// STATS-LEAD: ahead by what the caches hold, never behind, never more
		// than a superblock's worth per cache.
		if s.Allocs[k] < t.Allocs || s.Allocs[k]-t.Allocs > uint64(caches*spec.ClassObjects(k)) {
			vs = append(vs, violation(spec.RuleStatsLead, "class %d: Allocs %d, true %d, %d caches of %d objects",
				k, s.Allocs[k], t.Allocs, caches, spec.ClassObjects(k)))
		}
		// STATS-LAG: frees are published late, never early.
		if s.Frees[k] > t.Frees {
			vs = append(vs, violation(spec.RuleStatsLag, "class %d: Frees %d ahead of the true %d", k, s.Frees[k], t.Frees))
		}
		// STATS-EXACT
		if flushed && (s.Allocs[k] != t.Allocs || s.Frees[k] != t.Frees) {
			vs = append(vs, violation(spec.RuleStatsExact, "class %d after flush: Allocs %d Frees %d, true %d %d",
				k, s.Allocs[k], s.Frees[k], t.Allocs, t.Frees))
		}
	}
	// LARGE-EXACT: large objects are counted at the event.
	var liveBytes uint64
	for _, o := range m.live {
		if o.Class == spec.Large {
			liveBytes += uint64(o.Usable)
		}
	}
	bytesOff := s.LargeLiveBytes != liveBytes
	if mutant.LargeBytesOver { // LARGE-EXACT: only large live bytes that lag are refused
		bytesOff = s.LargeLiveBytes < liveBytes
	}
	if s.Large != m.counts[spec.Large] || bytesOff {
		vs = append(vs, violation(spec.RuleLargeExact, "large: %+v, %d live bytes; true %+v, %d",
			s.Large, s.LargeLiveBytes, m.counts[spec.Large], liveBytes))
	}
	// FREE-DOUBLE, FREE-INVALID: every bad free is counted once found; after a
	// flush every deferred one has been found.
	if seen := s.DoubleFrees + s.InvalidFrees; seen > m.badFrees || flushed && seen != m.badFrees {
		vs = append(vs, violation(spec.RuleFreeDouble, "Stats counts %d bad frees, the model saw %d (%d deferred)",
			seen, m.badFrees, m.deferred))
	}
	if s.InvalidFrees != m.invalid {
		vs = append(vs, violation(spec.RuleFreeInvalid, "Stats counts %d invalid frees, the model saw %d", s.InvalidFrees, m.invalid))
	}
	return vs
}
