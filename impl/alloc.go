// refalloc's design.
//
// Memory. One address-space reservation is taken from the OS at New (an anonymous
// mmap with MAP_NORESERVE, so nothing is committed until it is touched; in -race
// builds a Go-heap arena so the race detector sees the payload). The reservation is
// cut into 64 KiB superblocks aligned to their size, so the superblock of an
// address is (addr-base)>>16 and an object of a power-of-two class is naturally
// aligned. A superblock is either free in the central pool, carved into objects of
// one size class, or part of a large object (a run of whole superblocks whose
// usable size is rounded to pages). All metadata lives on the Go heap, out of band:
// the allocator never writes into a user's object, so a buffer overflow cannot
// corrupt it, and the race detector sees every metadata access.
//
// Ownership. A Cache (one per goroutine) owns the superblocks it allocates from and
// touches their private state (a free bitmap and a few counters) with plain loads
// and stores. Another cache that frees an object of such a superblock (a remote
// free) sets a bit in the superblock's remote set with a CAS and pushes the
// superblock onto its owner's notification stack (lock-free, push-one/pop-all); the
// owner collects on its slow path. A remote free always returns the object to its
// owner, never to the freeing cache. Closing a cache orphans its superblocks; a
// cache that frees into an orphan adopts it first (so a goroutine that takes
// over another's objects takes over their superblocks), and a refill that
// needs room adopts orphans before it takes fresh superblocks. Full
// superblocks are orphaned too, as their owner acquires the next superblock
// of their class (LIFECYCLE, orphanFull): an owner that goes idle would keep
// them otherwise, each object freed remotely and pending, since only an owner
// collects. Larson's main goroutine allocates the initial objects and never
// runs again: its full superblocks were 4.6 MB of the 15 MB peak RSS for
// 5.4 MB live. A full superblock has nothing to hand out; giving it up costs
// nothing under the lock the acquisition takes. One its owner has freed into
// stays (ownerFreed): it will be partial again, and adopting it back would
// cost the owner the lock. The producer of a producer-consumer pair
// (xmalloc-test) gives its superblocks to the consumer this way, whose frees
// then are local: 1.3x to 1.7x the throughput, measured side by side.
//
// Allocation. For each class a cache holds at most one group of up to 32 objects
// taken from its current superblock (the "held" objects). Alloc pops the lowest
// held object: a few plain loads and stores, one load of the group's remote word
// (to refuse to hand out an object that a stale pointer has already been freed
// remotely, see FREE-DOUBLE), and the zeroing when the memory is not known fresh.
// Refill takes the next group of free objects from the current superblock, then
// collected remote frees, then a partially free superblock, then an orphan, then
// the central pool, under one mutex. Within a superblock it takes groups that
// were handed out before while one has a free object, and only then a fresh
// one (nextGroup): Committed counts the superblock, the kernel only the
// pages touched, and a cursor sweeping the superblock round-robin faulted in
// all 64 KiB of a class whose live set is a few KiB (MEM-ACCOUNT).
//
// Which superblock a refill takes (LIFECYCLE, partialMin; issue 12). A refill
// moves one group into the held group, so its cost is paid per group, and a
// group yields what is free in it. In larson's steady state (a live set packed
// into its superblocks, freed at random) that was 3.6 objects a refill on
// 8-1000 and 1.1 on a fixed 512 B, and with every superblock holding a free
// object taken as current, most refills also switched superblock (publish,
// relist, drain, list moves): 930 instructions an op on the fixed size, where
// modernc.org/memory's free lists take 300 (callgrind, one Cache). So an owned
// superblock is partial only once a sixteenth of its objects are free; with
// fewer it waits on the full list, and a refill takes it only when no partial
// superblock, no orphan with as many free, and no superblock of the pool can
// serve (OOM-REAL: then an orphan with any free object, then one of its own).
// What waits is under a sixteenth of a class's objects, about half that on
// average. Measured on one Cache (5 interleaved runs, medians, ns an op):
// larson 8-1000 68.7 to 64.3, larson 100-200 40.5 to 39.2, a fixed 512 B
// 93.7 to 45.8, in 91, 24 and 42 superblocks against 90, 23 and 41; 423 to 379
// instructions an op on larson 8-1000, 928 to 466 on 512 B. Orders tried and
// left: the group with the most free objects of the next few (more scanning,
// no fewer refills); superblocks with any free object taken before the pool,
// only the threshold deciding the order (memory-neutral, half the gain).
// What it costs in memory, in allocbench's memory pass at T=2 (successors,
// caches that come and go): larson 8-1000 through the Allocator committed
// 10.2 MiB after the frees against 8.9 before, peak RSS over peak live 1.83
// against 1.57; larson 100-200 2.8 MiB either way; fill-mixed 1.06 either way.
// A share of a 32nd instead of a 16th was within the noise of that pass
// (larson 8-1000 on Caches 2.05 and 1.94 against 2.06 and 2.11).
//
// Where larson's memory goes (issue 12's 1.5x target; a snapshot 2.5 s into
// larson 8-1000 at T=2, successors every 500,000 operations). On Caches, 189
// committed superblocks (11.8 MiB) for 5.0 MiB live: each worker's 28 current
// superblocks, one a class, 46% live; its partial ones 62-70% live, its full
// ones 98%; 35 empty ones in the pool, which keeps them committed up to
// Retain; and the 28 current superblocks of the idle main goroutine, with no
// live object at all: every object freed remotely, pending, and only an owner
// collects (its full superblocks were orphaned at its acquisitions, but it
// never acquires again). Through the Allocator, whose per-P caches are never
// idle: 156 (9.75 MiB) for 5.1 MiB, of which 56 current, 45 partial, 23 full,
// 32 pooled. So at this live set the floor is a current superblock a class a
// cache: 28 classes x 64 KiB x 2 caches is 3.5 MiB, half used on average.
// Larson 100-200 (7 classes) commits 52 superblocks (3.25 MiB) for 1.5 MiB;
// the rest of the 3.1x to 3.9x peak RSS over live that the runner reports on
// Caches is the Go heap: a Cache is 12.7 KiB of Go memory (128
// superblock-cache entries of 64 bytes, 64 class slots), garbage at its
// Close, and hundreds of successors in 3 s fill the Go heap's 4 MiB before
// its first collection.
//
// Mispredicted branches (issue 12): under random sizes and random frees the
// free's test of whether the freed object is in the held group (0.65 a free),
// the exit of the zeroing loop (0.6 an allocation) and the refill's branch
// are coin tosses; the first is now a select (CMOV), the second two
// overlapping runs of stores, and allocSlow takes the current superblock's
// next group first, without refill's frames. With the superblock cache at 128
// ways, the threshold and these, larson 8-1000 on one Cache went from 14.5 to
// 23.0 Mops/s (allocbench, 5 interleaved runs: 1.13x sync.Pool, 0.89x
// modernc.org/memory, 2.6x the Go heap) and larson 100-200 from 28.0 to 35.0
// (1.17x sync.Pool, 1.25x modernc); a 64-byte pair 10.7 to 9.5 ns.
//
// Statistics (STATS-LEAD, STATS-LAG, STATS-EXACT). The fast paths store no
// counter. A refill that moves N objects into the held group credits exactly N
// allocations; Flush debits the objects it gives back. A local free increments the
// superblock's localFreed, which is state the free path needs anyway (it is how
// the owner learns that a superblock became empty); every publishBatch frees, and
// whenever the owner's slow path looks at the superblock, those frees are
// published. So Allocs is ahead of the truth by exactly the held objects (at most
// 32 a class a cache, never more than the class's SlabObjects) and Frees is behind
// it by the unpublished local frees (fewer than publishBatch per superblock) plus
// the remote frees not yet collected; after every cache has flushed both are exact.
// Counters are full-width uint64, one set per cache, summed by Stats.
//
// The free path (CACHE-COHERENT). Free maps an address to its superblock through a
// small direct-mapped cache in each Cache (128 ways by default, indexed by
// superblock number & 127, 64-byte entries) holding what the free needs: the header,
// the class's size, its index magic, the generation, and whether the cache owns the
// superblock. A hit is one indexed load and a compare. The ways grew with the
// live sets measured: 16, then 32 when a cache adopting larson 100-200's idle main
// goroutine's superblocks spread over 17 to 32 of them (40% of its frees missed
// with 16, none with 32), then 128 in issue 12 when larson 8-1000 on one
// goroutine, 28 classes and about 100 superblocks, missed on 46% of its frees
// with 32 ways and 13% with 64; a miss (the header's chunk, its shared line, the
// remote set, a 64-byte fill, then the fast path again) cost about 150
// instructions, counted with callgrind. With 128 ways it hits 99.98% of its
// frees and runs 1.21x (1.20-1.26) the throughput of 32 ways at T=1 (allocbench
// sweep, 3 interleaved runs, within-run ratios); larson 100-200, whose 30
// superblocks fit in 32 ways already, 0.99x (T=1) and 1.03x (T=2); larson
// 8-1000 at T=2, where the remote frees of the successors miss whatever the
// ways, 0.96x (0.89-1.15). The entries cost nothing more than their memory
// (8 KiB a cache; fewer ways only mask the index). Superblocks are reused
// across classes and owners, so an entry can go stale; SPEC.md gives the argument
// why a hit never acts on stale fields: only an owner changes an owned superblock,
// and it invalidates its own entry when it does; every other entry is checked by
// the generation tag carried in each remote word, inside the very CAS that frees.
//
// The goroutine-safe front (FRONT-EXCLUSIVE, front.go). Most Go code cannot hand
// a Cache to every goroutine, so the Allocator's own methods must run at a
// Cache's speed. They run on per-P caches: a call pins its goroutine to its P
// with runtime.procPin (reached through go:linkname, as sync.Pool's own pin;
// the runtime keeps it linkable), which makes the P's cache the caller's
// alone until procUnpin, and runs the Cache's fast path on it with plain loads
// and stores — no atomic read-modify-write, as on a Cache. What never blocks
// runs pinned too: the next group of the current superblock when nothing is
// pending on it, a superblock-cache fill, a remote free's CAS, a local free's
// publication when it does not empty the superblock (larson's superblocks on
// the full list publish every few frees; each was a slow path). The rest of the
// slow path (refill beyond that, the central lock, release, madvise, OnError)
// takes the cache's token with a CAS while pinned, unpins, and gives the token
// back after; a call that finds the token held (its holder was
// descheduled) uses a shard, one of a few caches behind mutexes. Under -race
// the fast path takes the token too, so the detector sees the order the P
// gives. The caches belong to Ps: goroutines that come and go leave nothing
// behind. Allocator.Flush takes every token and stops the world for an
// instant, which cannot happen while a goroutine is pinned. The build tag
// refalloc_portable keeps the shards alone.
//
// Measured before choosing (2-vCPU VM, Go 1.26; ns per alloc+free pair of
// 64 B on one goroutine, interleaved, medians): the shards alone, a TryLock
// and an Unlock per call after hashing the stack address, cost 3.2× a Cache
// pair; a sync.Pool of Caches costs a Get and a Put per call (9 ns, as much
// as the mutex: rejected); the pin costs 2.2 ns per call (procPin and
// procUnpin are two calls, and every register is spilled around them), which
// bounds the front at about +3.7 ns a pair over a Cache's 7.5 ns without the
// benchmark's interface call. The one cheaper way to know where a goroutine
// runs was measured too: an assembly function reading the M from the g in
// TLS costs 1.2 ns a call against 2.0 ns for procPin+procUnpin in the same
// loop; a front keyed by M, whose fast path is go:nosplit with no call
// (so nothing can preempt it), would save at most 0.8 ns a call — still
// about 1.35x a Cache pair — and rests on the runtime's private g layout and
// on no fast-path callee ever growing a prologue. Not built.
//
// Issue 12 made the Cache's pair cheaper (192 instructions a 16-byte pair
// with the benchmark's interface calls, 222 before; callgrind) and the front
// with it (270, 314 before), which leaves the pin a larger share: procPin
// and procUnpin alone take 2.2 ns a call (BenchmarkPin-like loop here), 4.4
// ns a pair, against a Cache pair of 9.0-9.5 ns, so the front cannot come
// below about 1.45x a Cache pair while it pins each call. Measured: 1.41x to
// 1.55x at 16-256 B, threadtest 0.85x (T=1) and larson 8-1000 0.92x (T=1)
// the Cache's throughput (allocbench, 5 interleaved runs).
//
// The central lock spins before it parks (Allocator.lock): a front slow path
// holds its P cache's token while it waits for a.mu, and sync.Mutex parks
// at once when its P has other goroutines to run, so a parked waiter sent
// every goroutine behind it on that P to the shards: on xmalloc-test at T=2
// (four goroutines on two Ps) 29% of the Allocator's frees and 20% of its
// allocations went to the shards, and 0.8% and 0.5% with the spin (counted
// in one run each). Spinning about 2.5 µs first (5 interleaved
// runs, M frees/s): the Allocator at T=2 went from 47-63 to 71-113, the
// Cache at T=1 from 74-84 to 75-159; the rest within the workload's spread.
// xmalloc-test is multimodal here (the same build ranges 60-180 M/s from run
// to run, by how the scheduler pairs producers with consumers), so its
// figures in bench/results are medians of a wide spread. threadtest moved
// by -7% to -17% in the same runs, by code layout alone: it never waits for
// the lock at T=1, and the same code with the spin switched off by a
// variable ran as slowly.
//
// Remote frees stay one tagged CAS each. Batching several pending bits of a
// superblock into one CAS across calls (the freeing cache buffering them)
// would let a free return before its bit is visible, and FREE-DOUBLE forbids
// that: a buffered double free of an object its owner has meanwhile handed
// out again would land on the new, live object and free it; and the owner's
// own free of an object freed remotely a moment before would find no pending
// bit and succeed. So the remote path was made cheaper per free instead: a
// hit on another cache's superblock goes straight to the lock-free core
// (remoteFree) without the miss path's checks, and the front runs it pinned,
// without the token.
//
// Memory back to the OS (MEM-ACCOUNT; issue 12). The pool keeps up to Retain
// bytes of empty superblocks committed for good; what it holds past Retain
// waits Options.Decay (1 s) before madvise returns it, as jemalloc's dirty
// decay and mimalloc's purge delay do, so a program that frees a big buffer
// and allocates it again soon (an Arrow builder, a request loop) does not
// fault its pages in every time. A release walks the pool only once something
// in it can have waited that long (decayNext): walking it on every release
// cost xmalloc-test three quarters of its throughput. Large objects resize in
// place: a shrink gives back the superblocks past the new size, a grow takes
// the free superblocks right after the object. Measured (bench/results): the
// Arrow-like grow cycle (64 B to 80 MB by doubling through Realloc, 50 times)
// spends 0.15x the Go heap's kernel time at 0.38x its peak RSS; Arrow's int64
// builder went from 1.27x to 0.23x GoAllocator's time.
//
// Decay alone let a long-lived live set with churn hold far more than it
// uses: fill-mixed (132 MiB live, objects of 16 B-2 MiB replaced at random)
// frees large objects whose runs no later object fits, and commits fresh
// memory for those while the holes wait out the decay: peak RSS 1.16x peak
// live. So a take that commits fresh memory while the pool holds more than
// 1/32 of what is in use (and more than Retain/8) returns as much, whatever
// its age (purgeOnGrowth, as the Go runtime scavenges as much as its heap
// grows past its goal): fill-mixed 1.06x, same kernel time (3 interleaved
// runs); the grow cycle takes back the memory it freed, commits nothing fresh
// and is unchanged (kernel 0.024 s, 77 MiB). Best fit instead of first fit
// was measured too: 1.157x to 1.137x alone, nothing on top of the purge.
//
// Bad frees (FREE-DOUBLE, FREE-INVALID) are always detected and never change state:
// a free is accepted only at the start of a slot that is live; the owner checks its
// free bitmap, its held group and the pending remote bits; a remote free that
// targets an object which is not live is caught when the owner collects it (or
// before it could hand the object out) and dropped.
//
// Guard mode (GUARD-FAULT, guard.go). Freed memory of guarded objects is made
// inaccessible (mprotect) and given back to the OS, and kept out of reuse in a
// bounded quarantine, oldest released first, so that a read or write after
// free faults at the access. Large objects are runs of whole superblocks
// already; a sampled small allocation gets a superblock of its own, the object
// at its start, so that protecting it protects nothing else. Sampling costs
// the fast paths nothing: a refill cuts the held group short where the next
// sampled allocation is due (a countdown per cache and class), so the
// allocation that finds the group empty, which takes the slow path anyway, is
// the sampled one. Guarded objects live under the central lock, like large
// ones: they are not small, so their frees miss the superblock cache and reach
// freeLarge, which quarantines them.

package impl

import (
	"cmp"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// Options configures an Allocator. The zero value is valid; New rejects the
// values the fields below say are out of range.
type Options struct {
	// Reserve is the size of the address-space reservation in bytes, rounded up to
	// whole superblocks. 0 means 64 GiB (1 GiB under the Go-heap backend, in
	// -race builds or with HeapBackend, where the payload is a Go-heap arena,
	// which the kernel must be able to commit whole: a Reserve it refuses is
	// ErrOutOfMemory). When it is exhausted Alloc returns ErrOutOfMemory; a
	// request larger than the whole reservation is ErrTooLarge. New rejects a
	// negative Reserve or one above 1 TiB (spec.MaxAlloc).
	Reserve int
	// SuperblockCacheWays is the number of entries of each Cache's superblock
	// cache: 1, 8, 16, 32, 64 or 128. 0 means 128 (the entries are there
	// whatever the count: fewer ways only mask the index).
	SuperblockCacheWays int
	// OnError, when set, is called with every bad free detected after the call
	// that made it returned (a remote double free found when the owner collects)
	// and, in debug and guard modes, every write after free. It is called once
	// the call that found it has done its work (a collection, a release, a
	// refill), with no internal lock held, normally on that call's goroutine:
	// it may panic (or t.Fatal) and the allocator stays whole (an allocating
	// call it stops frees the object it would have returned), and it may call
	// the Allocator, though not the Cache whose call it interrupts.
	// Reports wait in one queue, and whichever call ends first delivers them:
	// one found by another goroutine's call may be delivered on this one, and
	// after a panic the reports still queued go to the next call that ends
	// (so a call may panic with a report an earlier call found). OnError may
	// run on several goroutines at once, and, when it calls the Allocator
	// while more reports wait, again inside that call, before it returns: it
	// must not hold a lock of its own across a call to the Allocator.
	OnError func(error)
	// HeapBackend forces the Go-heap backend even outside -race builds.
	HeapBackend bool
	// Debug poisons freed memory and verifies the poison when the memory is
	// handed out again, reporting a write after free (WriteAfterFreeError,
	// through OnError, counted in Stats.WriteAfterFrees) with the allocation
	// site of the object that was freed; it records every allocation site
	// (runtime.Callers) for Leaks. Every call takes the slow paths. When off it
	// costs nothing: the fast paths do not test for it.
	Debug bool
	// Retain is how many bytes of empty superblocks (and freed large runs) the
	// pool keeps committed, ready for reuse, for good (Decay does not return
	// them), in whole superblocks (rounded down: less than 64 KiB keeps none,
	// as Snapshot.Retain shows). 0 means 32 MiB; a negative value keeps none.
	// Whatever Retain and Decay say, Committed does not grow while the pool holds committed memory
	// that does not fit what is asked: a take that commits fresh memory while
	// the pool holds more than 1/32 of the memory in use (and more than
	// Retain/8) returns as much of it at once (MEM-ACCOUNT).
	Retain int
	// Decay is how long what the pool holds past Retain stays committed before
	// it goes back to the OS (madvise): a workload that frees and allocates
	// again within it does not fault its pages in anew every time (as
	// jemalloc's dirty decay and mimalloc's purge delay do). 0 means 1 s; a
	// negative value returns it at once. A timer returns it when nothing else
	// happens (MEM-ACCOUNT).
	Decay time.Duration
	// Guard turns on guard mode (GUARD-FAULT): freed memory of guarded objects
	// (every large object, and small ones sampled at Guard.SampleRate, each on
	// a superblock of its own) is made inaccessible and kept out of reuse in a
	// bounded quarantine, so that a read or write after free faults at the
	// access; Allocator.Explain and CatchFaults turn the fault into a
	// UseAfterFreeError naming the object and the stacks that allocated and
	// freed it. See GuardOptions for what it costs. Off, it costs nothing.
	Guard GuardOptions
}

// publishBatch bounds the unpublished local frees of one superblock (STATS-LAG).
const publishBatch = 64

const maxWays = 128

// chunkShift: headers are allocated 512 at a time, as the pool first reaches them.
const (
	chunkShift = 9
	chunkLen   = 1 << chunkShift
)

type sbChunk [chunkLen]superblock

// Allocator is one reservation and everything carved from it. Its methods are
// safe for concurrent use; a Cache is not.
type Allocator struct {
	// read-only after New, read on every fast path
	base    uintptr
	start   unsafe.Pointer
	size    uintptr // reservation bytes
	closed  atomic.Bool
	ways    int
	wayMask uintptr // ways-1, as in every Cache
	spin    bool    // more than one CPU: a waiter for mu spins first (lock)
	debug   bool
	guard   guard // guard mode's configuration (guard.go)
	opt     Options
	be      backend
	nsb     uint32
	top     []atomic.Pointer[sbChunk]

	// central state, under mu
	mu      sync.Mutex
	runs    []run                        // free superblock runs, sorted by start
	orphans [spec.NumClasses]*superblock // orphaned superblocks by class
	large   LargeStats
	counts  sbCounts
	retain  int         // superblocks the pool keeps committed (Options.Retain)
	decay   int64       // ns past-Retain superblocks stay committed (Options.Decay)
	timer   *time.Timer // returns them when their time is up, nil when none waits
	fired   uint64      // the timer's firings (Snapshot.TimerFired)
	// decayNext: no dirty pooled superblock has waited the decay before this
	// instant, so a release before it need not walk the pool (decayPool).
	decayNext int64
	// dirtyTop is one past the highest superblock ever used: the pool's walks
	// start below it (the reservation's fresh tail is one long run).
	dirtyTop  uint32
	poolWalks int // decommitPool's walks, for TestDecayWalksOncePerDecay
	now       func() int64
	after     func(time.Duration, func()) *time.Timer // time.AfterFunc; tests see the decay timer's delay
	// orphanNotify is the notification stack of orphaned superblocks; drained
	// under mu.
	orphanNotify atomic.Pointer[superblock]

	// the cache registry, for Stats
	regMu   sync.Mutex
	caches  map[*Cache]struct{}
	retired counters
	nextID  int

	front front
	sites sites      // debug and guard mode's allocation (and free) stacks
	quar  quarantine // guard mode's quarantine (guard.go), under mu

	reports reports // for OnError, queued until the call that found them is done

	atClose *liveAtClose // what was live at Close, if anything (Leaks)
}

// reports are what OnError is to be told: a bad free found late, a write after
// free. They are found in the middle of a collection, a release, a drain or a
// refill, often under the central lock; OnError may panic (or t.Fatal), and
// called there it left that work half done: good frees dropped, a release
// stopped between stamping and pooling, a popped notification stack lost.
// So they are queued (report) and given to OnError (deliver) where a public
// call has finished its work, no lock held and not pinned.
type reports struct {
	n    atomic.Int32 // len(errs): deliver's look, without the lock
	mu   sync.Mutex
	errs []error
}

// report queues err for OnError. Any goroutine, any lock held, not pinned.
func (a *Allocator) report(err error) {
	if a.opt.OnError == nil || mutant.ReportAtOnce {
		if a.opt.OnError != nil {
			a.opt.OnError(err)
		}
		return
	}
	r := &a.reports
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.n.Store(int32(len(r.errs)))
	r.mu.Unlock()
}

// deliver gives OnError the queued reports, one at a time, with no lock held:
// if OnError panics, the one it panicked on is gone and the rest wait for the
// next call's deliver. It runs on the goroutine whose call queued them, unless
// another call ends first.
func (a *Allocator) deliver() {
	r := &a.reports
	for r.n.Load() != 0 {
		yield(YieldDeliverLoad)
		r.mu.Lock()
		if len(r.errs) == 0 && !mutant.DeliverEmpty { // FREE-DOUBLE: another call delivered them since the load
			r.mu.Unlock()
			return
		}
		err := r.errs[0]
		r.errs = r.errs[1:]
		if mutant.DeliverLIFO { // the newest first
			r.errs = append([]error{err}, r.errs...)
			err = r.errs[len(r.errs)-1]
			r.errs = r.errs[:len(r.errs)-1]
		}
		if len(r.errs) == 0 || mutant.DeliverDrops {
			r.errs = nil
		}
		r.n.Store(int32(len(r.errs)))
		r.mu.Unlock()
		a.opt.OnError(err)
	}
}

// deliver gives OnError what this cache's call queued, on its way out. A front
// cache's calls run under the front's token or lock: the front delivers after
// giving the cache up (Allocator.allocSlow, freeSlow, Flush, Realloc).
func (c *Cache) deliver() {
	if !c.front || mutant.FrontDeliversHeld {
		c.a.deliver()
	}
}

// deliverAlloc is deliver for a call of c that allocated b, about to return
// it (nil if it allocated nothing); reserved: b is a moving Realloc's new
// object, reserved (a large one, or a guarded one). If OnError does not return
// (it panics, or t.Fatal ends the goroutine), the caller never gets b and
// nothing else could free it: it is freed (CONSERVE), as a moving Realloc
// frees the new object it does not return.
func (c *Cache) deliverAlloc(b []byte, reserved bool) {
	if c.front || c.a.reports.n.Load() == 0 {
		return
	}
	delivered := false
	defer func() {
		if delivered || cap(b) == 0 || mutant.AllocPanicLost {
			return
		}
		if reserved {
			c.a.freeReserved(c, b)
		} else {
			c.Free(b)
		}
	}()
	c.a.deliver()
	delivered = true
}

// deliverAlloc is Cache.deliverAlloc for the Allocator's own methods, once
// the front has given its cache up.
func (a *Allocator) deliverAlloc(b []byte) {
	if a.reports.n.Load() == 0 {
		return
	}
	delivered := false
	defer func() {
		if !delivered && cap(b) != 0 && !mutant.AllocPanicLost {
			a.Free(b)
		}
	}()
	a.deliver()
	delivered = true
}

type run struct{ start, n uint32 }

type sbCounts struct {
	small, large, orphaned int
	guard                  int // superblocks of live guarded small objects
	committed              int // dirty superblocks anywhere
	dirtyPooled            int // dirty superblocks in the pool
}

// New reserves the address space and returns an Allocator.
func New(opt Options) (*Allocator, error) {
	be := defaultBackend()
	if opt.HeapBackend {
		be = &heapBackend{}
	}
	reserve := opt.Reserve
	switch {
	case reserve < 0 || reserve > spec.MaxAlloc || mutant.ReserveMaxExcl && reserve == spec.MaxAlloc:
		return nil, fmt.Errorf("refalloc: Options.Reserve %d out of range [0, %d]", reserve, spec.MaxAlloc)
	case reserve == 0:
		reserve = defaultReserve
		if _, heap := be.(*heapBackend); heap && !mutant.HeapReserveTag { // MEM-ACCOUNT
			// The Go-heap arena is a heap object, which the runtime maps
			// (and the kernel charges) whole: the -race builds' default,
			// however the backend was chosen (TestHeapBackendDefaultReserve).
			reserve = heapDefaultReserve
		}
		if mutant.DefaultReserveHalf {
			reserve /= 2
		}
	}
	if !mutant.ReserveRoundDown {
		reserve += spec.SuperblockSize - 1
	}
	reserve &^= spec.SuperblockSize - 1
	ways := opt.SuperblockCacheWays
	switch ways {
	case 0:
		ways = maxWays
		if mutant.Ways64 {
			ways = 64
		}
	case 1, 8, 16, 32, 64, 128:
	default:
		return nil, fmt.Errorf("refalloc: Options.SuperblockCacheWays must be 1, 8, 16, 32, 64 or 128, not %d", ways)
	}
	p, err := be.reserve(uintptr(reserve), spec.SuperblockSize)
	if err != nil {
		if mutant.NewOOMNoWrap {
			return nil, fmt.Errorf("%v: %w", ErrOutOfMemory, err)
		}
		return nil, fmt.Errorf("%w: %w", ErrOutOfMemory, err)
	}
	nsb := uint32(reserve >> spec.SuperblockShift)
	retain := opt.Retain
	switch {
	case retain == 0:
		retain = 32 << 20
	case retain < 0:
		retain = 0
		if mutant.RetainNegAbs { // MEM-ACCOUNT: a negative Retain keeps its magnitude
			retain = -opt.Retain
		}
	}
	decay := opt.Decay
	switch {
	case decay == 0:
		decay = time.Second
		if mutant.DefaultDecay {
			decay = 10 * time.Second
		}
	case decay < 0:
		decay = 0
	}
	a := &Allocator{
		base:    uintptr(p),
		start:   p,
		size:    uintptr(reserve),
		ways:    ways,
		wayMask: uintptr(ways - 1),
		spin:    runtime.NumCPU() > 1 && runtime.GOMAXPROCS(0) > 1,
		debug:   opt.Debug,
		opt:     opt,
		be:      be,
		nsb:     nsb,
		top:     make([]atomic.Pointer[sbChunk], (nsb+chunkLen-1)/chunkLen),
		runs:    []run{{0, nsb}},
		caches:  map[*Cache]struct{}{},
		retain:  (retain + int(b2i(mutant.RetainRoundUp))*(spec.SuperblockSize-1)) >> spec.SuperblockShift,
		decay:   int64(decay),
		now:     monotonicClock(time.Now()),
		after:   time.AfterFunc,
	}
	if mutant.FrontWaysHalf && ways > 1 { // CACHE-COHERENT: the pinned free looks at entry i mod W/2
		a.wayMask >>= 1
	}
	gr := reserve
	if mutant.QuarBytesOptReserve {
		gr = opt.Reserve
	}
	if err := a.initGuard(opt.Guard, gr); err != nil {
		be.release()
		return nil, err
	}
	a.front.init(a)
	return a, nil
}

// lookup returns the header of superblock i, or nil if it was never used.
// Any goroutine; i < a.nsb.
func (a *Allocator) lookup(i uintptr) *superblock {
	ch := a.top[i>>chunkShift].Load()
	if ch == nil {
		return nil
	}
	return &ch[i&(chunkLen-1)]
}

// header returns the header of superblock i, creating its chunk. Under a.mu.
func (a *Allocator) header(i uint32) *superblock {
	ch := a.top[i>>chunkShift].Load()
	if ch == nil {
		ch = new(sbChunk)
		for j := range ch {
			ch[j].idx = i&^(chunkLen-1) + uint32(j)
			ch[j].meta.Store(packMeta(0, stateUnused+uint8(b2i(mutant.HeaderPooled)), noClass))
		}
		a.top[i>>chunkShift].Store(ch)
	}
	return &ch[i&(chunkLen-1)]
}

// sbAddr is the address of superblock sb's first byte.
func (a *Allocator) sbAddr(sb *superblock) unsafe.Pointer {
	return unsafe.Add(a.start, uintptr(sb.idx)<<spec.SuperblockShift)
}

// takeRun removes n contiguous superblocks from the pool, lowest address first.
// Under a.mu.
func (a *Allocator) takeRun(n uint32) (uint32, bool) {
	for i, r := range a.runs {
		if r.n < n || mutant.SkipExactRun && r.n == n {
			continue
		}
		if r.n == n {
			a.runs = append(a.runs[:i], a.runs[i+1:]...)
		} else {
			a.runs[i] = run{r.start + n, r.n - n}
		}
		return r.start, true
	}
	return 0, false
}

// takeRunAt removes [start, start+n) from the pool if a run begins there and
// holds it. Under a.mu.
func (a *Allocator) takeRunAt(start, n uint32) bool {
	i, found := slices.BinarySearchFunc(a.runs, start, func(r run, s uint32) int { return cmp.Compare(r.start, s) })
	if mutant.LargeGrowTaken && !found && i < len(a.runs) && a.runs[i].n >= n {
		start, found = a.runs[i].start, true
	}
	if !found || a.runs[i].n < n || mutant.LargeGrowExact && a.runs[i].n == n {
		return false
	}
	if a.runs[i].n == n {
		if !mutant.GrowExactKept {
			a.runs = slices.Delete(a.runs, i, i+1)
		}
	} else {
		a.runs[i] = run{start + n, a.runs[i].n - n}
	}
	return true
}

// putRun returns [start, start+n) to the pool, coalescing with its neighbours
// (NO-OVERLAP: a superblock is in one run or in one use). Under a.mu.
func (a *Allocator) putRun(start, n uint32) {
	lo, hi := 0, len(a.runs)
	for lo < hi {
		m := (lo + hi) / 2
		if a.runs[m].start < start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	i := lo
	if i > 0 && a.runs[i-1].start+a.runs[i-1].n == start {
		a.runs[i-1].n += n
		if i < len(a.runs) && start+n == a.runs[i].start {
			a.runs[i-1].n += a.runs[i].n
			a.runs = append(a.runs[:i], a.runs[i+1:]...)
		}
		return
	}
	if i < len(a.runs) && start+n == a.runs[i].start && !mutant.NoCoalesce {
		a.runs[i].start = start
		a.runs[i].n += n
		return
	}
	a.runs = append(a.runs, run{})
	copy(a.runs[i+1:], a.runs[i:])
	a.runs[i] = run{start, n}
}

// acquireSmall takes a superblock from the pool and carves it for class k, owned
// by c. Under a.mu.
func (a *Allocator) acquireSmall(c *Cache, k int) *superblock {
	i, ok := a.takeRunEvict(1)
	if !ok {
		return nil
	}
	sb := a.header(i)
	if a.takeDirty(sb) && !mutant.SmallNoGrowthPurge {
		a.purgeOnGrowth(1)
	}
	gen, _, _ := unpackMeta(sb.meta.Load())
	groups := (spec.ClassObjects(k) + 31) / 32
	// Order matters to a concurrent fill (fillEntry): the remote set, then the
	// owner, then the layout. The generation does not change here: every small
	// period of a superblock starts with the generation its release gave it.
	if !mutant.RemoteSetLate {
		sb.ensureRemote(groups, gen)
	}
	sb.initSmall(k, a.debug)
	sb.dirty = true
	sb.ownerFreed = sb.ownerFreed && mutant.StaleOwnerFreed
	sb.owner.Store(c)
	if mutant.RemoteSetLate { // CACHE-COHERENT: the layout published before its remote set
		sb.meta.Store(packMeta(gen, stateSmall, uint8(k)))
	}
	yield(YieldAcquireCarve)
	if mutant.RemoteSetLate {
		sb.ensureRemote(groups, gen)
	}
	sb.meta.Store(packMeta(gen, stateSmall, uint8(k)))
	a.counts.small++
	return sb
}

// releaseLocked returns an empty small superblock to the pool. The caller owns it
// (or holds a.mu for an orphan) and has established that every object is free;
// c is charged with any late double free found while stamping.
// Under a.mu.
func (a *Allocator) releaseLocked(c *Cache, sb *superblock) {
	gen, _, k := unpackMeta(sb.meta.Load())
	next, tag := nextGen(gen)
	// CACHE-COHERENT: stamp every remote word with the next generation (or retire
	// the set, at a wrap) before the layout changes, so a free computed from the
	// old layout fails its CAS. A bit still pending here targets an object that
	// is not live (all are free): a double free, dropped.
	rs := sb.remote.Load()
	var late []uint64 // group<<32 | the bits it had pending
	for g := range rs.w {
		for {
			w := rs.w[g].Load()
			yield(YieldReleaseStamp)
			stamp := tag
			if mutant.StampSameGen {
				stamp = gen
			}
			if mutant.LateAppendEarly && uint32(w) != 0 { // STATS-EXACT: counted before the CAS, again at each retry
				late = append(late, uint64(g)<<32|uint64(uint32(w)))
			}
			if mutant.ReleaseStampStore { // FREE-DOUBLE, STATS-EXACT: a Store, not a CAS: a free landing since the Load is lost
				rs.w[g].Store(uint64(stamp) << 32)
				if uint32(w) != 0 {
					late = append(late, uint64(g)<<32|uint64(uint32(w)))
				}
				break
			}
			if rs.w[g].CompareAndSwap(w, uint64(stamp)<<32) {
				if uint32(w) != 0 && !mutant.LateAppendEarly {
					late = append(late, uint64(g)<<32|uint64(uint32(w)))
				}
				break
			}
		}
	}
	yield(YieldReleaseStamped)
	if a.debug {
		a.verifyReleased(c, sb)
		poison(unsafe.Slice((*byte)(a.sbAddr(sb)), spec.SuperblockSize))
	}
	// DEBUG-POISON: the site of the last large or guarded object here no
	// longer describes this memory, verified and poisoned (a write after
	// free found when a large or guarded object takes the superblock back
	// would name it: TestWriteAfterSmallLifeNamesNoStaleSite).
	if !mutant.SmallKeepsSite {
		sb.site = 0
	}
	if !mutant.ReleaseKeepsOwner {
		sb.owner.Store(nil)
	}
	sb.meta.Store(packMeta(next, statePool, k))
	if sb.list == listOrphan {
		a.unlinkOrphan(sb)
		if !mutant.ReleaseOrphanCount {
			a.counts.orphaned-- // MEM-ACCOUNT
		}
	}
	sb.list = listNone
	a.counts.small--
	if mutant.ReleasePooledFirst { // MEM-ACCOUNT: the decay walk misses sb, and sets no deadline for it
		a.pooled(sb.idx, 1)
		a.putRun(sb.idx, 1)
	} else {
		a.putRun(sb.idx, 1)
		a.pooled(sb.idx, 1)
	}
	// Reported once the release is whole: OnError may panic, and a release
	// stopped in its stamping left sb small, owned by a cache that no longer
	// lists it, its later words unstamped (TestPanickingReleaseStampsEveryWord).
	for _, l := range late {
		g := int(l >> 32)
		for p := uint32(l); p != 0; p &= p - 1 {
			a.lateDouble(c, sb, int(k), g*32*int(1-b2i(mutant.StampGroupIndex))+bits.TrailingZeros32(p))
		}
	}
}

// takeDirty accounts for a superblock leaving the pool: it will be used, so it
// counts as committed from now on. Under a.mu.
func (a *Allocator) takeDirty(sb *superblock) (fresh bool) {
	if sb.dirty {
		if !mutant.TakeDirtyNoPooled {
			a.counts.dirtyPooled--
		}
		return false
	}
	a.counts.committed++
	a.dirtyTop = max(a.dirtyTop, sb.idx+1-uint32(b2i(mutant.DirtyTopShort)))
	return true
}

// growthSlack: a take that commits fresh memory while the pool holds more
// than 1/growthSlack of the memory in use in committed empty superblocks
// (and more than an eighth of Retain) returns as much of those to the OS.
const growthSlack = 32

// purgeOnGrowth is what a take that committed fresh superblocks owes
// (MEM-ACCOUNT): the pool held committed memory none of which fitted, and
// keeping it while committing more is how a long-lived live set with churn
// (fill-mixed: holes left by large objects of other sizes) ends up with far
// more committed than in use before any of it is old enough to decay. So,
// past the slack, as many pooled superblocks as the take committed go back
// at once, whatever their age, highest address first (as the Go runtime
// scavenges as much as the heap grows once it retains more than its goal):
// committed stays within the slack of what is in use, while a workload that
// allocates again what it freed (grow-cycle) takes its dirty memory back and
// commits nothing fresh, so it loses nothing. Under a.mu.
func (a *Allocator) purgeOnGrowth(fresh int) {
	if fresh == 0 || mutant.NoGrowthPurge {
		return
	}
	inUse := a.counts.committed - a.counts.dirtyPooled
	if mutant.GrowthSlackCommitted {
		inUse = a.counts.committed
	}
	floor := a.retain / 8
	if mutant.GrowthNoRetain {
		floor = 0
	}
	slack := max(inUse/growthSlack, floor)
	if a.counts.dirtyPooled > slack {
		// Returning superblocks early leaves decayNext a lower bound of when
		// the rest can have waited the decay: keep it, not the walk's
		// "unknown" when it stops short.
		// An madvise that fails leaves its superblocks committed and counted
		// so (decommit changes nothing then): the take still succeeds, and
		// the next purge, decay or Trim tries them again; Trim reports it.
		next := a.decayNext
		_ = a.decommitPool(max(slack, a.counts.dirtyPooled-fresh), 1<<63-1)
		if !mutant.PurgeLosesDecay {
			a.decayNext = max(a.decayNext, next)
		}
	}
}

// pooled accounts for the superblocks [start, start+n) entering the pool: the
// used (dirty) ones, all of them before the pool may decay (a quarantined run
// comes back fresh, GUARD-FAULT). Past Options.Retain the pool decays
// (MEM-ACCOUNT): superblocks that have been pooled for Options.Decay go back
// to the OS, down to half of Retain, so that a workload oscillating around the
// limit does not madvise on every release; younger ones wait for the timer.
// Under a.mu.
func (a *Allocator) pooled(start, n uint32) {
	now := a.now()
	for i := start; i < start+n; i++ {
		if sb := a.lookup(uintptr(i)); sb.dirty || mutant.PooledCountsFresh { // MEM-ACCOUNT: a fresh one is not the pool's to decay
			if !mutant.PooledAtStale || sb.pooledAt == 0 { // MEM-ACCOUNT: it waits the decay from this return
				sb.pooledAt = now
			}
			a.counts.dirtyPooled++
		}
	}
	if !mutant.DecayNextLate {
		a.decayNext = min(a.decayNext, later(now, a.decay))
	}
	if a.counts.dirtyPooled > a.retain && !mutant.RetainIgnored {
		a.decayPool(now)
	}
	if mutant.DecayNextLate { // MEM-ACCOUNT: a release after a walk that left no deadline does not walk
		a.decayNext = min(a.decayNext, later(now, a.decay))
	}
}

// later is t+d, or the last instant there is when that is past it: any
// positive Options.Decay is valid, and the largest Duration ("keep it for
// good") wrapped decayNext into the past, which sent every release to walk
// the pool (TestDecayWalksOncePerDecay/forever).
func later(t, d int64) int64 {
	if d > 0 && t > 1<<63-1-d && !mutant.DecayWrap { // MEM-ACCOUNT
		return 1<<63 - 1
	}
	return t + d
}

// decayPool returns what has waited for Options.Decay past Retain, and arms
// the timer for the rest. Before decayNext nothing can have waited that long,
// and it does not walk the pool: a workload that releases superblocks all the
// time past Retain (xmalloc-test) would walk it on every release. Under a.mu.
func (a *Allocator) decayPool(now int64) {
	if now >= a.decayNext+int64(b2i(mutant.DecayNowGT)) || mutant.NoDecay {
		a.decommitPool(a.retain/2, now-a.decay+int64(b2i(mutant.DecayEdgeEarly))) // MEM-ACCOUNT: pooled at or before now-decay
	}
	if (a.counts.dirtyPooled > a.retain || mutant.TimerWithinRetain && a.counts.dirtyPooled == a.retain) && (a.timer == nil || mutant.TimerRearm) && !a.closed.Load() { // MEM-ACCOUNT: one timer at a time
		d := time.Duration(a.decay) // MEM-ACCOUNT: so nothing waits past twice the decay
		if mutant.TimerTwiceDecay {
			d *= 2
		}
		a.timer = a.after(d, a.decayLater)
	}
}

// monotonicClock is the Allocator's clock (MEM-ACCOUNT's decay): nanoseconds
// on the wall clock at start, then on the monotonic clock, so that the wall
// clock stepping back (NTP, a VM resumed) does not stop the pool's decay for
// as long as it stepped.
func monotonicClock(start time.Time) func() int64 {
	wall := start.UnixNano()
	return func() int64 { return wall + int64(time.Since(start)) }
}

// decayLater is the timer's: the pool decays without waiting for a release.
func (a *Allocator) decayLater() {
	a.lock()
	defer a.mu.Unlock()
	if !mutant.TimerFiredUncounted { // FREE-INVALID, MEM-ACCOUNT: how a checker tells the timer's work from a call's
		a.fired++
	}
	if !mutant.TimerNotCleared && !mutant.TimerClearedLate {
		a.timer = nil
	}
	if (!a.closed.Load() || mutant.DecayAfterClose) && (a.counts.dirtyPooled > a.retain || mutant.DecayTimerAtRetain && a.counts.dirtyPooled == a.retain) {
		a.decayPool(a.now())
	}
	if mutant.TimerClearedLate { // MEM-ACCOUNT: a walk that kept young superblocks arms no timer
		a.timer = nil
	}
}

// decommitPool gives dirty pooled superblocks pooled at or before the time
// before back to the OS, highest address first (allocation takes the lowest
// first), until at most keep remain. Contiguous ones go in one madvise.
// Under a.mu.
func (a *Allocator) decommitPool(keep int, before int64) (err error) {
	// When the walk sees every dirty superblock it keeps, the oldest of them
	// sets decayNext; else it is not known, and the next release walks again.
	const never = 1<<63 - 1
	a.poolWalks++
	young, all := int64(never), true
	defer func() {
		switch {
		case !all || err != nil && !mutant.DecayErrKeepsNext:
			a.decayNext = 0
		case young == never:
			a.decayNext = never
			if mutant.TrimDecayUnknown { // MEM-ACCOUNT: a pool that kept nothing dirty walked again at the next release
				a.decayNext = 0
			}
		default:
			a.decayNext = later(young, a.decay)
		}
	}()
	for r := len(a.runs) - 1; r >= 0; r-- {
		if a.counts.dirtyPooled <= keep {
			all = false
			break
		}
		// Walk the run down from its top, gathering a dirty stretch [lo, hi);
		// nothing at or above dirtyTop was ever used.
		run := a.runs[r]
		top := min(run.start+run.n, a.dirtyTop)
		if top <= run.start {
			continue
		}
		lo, hi := top, top
		for lo > run.start {
			if a.counts.dirtyPooled-int(hi-lo) <= keep {
				all = all && mutant.DecayStopKnown // MEM-ACCOUNT: superblocks kept, so not all decayed
				break
			}
			sb := a.lookup(uintptr(lo - 1))
			if sb != nil && sb.dirty && (sb.pooledAt <= before || mutant.NoDecay) {
				lo--
				continue
			}
			if sb != nil && sb.dirty {
				young = min(young, sb.pooledAt)
				if mutant.DecayYoungLast {
					young = sb.pooledAt
				}
			}
			if err := a.decommit(lo, hi); err != nil {
				return err
			}
			lo--
			hi = lo
		}
		if err := a.decommit(lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// decommit returns the pooled dirty superblocks [lo, hi) to the OS; they read
// as zero afterwards, so they count as fresh. Under a.mu.
func (a *Allocator) decommit(lo, hi uint32) error {
	if lo >= hi {
		return nil
	}
	p := unsafe.Add(a.start, uintptr(lo)<<spec.SuperblockShift)
	if err := a.be.decommit(p, uintptr(hi-lo)<<spec.SuperblockShift); err != nil {
		if mutant.TrimErrNoWrap {
			return fmt.Errorf("refalloc: returning memory to the OS: %v", err)
		}
		return fmt.Errorf("refalloc: returning memory to the OS: %w", err)
	}
	for i := lo; i < hi; i++ {
		a.lookup(uintptr(i)).dirty = false
	}
	n := int(hi - lo)
	a.counts.dirtyPooled -= n
	if !mutant.DecommitCount {
		a.counts.committed -= n
	}
	return nil
}

// Trim flushes the Allocator's own caches and returns to the OS every empty
// superblock and freed large run the pool holds. Caches made with NewCache keep
// what they hold until their owners flush or close them.
func (a *Allocator) Trim() error {
	if a.closed.Load() {
		return ErrClosed
	}
	if mutant.TrimDeliversEarly {
		a.Flush()
		return a.trim()
	}
	a.flush()
	err := a.trim()
	a.deliver() // what the flush found, once Trim has done its work
	return err
}

func (a *Allocator) trim() error {
	a.lock()
	defer a.mu.Unlock()
	if mutant.TrimNoop {
		return nil
	}
	err := a.decommitPool(0, 1<<63-1)
	if mutant.TrimNoErr {
		return nil
	}
	return err
}

// lateDouble records a double free found after the call that made it returned
// (FREE-DOUBLE): counted in c, the cache that found it (every collection and
// release runs on one, an orphan's too), reported through OnError, dropped.
func (a *Allocator) lateDouble(c *Cache, sb *superblock, k, idx int) {
	addr := a.base + uintptr(sb.idx)<<spec.SuperblockShift + uintptr(idx*spec.ClassSize(k))
	c.ev.double.Add(1)
	a.report(errDouble(addr, k))
}

func (a *Allocator) retiredWAF() {
	a.regMu.Lock()
	a.retired.waf++
	a.regMu.Unlock()
}

// Orphan lists: doubly linked through prev/next, under a.mu.
func (a *Allocator) linkOrphan(sb *superblock) {
	k := sb.class
	sb.prev, sb.next = nil, a.orphans[k]
	if sb.next != nil && !mutant.OrphanLinkNoPrev { // LIFECYCLE: the old head's prev, or unlinking it drops the orphans before it
		sb.next.prev = sb
	}
	a.orphans[k] = sb
	sb.list = listOrphan
}

func (a *Allocator) unlinkOrphan(sb *superblock) {
	if sb.prev != nil {
		sb.prev.next = sb.next
	} else {
		a.orphans[sb.class] = sb.next
	}
	if sb.next != nil {
		sb.next.prev = sb.prev
	}
	sb.prev, sb.next = nil, nil
	sb.list = listNone
}

// adoptOrphan hands c an orphaned superblock of class k with free objects,
// with partialMin of them if partial (LIFECYCLE). Under a.mu.
func (a *Allocator) adoptOrphan(c *Cache, k int, partial bool) *superblock {
	for sb := a.orphans[k]; sb != nil; sb = sb.next {
		if sb.nfree == 0 && !(mutant.AdoptEmptyOrphan && !partial) || partial && sb.nfree < sb.partialMin()+b2i(mutant.AdoptPartialExcl) {
			if mutant.AdoptOrphanBreak {
				break
			}
			continue
		}
		a.unlinkOrphan(sb)
		if !mutant.OrphanCount {
			a.counts.orphaned--
		}
		sb.ownerFreed = sb.ownerFreed && mutant.StaleOwnerFreed
		sb.owner.Store(c)
		return sb
	}
	return nil
}

// drainOrphanNotify collects the remote frees that landed in orphaned
// superblocks, publishing them to c, and releases orphans that became empty.
// Under a.mu.
func (a *Allocator) drainOrphanNotify(c *Cache) {
	for sb := a.orphanNotify.Swap(nil); sb != nil; {
		next := sb.nextNotify.Load()
		yield(YieldOrphanDrain)
		if !mutant.OrphanNotifiedLate {
			sb.notified.Store(false)
		}
		// Owner first: an adopted superblock's list field is its owner's,
		// who writes it outside a.mu (LIFECYCLE).
		orphan := sb.owner.Load() == nil && (sb.list == listOrphan || mutant.OrphanDrainPooled)
		if mutant.OrphanDrainListFirst {
			orphan = sb.list == listOrphan && sb.owner.Load() == nil
		}
		if orphan {
			a.collectOrphan(c, sb)
		} else if !mutant.OrphanDropForward {
			a.forward(sb)
		}
		if mutant.OrphanNextLate { // LIFECYCLE: the link read after the collection, when a push may have overwritten it
			next = sb.nextNotify.Load()
		}
		if mutant.OrphanNotifiedLate {
			sb.notified.Store(false)
		}
		sb = next
	}
}

// collectOrphan moves an orphan's pending remote frees into its free bitmap,
// and releases it if that emptied it (LIFECYCLE). Under a.mu.
func (a *Allocator) collectOrphan(c *Cache, sb *superblock) {
	c.publishFrees(int(sb.class), a.collectAll(c, nil, sb))
	if sb.empty() && !mutant.OrphanKeptEmpty {
		a.releaseLocked(c, sb)
	}
}

// Close releases the reservation. Every later call on the Allocator or its caches
// returns ErrClosed. If objects are still live the memory is released anyway and
// the error (ErrLeaked) says how many. Close must not run concurrently with other
// calls on the Allocator or its caches.
func (a *Allocator) Close() error {
	a.deliver()
	if a.closed.Swap(true) {
		return ErrClosed
	}
	s := a.snapshot()
	live := liveObjects(s)
	if live > 0 { // EMPTY: what Leaks lists from now on
		a.atClose = &liveAtClose{s: s, held: heldGroups(a.openCaches())}
	}
	if err := a.releaseAll(); err != nil {
		return fmt.Errorf("refalloc: releasing the reservation: %w", err)
	}
	if live > 0 {
		return fmt.Errorf("%w: %d objects still live at Close", ErrLeaked, live)
	}
	return nil
}

// releaseAll gives the reservation back, every remote word marked pending first.
func (a *Allocator) releaseAll() error {
	a.lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		if !mutant.CloseTimerKept { // MEM-ACCOUNT: a pending timer holds the closed Allocator until it fires
			a.timer.Stop()
		}
		a.timer = nil
	}
	a.markAllPending()
	if err := a.be.release(); err != nil {
		return err
	}
	// Nothing of the Allocator may point into the reservation after it is
	// released: the Go-heap backend's arena is a heap object, and a pointer
	// left here (or in a cache's held group) would keep all of it alive for
	// as long as the program holds the closed Allocator or one of its caches
	// (TestCloseFreesHeapArena). Every later call says ErrClosed before it
	// could use one: the remote words are all pending.
	if mutant.ClosePinsArena { // MEM-ACCOUNT: the closed Allocator keeps the arena alive
		return nil
	}
	a.start = nil
	a.regMu.Lock()
	for c := range a.caches {
		c.dropArena()
	}
	a.regMu.Unlock()
	return nil
}

// markAllPending sets every pending bit of every remote word. The fast paths
// test none of the closed flags: they read these words (the held group's before
// handing out, the freed object's before freeing), find a free "pending", and
// leave for the slow paths, which check the flags and return ErrClosed. Under
// a.mu, after closed is set.
func (a *Allocator) markAllPending() {
	for ci := range a.top {
		ch := a.top[ci].Load()
		if ch == nil {
			continue
		}
		for j := range ch {
			if rs := ch[j].remote.Load(); rs != nil {
				for g := range rs.w {
					rs.w[g].Or(1<<32 - 1 - uint64(b2i(mutant.CloseMarkShort))<<31)
				}
			}
		}
	}
}

// liveObjects counts the live objects of s, a snapshot of a quiescent
// Allocator, for the leak report of Close (EMPTY).
func liveObjects(s *Snapshot) int {
	n := 0
	for i := range s.Superblocks {
		n += s.Superblocks[i].Live
	}
	if mutant.LeakCountLarge {
		return n
	}
	return n + len(s.Large)
}
