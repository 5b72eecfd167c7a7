// Stats: the published counters, summed over caches; readable from any goroutine.

package impl

import (
	"fmt"
	"strings"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// ClassStats are the counters of one small size class.
type ClassStats struct {
	Class       int
	Size        int // usable bytes of an object
	SlabObjects int // objects per superblock
	// Allocs is ahead of the true number of allocations by exactly the objects
	// caches hold (taken from superblocks, not yet handed out): at most
	// min(32, SlabObjects) per cache (STATS-LEAD). An upper bound.
	Allocs uint64
	// Frees is behind the true number of frees by the frees not yet published:
	// fewer than 64 local frees per owned superblock, plus remote frees not yet
	// collected by their owner (STATS-LAG). A lower bound.
	Frees uint64
}

// LargeStats are exact at every instant (LARGE-EXACT).
type LargeStats struct {
	Allocs, Frees uint64
	LiveObjects   uint64
	LiveBytes     uint64 // usable bytes of live large objects
}

// Stats is a snapshot of the published counters. After every cache has flushed,
// Allocs and Frees are exact (STATS-EXACT); Allocs-Frees never under-reports the
// live objects of a class. Close flushes nothing: Stats after Close stay as
// they were at Close, and frees not yet published then (STATS-LAG) are never
// counted, so flush the caches (Cache.Close, Allocator.Flush) before Close for
// final counts.
type Stats struct {
	Classes []ClassStats
	Large   LargeStats
	// DoubleFrees and InvalidFrees count every bad free detected: those returned
	// as errors and those found later, when an owner collected a remote free
	// (FREE-DOUBLE, FREE-INVALID).
	DoubleFrees, InvalidFrees uint64
	// WriteAfterFrees counts the writes after free reported
	// (WriteAfterFreeError): in debug mode, and in guard mode under the
	// Go-heap backend, where quarantined memory is poisoned.
	WriteAfterFrees uint64
	// SuperblockCacheMisses counts frees of small objects that missed the
	// freeing cache's superblock cache and read the header (a stale entry
	// refreshed counts too); 1 - misses/frees is the hit rate. Published in
	// batches of 64 a cache: exact after every cache flushed.
	SuperblockCacheMisses uint64
	// Reserved is the address space reserved. Committed is the memory that may be
	// resident: every superblock used since it was last fresh (an upper bound on
	// what the kernel has committed to the reservation; Trim brings it down to
	// the superblocks in use). InUse is the memory of superblocks in use (small or
	// large); the rest of Committed is empty superblocks the pool keeps for reuse
	// (Options.Retain).
	Reserved, Committed, InUse uint64
	// SmallSuperblocks, LargeSuperblocks and OrphanedSuperblocks count
	// superblocks in use by each kind.
	SmallSuperblocks, LargeSuperblocks, OrphanedSuperblocks int
	// Guard is guard mode's (GUARD-FAULT); all zero when it is off.
	Guard GuardStats
}

// GuardStats are guard mode's counters, exact at every instant (counted under
// the central lock at the event). Reserved is the pool, InUse and
// QuarantinedBytes together.
type GuardStats struct {
	// Allocs counts the small allocations guarded (sampled); every large
	// object is guarded, and counted in Stats.Large. The guarded small
	// allocations and their frees are counted in their class too.
	Allocs uint64
	// LiveObjects and LiveBytes are the live guarded small objects and their
	// usable bytes; Superblocks the superblocks they occupy, one each
	// (counted in InUse and Committed).
	LiveObjects, LiveBytes uint64
	Superblocks            int
	// Quarantined is the number of freed guarded objects (small and large) in
	// quarantine; QuarantinedBytes the address space their superblocks hold,
	// inaccessible and given back to the OS (not in InUse, nor, when guard
	// mode protects memory, in Committed). Released counts the objects that
	// left the quarantine, oldest first, for the pool.
	Quarantined      int
	QuarantinedBytes uint64
	Released         uint64
}

// counters is what a closed cache leaves to the Allocator's totals.
type counters struct {
	allocs, frees   [spec.NumClasses]uint64
	double, invalid uint64
	sbcFills, waf   uint64
}

// Stats returns the published counters. Any goroutine, any time: it reads each
// cache's counters atomically and never blocks a fast path.
func (a *Allocator) Stats() Stats {
	s := Stats{Classes: make([]ClassStats, spec.NumClasses), Reserved: uint64(a.size)}
	for k := range s.Classes {
		s.Classes[k] = ClassStats{Class: k, Size: spec.ClassSize(k), SlabObjects: spec.ClassObjects(k)}
	}
	// STATS-LEAD, STATS-LAG: every cache's frees first, then every cache's
	// allocs. Each published free is of an allocation credited before it,
	// frees only grow, and each cache's allocs are at least its true
	// allocations at every instant: so the frees read are at most the true
	// frees at the instant between the two passes, and the allocs read at
	// least the true allocations then, and Allocs-Frees is at least the
	// live objects of that instant, even while other goroutines allocate
	// and free. Read the other way round (allocs, then frees, of each cache),
	// an allocation credited and freed and published between the two loads
	// had its free counted and not its allocation: Allocs-Frees under the
	// live count, or below zero (wrapped). A cache that retires between
	// the passes (Close) is read once for each counter: its frees from
	// itself, its allocs from the retired totals.
	first, second := a.readFrees, a.readAllocs
	if mutant.StatsAllocsFirst {
		first, second = second, first
	}
	a.regMu.Lock()
	first(&s)
	a.regMu.Unlock()
	yield(YieldStatsRead)
	a.regMu.Lock()
	second(&s)
	s.DoubleFrees, s.InvalidFrees = a.retired.double, a.retired.invalid
	s.SuperblockCacheMisses = a.retired.sbcFills
	s.WriteAfterFrees = a.retired.waf
	for c := range a.caches {
		s.DoubleFrees += c.ev.double.Load()
		s.InvalidFrees += c.ev.invalid.Load()
		s.SuperblockCacheMisses += c.ev.sbcFills.Load()
		s.WriteAfterFrees += c.ev.waf.Load()
	}
	a.regMu.Unlock()
	a.lock()
	a.centralStats(&s)
	a.mu.Unlock()
	return s
}

// centralStats sets what s takes from the central state. Under a.mu.
func (a *Allocator) centralStats(s *Stats) {
	s.Large = a.large
	s.SmallSuperblocks, s.LargeSuperblocks, s.OrphanedSuperblocks = a.counts.small, a.counts.large, a.counts.orphaned
	s.Committed = uint64(a.counts.committed) << spec.SuperblockShift
	s.InUse = uint64(a.counts.small+a.counts.large+a.counts.guard) << spec.SuperblockShift
	s.Guard = a.guardStats()
}

// readFrees sets s's frees of each class: the retired caches' and the open
// caches' published ones. The caller holds a.regMu.
func (a *Allocator) readFrees(s *Stats) {
	for k := range s.Classes {
		s.Classes[k].Frees = a.retired.frees[k]
	}
	for c := range a.caches {
		for k := range s.Classes {
			s.Classes[k].Frees += c.pub[k].frees.Load()
		}
	}
}

// readAllocs is readFrees for the allocations.
func (a *Allocator) readAllocs(s *Stats) {
	for k := range s.Classes {
		s.Classes[k].Allocs = a.retired.allocs[k]
	}
	for c := range a.caches {
		for k := range s.Classes {
			s.Classes[k].Allocs += c.pub[k].allocs.Load()
		}
	}
}

// retire folds a closing cache's counters into the Allocator's totals.
func (a *Allocator) retire(c *Cache) {
	a.regMu.Lock()
	for k := range c.pub {
		a.retired.allocs[k] += c.pub[k].allocs.Load()
		a.retired.frees[k] += c.pub[k].frees.Load()
	}
	a.retired.double += c.ev.double.Load()
	if mutant.RetiredInvalid {
		a.retired.double += c.ev.invalid.Load()
	} else {
		a.retired.invalid += c.ev.invalid.Load()
	}
	a.retired.sbcFills += c.ev.sbcFills.Load()
	a.retired.waf += c.ev.waf.Load()
	delete(a.caches, c)
	a.regMu.Unlock()
}

// String prints the statistics as a table: one row per class with activity
// (Allocs is an upper bound, STATS-LEAD; Frees a lower bound, STATS-LAG; their
// difference never under-reports live objects), then large objects, bad frees
// and memory.
func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%5s %7s %7s %14s %14s %12s\n", "class", "size", "objects", "allocs", "frees", "live<=")
	for _, c := range s.Classes {
		if c.Allocs == 0 && c.Frees == 0 || mutant.StringSkipsOneSided && (c.Allocs == 0 || c.Frees == 0) || mutant.StringNoAllocsSkipped && c.Allocs == 0 {
			continue
		}
		live := c.Allocs - c.Frees
		if mutant.StringLiveAllocs {
			live = c.Allocs
		}
		fmt.Fprintf(&b, "%5d %7d %7d %14d %14d %12d\n", c.Class, c.Size, c.SlabObjects, c.Allocs, c.Frees, live)
	}
	la, lf := s.Large.Allocs, s.Large.Frees
	if mutant.StatsSwapped {
		la, lf = lf, la
	}
	fmt.Fprintf(&b, "large: %d allocs, %d frees, %d live (%d bytes)\n", la, lf, s.Large.LiveObjects, s.Large.LiveBytes)
	fmt.Fprintf(&b, "bad frees: %d double, %d invalid; writes after free: %d\n", s.DoubleFrees, s.InvalidFrees, s.WriteAfterFrees)
	fmt.Fprintf(&b, "memory: %d reserved, %d committed, %d in use; superblocks: %d small (%d orphaned), %d large\n",
		s.Reserved, s.Committed, s.InUse, s.SmallSuperblocks, s.OrphanedSuperblocks, s.LargeSuperblocks)
	if g := s.Guard; g != (GuardStats{}) && !(mutant.StringGuardAllocs && g.Allocs == 0) {
		released := g.Released
		if mutant.StringReleased {
			released = g.Allocs
		}
		fmt.Fprintf(&b, "guard: %d small allocations guarded, %d live (%d bytes, %d superblocks); quarantine: %d objects, %d bytes; %d released\n",
			g.Allocs, g.LiveObjects, g.LiveBytes, g.Superblocks, g.Quarantined, g.QuarantinedBytes, released)
	}
	return b.String()
}
