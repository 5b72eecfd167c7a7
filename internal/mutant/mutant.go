// Package mutant holds the switches of the injected bugs that cmd/mutants runs
// the suite against, to prove that the tests can fail. In every normal build the
// switches are false constants (off.go), so the code they guard is compiled
// out: zero cost. Under the build tag refalloc_mutants they are variables, and
// the one named by the environment variable REFALLOC_MUTANT is true (on.go): one
// test binary serves every mutant.
//
// To add a mutant for a new bug class: add it to All, a switch to on.go and
// off.go, guard the bug where it would live with `if mutant.X { ... }`, and run
// `go run ./cmd/mutants -only <name>`; while it survives, strengthen the tests
// (a new invariant, a machine action, a unit test naming the rule).
package mutant

// A Mutant is one injected bug.
type Mutant struct {
	Name   string // the value of REFALLOC_MUTANT that turns it on
	Rule   string // the rule of spec/SPEC.md it breaks
	Method string // the public method or option whose behaviour it changes
	Bug    string // what it does
}

// Env is the environment variable that selects the mutant in a
// refalloc_mutants build.
const Env = "REFALLOC_MUTANT"

// All lists the mutants in the order cmd/mutants runs them.
var All = []Mutant{
	{"capacitycredit", "STATS-LEAD", "Cache.Alloc", "refill credits the group's capacity instead of the objects it moved"},
	{"noflushdebit", "STATS-EXACT", "Cache.Flush", "Flush gives held objects back without debiting Allocs"},
	{"counterwrap", "STATS-LEAD", "Allocator.Stats", "a cache's Allocs counter is kept in 16 bits and wraps"},
	{"stalesbcache", "CACHE-COHERENT", "Cache.Free", "a remote free ignores the generation tag of its entry"},
	{"staleowner", "CACHE-COHERENT", "Cache.Free", "an owner keeps its own entry when it releases a superblock"},
	{"lostremote", "CONSERVE", "Cache.Free", "one remote free in 64 is dropped"},
	{"remoteintolocal", "CONSERVE", "Cache.Free", "a remote free is applied as if the freeing cache owned the superblock"},
	{"nodoublefreecheck", "FREE-DOUBLE", "Cache.Free", "the owner's double-free check on the free fast path is skipped"},
	{"nozero", "ZEROED", "Cache.Alloc", "a reused object is not zeroed"},
	{"genwrap", "CACHE-COHERENT", "Cache.Free", "the generation wraps without retiring the remote set"},
	{"adoptstale", "CACHE-COHERENT", "Cache.Free", "a free that adopts an orphan acts on the header it read before adopting"},
	{"poisonbeforetag", "DEBUG-POISON", "Options.Debug", "a remote free in debug mode poisons the object before its tagged CAS"},
	{"oomnoflush", "OOM-REAL", "Cache.Alloc", "a small refill gives up without giving back what the cache holds"},
	{"largeoomnoflush", "OOM-REAL", "Cache.Alloc", "a large allocation gives up without giving back what the cache holds"},
	{"frontnotoken", "FRONT-EXCLUSIVE", "Allocator.Alloc", "the front's fast path uses a P's cache whose token another call holds"},
	{"tokenleak", "FRONT-EXCLUSIVE", "Allocator.Free", "a free through the front that fails keeps its P cache's token"},
	{"flushnowait", "FRONT-EXCLUSIVE", "Allocator.Flush", "Allocator.Flush takes the per-P caches without waiting out the fast paths in flight"},
}
