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
	{"publishlate", "STATS-LAG", "Cache.Free", "the free path publishes a superblock's local frees one free late"},
	{"collectnopublish", "STATS-LAG", "Cache.Flush", "collecting a superblock's remote frees does not publish them"},
	{"relistfull", "LIFECYCLE", "Cache.Free", "a superblock that became partial is filed on the full list"},
	{"keepempty", "LIFECYCLE", "Cache.Free", "an owned superblock that became empty is kept, not released"},
	{"nocoalesce", "CONSERVE", "Allocator.Trim", "a freed run is not merged with the run after it"},
	{"skipexactrun", "OOM-REAL", "Cache.Alloc", "a run exactly as long as needed is passed over"},
	{"decommitcount", "MEM-ACCOUNT", "Allocator.Stats", "memory returned to the OS still counts as committed"},
	{"retainignored", "MEM-ACCOUNT", "Options.Retain", "the pool keeps every empty superblock committed, past Retain"},
	{"trimnoop", "MEM-ACCOUNT", "Allocator.Trim", "Trim returns without giving memory back"},
	{"dirtyasfresh", "ZEROED", "Cache.Alloc", "a reused superblock is carved as if it were fresh, so its objects are not zeroed"},
	{"freshfirst", "MEM-ACCOUNT", "Cache.Alloc", "a refill takes the next fresh group of its superblock while groups it handed out before have free objects, faulting in pages a small live set does not need"},
	{"keepfull", "LIFECYCLE", "Cache.Alloc", "a cache keeps its full superblocks when it acquires a new one, so an idle owner holds them, every object freed remotely and pending, for good"},
	{"largenoclear", "ZEROED", "Cache.Alloc", "a large object on reused memory is not cleared"},
	{"largelivebytes", "LARGE-EXACT", "Allocator.Stats", "a large free does not take its bytes off LiveBytes"},
	{"orphancount", "MEM-ACCOUNT", "Allocator.Stats", "adopting an orphan at refill does not take it off OrphanedSuperblocks"},
	{"closemisses", "STATS-EXACT", "Cache.Close", "a flush (and so Close) drops the superblock-cache misses not yet published"},
	{"retiredinvalid", "FREE-INVALID", "Cache.Close", "a closing cache's invalid frees are retired as double frees"},
	{"leaksheld", "EMPTY", "Allocator.Leaks", "Leaks reports the objects caches hold as leaked"},
	{"frontflushskip", "STATS-EXACT", "Allocator.Flush", "Allocator.Flush skips the last of its caches"},
	{"alignignored", "ALIGN", "Cache.AllocAligned", "AllocAligned serves small alignments up to 64 from the size's class, ignoring them"},
	{"debugnoverify", "DEBUG-POISON", "Options.Debug", "an object handed out again in debug mode is not checked for a write after free"},
	{"debugsitewrong", "DEBUG-POISON", "Options.Debug", "a write after free is reported with the site of the new allocation"},
	{"closedalloc", "REFINES", "Cache.Close", "a closed cache still allocates"},
	{"remotetail", "FREE-INVALID", "Cache.Free", "a remote free does not check that the index is below the object count"},
	{"localtail", "FREE-INVALID", "Cache.Free", "the owner's free does not check that the index is below the object count"},
	{"stalepoolnil", "FREE-DOUBLE", "Cache.Free", "a free into a pooled superblock at a slot of its last layout returns nil"},
	{"acquirenoinvalidate", "CACHE-COHERENT", "Cache.Alloc", "a refill that acquires a superblock keeps its 'not mine' entry for it"},
	{"heldnotchecked", "FREE-DOUBLE", "Cache.Free", "the owner's double-free check does not look at its held group"},
	{"pendingnotchecked", "NO-OVERLAP", "Cache.Alloc", "the alloc fast path hands out a held object with a remote free pending on it"},
	{"poisonwronggroup", "INTEGRITY", "Options.Debug", "a flush in debug mode poisons the held objects of the next group (live ones)"},
	{"leakcountlarge", "EMPTY", "Allocator.Close", "Close does not count live large objects as leaked"},
	{"largeinterior", "FREE-INVALID", "Cache.Free", "a pointer inside a large object's first superblock frees it"},
	{"missbatchshort", "STATS-EXACT", "Allocator.Stats", "a batch of 64 superblock-cache misses is published as 63"},
	{"stampsamegen", "CACHE-COHERENT", "Cache.Free", "a release stamps the remote words with the generation that ends, not the next"},
	{"norestamp", "CACHE-COHERENT", "Cache.Free", "a new small period keeps the remote set without restamping it"},
	{"dropforward", "STATS-EXACT", "Cache.Flush", "a cache's drain drops, instead of forwarding, a superblock it no longer owns"},
	{"nodecay", "MEM-ACCOUNT", "Options.Decay", "past Retain the pool returns memory at once, without waiting for Decay"},
	{"reallocnozero", "ZEROED", "Cache.Realloc", "an in-place Realloc of a small object clears only up to n, not to cap"},
	{"reallocshortcopy", "REFINES", "Cache.Realloc", "a moving Realloc copies one byte less than it keeps"},
	{"reallocstaleself", "FREE-DOUBLE", "Cache.Realloc", "a Realloc of a freed slice that gets its own address back returns it"},
	{"largegrowdirty", "ZEROED", "Cache.Realloc", "a large object growing in place does not clear the superblocks it takes"},
	{"largeshrinkkeep", "MEM-ACCOUNT", "Cache.Realloc", "a large object shrinking in place keeps its superblocks past n's"},
	{"largegrowtaken", "NO-OVERLAP", "Cache.Realloc", "a large object grows in place over a run that does not begin right after it"},
	{"guardnoprotect", "GUARD-FAULT", "Options.Guard", "a freed guarded object is quarantined without being made inaccessible"},
	{"quarantineunbounded", "GUARD-FAULT", "Options.Guard", "the quarantine releases nothing when its bounds are exceeded"},
	{"frontnotoken", "FRONT-EXCLUSIVE", "Allocator.Alloc", "the front's fast path uses a P's cache whose token another call holds"},
	{"tokenleak", "FRONT-EXCLUSIVE", "Allocator.Free", "a free through the front that fails keeps its P cache's token"},
	{"flushnowait", "FRONT-EXCLUSIVE", "Allocator.Flush", "Allocator.Flush takes the per-P caches without waiting out the fast paths in flight"},
	{"pinnedrefillheld", "CONSERVE", "Allocator.Alloc", "the front's pinned Alloc refills over a held group whose lowest object has a remote free pending (the group's objects are lost)"},
	{"fillpinnedrs", "CACHE-COHERENT", "Allocator.Free", "the front's pinned entry fill does not read the remote set again after the header"},
	{"quarantinedpastend", "GUARD-FAULT", "Cache.Realloc", "a moving Realloc in guard mode skips its copy when the byte past its source is quarantined"},
	{"frontnonotify", "LIFECYCLE", "Allocator.Free", "a remote free on a front cache does not notify the owner"},
	{"pinnedsampled", "GUARD-FAULT", "Allocator.Alloc", "the front's pinned refill runs while guard mode samples: the sampled allocation is served unguarded, and sampling stops"},
	{"largegrowexact", "ZEROED", "Cache.Realloc", "a large object does not grow in place into a free run exactly as long as it needs"},
	{"orphanfreedfull", "LIFECYCLE", "Cache.Alloc", "a refill orphans a full superblock its owner frees into, which the owner's next free must adopt back"},
	{"noreroute", "LIFECYCLE", "Cache.Free", "a notify that pushed a superblock onto a stack whose cache gave it up meanwhile (orphanFull) leaves it there: the idle owner never forwards it"},
	{"ways16", "CACHE-COHERENT", "Options.SuperblockCacheWays", "the superblock cache's default is 16 ways, not 32"},
	{"dirtyscanshort", "MEM-ACCOUNT", "Cache.Alloc", "a refill's scan of the groups handed out before stops one short, skipping the group just taken: a fresh group's pages are touched instead"},
	{"staleownerfreed", "LIFECYCLE", "Cache.Alloc", "a superblock taken from the pool or adopted at refill keeps the ownerFreed of its last owner: full, it is never orphaned"},
	{"copyquarantinedsrc", "GUARD-FAULT", "Cache.Realloc", "a moving Realloc in guard mode checks only its new object for quarantine: a free of its source racing it makes the copy fault"},
	{"orphanfullentry", "CACHE-COHERENT", "Cache.Free", "orphanFull keeps the owner's \"mine\" entry of a superblock it orphans: the old owner's next free into it is local, into an orphan"},
	{"refillnodrain", "LIFECYCLE", "Cache.Alloc", "a refill that orphaned its full superblocks does not drain its stack again: one announced there before the orphaning stays"},
	{"nogrowthpurge", "MEM-ACCOUNT", "Options.Decay", "a take that commits fresh superblocks never returns pooled ones (no purge on growth)"},
	{"dirtytopshort", "MEM-ACCOUNT", "Allocator.Trim", "the pool's walks stop one superblock short of the highest one ever used"},
	{"smallnogrowthpurge", "MEM-ACCOUNT", "Cache.Alloc", "a small refill that commits a fresh superblock returns no pooled one (acquireSmall skips purgeOnGrowth)"},
	{"growthslackcommitted", "MEM-ACCOUNT", "Cache.Alloc", "the growth purge's slack is 1/32 of Committed, the pool's own superblocks included, not of the memory in use"},
	{"growthnoretain", "MEM-ACCOUNT", "Options.Retain", "the growth purge's slack ignores Retain/8: a fresh take returns pooled memory below an eighth of Retain"},
	{"purgelosesdecay", "MEM-ACCOUNT", "Options.Decay", "a growth purge that stops short leaves decayNext unknown, so the next release walks the pool again"},
	{"reallocnoreserve", "FREE-DOUBLE", "Allocator.publishLarge", "a moving Realloc's large new object is not reserved: a stale free of its address racing the Realloc frees it, the address is handed out again, and the Realloc copies into (or frees) the new owner's object"},
	{"reservegap", "FREE-DOUBLE", "Cache.Realloc", "the clean-up free of a refused Realloc's reserved new object unreserves it, then frees it with a plain free: a stale free of its address between is accepted, the address is handed out again, and the clean-up frees the new owner's object"},
	{"guardednoreserve", "FREE-DOUBLE", "Cache.allocGuarded", "a moving Realloc's guarded small new object is not reserved: a stale free quarantines it, the quarantine releases it, the address is handed out again, and copyOut copies into the new owner's object"},
	{"guardflushleft", "GUARD-FAULT", "Cache.flush", "a flush's objects given back still count towards the next sampled allocation: after a Flush the samples come early"},
	{"quarantineexact", "GUARD-FAULT", "Allocator.quarantine", "an object of exactly QuarantineBytes is not quarantined"},
	{"pendingbeforetag", "CACHE-COHERENT", "Cache.remoteFree", "the pending bit is tested before the tag: a stale entry's free of a live object, whose bit is pending for another object in the next layout, is refused as a double free"},
	{"adoptnotownerfreed", "LIFECYCLE", "Allocator.adopt", "adoption by a free does not mark the superblock owner-freed: a refused free that adopts a full orphan lets the adopter orphan it straight back"},
	{"pinnedpublishlate", "STATS-LAG", "Allocator.Free", "the front's pinned free stays local on the free that reaches the publish limit: a full superblock's first free leaves it filed full"},
	{"reallocpanicleak", "CONSERVE", "Cache.Realloc", "a moving Realloc does not free its new object when it does not return it (an error after the allocation, or an OnError panic in its free of b)"},
	{"closemarkshort", "LIFECYCLE", "Allocator.Close", "Close marks every remote word pending but a group's last object, so a fast-path free or allocation of that slot after Close goes through"},
	{"resizenowait", "INTEGRITY", "Cache.Realloc", "a free or a Realloc of a large object that a Realloc resized in place does not wait for its zeroing outside the central lock: the run (or its tail) is pooled, handed out again, and the zeroing clears the new owner's object"},
	{"releasenoreroute", "LIFECYCLE", "Cache.Flush", "an owner that releases a superblock announced on its own stack after its last drain does not forward the stack: the superblock stays marked notified, its next period's remote frees are never announced, and once its next owner orphans it full nobody collects it"},
	{"remoteskipsclosed", "FREE-DOUBLE", "Cache.Free", "a remote free after Allocator.Close asks only whether its cache is closed: the object reads pending, and it is refused as a double free instead of ErrClosed"},
	{"closewaysshort", "CACHE-COHERENT", "Cache.Close", "Close clears the superblock cache's ways below wayMask only: with one way its only entry stays mine, and a free through the closed cache frees locally into an orphan"},
	{"refillnoretake", "MEM-ACCOUNT", "Cache.Alloc", "a refill takes no second look at its current superblock after draining its stack: a remote free just collected into it is passed over, and the refill acquires a fresh superblock"},
	{"decaynowgt", "MEM-ACCOUNT", "Options.Decay", "the pool decays only once the clock is past decayNext: a superblock pooled for exactly Decay is kept one more release"},
	{"timernotcleared", "MEM-ACCOUNT", "Options.Decay", "the decay timer is not cleared when it fires, so it is never armed again: what is pooled after stays committed until a release"},
	{"poolrunmarkall", "FREE-INVALID", "Allocator.Free", "a freed large run marks all its superblocks as the head's class, so a free of its tail superblocks' starts is judged as of a pooled head"},
	{"resizecapcheck", "ZEROED", "Cache.Realloc", "an in-place large resize does not check that b's capacity is the object's: a stale slice of an older, smaller object at the address resizes the larger live one"},
	{"reservedguardall", "FREE-DOUBLE", "Cache.Realloc", "in guard mode every moving Realloc's small new object counts as reserved, sampled or not: the clean-up of an unsampled one goes to freeReserved"},
	{"resizeforeign", "FREE-INVALID", "Cache.Realloc", "a Realloc to a large size of a slice outside the reservation is looked up past the header table"},
	{"resizabletail", "FREE-INVALID", "Cache.Realloc", "a small in-place Realloc accepts the slot one past a superblock's last object"},
	{"heapdecommitnoclear", "ZEROED", "Allocator.Trim", "the Go-heap backend's decommit does not clear, though decommitted memory counts as fresh and is not zeroed again"},
	{"pinnedorphanremote", "FREE-DOUBLE", "Allocator.Free", "the front's pinned free frees remotely into an orphan through a stale entry instead of leaving it to adoption, and not into an owned superblock"},
	{"tokenoutsideignored", "FRONT-EXCLUSIVE", "Allocator.Alloc", "the pinned fast path takes a per-P cache whose token Flush holds (tokenOutside), as if it were free"},
	{"sampleratebound", "GUARD-FAULT", "Options.Guard", "New refuses a SampleRate of exactly the maximum, 1<<30"},
	{"stringskipsonesided", "STATS-LEAD", "Stats.String", "Stats.String leaves out a class with allocations and no frees, or frees and no allocations"},
	{"verifyreleasedshort", "DEBUG-POISON", "Options.Debug", "a released superblock's poison is verified up to zeroedFrom-1: a write after free into its last object used is not reported"},
	{"poisonreporteach", "DEBUG-POISON", "Options.Debug", "a write after free is reported once per bad byte, not once per object"},
	{"explainpastend", "GUARD-FAULT", "Allocator.Explain", "a fault exactly one past a guarded object's end is described as inside it"},
	{"evictnotpooled", "MEM-ACCOUNT", "Options.Guard", "a superblock released from the quarantine is not counted as dirty in the pool: Trim and decay never return it"},
	{"flushpartialonly", "STATS-EXACT", "Cache.Flush", "Flush walks only the partial list collecting remote frees: a full superblock announced on the orphans' stack while adopted keeps its pending free past the flush"},
}
