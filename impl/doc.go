// Package impl is refalloc: a memory allocator for Go programs that keeps payload
// memory off the garbage-collected heap, checked operation by operation against
// the executable model in package oracle (rules: spec/SPEC.md). The design essay
// is at the top of alloc.go.
//
// # Start here
//
//   - New reserves address space and returns an Allocator; Close gives it back.
//   - Allocator.NewCache gives each goroutine its own Cache: Cache.Alloc and
//     Cache.Free are the fast paths. Cache.Close when the goroutine is done.
//   - Allocator.Alloc, AllocAligned, Realloc and Free do the same from any
//     goroutine, through internal caches.
//
// Alloc(n) returns a []byte of len n whose capacity is the size class's usable
// size, zeroed over the whole capacity. Free takes it back from any cache of the
// same Allocator.
//
// # Index
//
// Allocating and freeing: Cache.Alloc, Cache.AllocAligned, Cache.Realloc,
// Cache.Free, Cache.Flush, Cache.Close, and the Allocator methods of the same
// names. Errors are sentinels for errors.Is (ErrInvalidSize, ErrTooLarge,
// ErrOutOfMemory, ErrDoubleFree, ErrInvalidPointer, ErrClosed, ErrLeaked); a bad
// free comes wrapped in a FreeError with the address and class, and never
// changes the allocator's state.
//
// Memory: Options.Reserve (the reservation), Options.Retain (empty memory kept
// before it goes back to the OS), Allocator.Trim (give it all back now),
// Stats.Reserved, Stats.Committed, Stats.InUse.
//
// Statistics: Allocator.Stats and Stats.String; package expvarstats publishes them
// through expvar. Allocs is ahead of the truth by the objects caches hold
// (STATS-LEAD), Frees behind it by unpublished batches (STATS-LAG); both are
// exact after every cache flushed (STATS-EXACT).
//
// Debugging: Options.Debug (poisoned free memory, WriteAfterFreeError with the
// allocation site, reported through Options.OnError), Options.Guard (guard
// mode: a read or write after free faults at the access; Allocator.CatchFaults
// and Allocator.Explain turn the fault into a UseAfterFreeError with the
// stacks that allocated, freed and touched the object; Stats.Guard),
// Allocator.Leaks and CheckLeaks (for tests: t.Cleanup(func() {
// impl.CheckLeaks(t, a) })).
//
// Verification: Allocator.Snapshot is the read-only view of the internal state
// that package invariants checks against the model.
//
// Tuning: Options.SuperblockCacheWays; the build tags refalloc_check (internal
// assertions) and refalloc_nostats (no per-class Allocs and Frees counters:
// ClassCounters).
package impl
