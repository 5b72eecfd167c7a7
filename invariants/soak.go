// Soak: many goroutines, scattered remote frees, the Model, and periodic barriers.

package invariants

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refalloc/refalloc/impl"
	"github.com/refalloc/refalloc/internal/mutant"
	"github.com/refalloc/refalloc/spec"
)

// SoakConfig configures Soak. Zero fields take the defaults in brackets.
type SoakConfig struct {
	Goroutines int           // workers, each with its own Cache [4×GOMAXPROCS]
	Duration   time.Duration // how long to run [30s]
	MaxOps     uint64        // stop after this many operations in all (0: no limit)
	MinOps     uint64        // but not before this many, whatever the time (a slow machine)
	MinChecks  int           // nor before this many checks (a loaded machine checks less often)
	Seed       uint64        // worker g draws from PCG(Seed, g) [from the clock]
	// Reserve is the reservation in bytes [8 MiB]: small, so superblocks are
	// reused across classes and owners and the allocator runs out of memory.
	Reserve int
	Ways    int // superblock-cache ways (0: impl's default)
	// Debug runs the Allocator in debug mode (freed memory poisoned, checked on
	// reuse): a write after free is reported, and none is made.
	Debug bool
	// Guard runs it in guard mode (GUARD-FAULT): freed guarded objects are
	// inaccessible in quarantine; a driver that touched one would fault, and
	// none does.
	Guard impl.GuardOptions
	// Retain and Decay are the pool's Options (MEM-ACCOUNT) [impl's defaults:
	// 32 MiB, which a soak's reservation never exceeds, so the pool never
	// decays]. With a small Retain and Decay < 0 the pool returns memory at
	// every release, under the workers' feet, and every barrier checks that it
	// keeps no more than Retain. (A Decay > 0 leaves the return to a timer,
	// whose lateness on a loaded machine a barrier cannot tell from a bug.)
	Retain int
	Decay  time.Duration
	// CheckEvery is the time between barriers, where every worker stops and a
	// Snapshot is checked against the Model [100ms]; every FlushEvery-th barrier
	// every cache flushes first and STATS-EXACT is checked too [4].
	CheckEvery time.Duration
	FlushEvery int
	// Progress, if set, is called about once a second with the figures as of the
	// last barrier.
	Progress      func(SoakProgress)
	MaxViolations int // stop after this many [10]

	// atEnd, if set (tests), runs after the workers are done and before the
	// final EMPTY check and the report of writes after free.
	atEnd func(*Shared)
	// stats, if set (tests), sees each Stats a worker reads while the others
	// run before it is judged: a test breaks one to see the soak refuse it.
	stats func(*impl.Stats)
}

// SoakProgress is the state of a running soak.
type SoakProgress struct {
	Elapsed                  time.Duration
	Ops, Frees, RemoteFrees  uint64
	OOMs                     uint64
	Checks, Violations, Live int
}

// SoakViolation is a broken rule seen by a soak, with what replays it: the seed
// fixes every worker's sequence of operations (not the interleaving, which the
// scheduler chooses; a replay usually, not always, meets the same failure).
type SoakViolation struct {
	Rule, Detail string
	Seed         uint64
	At           time.Duration
}

// LeadObservation is, for one class, the largest STATS-LEAD lead (published
// Allocs minus true allocations) seen at a barrier, and the bound SPEC.md gives
// for it at that barrier: caches × min(32, SlabObjects).
type LeadObservation struct {
	Class, Size    int
	MaxLead, Bound uint64
}

// SoakReport is what a soak did and found.
type SoakReport struct {
	Config                                   SoakConfig
	Ways                                     int // the superblock cache's, as the allocator took Config.Ways
	Elapsed                                  time.Duration
	Ops, Allocs, Frees, RemoteFrees, Handoff uint64
	// FrontCalls counts the worker's calls on the Allocator's methods;
	// ShortLived the goroutines that came, called them, and went (on a
	// goroutine other than their worker's: one that runs on its worker's is
	// not counted).
	FrontCalls, ShortLived, BadFrees, OOMs, Reopens uint64
	// Reallocs counts the Reallocs made, Aligned the AllocAligned calls with
	// an alignment above 1, BadForeign the bad frees of another Allocator's
	// object (the others free Go heap memory).
	Reallocs, Aligned, BadForeign uint64
	// MaxAlign is the largest alignment asked for (adv20: 16 to 4096).
	MaxAlign int
	// Trims counts the Allocator.Trim calls made while the others run,
	// Large the allocations of a large size drawn off the edges (drawSize's
	// large range), Interior the stale frees of a pointer inside an object
	// the worker holds, ShortFrees the frees made by goroutines that came and
	// went.
	Trims, Large, Interior, ShortFrees uint64
	SmallFrees, SBCacheMisses          uint64
	// Edges is how many of the EdgeSizes up to three superblocks (every
	// class's size and one more, MaxSmall+1, the page edges) the workers
	// allocated, of the EdgeSizes they draw from.
	Edges, EdgeSizes    int
	Checks, FlushChecks int
	Violations          []SoakViolation
	Lead                []LeadObservation
}

// HitRate is the superblock-cache hit rate of small frees.
func (r *SoakReport) HitRate() float64 {
	if r.SmallFrees == 0 {
		return 0
	}
	return 1 - float64(r.SBCacheMisses)/float64(r.SmallFrees)
}

type soakBarrier struct {
	arrived sync.WaitGroup
	resume  chan struct{}
}

type soak struct {
	cfg     SoakConfig
	edges   []int         // soakEdges, which the workers go through between them
	edge    atomic.Uint64 // the next of edges to allocate (mod len)
	sh      *Shared
	workers []*soakWorker
	barrier atomic.Pointer[soakBarrier]
	stop    atomic.Bool
	ops     atomic.Uint64
	start   time.Time
	// at is when each violation was seen, parallel to sh.Violations().
	seen int
	at   []time.Duration
}

type soakWorker struct {
	sh    *Shared
	s     *soak
	g     int
	id    int
	c     *impl.Cache
	rng   *rand.Rand
	mine  []SharedObj
	freed [][]byte // recently freed, for stale frees
	inbox chan SharedObj
	last  *soakBarrier
	drawn []bool // which of s.edges it has allocated
	goid  uint64 // the worker's goroutine
	// counters, read by the coordinator at barriers and at the end
	inline, ops, allocs, frees, remote, handoff, front, short, bad, oom, reopen, small, reallocs, aligned, foreign uint64
	trims, large, interior, shortFrees                                                                             uint64
	maxAlign                                                                                                       int
}

// Soak runs cfg.Goroutines workers against one Allocator and the Model (through
// Shared). Each worker allocates through its own Cache or the Allocator, hands
// objects to other workers through channels (so many frees are remote, scattered
// over many superblocks), frees what it receives and what it owns, makes bad
// frees, and now and then closes its cache and opens a new one (superblocks are
// orphaned and adopted). At every barrier all workers stop and Check runs on a
// Snapshot (CONSERVE, STATS-LEAD with the held counts, STATS-LAG, CACHE-COHERENT,
// NO-OVERLAP, REFINES); at flush barriers, after every cache flushed,
// STATS-EXACT too; at the end, after everything is freed, EMPTY.
func Soak(cfg SoakConfig) (*SoakReport, error) {
	if cfg.Goroutines <= 0 {
		cfg.Goroutines = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 30 * time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if cfg.Reserve <= 0 {
		cfg.Reserve = 8 << 20
	}
	if cfg.CheckEvery <= 0 {
		cfg.CheckEvery = 100 * time.Millisecond
	}
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 4
	}
	if cfg.MaxViolations <= 0 {
		cfg.MaxViolations = 10
	}
	// A write after free reported is a violation (none is made); say which.
	var wafs struct {
		sync.Mutex
		errs []string
	}
	onError := func(err error) {
		if errors.Is(err, impl.ErrWriteAfterFree) {
			wafs.Lock()
			if len(wafs.errs) < 3 {
				wafs.errs = append(wafs.errs, err.Error())
			}
			wafs.Unlock()
		}
	}
	ways := cfg.Ways
	if mutant.SoakWays {
		ways = 0
	}
	sh, err := NewShared(impl.Options{Reserve: cfg.Reserve, SuperblockCacheWays: ways, Debug: cfg.Debug, Guard: cfg.Guard, Retain: cfg.Retain, Decay: cfg.Decay, OnError: onError})
	if err != nil {
		return nil, err
	}
	sh.MaxViolations = cfg.MaxViolations
	s := &soak{cfg: cfg, sh: sh, start: time.Now(), edges: soakEdges(cfg.Reserve)}
	for g := range cfg.Goroutines {
		w := &soakWorker{sh: sh, s: s, g: g, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(g))), inbox: make(chan SharedObj, 64),
			drawn: make([]bool, len(s.edges))}
		if w.c, w.id, err = sh.OpenCache(); err != nil {
			return nil, err
		}
		s.workers = append(s.workers, w)
	}
	rep := &SoakReport{Config: cfg, Ways: sh.A.Snapshot().Ways}
	lead := make([]LeadObservation, spec.NumClasses)
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run() }()
	}
	lastProgress := time.Now()
	for n := 1; ; n++ {
		time.Sleep(cfg.CheckEvery)
		done := time.Since(s.start) >= cfg.Duration && s.ops.Load() >= cfg.MinOps && n >= cfg.MinChecks || cfg.MaxOps > 0 && s.ops.Load() >= cfg.MaxOps ||
			len(sh.Violations()) >= cfg.MaxViolations
		b := s.pause()
		if done {
			s.stop.Store(true)
		}
		s.check(rep, lead, n%cfg.FlushEvery == 0)
		if cfg.Progress != nil && (time.Since(lastProgress) >= time.Second || done) {
			lastProgress = time.Now()
			cfg.Progress(s.progress(rep))
		}
		s.barrier.Store(nil)
		close(b.resume)
		if done {
			break
		}
	}
	wg.Wait() // the workers free everything they own or received, and close
	if cfg.atEnd != nil {
		cfg.atEnd(sh)
	}
	sh.A.Flush()
	sh.Settle()
	if !mutant.SoakNoEmpty {
		sh.Record(CheckEmpty(sh.A.Snapshot(), sh.M)...)
	}
	rep.Checks++
	s.sum(rep)
	rep.Elapsed = time.Since(s.start)
	for k := range lead {
		lead[k].Class, lead[k].Size = k, spec.ClassSize(k)
	}
	rep.Lead = lead
	sh.Close()
	for _, e := range wafs.errs {
		if !mutant.SoakNoWAF {
			sh.Record(violation(spec.RuleDebugPoison, "reported: %s", e))
		}
	}
	s.stamp()
	for i, v := range sh.Violations() {
		rep.Violations = append(rep.Violations, SoakViolation{Rule: v.Rule, Detail: v.Detail, Seed: cfg.Seed, At: s.at[i]})
	}
	return rep, nil
}

// stamp notes the time of the violations recorded since the last call.
func (s *soak) stamp() {
	for n := len(s.sh.Violations()); s.seen < n; s.seen++ {
		s.at = append(s.at, time.Since(s.start))
	}
}

// pause stops every worker at a barrier and returns it; the caller resumes them
// by closing b.resume.
func (s *soak) pause() *soakBarrier {
	b := &soakBarrier{resume: make(chan struct{})}
	b.arrived.Add(len(s.workers))
	s.barrier.Store(b)
	b.arrived.Wait()
	return b
}

func (s *soak) check(rep *SoakReport, lead []LeadObservation, flush bool) {
	if flush {
		// Every worker is parked (the barrier orders its last call before
		// these and these before its next), so their caches can be flushed
		// from here; a flush by the worker itself, before the others stopped,
		// could miss remote frees still arriving.
		for _, w := range s.workers {
			w.c.Flush()
		}
		s.sh.A.Flush()
	}
	if mutant.SoakNoExact {
		flush = false
	}
	s.sh.Check(flush)
	// Objects a stale free freed under their holders are gone.
	for _, w := range s.workers {
		w.mine = alive(s.sh, w.mine)
		var kept []SharedObj
		for len(w.inbox) > 0 {
			kept = append(kept, <-w.inbox)
		}
		for _, o := range alive(s.sh, kept) {
			w.inbox <- o
		}
	}
	s.stamp()
	rep.Checks++
	snap := s.sh.A.Snapshot()
	for k := range spec.NumClasses {
		if d := snap.Stats.Classes[k].Allocs - s.sh.M.Counts(k).Allocs; d > lead[k].MaxLead {
			lead[k].MaxLead = d
		}
		lead[k].Bound = max(lead[k].Bound, uint64(len(snap.Caches)*min(32, spec.ClassObjects(k))))
	}
}

func (s *soak) progress(rep *SoakReport) SoakProgress {
	var r SoakReport
	s.sum(&r)
	return SoakProgress{
		Elapsed: time.Since(s.start), Ops: r.Ops, Frees: r.Frees, RemoteFrees: r.RemoteFrees, OOMs: r.OOMs,
		Checks: rep.Checks, Violations: len(s.sh.Violations()), Live: len(s.sh.M.Live()),
	}
}

// sum adds up the workers' counters; quiescent callers.
func (s *soak) sum(r *SoakReport) {
	for _, w := range s.workers {
		r.Ops += w.ops
		r.Allocs += w.allocs
		r.Frees += w.frees
		r.RemoteFrees += w.remote
		r.Handoff += w.handoff
		r.FrontCalls += w.front
		r.ShortLived += w.short - w.inline
		r.Reallocs += w.reallocs
		r.Aligned += w.aligned
		r.MaxAlign = max(r.MaxAlign, w.maxAlign)
		r.BadForeign += w.foreign
		r.Trims += w.trims
		r.Large += w.large
		r.Interior += w.interior
		r.ShortFrees += w.shortFrees
		r.BadFrees += w.bad
		r.OOMs += w.oom
		r.Reopens += w.reopen
		r.SmallFrees += w.small
	}
	r.SBCacheMisses = s.sh.A.Stats().SuperblockCacheMisses
	r.EdgeSizes = len(s.edges)
	for i := range s.edges {
		for _, w := range s.workers {
			if w.drawn[i] {
				r.Edges++
				break
			}
		}
	}
	r.FlushChecks = s.sh.ExactChecks()
}

func (w *soakWorker) run() {
	w.goid = goid()
	for !w.s.stop.Load() {
		if b := w.s.barrier.Load(); b != nil && b != w.last {
			w.last = b
			b.arrived.Done()
			<-b.resume
			continue
		}
		w.step()
		w.ops++
		w.s.ops.Add(1)
	}
	// After the last barrier nobody sends: free what is left, and close.
	for len(w.mine) > 0 {
		w.freeOwn(len(w.mine) - 1)
	}
	for len(w.inbox) > 0 {
		w.free(<-w.inbox, true)
	}
	w.sh.CloseCache(w.c, w.id)
}

func (w *soakWorker) step() {
	switch op := w.rng.IntN(1000); {
	case op < 400:
		if len(w.mine) > 400 {
			w.freeOwn(w.rng.IntN(len(w.mine)))
		} else {
			w.alloc()
		}
	case op < 520:
		if len(w.mine) > 0 {
			w.freeOwn(w.rng.IntN(len(w.mine)))
		}
	case op < 780:
		w.handOff()
	case op < 940:
		for range 1 + w.rng.IntN(8) {
			select {
			case o := <-w.inbox:
				w.free(o, true)
			default:
			}
		}
	case op < 955:
		w.staleFree()
	case op < 970:
		if !mutant.SoakNoRealloc {
			w.realloc()
		}
	case op < 975:
		kind := w.rng.IntN(2)
		if mutant.SoakBadKind {
			kind = 0
		}
		if kind == 1 {
			w.foreign++
		}
		w.sh.BadFree(w.cache(), w.id, kind, w.rng.IntN(1<<16))
		w.bad++
	case op < 985:
		w.shortLived()
	case op < 999:
		w.allocatorCall()
	default:
		w.sh.CloseCache(w.c, w.id)
		var err error
		if w.c, w.id, err = w.sh.OpenCache(); err != nil {
			w.sh.Record(violation(spec.RuleRefines, "NewCache: %v", err))
		}
		w.reopen++
	}
}

// cache is the worker's Cache, or half the time nil: the goroutine-safe
// Allocator, driven as heavily as the caches.
func (w *soakWorker) cache() *impl.Cache {
	if w.rng.IntN(2) == 0 && !mutant.SoakFrontNever {
		w.front++
		return nil
	}
	return w.c
}

// staleFree frees what the worker no longer holds, racing whatever reuses the
// address: an object it freed before, a double free right after its own free,
// or a pointer inside an object it holds (FREE-DOUBLE, FREE-INVALID; judged by
// Shared at the next barrier).
func (w *soakWorker) staleFree() {
	var b []byte
	switch r := w.rng.IntN(3); {
	case r == 0 && len(w.mine) > 0 && !mutant.SoakNoInterior: // FREE-INVALID: no interior stale free
		o := w.mine[w.rng.IntN(len(w.mine))].B
		if cap(o) < 32 {
			return
		}
		b = o[:cap(o)][16*(1+w.rng.IntN(cap(o)/16-1)):]
		w.interior++
	case r == 1 && len(w.mine) > 0:
		i := w.rng.IntN(len(w.mine))
		o := w.mine[i]
		w.freeOwn(i)
		b = o.B
	case len(w.freed) > 0:
		b = w.freed[w.rng.IntN(len(w.freed))]
	default:
		return
	}
	w.sh.StaleFree(w.cache(), w.id, b)
	w.bad++
	if cap(b) <= spec.MaxSmall {
		w.small++
	}
}

// realloc resizes one of the worker's objects through its cache or the
// Allocator.
func (w *soakWorker) realloc() {
	if len(w.mine) == 0 {
		return
	}
	i := w.rng.IntN(len(w.mine))
	if cap(w.mine[i].B) <= spec.MaxSmall {
		w.small++ // it may free the object: a superblock-cache lookup
	}
	w.reallocs++
	if r, _ := w.sh.Realloc(w.cache(), w.id, w.mine[i], w.drawSize(), byte(w.rng.IntN(255)+1)); r.B != nil {
		w.mine[i] = r
	} else {
		w.mine[i] = w.mine[len(w.mine)-1]
		w.mine = w.mine[:len(w.mine)-1]
	}
}

// shortLived runs a goroutine that comes and goes: a few calls on the
// Allocator's methods, then it exits (and the worker waits for it).
func (w *soakWorker) shortLived() {
	seed := w.rng.Uint64()
	done := make(chan struct{})
	run := func() {
		defer close(done)
		if goid() == w.goid {
			w.inline++ // not a goroutine of its own: counted, and judged by the tests
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		var objs []SharedObj
		for range 1 + rng.IntN(8) {
			if o, ok := w.sh.Alloc(nil, Front, rng.IntN(600), 1, byte(rng.IntN(255)+1)); ok {
				objs = append(objs, o)
			}
		}
		for _, o := range objs {
			if rng.IntN(3) == 0 && !mutant.SoakShortNoFree { // REFINES: a short-lived goroutine never frees
				w.sh.Free(nil, Front, o)
				w.small++
				w.shortFrees++
			} else {
				w.mine = append(w.mine, o) // left to the worker (it waits for us)
			}
		}
	}
	if mutant.SoakInline {
		run()
	} else {
		go run()
	}
	<-done
	w.short++
}

// allocatorCall makes a call on the whole Allocator while the others allocate:
// Flush, Trim, or Stats, whose counters must be consistent at every instant
// (LARGE-EXACT, MEM-ACCOUNT).
func (w *soakWorker) allocatorCall() {
	k := w.rng.IntN(3)
	if mutant.SoakNoTrim && k == 1 { // MEM-ACCOUNT: Trim never runs while the others allocate
		k = 0
	}
	switch k {
	case 0:
		w.sh.A.Flush()
	case 1:
		w.trims++
		if err := w.sh.A.Trim(); err != nil {
			w.sh.Record(violation(spec.RuleRefines, "Trim: %v", err))
		}
	case 2:
		st := w.sh.A.Stats()
		if w.s.cfg.stats != nil {
			w.s.cfg.stats(&st)
		}
		if !mutant.SoakStatsUnjudged { // LARGE-EXACT, MEM-ACCOUNT: Stats read, never judged
			w.sh.Record(StatsNow(st)...)
		}
	}
}

func (w *soakWorker) drawSize() int {
	switch r := w.rng.IntN(100); {
	case r < 70:
		return w.rng.IntN(257)
	case r < 90:
		return 257 + w.rng.IntN(4096-256)
	case r < 99:
		return 4097 + w.rng.IntN(spec.MaxSmall-4096)
	}
	if mutant.SoakNoLarge { // LARGE-EXACT: no large size but the edges
		return 4097 + w.rng.IntN(spec.MaxSmall-4096)
	}
	return spec.MaxSmall + 1 + w.rng.IntN(3*spec.SuperblockSize)
}

// soakEdges are the EdgeSizes a soak draws: up to three superblocks, not the
// reservation's own edges (out of memory or too large, which the machines
// judge one call at a time).
func soakEdges(reserve int) []int {
	var out []int
	for _, n := range EdgeSizes(reserve) {
		if n <= spec.MaxSmall+1+3*spec.SuperblockSize {
			out = append(out, n)
		}
	}
	return out
}

func (w *soakWorker) alloc() {
	n, align, edge := w.drawSize(), 1, uint64(0)
	// One allocation in 8 is at an edge, where a rule changes its answer by
	// one byte: the workers go through them in turn, together, so that in a
	// short soak they reach every one, however the scheduler shares the time
	// out among them.
	if w.rng.IntN(8) == 0 && !mutant.SoakNoEdges {
		edge = w.s.edge.Load() + 1
		n = w.s.edges[(edge-1)%uint64(len(w.s.edges))]
	}
	if w.rng.IntN(20) == 0 {
		align = 16 << w.rng.IntN(9) // 16 to 4096
		if mutant.SoakAlignNarrow { // ALIGN: never 4096
			align = 16 << w.rng.IntN(8)
		}
		if mutant.SoakNoAlign {
			align = 1
		}
	}
	if align > 1 {
		w.aligned++
		w.maxAlign = max(w.maxAlign, align)
	}
	o, ok := w.sh.Alloc(w.cache(), w.id, n, align, byte(w.rng.IntN(255)+1))
	if !ok {
		w.oom++
		for range len(w.mine) / 2 { // make room
			w.freeOwn(w.rng.IntN(len(w.mine)))
		}
		return
	}
	w.allocs++
	if edge == 0 && n > spec.MaxSmall {
		w.large++
	}
	if edge > 0 { // an edge out of memory is drawn again next time
		w.drawn[(edge-1)%uint64(len(w.s.edges))] = true
		w.s.edge.CompareAndSwap(edge-1, edge)
	}
	w.mine = append(w.mine, o)
}

func (w *soakWorker) freeOwn(i int) {
	o := w.mine[i]
	w.mine[i] = w.mine[len(w.mine)-1]
	w.mine = w.mine[:len(w.mine)-1]
	w.free(o, false)
}

// free frees o through the worker's cache, or now and then the Allocator.
func (w *soakWorker) free(o SharedObj, received bool) {
	w.sh.Free(w.cache(), w.id, o)
	w.frees++
	if received || o.Cache != w.id {
		w.remote++
	}
	if cap(o.B) <= spec.MaxSmall {
		w.small++
	}
	if len(w.freed) == 16 {
		w.freed = w.freed[1:]
	}
	w.freed = append(w.freed, o.B)
}

// handOff sends one of the worker's objects to another worker, who will free it.
func (w *soakWorker) handOff() {
	if len(w.mine) == 0 || len(w.s.workers) < 2 || mutant.SoakNoHandoff {
		return
	}
	i := w.rng.IntN(len(w.mine))
	to := w.s.workers[(w.g+1+w.rng.IntN(len(w.s.workers)-1))%len(w.s.workers)]
	select {
	case to.inbox <- w.mine[i]:
		w.mine[i] = w.mine[len(w.mine)-1]
		w.mine = w.mine[:len(w.mine)-1]
		w.handoff++
	default:
	}
}

// String prints a report as the refcheck summary table.
func (r *SoakReport) String() string {
	var b bytes.Buffer
	pct := func(x, of uint64) float64 {
		if of == 0 {
			return 0
		}
		return 100 * float64(x) / float64(of)
	}
	mode := ""
	if r.Config.Debug {
		mode += ", debug mode"
	}
	if g := r.Config.Guard; g.Enabled {
		mode += fmt.Sprintf(", guard mode (sample rate %d)", g.SampleRate)
	}
	fmt.Fprintf(&b, "refcheck: %d goroutines, %v, seed %d, reserve %d KiB, %d ways%s\n\n",
		r.Config.Goroutines, r.Elapsed.Round(time.Millisecond), r.Config.Seed, r.Config.Reserve>>10, r.Ways, mode)
	fmt.Fprintf(&b, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| operations | %d (%.0f/s) |\n", r.Ops, float64(r.Ops)/r.Elapsed.Seconds())
	fmt.Fprintf(&b, "| allocations / frees | %d / %d |\n", r.Allocs, r.Frees)
	fmt.Fprintf(&b, "| remote frees | %d (%.1f%% of frees) |\n", r.RemoteFrees, pct(r.RemoteFrees, r.Frees))
	fmt.Fprintf(&b, "| objects handed between goroutines | %d |\n", r.Handoff)
	fmt.Fprintf(&b, "| goroutine-safe Allocator calls (and goroutines that came and went) | %d (%d) |\n", r.FrontCalls, r.ShortLived)
	fmt.Fprintf(&b, "| frees by goroutines that came and went | %d |\n", r.ShortFrees)
	fmt.Fprintf(&b, "| reallocs / aligned allocations (the largest alignment) | %d / %d (%d) |\n", r.Reallocs, r.Aligned, r.MaxAlign)
	fmt.Fprintf(&b, "| large sizes drawn off the edges | %d |\n", r.Large)
	fmt.Fprintf(&b, "| edge sizes allocated (of those drawn) | %d (%d) |\n", r.Edges, r.EdgeSizes)
	fmt.Fprintf(&b, "| superblock-cache hit rate (small frees) | %.2f%% (%d misses / %d) |\n", 100*r.HitRate(), r.SBCacheMisses, r.SmallFrees)
	fmt.Fprintf(&b, "| bad and stale frees made (each judged as the model and its address allow) | %d |\n", r.BadFrees)
	fmt.Fprintf(&b, "| of which stale frees inside a held object | %d |\n", r.Interior)
	fmt.Fprintf(&b, "| Allocator.Trim calls while the others run | %d |\n", r.Trims)
	fmt.Fprintf(&b, "| out-of-memory (then freed and went on) | %d |\n", r.OOMs)
	fmt.Fprintf(&b, "| caches closed and reopened | %d |\n", r.Reopens)
	fmt.Fprintf(&b, "| invariant checks (of which after a full flush) | %d (%d) |\n", r.Checks, r.FlushChecks)
	fmt.Fprintf(&b, "| violations | %d |\n", len(r.Violations))
	if len(r.Violations) > 0 {
		fmt.Fprintf(&b, "\n| rule | at | detail | replay |\n|---|---|---|---|\n")
		for _, v := range r.Violations {
			fmt.Fprintf(&b, "| %s | %v | %s | -seed %d |\n", v.Rule, v.At.Round(time.Millisecond), oneLine(v.Detail), v.Seed)
		}
	}
	fmt.Fprintf(&b, "\nSTATS-LEAD per class: the largest lead seen at a barrier against its bound (caches × min(32, SlabObjects))\n\n")
	fmt.Fprintf(&b, "| class | size | max lead | bound | used |\n|---|---|---|---|---|\n")
	for _, l := range r.Lead {
		if l.MaxLead == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %.0f%% |\n", l.Class, l.Size, l.MaxLead, l.Bound, pct(l.MaxLead, l.Bound))
	}
	return b.String()
}

func oneLine(s string) string {
	return string(bytes.ReplaceAll([]byte(s), []byte("\n"), []byte(" ")))
}

// goid is the calling goroutine's ID, from the header of its stack trace
// ("goroutine 42 [running]:"): the soak's proof that a short-lived goroutine is
// one (the runtime gives no other way to tell).
func goid() uint64 {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = b[len("goroutine "):]
	var id uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
