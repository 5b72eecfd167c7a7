// Package expvarstats publishes an Allocator's statistics through the standard
// library's expvar (at /debug/vars when the program serves http.DefaultServeMux).
//
// It is a package of its own because importing expvar registers an HTTP handler:
// a program that wants the variables imports this; impl does not pay for it.
//
// The variable is a JSON object; its fields, and what the rules of spec/SPEC.md
// say about them:
//
//	classes[]            one entry per size class with activity ([] when none):
//	  class, size          the class and its usable size in bytes
//	  allocs               allocations: an upper bound, ahead of the truth by the
//	                       objects caches hold (STATS-LEAD); exact after flushes
//	  frees                frees: a lower bound, behind by unpublished batches
//	                       (STATS-LAG); exact after flushes (STATS-EXACT)
//	  live_upper_bound     allocs - frees: never below the live objects
//	large_allocs, large_frees, large_live_objects, large_live_bytes
//	                     exact at every instant (LARGE-EXACT)
//	double_frees, invalid_frees
//	                     bad frees detected, at once or when an owner collected
//	                     (FREE-DOUBLE, FREE-INVALID)
//	write_after_frees    writes after free reported: debug mode's, and guard
//	                     mode's under the Go-heap backend (DEBUG-POISON)
//	superblock_cache_misses
//	                     frees that missed the superblock cache (CACHE-COHERENT)
//	reserved_bytes, committed_bytes, in_use_bytes
//	                     address space, memory that may be resident (an upper
//	                     bound), memory of superblocks in use (MEM-ACCOUNT)
package expvarstats

import (
	"expvar"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
)

// Class is one entry of the "classes" field.
type Class struct {
	Class          int    `json:"class"`
	Size           int    `json:"size"`
	Allocs         uint64 `json:"allocs"`
	Frees          uint64 `json:"frees"`
	LiveUpperBound uint64 `json:"live_upper_bound"`
}

// Vars is the published object.
type Vars struct {
	Classes               []Class `json:"classes"`
	LargeAllocs           uint64  `json:"large_allocs"`
	LargeFrees            uint64  `json:"large_frees"`
	LargeLiveObjects      uint64  `json:"large_live_objects"`
	LargeLiveBytes        uint64  `json:"large_live_bytes"`
	DoubleFrees           uint64  `json:"double_frees"`
	InvalidFrees          uint64  `json:"invalid_frees"`
	WriteAfterFrees       uint64  `json:"write_after_frees"`
	SuperblockCacheMisses uint64  `json:"superblock_cache_misses"`
	ReservedBytes         uint64  `json:"reserved_bytes"`
	CommittedBytes        uint64  `json:"committed_bytes"`
	InUseBytes            uint64  `json:"in_use_bytes"`
}

// FromStats converts Stats to the published object.
func FromStats(s impl.Stats) Vars {
	v := Vars{
		LargeAllocs: s.Large.Allocs, LargeFrees: s.Large.Frees,
		LargeLiveObjects: s.Large.LiveObjects, LargeLiveBytes: s.Large.LiveBytes,
		DoubleFrees: s.DoubleFrees, InvalidFrees: s.InvalidFrees, WriteAfterFrees: s.WriteAfterFrees,
		SuperblockCacheMisses: s.SuperblockCacheMisses,
		ReservedBytes:         s.Reserved, CommittedBytes: s.Committed, InUseBytes: s.InUse,
		Classes: []Class{}, // an array, [] with no class active: never null
	}
	if mutant.ExpvarClassesNull { // STATS-EXACT: no class active publishes null
		v.Classes = nil
	}
	if mutant.ExpvarCommittedInUse { // MEM-ACCOUNT: committed_bytes published from InUse
		v.CommittedBytes = s.InUse
	}
	for _, c := range s.Classes {
		if c.Allocs != 0 || c.Frees != 0 {
			v.Classes = append(v.Classes, Class{Class: c.Class, Size: c.Size, Allocs: c.Allocs, Frees: c.Frees, LiveUpperBound: c.Allocs - c.Frees})
		}
	}
	return v
}

// Publish publishes a's statistics as the expvar variable name; every read
// calls a.Stats, which never blocks a fast path. Like expvar.Publish, it panics
// if the name is already taken.
func Publish(name string, a *impl.Allocator) {
	if mutant.ExpvarStale {
		v := FromStats(a.Stats())
		expvar.Publish(name, expvar.Func(func() any { return v }))
		return
	}
	expvar.Publish(name, expvar.Func(func() any { return FromStats(a.Stats()) }))
}
