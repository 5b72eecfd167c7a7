// Package mutant holds the switches of the injected bugs the mutation runner
// (cmd/mutants) builds impl with, one build tag each. In every normal build they
// are false constants, so the code they guard is compiled out: zero cost.
//
// To add a mutant for a new bug class: add a pair of files here (tag on and off),
// guard the bug in impl with `if mutant.X { ... }`, add it to cmd/mutants, and
// strengthen the tests until the runner reports it killed.
//
//   - refalloc_mutant_capacitycredit: refill credits the group's capacity instead of the objects it moved (the published over-count of STATS-LEAD).
//   - refalloc_mutant_counterwrap: the Allocs counter of a cache is kept in 16 bits and wraps (STATS-LEAD).
//   - refalloc_mutant_lostremote: one remote free in 64 is dropped (CONSERVE, REFINES).
//   - refalloc_mutant_nodoublefreecheck: the owner's double-free check on the free fast path is skipped (FREE-DOUBLE).
//   - refalloc_mutant_noflushdebit: Flush gives held objects back without debiting Allocs (STATS-LEAD, STATS-EXACT).
//   - refalloc_mutant_nozero: a reused object is not zeroed (ZEROED).
//   - refalloc_mutant_remoteintolocal: a remote free is put into the freeing cache as if it owned the superblock (ownership, CONSERVE).
//   - refalloc_mutant_staleowner: an owner does not invalidate its own entry when it releases a superblock, so "owned by me" survives the change of owner (CACHE-COHERENT).
//   - refalloc_mutant_stalesbcache: a remote free ignores the generation tag, so a superblock-cache entry survives the reuse of its superblock (CACHE-COHERENT).
package mutant
